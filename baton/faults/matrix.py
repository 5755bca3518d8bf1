"""Run the fifteen cases against Baton and the naive control, and tabulate the six answers.

Each case runs in a fresh world under a temporary directory, so runs never
see each other. A Baton violation is any question answered "yes", any broken
invariant, or a case that crashed; the control is expected to show
violations, and a control without any means the checks are blind.
"""

from __future__ import annotations

import shutil
import tempfile
import time
import traceback
from pathlib import Path

from pydantic import Field

from baton.faults.cases import CASE_LIST, CASES, FaultCase
from baton.faults.facts import RunEnded
from baton.faults.questions import Question, answer, invariants, observe
from baton.faults.scenario import Scenario
from baton.faults.strategies import STRATEGIES
from baton.faults.tasks import TASKS
from baton.faults.world import World
from baton.models import Record


class CaseResult(Record):
    """One case against one strategy: the six answers with their evidence, and the invariants broken."""

    case_id: str
    title: str
    strategy: str
    answers: dict[Question, list[str]]
    invariants: dict[int, list[str]] = Field(default_factory=dict)
    run_status: str | None = None
    notes: list[str] = Field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0

    @property
    def violated(self) -> list[Question]:
        return [question for question, evidence in self.answers.items() if evidence]

    @property
    def violation_count(self) -> int:
        return len(self.violated) + len(self.invariants) + (1 if self.error else 0)


class MatrixReport(Record):
    """Both strategies over every case, for one seed."""

    seed: int
    baton: tuple[CaseResult, ...]
    naive: tuple[CaseResult, ...]

    @property
    def baton_violations(self) -> int:
        return sum(result.violation_count for result in self.baton)

    @property
    def naive_violations(self) -> int:
        return sum(len(result.violated) for result in self.naive)

    @property
    def ok(self) -> bool:
        """Baton clean everywhere, and the control caught (so the checks can fail)."""
        return self.baton_violations == 0 and self.naive_violations > 0


def run_case(case: FaultCase, strategy: str, seed: int, root: Path) -> CaseResult:
    """Run one case against one strategy in a fresh world under `root`."""
    config = case.config(seed)
    started = time.monotonic()
    directory = root / f"{case.case_id}-{strategy}"
    shutil.rmtree(directory, ignore_errors=True)
    world = World(directory, config)
    scenario = Scenario(world=world, strategy=STRATEGIES[strategy], task=TASKS[config.task], case_id=case.case_id)
    error = None
    try:
        try:
            case.script(scenario)
        except Exception as exc:  # noqa: BLE001 - a crashed case is reported, and counts against its strategy
            error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=6)}"
        seen = observe(world)
        answers = answer(seen)
        broken = invariants(seen, answers)
        status = next((f.status for f in seen.facts if isinstance(f, RunEnded)), None)
        return CaseResult(case_id=case.case_id, title=case.title, strategy=strategy, answers=answers,
                          invariants=broken, run_status=status, notes=scenario.notes + seen.notes, error=error,
                          seconds=round(time.monotonic() - started, 3))
    finally:
        world.close()


def run_matrix(seed: int = 0, *, cases: list[str] | None = None, root: Path | None = None) -> MatrixReport:
    """Every case (or the named ones) against Baton, then against the naive control."""
    chosen = [CASES[case_id] for case_id in cases] if cases else list(CASE_LIST)
    with tempfile.TemporaryDirectory(prefix="baton-faults-") as scratch:
        base = Path(root) if root is not None else Path(scratch)
        baton = tuple(run_case(case, "baton", seed, base) for case in chosen)
        naive = tuple(run_case(case, "naive", seed, base) for case in chosen)
    return MatrixReport(seed=seed, baton=baton, naive=naive)
