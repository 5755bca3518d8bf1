"""Each protection switched off is caught by the smallest case that caught it in the full ablation run.

The table is `baton.faults.ablations.CATCHING_CASE` (one case per ablation,
Baton only, so the whole file stays within a few minutes on two cores). An
ablation no case catches is a finding: `test_every_ablation_is_caught` fails
on it (marked strict xfail while the findings in docs/fault-matrix.md stand,
so it turns red the moment the table and the matrix disagree).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from baton.faults.ablations import ABLATIONS, CATCHING_CASE, run_ablation
from baton.faults.cases import CASES

CAUGHT = sorted(name for name, case in CATCHING_CASE.items() if case is not None)
UNCAUGHT = sorted(name for name, case in CATCHING_CASE.items() if case is None)


def test_the_table_names_every_ablation_and_only_known_cases() -> None:
    assert set(CATCHING_CASE) == set(ABLATIONS)
    assert {case for case in CATCHING_CASE.values() if case is not None} <= set(CASES)


@pytest.mark.parametrize("name", CAUGHT)
def test_ablation_is_caught_by_its_case(name: str, tmp_path: Path) -> None:
    case = CATCHING_CASE[name]
    assert case is not None
    result = run_ablation(name, cases=[case], root=tmp_path)
    assert case in result.caught, f"{name} went uncaught by {case}: {result.evidence}"


@pytest.mark.xfail(bool(UNCAUGHT), strict=True, reason=f"findings: no case catches {', '.join(UNCAUGHT)}" if UNCAUGHT else "")
def test_every_ablation_is_caught() -> None:
    assert UNCAUGHT == [], f"uncaught ablations (add the case that catches each): {UNCAUGHT}"
