"""Every case of sec. 27 leaves Baton with no violation, and the naive control with the ones it should have."""

from __future__ import annotations

import pytest

from baton.faults.cases import CASE_LIST
from baton.faults.matrix import CaseResult, MatrixReport
from baton.faults.questions import Question

CASE_IDS = [case.case_id for case in CASE_LIST]
Q = Question

EXPECTED_NAIVE: dict[str, set[Question]] = {
    "source-dies-before-seal": {Q.BUDGET_RESET},
    "source-dies-after-seal": {Q.BUDGET_RESET},
    "target-dies-after-epoch": {Q.BUDGET_RESET},
    "old-worker-resumes": {Q.DUPLICATE_MUTATION, Q.BUDGET_RESET},
    "checkpoint-blob-missing": {Q.DUPLICATE_MUTATION, Q.BUDGET_RESET},
    "checkpoint-hash-mismatch": {Q.WRONG_ARTIFACT, Q.STALE_EVIDENCE},
    "state-schema-incompatible": {Q.BUDGET_RESET},
    "verifier-unavailable": {Q.BUDGET_RESET},
    "repository-changed": {Q.STALE_EVIDENCE},
    "browser-session-expired": {Q.STALE_EVIDENCE, Q.AUTHORITY_EXPANDED},
    "provider-alias-changed": {Q.WRONG_ARTIFACT},
    "side-effect-timed-out": {Q.DUPLICATE_MUTATION, Q.UNKNOWN_HIDDEN, Q.BUDGET_RESET},
    "approval-expired": {Q.AUTHORITY_EXPANDED},
    "budget-expires": {Q.BUDGET_RESET},
    "region-policy-changed": {Q.AUTHORITY_EXPANDED},
}
"""What the transcript-only resume must be caught doing in each case (at least these)."""


def _result(results: tuple[CaseResult, ...], case_id: str) -> CaseResult:
    return next(result for result in results if result.case_id == case_id)


def test_all_fifteen_cases_ran_for_both_strategies(matrix: MatrixReport) -> None:
    assert [r.case_id for r in matrix.baton] == CASE_IDS == [r.case_id for r in matrix.naive]
    assert len(CASE_IDS) == 15 and set(EXPECTED_NAIVE) == set(CASE_IDS)


@pytest.mark.parametrize("case_id", CASE_IDS)
def test_baton_has_no_violation(matrix: MatrixReport, case_id: str) -> None:
    result = _result(matrix.baton, case_id)
    assert result.error is None, result.error
    assert result.violated == [], {q.value: result.answers[q] for q in result.violated}
    assert result.invariants == {}
    assert result.run_status in ("verified", "failed", "escalated")  # invariant 10: every run ends


@pytest.mark.parametrize("case_id", CASE_IDS)
def test_naive_control_is_caught(matrix: MatrixReport, case_id: str) -> None:
    result = _result(matrix.naive, case_id)
    assert result.error is None, result.error
    assert EXPECTED_NAIVE[case_id] <= set(result.violated), [q.value for q in result.violated]
    for question in EXPECTED_NAIVE[case_id]:
        assert result.answers[question], f"{question.value} has no evidence"


def test_the_control_breaks_the_matching_invariants(matrix: MatrixReport) -> None:
    timed_out = _result(matrix.naive, "side-effect-timed-out")
    assert 1 in timed_out.invariants and 8 in timed_out.invariants
    assert any("applied 2 times" in line for line in timed_out.answers[Q.DUPLICATE_MUTATION])
    assert any("without asking the target" in line for line in timed_out.answers[Q.UNKNOWN_HIDDEN])
    session = _result(matrix.naive, "browser-session-expired")
    assert any("credential is stored in transcript.json" in line for line in session.answers[Q.AUTHORITY_EXPANDED])
    assert 7 in session.invariants and 9 in session.invariants
    assert 6 in _result(matrix.naive, "provider-alias-changed").invariants


def test_baton_outcomes_follow_the_protocol(matrix: MatrixReport) -> None:
    outcome = {r.case_id: r for r in matrix.baton}
    for aborted in ("checkpoint-blob-missing", "checkpoint-hash-mismatch", "state-schema-incompatible",
                    "verifier-unavailable"):
        assert any("aborted, the source keeps the run" in note for note in outcome[aborted].notes), aborted
        assert outcome[aborted].run_status == "verified"
    assert outcome["budget-expires"].run_status == "failed"  # budget is never reset to finish the job
    assert outcome["region-policy-changed"].run_status == "escalated"  # no placement may mutate any more
    assert any("was fenced" in note for note in outcome["old-worker-resumes"].notes)
    assert any("SIGKILLed" in note for note in outcome["source-dies-before-seal"].notes)
    assert any("SIGKILLed" in note for note in outcome["source-dies-after-seal"].notes)
    assert matrix.ok and matrix.baton_violations == 0 and matrix.naive_violations >= 15
