"""`baton experiment-check`: the experiment's Baton model against the real protocol in the simulation."""

from __future__ import annotations

import json
import time

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from baton.experiment.sim_check import MODEL_RUNS, KindCheck, check, share_gap
from baton.experiment.workload import FAULT_KINDS


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def check_table(rows: list[KindCheck]) -> Table:
    strategy = rows[0].strategy if rows else "baton"
    table = Table(title=f"{strategy}: the experiment's model against the real code in the simulation, one fault per run")
    for column in ("fault kind", "sim worlds (fired)", "sim statuses", "sim runs >1 effect", "sim violating",
                   "model runs", "model verified", "sim verified", "gap", "model dup · stale", "safety agrees"):
        table.add_column(column, justify="left" if column in ("fault kind", "sim statuses") else "right")
    for row in rows:
        statuses = ", ".join(f"{k} {v}" for k, v in sorted(row.sim.statuses.items()))
        gap = share_gap(row)
        table.add_row(row.kind, f"{row.sim.worlds} ({row.sim.fired})", statuses, str(row.sim.runs_over_one_effect),
                      str(row.sim.violating_worlds), str(row.model.runs), _share(row.model.verified_share),
                      _share(row.sim.verified_share), "n/a" if gap is None else f"{gap:+.1%}",
                      f"{row.model.duplicates} · {row.model.stale}", "yes" if row.safety_agrees else "NO")
    return table


def register(app: typer.Typer) -> None:
    @app.command("experiment-check")
    def experiment_check(
        worlds: int = typer.Option(50, "--worlds", help="Simulated worlds per fault kind (seeds 0..N-1)."),
        seed: int = typer.Option(7, "--seed", help="Seed of the model's workload."),
        model_runs: int = typer.Option(MODEL_RUNS, "--model-runs", help="Runs of the model's workload."),
        kinds: str = typer.Option(",".join(FAULT_KINDS), "--kinds", help="Fault kinds, comma-separated."),
        as_json: bool = typer.Option(False, "--json", help="Print the rows as JSON."),
        strategy: str = typer.Option("baton", "--strategy", help="baton, a transcript-only control (naive, "
                                     "competent) or a baseline (restart, restart_last_step, retry_same_placement, "
                                     "wait_same_pool, coarse_checkpoints, human_assisted): its real code in the "
                                     "simulation against its model"),
        await_stalled: bool = typer.Option(False, "--await-stalled", help="run each world until its stalled workers "
                                           "woke and finished (a zombie's late acts judged too)"),
    ) -> None:
        """Run the real protocol with one fault of each of the experiment's kinds and compare with the model.

        Exits 1 when either side shows a run with a second effect, stale evidence or a violated oracle (for a
        control: when the two sides' verdicts on second effects or stale evidence differ)."""
        if worlds < 1 or model_runs < 1:
            raise typer.BadParameter("--worlds and --model-runs must be at least 1")
        chosen = tuple(k.strip() for k in kinds.split(",") if k.strip())
        started = time.perf_counter()
        with Progress(TextColumn("experiment-check"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=Console(stderr=True), transient=True) as progress:
            task = progress.add_task("worlds", total=worlds * len(chosen))
            try:
                rows = check(worlds, seed=seed, model_runs=model_runs, kinds=chosen,
                             tick=lambda: progress.advance(task), strategy=strategy, await_stalled=await_stalled)
            except ValueError as exc:
                raise typer.BadParameter(str(exc), param_hint="--kinds or --strategy") from exc
        seconds = time.perf_counter() - started
        if as_json:
            typer.echo(json.dumps({"seconds": round(seconds, 1), "strategy": strategy, "await_stalled": await_stalled,
                                   "worlds_per_kind": worlds,
                                   "model_seed": seed,
                                   "model_runs": model_runs, "rows": [row.as_dict() for row in rows]}, indent=1))
        else:
            Console(width=200).print(check_table(rows))
            typer.echo(f"{seconds:.1f} s")
        if not all(row.safety_agrees for row in rows):
            raise typer.Exit(1)
