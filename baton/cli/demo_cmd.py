"""`baton demo`: a scripted run sealed at boundaries, then a small live fleet with chaos."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from baton.ablation import exit_if_ablated
from baton.cli.fleet_cmd import fleet_ok, print_summary, run_with_progress
from baton.fleet import FleetConfig
from baton.scripted_run import run_scripted_research
from baton.store.factory import baton_home, database_url, open_blobs, open_store

DEMO_RUNS, DEMO_WORKERS, DEMO_SEED = 6, 3, 1


def register(app: typer.Typer) -> None:
    @app.command("demo")
    def demo(
        fleet: bool = typer.Option(True, "--fleet/--no-fleet", help="Also run a small live fleet with chaos."),
    ) -> None:
        """A scripted run sealed and re-verified at each boundary, then a live fleet (6 runs, 3 workers, chaos)."""
        exit_if_ablated("baton demo")
        console = Console(width=max(Console().width, 110))
        home = baton_home()
        store = open_store(None, home)
        blobs = open_blobs(home, store)
        try:
            console.rule("[bold]Baton demo: a scripted run sealed at semantic boundaries")
            console.print(f"store: {store.backend} under {home}")
            steps = run_scripted_research(store, blobs)
            table = Table(title=f"run {steps[0].checkpoint.run_id}")
            for column in ("seq", "boundary", "resumability", "epoch", "observations", "checkpoint hash", "reload"):
                table.add_column(column)
            for step in steps:
                ckpt = step.checkpoint
                table.add_row(
                    str(ckpt.seq),
                    ckpt.boundary.value,
                    ckpt.resumability.value,
                    str(ckpt.owner_epoch),
                    str(step.observations),
                    ckpt.checkpoint_hash[:19] + "…",
                    "[green]verified[/green]" if step.verified_on_restore else "[red]MISMATCH[/red]",
                )
            console.print(table)
            run = store.get_run(steps[0].checkpoint.run_id)
            events = store.list_events(run_id=run.run_id)
            console.print(f"run status: [bold]{run.status}[/bold]; {len(events)} events recorded")
            if not all(step.verified_on_restore for step in steps):
                raise typer.Exit(code=1)
        finally:
            store.close()
        if not fleet:
            return
        console.rule("[bold]Baton demo: a live fleet with chaos (worker processes, real targets)")
        config = FleetConfig(runs=DEMO_RUNS, workers=DEMO_WORKERS, chaos=True, seed=DEMO_SEED, home=home,
                             database_url=database_url())
        summary = run_with_progress(console, config)
        print_summary(console, summary)
        if not fleet_ok(summary):
            raise typer.Exit(code=1)
