"""Resumability classes are derived, each with its reasons."""

from __future__ import annotations

from pathlib import Path

import pytest

from baton.checkpoints import restore
from baton.models import Boundary, OperationLedger, OperationState, PortabilityConstraints, ResumabilityClass, RunKind
from baton.resumability import (
    BROWSER_RESUMABILITY,
    BrowserResumeClass,
    ResumeReason,
    classify_restored,
    classify_resumability,
)
from baton.store.blobs import BlobStore

from builders.checkpoints import chain
from builders.records import ledger, placement, workspace

R = ResumabilityClass
EMPTY = OperationLedger()


def test_pure_planning_is_r2() -> None:
    result = classify_resumability(Boundary.GENERATING, RunKind.PLANNING, EMPTY)
    assert result == (R.R2, (ResumeReason.DETERMINISTIC_STATE,))


def test_research_with_recorded_observations_is_r3() -> None:
    result = classify_resumability(Boundary.CANDIDATE_READY, RunKind.RESEARCH, EMPTY, has_recorded_observations=True)
    assert result.resumability is R.R3
    assert result.reasons == (ResumeReason.RECORDED_OBSERVATIONS,)


def test_coding_in_an_isolated_workspace_is_r4() -> None:
    result = classify_resumability(Boundary.VERIFIED, RunKind.CODING, EMPTY, workspace=workspace())
    assert result == (R.R4, (ResumeReason.ISOLATED_WORKSPACE,))


def test_coding_without_workspace_identity_restarts_from_the_previous_boundary() -> None:
    result = classify_resumability(Boundary.GENERATING, RunKind.CODING, EMPTY)
    assert result == (R.R1, (ResumeReason.WORKSPACE_IDENTITY_MISSING,))


@pytest.mark.parametrize(
    ("state", "reason"),
    [
        (OperationState.UNKNOWN, ResumeReason.OPERATION_OUTCOME_UNKNOWN),
        (OperationState.PREPARED, ResumeReason.OPERATION_PREPARED_UNCONFIRMED),
    ],
)
def test_unresolved_operation_forces_reconciliation(state: OperationState, reason: ResumeReason) -> None:
    result = classify_resumability(Boundary.AUTHORIZED, RunKind.DEPLOY, ledger(OperationState.COMMITTED, state))
    assert result.resumability is R.R5
    assert result.reasons[0] == reason
    assert ResumeReason.MUTATION_AUTHORITY_NEEDS_NEW_EPOCH in result.reasons


def test_committing_with_in_flight_operation_is_r5_even_for_a_coding_run() -> None:
    result = classify_resumability(
        Boundary.COMMITTING, RunKind.CODING, ledger(OperationState.PREPARED), workspace=workspace(), has_recorded_observations=True
    )
    assert result.resumability is R.R5
    assert result.reasons == (
        ResumeReason.OPERATION_PREPARED_UNCONFIRMED,
        ResumeReason.ISOLATED_WORKSPACE,
        ResumeReason.MUTATION_AUTHORITY_NEEDS_NEW_EPOCH,
        ResumeReason.RECORDED_OBSERVATIONS,
    )


def test_final_operations_do_not_force_reconciliation() -> None:
    result = classify_resumability(
        Boundary.COMMITTED, RunKind.DEPLOY, ledger(OperationState.COMMITTED, OperationState.NOT_COMMITTED)
    )
    assert result == (R.R4, (ResumeReason.MUTATION_AUTHORITY_NEEDS_NEW_EPOCH,))


def test_verifying_is_not_sealable_so_it_restarts_from_the_candidate() -> None:
    result = classify_resumability(Boundary.VERIFYING, RunKind.RESEARCH, EMPTY, has_recorded_observations=True)
    assert result.resumability is R.R1
    assert result.reasons[0] == ResumeReason.BOUNDARY_NOT_SEALABLE


@pytest.mark.parametrize(
    ("boundary", "reason"),
    [
        (Boundary.POSTCONDITION_VERIFIED, ResumeReason.RUN_FINISHED),
        (Boundary.FAILED, ResumeReason.RUN_STOPPED),
        (Boundary.ESCALATED, ResumeReason.RUN_STOPPED),
    ],
)
def test_terminal_runs_are_not_resumable(boundary: Boundary, reason: ResumeReason) -> None:
    result = classify_resumability(boundary, RunKind.DEPLOY, ledger(OperationState.UNKNOWN))
    assert result == (R.R0, (reason,))


