"""`baton check-history`: run the invariant checker over a recorded history."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from baton.checker import INVARIANTS, check
from baton.history import read_history


def register(app: typer.Typer) -> None:
    @app.command("check-history")
    def check_history(
        file: Path = typer.Argument(..., exists=True, dir_okay=False, readable=True, help="A JSONL history file."),
    ) -> None:
        """Check invariants 1-5 over a Jepsen-style history; exit 1 if any is violated."""
        console = Console()
        try:
            ops = read_history(file)
        except (ValueError, OSError) as exc:
            console.print(f"[red]cannot read {file}: {exc}[/red]")
            raise typer.Exit(2) from exc
        violations = check(ops)
        if not violations:
            console.print(f"[green]{len(ops)} records, invariants 1-5 hold[/green]")
            return
        table = Table(title=f"{len(violations)} violation(s) in {file}")
        table.add_column("invariant", justify="right")
        table.add_column("rule")
        table.add_column("what happened")
        table.add_column("records")
        for violation in violations:
            table.add_row(
                str(violation.invariant),
                INVARIANTS[violation.invariant],
                violation.message,
                ", ".join(map(str, violation.history_indexes)),
            )
        console.print(table)
        raise typer.Exit(1)
