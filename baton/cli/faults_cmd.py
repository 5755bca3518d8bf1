"""`baton faults`: the fault cases under Baton and two transcript-only controls, answered by outside oracles.

Exit codes: 0 Baton showed no violation and every control was caught; 1 any
Baton violation (an oracle said yes, or a case crashed); 2 a control showed
no violation at all (the oracles would be blind); 3 with `--ablate`, some
ablation that no case caught.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
import typer
from rich.console import Console
from rich.table import Table

from baton.ablation import Ablation, UnknownAblation, parse_ablations
from baton.faults.ablations import ABLATIONS, AblationResult, run_ablations
from baton.faults.cases import CASE_LIST, CASES
from baton.faults.doc import ablation_section, matrix_section
from baton.faults.doc import write as write_doc
from baton.faults.matrix import CaseResult, MatrixReport, report_json, run_matrix
from baton.faults.oracles import QUESTION_TEXT, Question
from baton.faults.strategies import STRATEGIES


def _cell(result: CaseResult | None) -> str:
    if result is None:
        return "-"
    if result.error:
        return "[red]CRASHED[/red]"
    marks = ",".join(q.value for q in result.violated)
    return f"[red]✗ {marks}[/red]" if marks else f"[green]✓[/green] {result.status}"


def _print(report: MatrixReport, console: Console, *, verbose: bool) -> None:
    ran = [s for s in STRATEGIES if report.of(s)]
    table = Table(title=f"Fault matrix on {report.store}, seed {report.seed}: ✓ = no oracle said yes")
    table.add_column("case", no_wrap=True)
    for strategy in ran:
        table.add_column(strategy)
    by_key = {(r.case_id, r.strategy): r for r in report.results}
    for case in CASE_LIST:
        if any((case.case_id, s) in by_key for s in ran):
            table.add_row(case.case_id, *(_cell(by_key.get((case.case_id, s))) for s in ran))
    console.print(table)
    for result in report.results:
        if result.violation_count and (verbose or result.strategy == "baton"):
            console.print(f"[bold]{result.strategy}[/bold] {result.case_id}: {(result.error or '').strip()}")
            for question, evidence in result.answers.items():
                for line in evidence:
                    console.print(f"  {question.value}: {line}")
        if verbose:
            console.print(f"  [dim]{result.strategy} {result.case_id} ({result.seconds}s): {'; '.join(result.notes)}[/dim]")
    console.print("Questions: " + "; ".join(f"{q.value} = {text}" for q, text in QUESTION_TEXT.items()))
    console.print(", ".join(f"{s}: {report.violations(s)} violation(s)" for s in ran) + f"  ({report.seconds}s)")
    for control in report.blind_controls:
        console.print(f"[red]the {control} control shows no violation: the oracles cannot fail, so they prove nothing[/red]")


def _print_ablations(results: list[AblationResult], console: Console) -> None:
    table = Table(title="Ablations: one protection off, Baton only")
    table.add_column("ablation", no_wrap=True)
    table.add_column("caught by (case: oracles)")
    for result in results:
        caught = "; ".join(f"{case}: {','.join(q)}" for case, q in result.caught.items())
        table.add_row(result.name, caught or "[red]UNCAUGHT[/red]")
    console.print(table)


def _command(ablate: list[str], cases: list[str], url: str | None) -> str:
    """The command line that regenerates a doc section (the store URL shown by its scheme only)."""
    parts = ["baton faults", *(f"--ablate {a}" for a in ablate), *(f"--case {c}" for c in cases)]
    if url:
        parts.append("--store-url postgresql://...")
    return " ".join(parts + ["--doc docs/fault-matrix.md"])


def _ablation_names(values: list[str]) -> list[str]:
    if values == ["all"]:
        return list(ABLATIONS)
    if values == ["gates"]:
        return [name for name in ABLATIONS if name.startswith("gate:")]
    names: list[str] = []
    for value in values:
        names += sorted(parse_ablations(value))
    return names


def register(app: typer.Typer) -> None:
    @app.command("faults")
    def faults(
        as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
        seed: int = typer.Option(0, "--seed", help="Seed of the targets' seeded behaviour."),
        case: list[str] = typer.Option([], "--case", help="Run only these case ids (repeatable)."),
        strategy: list[str] = typer.Option([], "--strategy", help=f"Run only these of {', '.join(STRATEGIES)}."),
        ablate: list[str] = typer.Option([], "--ablate", help="Switch off this protection (repeatable; 'all' runs "
                                         "each ablation in turn, 'gates' each gate reason) and report which cases catch it."),
        store_url: str | None = typer.Option(None, "--store-url", help="postgresql://... server for Baton's store "
                                             "(a fresh database per case); default BATON_DATABASE_URL, else SQLite."),
        keep: Path | None = typer.Option(None, "--keep", help="Keep every case's directory here."),
        verbose: bool = typer.Option(False, "--verbose", "-v", help="Also print what happened in each case."),
        doc: Path | None = typer.Option(None, "--doc", help="Rewrite this run's section of this Markdown file "
                                        "(docs/fault-matrix.md)."),
    ) -> None:
        """Inject faults into real runs under Baton and two transcript-only controls; answer from outside oracles."""
        err = Console(stderr=True)
        unknown = [c for c in case if c not in CASES]
        bad = [s for s in strategy if s not in STRATEGIES]
        if unknown or bad:
            err.print(f"unknown case(s) {unknown} / strategy(ies) {bad}; cases: {sorted(CASES)}; "
                      f"strategies: {list(STRATEGIES)}")
            raise typer.Exit(code=2)
        url = store_url or os.environ.get("BATON_DATABASE_URL") or None
        if url is not None and not url.startswith(("postgresql://", "postgres://")):
            err.print(f"--store-url must be a postgresql:// URL, not {url!r}")
            raise typer.Exit(code=2)
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
        console = Console(width=max(Console().width, 160))
        if ablate:
            try:
                names = _ablation_names(ablate)
            except UnknownAblation as exc:
                err.print(str(exc))
                raise typer.Exit(code=2) from None
            results = run_ablations(names, seed=seed, root=keep, store_url=url, cases=case or None)
            if doc is not None:
                write_doc(doc, "ablations", ablation_section([r.model_dump(mode="json") for r in results],
                                                             _command(ablate, case, url)))
            if as_json:
                typer.echo(json.dumps([r.model_dump(mode="json") for r in results], indent=2))
            else:
                _print_ablations(results, console)
            if any(not r.caught for r in results):
                raise typer.Exit(code=3)
            return
        report = run_matrix(seed, cases=case or None, strategies=tuple(strategy) or STRATEGIES, root=keep,
                            store_url=url)
        if doc is not None:
            write_doc(doc, f"matrix-{report.store}", matrix_section(report_json(report), _command([], case, url)))
        if as_json:
            typer.echo(json.dumps(report_json(report), indent=2, sort_keys=True, default=str))
        else:
            _print(report, console, verbose=verbose)
        if report.baton_violations:
            raise typer.Exit(code=1)
        if report.blind_controls:
            raise typer.Exit(code=2)


__all__ = ["Ablation", "Question", "register", "report_json"]
