"""`baton demo`: the main job on the embedded defaults."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from baton.scripted_run import run_scripted_research
from baton.store.factory import baton_home, open_blobs, open_store


def register(app: typer.Typer) -> None:
    @app.command("demo")
    def demo() -> None:
        """Run a scripted research run through several checkpoints, reload each and verify it."""
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
