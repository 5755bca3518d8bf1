"""`baton inspect RUN_ID`: the run's status, checkpoints and event trail as a story."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from baton.errors import RecordNotFoundError
from baton.inspect import story
from baton.store.factory import baton_home, open_store


def register(app: typer.Typer) -> None:
    @app.command("inspect")
    def inspect_run(
        run_id: str = typer.Argument(..., help="The run to tell the story of."),
        as_json: bool = typer.Option(False, "--json", help="Print the story as JSON."),
    ) -> None:
        """Tell what happened to a run: every event, in order, as a sentence."""
        store = open_store(None, baton_home())
        try:
            try:
                run = store.get_run(run_id)
            except RecordNotFoundError as exc:
                typer.echo(f"error: {exc}", err=True)
                raise typer.Exit(code=2) from exc
            lines = story(store.list_events(run_id=run_id))
            checkpoints = store.list_checkpoints(run_id)
        finally:
            store.close()
        if as_json:
            typer.echo(json.dumps({
                "run_id": run.run_id, "status": run.status, "placement": run.placement,
                "checkpoints": [c.checkpoint_id for c in checkpoints],
                "story": [{"seq": l.seq, "offset_s": round(l.offset_s, 3), "event": l.event_type.value,
                           "sentence": l.sentence} for l in lines],
            }, indent=2))
            return
        console = Console(width=max(Console().width, 120))
        console.rule(f"[bold]run {run.run_id}[/bold]: {run.kind.value}, {run.status}, on {run.placement}")
        table = Table(show_header=True, header_style="bold", box=None)
        table.add_column("t+s", justify="right")
        table.add_column("event")
        table.add_column("what happened")
        for line in lines:
            table.add_row(f"{line.offset_s:.3f}", line.event_type.value, line.sentence)
        console.print(table)
        console.print(f"{len(checkpoints)} checkpoints; latest {checkpoints[-1].checkpoint_id if checkpoints else '-'}")
