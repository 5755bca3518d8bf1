"""Run the cases under Baton and the two transcript-only controls; answer every question from raw files.

Each (case, strategy) runs in a fresh directory with its own target services,
provider bill and (for Baton) store, authority service and worker processes.
A Baton violation is any oracle answering "yes" or a case that crashed; each
control is expected to show violations, and a control showing none means the
oracles are blind. With ablations, only Baton runs, with those protections
switched off in this process and every process it starts.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from baton.ablation import ablation_env
from baton.faults.cases import CASE_LIST, CASES, FaultCase
from baton.faults.oracles import QUESTION_TEXT, Question, answer
from baton.faults.oracles_agents import answer_agents
from baton.faults.oracles_gates import answer_gates
from baton.faults.rig import REPORTED_FILE, Rig
from baton.faults.strategies import CONTROLS, STRATEGIES, make_run


class CaseResult(BaseModel):
    """One case under one strategy: each question's evidence, how the run ended, what happened."""

    model_config = ConfigDict(frozen=True)

    case_id: str
    title: str
    strategy: str
    answers: dict[Question, list[str]]
    status: str | None = None
    notes: list[str] = Field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0
    gate_reasons: list[str] = Field(default_factory=list)
    """The compatibility gate's reason codes raised in this run's handoffs (Baton only)."""

    @property
    def violated(self) -> list[Question]:
        return [question for question, evidence in self.answers.items() if evidence]

    @property
    def violation_count(self) -> int:
        return len(self.violated) + (1 if self.error else 0)


class MatrixReport(BaseModel):
    """Every case under every strategy run, for one seed and store."""

    model_config = ConfigDict(frozen=True)

    seed: int
    store: str
    ablations: tuple[str, ...] = ()
    results: tuple[CaseResult, ...]
    seconds: float = 0.0

    def of(self, strategy: str) -> list[CaseResult]:
        return [result for result in self.results if result.strategy == strategy]

    def violations(self, strategy: str) -> int:
        return sum(result.violation_count for result in self.of(strategy))

    @property
    def baton_violations(self) -> int:
        return self.violations("baton")

    @property
    def blind_controls(self) -> list[str]:
        """Controls that ran and showed no violation at all."""
        ran = {result.strategy for result in self.results}
        return [c for c in CONTROLS if c in ran and sum(len(r.violated) for r in self.of(c)) == 0]

    @property
    def ok(self) -> bool:
        """Baton clean everywhere and every control caught (so the oracles can fail)."""
        return self.baton_violations == 0 and not self.blind_controls


def run_case(case: FaultCase, strategy: str, seed: int, root: Path, store_url: str | None = None) -> CaseResult:
    """Run one case under one strategy in a fresh directory under `root`."""
    started = time.monotonic()
    directory = root / f"{case.case_id}-{strategy}"
    shutil.rmtree(directory, ignore_errors=True)
    rig = Rig(directory, seed)
    notes: list[str] = []
    error, status = None, None
    gate_reasons: list[str] = []
    run = None
    try:
        with rig.process_env():
            run = make_run(strategy, rig, case, store_url)
            run.start(case.targets)
            case.script(run, rig, notes)
            run.settle()
            run.report()
            reported = json.loads((rig.root / REPORTED_FILE).read_text())
            status, gate_reasons = str(reported.get("status")), list(reported.get("gate_reasons") or [])
    except Exception as exc:  # noqa: BLE001 - a crashed case is reported, and counts against its strategy
        error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=4)}"
        if run is not None:
            try:
                run.report()  # whatever the run got to say, for the oracles
            except Exception:  # noqa: BLE001 - the oracles then see no report
                pass
    finally:
        rig.close()
    answers = answer(directory)
    for name, found in answer_agents(directory).items():
        answers[Question(name)] = answers.get(Question(name), []) + found
    for name, found in answer_gates(directory).items():  # baton/faults/oracles_gates.py
        answers[Question(name)] = answers.get(Question(name), []) + found
    return CaseResult(case_id=case.case_id, title=case.title, strategy=strategy, answers=answers,
                      status=status, notes=notes, error=error, seconds=round(time.monotonic() - started, 1),
                      gate_reasons=gate_reasons)


def isolated_companions(case: FaultCase, ablations: tuple[str, ...]) -> tuple[str, ...]:
    """The case's other stacked protections to switch off with a single ablation (see `FaultCase.companions`)."""
    if len(ablations) != 1:
        return ()
    return tuple(name for name in case.companions.get(ablations[0], ()) if name not in ablations)


def companions_of(ablation: str) -> tuple[str, ...]:
    """Every protection some case switches off with `ablation` alone (the union of the cases' companions), sorted."""
    return tuple(sorted({name for case in CASE_LIST for name in case.companions.get(ablation, ()) if name != ablation}))


def run_matrix(
    seed: int = 0,
    *,
    cases: list[str] | None = None,
    strategies: tuple[str, ...] = STRATEGIES,
    root: Path | None = None,
    store_url: str | None = None,
    ablations: tuple[str, ...] = (),
) -> MatrixReport:
    """Every case (or the named ones) under each strategy; with `ablations`, Baton only, those protections off."""
    chosen = [CASES[case_id] for case_id in cases] if cases else list(CASE_LIST)
    if ablations:
        strategies = ("baton",)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="baton-faults-") as scratch:
        base = Path(root) if root is not None else Path(scratch)
        results = []
        for strategy in strategies:
            for case in chosen:
                if ablations:
                    with ablation_env(*ablations, *isolated_companions(case, ablations)):
                        results.append(run_case(case, strategy, seed, base, store_url))
                else:
                    results.append(run_case(case, strategy, seed, base, store_url))
    return MatrixReport(seed=seed, store="postgresql" if store_url else "sqlite", ablations=ablations,
                        results=tuple(results), seconds=round(time.monotonic() - started, 1))


def _result_json(result: CaseResult) -> dict[str, Any]:
    return {
        "answers": {q.value: bool(evidence) for q, evidence in result.answers.items()},
        "evidence": {q.value: evidence for q, evidence in result.answers.items() if evidence},
        "status": result.status,
        "notes": result.notes,
        "error": result.error,
        "seconds": result.seconds,
    }


def report_json(report: MatrixReport) -> dict[str, Any]:
    """The matrix as plain JSON data (what `baton faults --json` prints)."""
    cases: dict[str, dict[str, Any]] = {}
    for result in report.results:
        entry = cases.setdefault(result.case_id, {"case_id": result.case_id, "title": result.title})
        entry[result.strategy] = _result_json(result)
    return {
        "seed": report.seed,
        "store": report.store,
        "ok": report.ok,
        "seconds": report.seconds,
        "violations": {s: report.violations(s) for s in STRATEGIES if report.of(s)},
        "blind_controls": report.blind_controls,
        "questions": {q.value: text for q, text in QUESTION_TEXT.items()},
        "cases": list(cases.values()),
    }
