"""`baton faults`: the fifteen failure cases x six questions, for Baton and a naive control.

Exit codes: 0 Baton kept every answer "no" and the control was caught; 1 any
Baton violation (a question, an invariant, or a crashed case); 2 the naive
control showed no violation at all, which would mean the checks are blind.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from baton.faults.cases import CASE_LIST, CASES
from baton.faults.matrix import CaseResult, MatrixReport, run_matrix
from baton.faults.questions import Question

_SHORT = {
    Question.DUPLICATE_MUTATION: "duplicate",
    Question.STALE_EVIDENCE: "stale",
    Question.AUTHORITY_EXPANDED: "authority",
    Question.WRONG_ARTIFACT: "artifact",
    Question.BUDGET_RESET: "budget",
    Question.UNKNOWN_HIDDEN: "unknown",
}


def _result_json(result: CaseResult) -> dict[str, Any]:
    return {
        "answers": {q.value: bool(evidence) for q, evidence in result.answers.items()},
        "evidence": {q.value: evidence for q, evidence in result.answers.items() if evidence},
        "invariants_violated": {str(n): messages for n, messages in result.invariants.items()},
        "run_status": result.run_status,
        "notes": result.notes,
        "error": result.error,
        "seconds": result.seconds,
    }


def report_json(report: MatrixReport) -> dict[str, Any]:
    """The matrix as plain JSON data (what `baton faults --json` prints)."""
    return {
        "seed": report.seed,
        "ok": report.ok,
        "baton_violations": report.baton_violations,
        "naive_violations": report.naive_violations,
        "questions": {q.value: q.text for q in Question},
        "cases": [
            {"case_id": b.case_id, "title": b.title, "baton": _result_json(b), "naive": _result_json(n)}
            for b, n in zip(report.baton, report.naive, strict=True)
        ],
    }


def _mark(violated: bool) -> str:
    return "[red]✗[/red]" if violated else "[green]✓[/green]"


def _print(report: MatrixReport, console: Console, *, verbose: bool) -> None:
    table = Table(title=f"Failure injection (sec. 27), seed {report.seed}: ✓ = did not happen under Baton",
                  caption="duplicate mutation | stale evidence accepted | authority expanded | verification on the "
                          "wrong artifact | budget reset | UNKNOWN hidden")
    table.add_column("#", justify="right")
    table.add_column("case", no_wrap=True)
    for question in Question:
        table.add_column(_SHORT[question], justify="center")
    table.add_column("invariants", justify="center")
    table.add_column("Baton run")
    table.add_column("naive control: caught", style="dim", no_wrap=True)
    numbers = {case.case_id: index for index, case in enumerate(CASE_LIST, start=1)}
    for baton, naive in zip(report.baton, report.naive, strict=True):
        index = numbers[baton.case_id]
        caught = ",".join(_SHORT[q] for q in naive.violated) or "-"
        table.add_row(
            str(index), baton.title, *(_mark(bool(baton.answers[q])) for q in Question),
            _mark(bool(baton.invariants)) if not baton.invariants else "[red]" + ",".join(map(str, baton.invariants)) + "[/red]",
            "[red]CRASHED[/red]" if baton.error else str(baton.run_status), f"✗ {caught}" if naive.violated else "-",
        )
    console.print(table)
    for result in report.baton:
        if result.violation_count:
            console.print(f"[red]{result.case_id}[/red]: {result.error or ''}")
            for question, evidence in result.answers.items():
                for line in evidence:
                    console.print(f"  {question.value}: {line}")
            for number, messages in result.invariants.items():
                for line in messages:
                    console.print(f"  invariant {number}: {line}")
    if verbose:
        for baton in report.baton:
            console.print(f"[bold]{baton.case_id}[/bold] ({baton.seconds:.2f}s): " + "; ".join(baton.notes))
    cases_caught = sum(1 for result in report.naive if result.violated)
    console.print(
        f"Baton: {report.baton_violations} violation(s) over {len(report.baton)} cases x {len(Question)} questions "
        f"and invariants 1-10.  Naive transcript-only control: {report.naive_violations} violation(s) in "
        f"{cases_caught} of {len(report.naive)} cases."
    )
    if report.naive_violations == 0:
        console.print("[red]the naive control shows no violation: the checks cannot fail, so they prove nothing[/red]")


def register(app: typer.Typer) -> None:
    @app.command("faults")
    def faults(
        as_json: bool = typer.Option(False, "--json", help="Print the matrix as JSON."),
        seed: int = typer.Option(0, "--seed", help="Seed of every scenario's data."),
        case: list[str] = typer.Option([], "--case", help="Run only these case ids (repeatable)."),
        keep: Path | None = typer.Option(None, "--keep", help="Keep each scenario's world in this directory."),
        verbose: bool = typer.Option(False, "--verbose", "-v", help="Also print what happened in each case."),
    ) -> None:
        """Inject the fifteen faults of sec. 27 into Baton and into a naive resume; check the six questions."""
        unknown = [c for c in case if c not in CASES]
        if unknown:
            Console(stderr=True).print(f"unknown case(s) {unknown}; known: {sorted(CASES)}")
            raise typer.Exit(code=2)
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
        report = run_matrix(seed, cases=case or None, root=keep)
        if as_json:
            typer.echo(json.dumps(report_json(report), indent=2, sort_keys=True, default=str))
        else:
            _print(report, Console(width=max(Console().width, 180)), verbose=verbose)
        if report.baton_violations:
            raise typer.Exit(code=1)
        if report.naive_violations == 0:
            raise typer.Exit(code=2)
