"""`baton experiment`: the strategy experiment of sec. 26 (Baton's handoff against simpler strategies)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from baton.experiment.headline import headline
from baton.experiment.results import experiment_path, write_experiment
from baton.experiment.run import run_experiment, sweep_runs_per_cell
from baton.experiment.strategies import STRATEGIES
from baton.experiment.sweep import FAULT_RATES, RUN_LENGTHS, restart_versus_baton


def _money(value: float | None) -> str:
    return "n/a" if value is None else f"${value:,.3f}"


def comparison_table(summary: list[dict[str, Any]]) -> Table:
    table = Table(title="strategy comparison (oracle-judged)")
    for column in ("strategy", "verified", "95% CI", "dup effects", "stale accepted", "cost/verified",
                   "mean time s", "p95 time s", "compute s", "interventions"):
        table.add_column(column, justify="left" if column == "strategy" else "right")
    for row in summary:
        table.add_row(row["strategy"], f"{row['verified']}/{row['runs']} ({row['success_rate']:.1%})",
                      f"{row['success_low']:.1%}-{row['success_high']:.1%}", str(row["duplicate_effects"]),
                      str(row["stale_evidence_accepted"]), _money(row["cost_per_verified_usd"]),
                      f"{row['mean_completion_s']:,.0f}", f"{row['p95_completion_s']:,.0f}",
                      f"{row['compute_s']:,.0f}", str(row["interventions"]))
    return table


def sweep_table(cells: list[dict[str, Any]]) -> Table:
    table = Table(title="sweep: winner per cell (lowest cost per verified run, 0 duplicates, 0 stale)")
    table.add_column("run length \\ fault rate")
    for rate in FAULT_RATES:
        table.add_column(f"{rate:g}", justify="right")
    winners = {(c["run_length"], c["fault_rate"]): c["strategy"] for c in cells if c["winner"]}
    for length in RUN_LENGTHS:
        table.add_row(str(length), *(winners.get((length, rate), "-") for rate in FAULT_RATES))
    return table


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.1%}"


def verdict_line(row: dict[str, Any]) -> str:
    """One sweep cell in words: who wins, by how much against Baton, and how restart compares."""
    head = f"  length {row['run_length']:>3}, fault rate {row['fault_rate']:<5g}: winner {row['winner']}"
    if row["winner"] != "baton":
        head += (f" (cost/verified {_pct(row['winner_cost_vs_baton'])}, time {_pct(row['winner_time_vs_baton'])} "
                 "vs baton)")
    return (head + f"; restart vs baton: cost/verified {_pct(row['restart_cost_vs_baton'])}, time "
            f"{_pct(row['restart_time_vs_baton'])}, verified {row['restart_success']:.1%} vs "
            f"{row['baton_success']:.1%}")


def register(app: typer.Typer) -> None:
    register_bench(app)

    @app.command("experiment")
    def experiment(
        runs: int = typer.Option(2000, "--runs", help="Runs in the workload (each replayed by every strategy)."),
        seed: int = typer.Option(7, "--seed", help="Seed of the workload and the fault schedule."),
        sweep: bool = typer.Option(False, "--sweep", help="Also sweep run length x fault rate."),
        as_json: bool = typer.Option(False, "--json", help="Print the summary (and sweep) as JSON."),
        out: Path | None = typer.Option(None, "--out", help="DuckDB file (default BATON_HOME/analytics/"
                                        "experiment.duckdb)."),
    ) -> None:
        """Replay nine recovery strategies over one seeded workload and fault schedule; judge by an oracle."""
        if runs < 1:
            raise typer.BadParameter(f"must be at least 1, got {runs}", param_hint="--runs")
        path = out or experiment_path(Path(os.environ.get("BATON_HOME", ".baton")))
        console = Console(stderr=as_json, width=170)
        total = runs * len(STRATEGIES) + (len(RUN_LENGTHS) * len(FAULT_RATES) if sweep else 0)
        command = f"baton experiment --runs {runs} --seed {seed}" + (" --sweep" if sweep else "")
        with Progress(TextColumn("experiment"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=Console(stderr=True), transient=True) as progress:
            task = progress.add_task("runs", total=total)
            done = run_experiment(runs, seed, sweep=sweep, command=command,
                                  tick=lambda n: progress.advance(task, n))
        counts = write_experiment(done.result, path)
        summary = [dict(row) for row in done.result.summary]
        cells = [dict(row) for row in done.result.sweep]
        restart_cells = restart_versus_baton(cells)
        if as_json:
            typer.echo(json.dumps({"experiment_id": done.result.meta["experiment_id"], "path": str(path),
                                   "seconds": done.result.meta["seconds"], "summary": summary, "sweep": cells,
                                   "restart_vs_baton": restart_cells, "rows": counts,
                                   "headline": headline(summary, restart_cells)},
                                  default=float, indent=1))
            return
        console.print(comparison_table(summary))
        if sweep:
            console.print(sweep_table(cells))
            console.print(f"sweep: {sweep_runs_per_cell(runs)} runs per cell")
            for row in restart_cells:
                console.print(verdict_line(row))
        console.print(f"wrote {path} in {done.result.meta['seconds']:.1f} s ({counts['run_outcomes']} run outcomes)")


def register_bench(app: typer.Typer) -> None:
    @app.command("experiment-bench")
    def experiment_bench(
        runs: int = typer.Option(10000, "--runs", help="Runs of the timed experiment."),
        events: int = typer.Option(1_000_000, "--events", help="Least events in the log the metrics are timed on."),
        seed: int = typer.Option(7, "--seed"),
        out: Path | None = typer.Option(None, "--out", help="Write the figures as JSON to this file."),
    ) -> None:
        """Time `baton experiment --runs N` and the sec.-25 metrics over a log of at least --events events."""
        from baton.experiment.bench import bench

        if runs < 1 or events < 1:
            raise typer.BadParameter("--runs and --events must be at least 1")
        figures = bench(runs, events, seed)
        text = json.dumps(figures, indent=1)
        if out is not None:
            out.write_text(text + "\n", encoding="utf-8")
        typer.echo(text)