@pytest.mark.parametrize(
    ("browser", "expected", "reason"),
    [
        (BrowserResumeClass.REOPEN_DURABLE_URL, R.R3, ResumeReason.BROWSER_REOPEN_DURABLE_URL),
        (BrowserResumeClass.RECONSTRUCT_SESSION, R.R4, ResumeReason.BROWSER_SESSION_FROM_SCOPED_CREDENTIALS),
        (BrowserResumeClass.RESTART_FROM_SERVER_STATE, R.R1, ResumeReason.BROWSER_RESTART_FROM_SERVER_STATE),
        (BrowserResumeClass.NOT_RESUMABLE, R.R0, ResumeReason.BROWSER_NOT_RESUMABLE),
    ],
)
def test_browser_classes_map_to_resumability(browser: BrowserResumeClass, expected: R, reason: ResumeReason) -> None:
    assert BROWSER_RESUMABILITY[browser] is expected
    assert classify_resumability(Boundary.CANDIDATE_READY, RunKind.BROWSER, EMPTY, browser=browser) == (expected, (reason,))


def test_browser_run_without_a_resume_class_is_not_resumable() -> None:
    result = classify_resumability(Boundary.GENERATING, RunKind.BROWSER, EMPTY)
    assert result == (R.R0, (ResumeReason.BROWSER_RESUME_CLASS_MISSING,))


def test_browser_form_submission_with_unknown_outcome_still_needs_reconciliation() -> None:
    result = classify_resumability(
        Boundary.COMMITTING, RunKind.BROWSER, ledger(OperationState.UNKNOWN), browser=BrowserResumeClass.NOT_RESUMABLE
    )
    assert result.resumability is R.R5
    assert ResumeReason.BROWSER_NOT_RESUMABLE in result.reasons


def test_browser_class_on_a_non_browser_run_is_refused() -> None:
    with pytest.raises(ValueError, match="browser resume class"):
        classify_resumability(Boundary.GENERATING, RunKind.PLANNING, EMPTY, browser=BrowserResumeClass.REOPEN_DURABLE_URL)


def test_non_exportable_state_without_an_allowed_target_is_migration_unsafe() -> None:
    source = placement("eu-1")
    elsewhere = placement("us-1", region="us-east", provider="cloudco")
    sealed = PortabilityConstraints(contains_non_exportable_state=True)
    result = classify_resumability(
        Boundary.GENERATING, RunKind.PLANNING, ledger(OperationState.UNKNOWN), constraints=sealed, source=source, targets=[elsewhere]
    )
    assert result.resumability is R.MIGRATION_UNSAFE
    assert result.reasons[:2] == (ResumeReason.NON_EXPORTABLE_WITHOUT_TARGET, ResumeReason.OPERATION_OUTCOME_UNKNOWN)


def test_non_exportable_state_with_a_target_in_its_trust_domain_is_classified_normally() -> None:
    source = placement("eu-1")
    same_domain = placement("eu-2")
    sealed = PortabilityConstraints(contains_non_exportable_state=True)
    result = classify_resumability(
        Boundary.GENERATING, RunKind.PLANNING, EMPTY, constraints=sealed, source=source, targets=[same_domain]
    )
    assert result.resumability is R.R2


def test_non_exportable_state_without_a_known_source_is_unsafe() -> None:
    sealed = PortabilityConstraints(contains_non_exportable_state=True)
    result = classify_resumability(Boundary.GENERATING, RunKind.PLANNING, EMPTY, constraints=sealed)
    assert result.resumability is R.MIGRATION_UNSAFE


def test_classification_is_deterministic() -> None:
    args = (Boundary.AUTHORIZED, RunKind.CODING, ledger(OperationState.UNKNOWN, OperationState.PREPARED))
    results = {classify_resumability(*args, workspace=workspace(), has_recorded_observations=True) for _ in range(5)}
    assert len(results) == 1


def test_classify_restored_reads_the_run_itself(tmp_path: Path) -> None:
    blobs = BlobStore(tmp_path)
    checkpoint = chain(blobs, 2)[-1]
    result = classify_restored(restore(blobs, checkpoint))
    assert result == (R.R3, (ResumeReason.RECORDED_OBSERVATIONS,))
