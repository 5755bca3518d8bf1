"""The coding and browser agents in the fault matrix: their cases live, under Baton and both controls.

`coding-killed-after-push`: the git remote applies the push and answers, the
worker is SIGKILLed before recording it, the run moves. Baton reconciles the
push against the remote and ends verified with one push in `pushes.jsonl`;
the naive control sends the push again under a fresh key (the remote refuses
its stale base) and reports failure while the remote holds the push; the
competent control's derived key is replayed, but the remote's request log
shows the committed key sent again without asking first.

`browser-draft-changed-during-move`: a person edits the verified server-side
draft while the run moves. Baton sees the draft changed by someone else and
escalates (no submission); the naive control's stale version is refused by the
application; the competent control refreshes to the draft's current version
and submits the person's answers, which the application's draft history shows.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from baton.faults.cases import CASE_LIST
from baton.faults.matrix import run_matrix
from baton.faults.oracles import Question

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_the_matrix_has_fifteen_cases_and_every_agent_kind() -> None:
    assert len(CASE_LIST) >= 15
    assert {case.kind for case in CASE_LIST} >= {"deploy", "research", "coding", "browser"}
    assert len({case.case_id for case in CASE_LIST}) == len(CASE_LIST)


def test_a_push_answered_but_unrecorded_is_reconciled_not_pushed_again(tmp_path: Path) -> None:
    report = run_matrix(0, cases=["coding-killed-after-push"], root=tmp_path)
    by = {result.strategy: result for result in report.results}
    baton, naive, competent = by["baton"], by["naive"], by["competent"]
    assert baton.error is None and baton.violated == [] and baton.status == "verified", baton
    assert Question.UNKNOWN_HIDDEN in naive.violated and Question.DUPLICATE not in naive.violated, naive
    assert competent.error is None and competent.violated == [Question.UNRECONCILED_RETRY], competent
    assert "git got key" in competent.answers[Question.UNRECONCILED_RETRY][0]


def test_a_draft_a_person_changed_during_the_move_is_never_submitted_as_the_runs(tmp_path: Path) -> None:
    report = run_matrix(0, cases=["browser-draft-changed-during-move"], root=tmp_path)
    by = {result.strategy: result for result in report.results}
    baton, naive, competent = by["baton"], by["naive"], by["competent"]
    assert baton.error is None and baton.violated == [] and baton.status == "escalated", baton
    assert naive.error is None and naive.violated == [] and naive.status == "failed", naive
    assert competent.violated == [Question.WRONG_SUBMISSION], competent
    assert "last written by {'user': 'alice'}" in competent.answers[Question.WRONG_SUBMISSION][1]
