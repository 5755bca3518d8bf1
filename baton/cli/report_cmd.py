"""`baton report`: write docs/evidence-report.md from experiments run now and committed artifacts."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import Progress

from baton.report.claims import ClaimsError
from baton.report.experiments import ExperimentsError
from baton.report.generate import write_report
from baton.report.ledger import LedgerError
from baton.report.provenance import SpecMissing

SPEC_NAME = "chapter-35-portable-execution-state.txt"


def _default_spec(repo: Path) -> Path:
    configured = os.environ.get("BATON_SPEC")
    return Path(configured) if configured else repo.parent / "shared" / "spec" / SPEC_NAME


def register(app: typer.Typer) -> None:
    @app.command("report")
    def report(
        out: Path = typer.Option(Path("docs/evidence-report.md"), help="where to write the report"),
        spec: Path | None = typer.Option(None, help="the chapter to audit (default: ../shared/spec/..., or $BATON_SPEC)"),
        repo: Path = typer.Option(Path("."), help="the Baton checkout whose docs/evidence/ and artifacts are used"),
        skip: list[str] = typer.Option([], help="experiment ids not to run (they are reported UNRUN)"),
        only: list[str] = typer.Option([], help="run only these experiment ids (the others are UNRUN)"),
    ) -> None:
        """Audit the chapter's claims against what Baton actually ran; UNRUN where nothing ran."""
        console = Console(stderr=True)
        root = repo.resolve()
        try:
            with Progress(console=console, transient=True) as progress:
                findings = write_report(repo=root, spec=spec or _default_spec(root), out=out, skip=skip,
                                        only=only or None, progress=progress)
        except (SpecMissing, LedgerError, ClaimsError, ExperimentsError) as exc:
            console.print(f"[red]baton report: {exc}[/red]")
            raise typer.Exit(2) from exc
        counts = Counter(finding.verdict.value for finding in findings)
        console.print(f"wrote {out}: {len(findings)} claims, "
                      + ", ".join(f"{n} {verdict}" for verdict, n in sorted(counts.items())))
