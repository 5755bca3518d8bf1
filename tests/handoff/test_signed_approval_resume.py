"""Resume keeps an approval only if an approver key signed it for the current candidate and it is unexpired."""

from __future__ import annotations

import dataclasses

from baton.approval_signing import sign_approval
from baton.authority_keys import KeyRing
from baton.handoff import HandoffCoordinator, HandoffRequest, prepare_resume
from baton.models import Approval, Boundary
from baton.store.base import SqlStore
from baton.store.blobs import BlobStore

from builders.handoff import SOURCE, SeededRun, place, seed_run

APPROVERS = KeyRing.generate()
TARGET = place("eu-2")


def _authorized_with(store: SqlStore, blobs: BlobStore, change) -> SeededRun:  # type: ignore[no-untyped-def]
    run = seed_run(store, blobs, boundary=Boundary.AUTHORIZED)
    approvals = tuple(change(a) for a in run.parts.authority.approvals)
    run.parts = dataclasses.replace(run.parts, authority=run.parts.authority.model_copy(update={"approvals": approvals}))
    run.seal(Boundary.AUTHORIZED)
    outcome = HandoffCoordinator(store, blobs, {p.name: p for p in (SOURCE, TARGET)}, quiesce_timeout_s=0.1).handoff(
        HandoffRequest(run.run_id, "rebalance", source_alive=False))
    assert outcome.committed, outcome
    return run


def _resume(store: SqlStore, blobs: BlobStore, run: SeededRun):  # type: ignore[no-untyped-def]
    return prepare_resume(store, blobs, run.run_id, placement=TARGET, epoch=store.current_epoch(run.run_id),
                          approvers=APPROVERS.trusted())


def test_a_signed_approval_carries_over(store: SqlStore, blobs: BlobStore) -> None:
    run = _authorized_with(store, blobs, lambda a: sign_approval(a, APPROVERS.active))
    plan = _resume(store, blobs, run)
    assert plan.boundary is Boundary.AUTHORIZED and len(plan.authority.approvals) == 1 and plan.refused_approvals == ()


def test_forged_altered_and_unsigned_approvals_send_the_run_back_to_awaiting_authority(
    store: SqlStore, blobs: BlobStore
) -> None:
    cases = {
        "untrusted_approver": lambda a: sign_approval(a, KeyRing.generate().active),
        "forged": lambda a: sign_approval(a, APPROVERS.active).model_copy(update={"approved_by": "someone else"}),
        "unsigned": lambda a: a,
    }
    for reason, change in cases.items():
        run = _authorized_with(store, blobs, change)
        plan = _resume(store, blobs, run)
        assert plan.boundary is Boundary.AWAITING_AUTHORITY and plan.authority.approvals == ()
        assert plan.refused_approvals == (("appr-1", reason),)


def test_without_approver_keys_resume_behaves_as_before(store: SqlStore, blobs: BlobStore) -> None:
    run = _authorized_with(store, blobs, lambda a: a)
    plan = prepare_resume(store, blobs, run.run_id, placement=TARGET, epoch=store.current_epoch(run.run_id))
    assert plan.boundary is Boundary.AUTHORIZED and isinstance(plan.authority.approvals[0], Approval)
