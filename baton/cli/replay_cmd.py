"""`baton replay RUN_ID --from CHECKPOINT`: re-execute a run from a checkpoint and report divergences.

Exit codes: 0 the replay matches the record, 1 it diverges (or a recorded blob
was altered), 2 it could not start (unknown run, checkpoint or release).
"""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from baton.agents.derivers import DERIVERS
from baton.catalog.releases import release_named
from baton.replay import ReplayError, ReplayReport, replay_run, report_json, summary_counts
from baton.store.factory import baton_home, open_blobs, open_store

_errors = Console(stderr=True)


def _short(ref: str | None) -> str:
    return "-" if ref is None else ref[:19] + "…"


def _print(report: ReplayReport, console: Console) -> None:
    table = Table(title=f"replay of {report.run_id} from {report.from_checkpoint}")
    for column in ("seq", "recorded boundary", "replayed boundary", "recorded candidate", "replayed candidate",
                   "evidence (rec/rep)"):
        table.add_column(column)
    for step in report.steps:
        same = step.recorded_boundary is step.replayed_boundary
        table.add_row(
            str(step.seq), step.recorded_boundary.value,
            step.replayed_boundary.value if same else f"[red]{step.replayed_boundary.value}[/red]",
            _short(step.recorded_candidate),
            _short(step.replayed_candidate) if step.replayed_candidate == step.recorded_candidate
            else f"[red]{_short(step.replayed_candidate)}[/red]",
            f"{step.recorded_evidence or '-'}/{step.replayed_evidence or '-'}",
        )
    console.print(table)
    if not report.steps:
        console.print("nothing was sealed after this checkpoint")
    if not report.divergences:
        console.print(f"[green]no divergence[/green] over {len(report.steps)} checkpoint(s)")
        return
    details = Table(title=f"{len(report.divergences)} divergence(s): {summary_counts(report.divergences)}")
    for column in ("checkpoint", "field", "recorded", "replayed", "detail"):
        details.add_column(column, overflow="fold")
    for d in report.divergences:
        details.add_row(d.checkpoint_id, d.field, _short(d.recorded) if d.recorded and d.recorded.startswith("sha256:")
                        else str(d.recorded), _short(d.replayed) if d.replayed and d.replayed.startswith("sha256:")
                        else str(d.replayed), d.detail)
    console.print(details)


def register(app: typer.Typer) -> None:
    @app.command("replay")
    def replay(
        run_id: str = typer.Argument(..., help="The run to replay."),
        from_checkpoint: str = typer.Option(..., "--from", help="Checkpoint id (RUN/000003) or seq to start from."),
        release: str | None = typer.Option(None, "--release", help="Counterfactual: replay under this catalog release."),
        as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    ) -> None:
        """Re-execute a run from a checkpoint with recorded observations only; report every divergence."""
        home = baton_home()
        store = open_store(None, home)
        try:
            override = None if release is None else release_named(release)
            report = replay_run(store, open_blobs(home, store), run_id, from_checkpoint, derivers=DERIVERS,
                                release=override)
        except (ReplayError, KeyError) as exc:
            message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            _errors.print(f"[red]replay failed[/red]: {message}", highlight=False)
            raise typer.Exit(code=2) from None
        finally:
            store.close()
        if as_json:
            typer.echo(json.dumps(report_json(report), indent=2, sort_keys=True))
        else:
            _print(report, Console(width=max(Console().width, 120)))
        if report.diverged:
            raise typer.Exit(code=1)
