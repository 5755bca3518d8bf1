"""Commit races: an epoch that moved, and checkpoints sealed after prepare or inside the commit window."""

from __future__ import annotations

import pytest

from baton.handoff import HandoffCoordinator, HandoffRequest, PreparedHandoff
from baton.handoff import prepare_resume
from baton.models import Boundary, EventType, OperationEntry, OperationLedger, OperationState, ResumabilityClass
from baton.ownership import Coordinator
from baton.store.base import SqlStore
from baton.store.blobs import BlobStore
from baton.identity import ref_of

from builders.handoff import SOURCE, events, one, place, seed_run

EU_B = place("eu-b")


def mover(store: SqlStore, blobs: BlobStore) -> HandoffCoordinator:
    return HandoffCoordinator(store, blobs, {p.name: p for p in (SOURCE, EU_B)}, quiesce_timeout_s=0.1)


def test_commit_loses_to_another_coordinator(store: SqlStore, blobs: BlobStore) -> None:
    run = seed_run(store, blobs, boundary=Boundary.VERIFIED)
    prepared = mover(store, blobs).prepare(HandoffRequest(run.run_id, "rebalance", source_alive=False))
    assert isinstance(prepared, PreparedHandoff)
    rival = Coordinator(store, name="rival").grant(run.run_id, "rival-owner", ttl_s=30, force=True)
    assert rival is not None and rival.epoch == 2

    outcome = mover(store, blobs).commit(prepared)
    assert not outcome.committed and "epoch moved" in (outcome.abort_reason or "")
    lease = store.get_lease(run.run_id)
    assert (lease.owner, lease.epoch) == ("rival-owner", 2)  # the winner keeps it; nothing was overwritten
    assert not events(store, run.run_id, EventType.OWNERSHIP_TRANSFERRED)
    assert one(store, run.run_id, EventType.HANDOFF_ABORTED).detail["request_seq"] == prepared.request_seq


def test_commit_aborts_when_the_source_sealed_after_prepare(store: SqlStore, blobs: BlobStore) -> None:
    run = seed_run(store, blobs, boundary=Boundary.VERIFIED)
    prepared = mover(store, blobs).prepare(HandoffRequest(run.run_id, "rebalance", source_alive=False))
    assert isinstance(prepared, PreparedHandoff)
    run.seal(Boundary.AWAITING_AUTHORITY)
    outcome = mover(store, blobs).commit(prepared)
    assert not outcome.committed and "newer checkpoint" in (outcome.abort_reason or "")
    assert store.get_lease(run.run_id).owner == "source-worker" and store.current_epoch(run.run_id) == 1


def test_checkpoint_sealed_inside_the_commit_window_is_what_moves(
    store: SqlStore, blobs: BlobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = seed_run(store, blobs, boundary=Boundary.VERIFIED)
    coordinator = mover(store, blobs)
    prepared = coordinator.prepare(HandoffRequest(run.run_id, "rebalance", source_alive=False))
    assert isinstance(prepared, PreparedHandoff)
    late: list = []
    commit_handoff = store.commit_handoff

    def seal_then_commit(*args, **kwargs):  # the source seals in the instant before the commit transaction
        if not late:
            late.append(run.seal(Boundary.AWAITING_AUTHORITY))
        return commit_handoff(*args, **kwargs)

    monkeypatch.setattr(store, "commit_handoff", seal_then_commit)
    outcome = coordinator.commit(prepared)
    assert outcome.committed and outcome.checkpoint_id == late[0].checkpoint_id
    assert one(store, run.run_id, EventType.OWNERSHIP_TRANSFERRED).resume_boundary == "AWAITING_AUTHORITY"


def test_late_checkpoint_the_target_cannot_take_aborts_with_nothing_committed(
    store: SqlStore, blobs: BlobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = seed_run(store, blobs, boundary=Boundary.VERIFIED)
    coordinator = mover(store, blobs)
    prepared = coordinator.prepare(HandoffRequest(run.run_id, "rebalance", source_alive=False))
    assert isinstance(prepared, PreparedHandoff)
    commit_handoff = store.commit_handoff
    sealed: list = []

    def seal_unsafe_then_commit(*args, **kwargs):
        if not sealed:
            sealed.append(run.seal(Boundary.FAILED, resumability=ResumabilityClass.R0))
        return commit_handoff(*args, **kwargs)

    monkeypatch.setattr(store, "commit_handoff", seal_unsafe_then_commit)
    outcome = coordinator.commit(prepared)
    assert not outcome.committed and "nothing was committed" in (outcome.abort_reason or "")
    lease = store.get_lease(run.run_id)
    assert (lease.owner, lease.epoch) == ("source-worker", 1)  # the one transaction never ran: the source keeps it
    assert store.get_run(run.run_id).placement == SOURCE.name
    assert not events(store, run.run_id, EventType.OWNERSHIP_TRANSFERRED)


def test_open_operation_only_the_store_knows_forces_reconciliation(store: SqlStore, blobs: BlobStore) -> None:
    """The source sent a request, recorded UNKNOWN in the store's ledger, and died before sealing it."""
    run = seed_run(store, blobs, boundary=Boundary.AUTHORIZED)
    entry = OperationEntry(
        operation_id="op-lost", run_id=run.run_id, idempotency_key=f"{run.run_id}:publish-1", epoch=1,
        kind="publish", target="publisher", payload_ref=ref_of({"intent": "publish"}), state=OperationState.PREPARED,
        recorded_at=store.db_now(),
    )
    store.begin_operation(entry)
    store.finish_operation("op-lost", OperationState.UNKNOWN, None, "timed out")
    assert run.parts.operations == OperationLedger()  # the sealed checkpoint never heard of it

    outcome = mover(store, blobs).handoff(HandoffRequest(run.run_id, "gpu_reclaimed", source_alive=False))
    assert outcome.committed and outcome.decision is not None
    assert outcome.decision.resume_mode.value == "RECONCILE_THEN_RESUME"
    assert "unresolved_operations" in [r.value for r in outcome.decision.reasons]
    assert one(store, run.run_id, EventType.OWNERSHIP_TRANSFERRED).detail["pending_operations"] == ["op-lost"]

    plan = prepare_resume(store, blobs, run.run_id, placement=EU_B, epoch=2)
    assert [op.operation_id for op in plan.unresolved_operations] == ["op-lost"]
    assert one(store, run.run_id, EventType.RESUME_STARTED).detail["unresolved_operations"] == ["op-lost"]
