"""`baton fleet`: a live fleet of worker processes and target services, with optional chaos."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from baton.ablation import exit_if_ablated
from baton.fleet import COORDINATORS, FleetConfig, FleetProgress, FleetSummary, run_fleet
from baton.store.factory import baton_home, database_url


def fleet_ok(summary: FleetSummary) -> bool:
    """Every run ended on its own, no run has more than one side effect per target, the checker found nothing."""
    return summary.all_terminal and summary.runs == summary.planned and not summary.oracle_failures


def _counts(title: str, counts: dict[str, int]) -> str:
    return f"{title}: " + (", ".join(f"{key} {value}" for key, value in counts.items()) or "none")


def print_summary(console: Console, summary: FleetSummary) -> None:
    """The fleet summary as tables."""
    runs = Table(title=f"fleet {summary.fleet_id} ({summary.store}, {summary.duration_s}s)")
    for column in ("runs", "verified", "failed", "escalated", "still active", "timed out"):
        runs.add_column(column, justify="right")
    launched = str(summary.runs) if summary.runs == summary.planned else f"{summary.runs} of {summary.planned} planned"
    runs.add_row(launched, f"[green]{summary.verified}[/green]", str(summary.failed), str(summary.escalated),
                 str(summary.active), str(len(summary.timed_out)))
    console.print(runs)

    handoffs = Table(title="handoffs (committed) by reason")
    handoffs.add_column("reason")
    handoffs.add_column("handoffs", justify="right")
    handoffs.add_column("chaos events", justify="right")
    for reason in sorted(set(summary.handoffs_by_reason) | set(summary.chaos_events)):
        handoffs.add_row(reason, str(summary.handoffs_by_reason.get(reason, 0)), str(summary.chaos_events.get(reason, "-")))
    console.print(handoffs)
    console.print(_counts("by migration class", summary.handoffs_by_class))
    console.print(_counts("aborted handoffs by requested reason", summary.handoffs_aborted))
    if summary.chaos_reasons_without_handoff:
        console.print(f"[yellow]chaos reasons that fired without a committed handoff: "
                      f"{', '.join(summary.chaos_reasons_without_handoff)}[/yellow]")

    effects = Table(title="side effects, from the targets' own files")
    for column in ("target", "file", "effects", "duplicate keys", "runs with >1"):
        effects.add_column(column)
    for item in summary.side_effects:
        effects.add_row(item.target, item.file, str(item.total), str(len(item.duplicate_keys)),
                        str(len(item.runs_with_several)))
    console.print(effects)
    console.print(
        f"stale-worker rejections (targets' request logs): {summary.stale_worker_rejections} "
        f"({_counts('by target', summary.stale_rejections_by_target)}; Baton's events: {summary.stale_rejection_events})   "
        f"resumes verified: {summary.resumes_verified}   resume failures: {summary.resume_failures}   "
        f"operations reconciled: {summary.operations_reconciled}   "
        f"observations changed on revalidation: {summary.observations_changed}"
    )
    console.print(_counts("workers", summary.workers))
    if summary.pause is not None:
        console.print("paused worker (SIGSTOP, then SIGCONT): " + ", ".join(f"{k} {v}" for k, v in summary.pause.items()))
    if summary.timed_out:
        console.print(f"[red]timed out, fenced and marked failed: {', '.join(summary.timed_out)}[/red]")
    duplicates = summary.duplicate_side_effects
    console.print(f"duplicate side effects: [{'green' if duplicates == 0 else 'red'}]{duplicates}[/]")
    if summary.checker_violations:
        console.print(f"[red]checker violations ({len(summary.checker_violations)}):[/red]")
        for line in summary.checker_violations:
            console.print(f"  {line}")
    else:
        console.print("invariant violations (1-5 over the fleet history, 6-8 over every checkpoint chain): "
                      "[green]0[/green]")


def run_with_progress(console: Console, config: FleetConfig) -> FleetSummary:
    """Run a fleet with a Rich progress bar on `console`."""
    columns = (TextColumn("[bold]fleet"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("{task.fields[status]}"))
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task("runs", total=config.runs, status="starting services and workers")

        def update(snapshot: FleetProgress) -> None:
            status = (f"verified {snapshot.verified} failed {snapshot.failed} escalated {snapshot.escalated} "
                      f"handoffs {snapshot.handoffs}")
            progress.update(task, completed=snapshot.finished, total=snapshot.total, status=status)

        return run_fleet(config, update)


def register(app: typer.Typer) -> None:
    @app.command("fleet")
    def fleet(
        runs: int = typer.Option(12, "--runs", min=1, help="How many runs to launch (research, deploy and coding)."),
        workers: int = typer.Option(3, "--workers", min=1, help="Worker processes, spread over placements."),
        chaos: bool = typer.Option(False, "--chaos", help="Inject the seeded chaos schedule."),
        seed: int = typer.Option(1, "--seed", help="Seed of the chaos schedule and the target services."),
        as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
        timeout_s: float = typer.Option(180.0, "--timeout", help="Seconds before leftover runs are fenced and failed."),
        home: Path = typer.Option(None, "--home", help="BATON_HOME (default: $BATON_HOME or ./.baton)."),
        launch_interval: float = typer.Option(0.6, "--launch-interval", min=0.01,
                                              help="Seconds between run launches (work arrives over time)."),
        chaos_window: float = typer.Option(8.0, "--chaos-window", min=0.1, help="Seconds over which chaos fires."),
        extra_chaos: int = typer.Option(2, "--extra-chaos", min=0, help="Chaos events beyond one per reason."),
        boundary_pause: float = typer.Option(0.35, "--boundary-pause", min=0.0,
                                             help="Seconds a worker pauses at each semantic boundary."),
        coordinator: str = typer.Option(
            "local", "--coordinator",
            help="local: this process hands off runs whose lease lapsed or that chaos displaced; dagster: it only "
                 "changes the infrastructure, and Dagster's sensors and handoff_job react.",
        ),
        browser: bool = typer.Option(False, "--browser",
                                     help="Every third run is a browser run (headless /usr/bin/chromium in the workers)."),
        pause_worker: bool = typer.Option(
            False, "--pause-worker",
            help="SIGSTOP one worker as it is about to send a mutation, past its lease; SIGCONT it once its runs "
                 "moved. Fails unless a target's own fence refused its stale request."),
    ) -> None:
        """Run a live fleet of worker processes on real target services until every run ends."""
        exit_if_ablated("baton fleet")
        if coordinator not in COORDINATORS:
            raise typer.BadParameter(f"--coordinator is one of {', '.join(COORDINATORS)}, not {coordinator!r}")
        console = Console(width=max(Console().width, 110), stderr=as_json)
        config = FleetConfig(coordinator=coordinator, runs=runs, workers=workers, chaos=chaos, seed=seed, timeout_s=timeout_s,
                             home=home or baton_home(), database_url=database_url(), launch_interval_s=launch_interval,
                             chaos_window_s=chaos_window, extra_chaos_events=extra_chaos,
                             boundary_pause_s=boundary_pause, browser=browser, pause_worker=pause_worker)
        summary = run_with_progress(console, config)
        if as_json:
            typer.echo(json.dumps(summary.model_dump(mode="json"), indent=2, sort_keys=True))
        else:
            print_summary(console, summary)
        if not fleet_ok(summary):
            for line in summary.oracle_failures:
                console.print(f"[red]oracle: {line}[/red]")
            raise typer.Exit(code=1)
