"""The checks are computed from what happened: breaking Baton makes them fire, and seeds reproduce."""

from __future__ import annotations

from pathlib import Path

import pytest

import baton.handoff.resume as resume
from baton.faults.cases import CASES
from baton.faults.matrix import run_case
from baton.faults.questions import Question


def test_a_resume_that_forgets_unsealed_spend_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Undo the store-charge merge of prepare_resume: the spend of the killed worker's last step is lost.
    monkeypatch.setattr(resume, "_at_least", lambda sealed, charged: sealed)
    result = run_case(CASES["source-dies-before-seal"], "baton", 0, tmp_path)
    assert result.violated == [Question.BUDGET_RESET]
    assert 8 in result.invariants


def test_without_the_workers_own_check_the_capability_service_still_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import baton.faults.baton_worker as worker

    monkeypatch.setattr(worker, "may_perform", lambda context, level: True)
    result = run_case(CASES["region-policy-changed"], "baton", 0, tmp_path)
    # The capability service still refuses above the ceiling: the run escalates instead of acting.
    assert result.violated == [] and result.run_status == "escalated"


@pytest.mark.parametrize("case_id", ["checkpoint-hash-mismatch", "repository-changed", "provider-alias-changed"])
def test_same_seed_same_story_other_seed_still_clean(tmp_path: Path, case_id: str) -> None:
    first = run_case(CASES[case_id], "naive", 3, tmp_path / "a")
    again = run_case(CASES[case_id], "naive", 3, tmp_path / "b")
    assert first.violated == again.violated and first.notes == again.notes
    assert run_case(CASES[case_id], "baton", 11, tmp_path / "c").violation_count == 0
