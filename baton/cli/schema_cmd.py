"""`baton schema`: export the checkpoint format as JSON Schema."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from baton.identity import CANONICAL_FORM, CANONICAL_FORM_RULES
from baton.schema_export import write_schemas


def register(app: typer.Typer) -> None:
    @app.command("schema")
    def schema(out: Path = typer.Option(..., "--out", help="Directory to write the JSON Schema files into.")) -> None:
        """Write JSON Schemas of the checkpoint and the records it references."""
        written = write_schemas(out)
        console = Console()
        for path in written:
            console.print(f"wrote {path}")
        console.print(f"canonical form: {CANONICAL_FORM}", highlight=False)
        for name, rule in CANONICAL_FORM_RULES.items():
            console.print(f"  {name}: {rule}", highlight=False, markup=False)
