"""The two-phase handoff on its happy path: every step recorded with the fields of sec. 24."""

from __future__ import annotations

import pytest

from baton.checkpoints import restore
from baton.compat import GateReason, HandoffDecision, MigrationClass, ResumeMode
from baton.errors import StaleEpochError
from baton.faults.target import LogTarget
from baton.fencing import FencingToken
from baton.gateway import MutationGateway
from baton.authority import AuthorityService
from baton.handoff import HandoffCoordinator, HandoffRequest, HandoffStatus, PreparedHandoff, confirm_resume, prepare_resume
from baton.models import AuthorityLevel, Boundary, EventType
from baton.store.base import SqlStore
from baton.store.blobs import BlobStore

from builders.handoff import PEER, SOURCE, events, one, place, seed_run

SEC24_FIELDS = ("run_id", "checkpoint_id", "source_placement", "target_placement", "source_epoch", "target_epoch",
                "release_id", "state_schema", "reason", "compatibility_decision", "authority_before",
                "authority_after", "resume_boundary")


def coordinator(store: SqlStore, blobs: BlobStore, *placements, **options) -> HandoffCoordinator:
    catalog = {p.name: p for p in (SOURCE, *placements)}
    return HandoffCoordinator(store, blobs, catalog, quiesce_timeout_s=0.2, **options)


def test_handoff_commits_with_every_field_recorded(store: SqlStore, blobs: BlobStore, publisher: LogTarget) -> None:
    run = seed_run(store, blobs, boundary=Boundary.AUTHORIZED)
    outcome = coordinator(store, blobs, PEER, fence_targets=[publisher]).handoff(
        HandoffRequest(run.run_id, "scheduler_rebalance", source_alive=False))

    assert outcome.status is HandoffStatus.COMMITTED and outcome.committed
    assert (outcome.source_placement, outcome.target_placement) == ("eu-a", "eu-b")
    assert (outcome.source_epoch, outcome.target_epoch) == (1, 2)
    assert outcome.checkpoint_id == run.latest.checkpoint_id
    assert outcome.authority_before is outcome.authority_after is AuthorityLevel.EXTERNAL_MUTATE
    assert outcome.new_owner == "placement:eu-b"
    lease = store.get_lease(run.run_id)
    assert (lease.owner, lease.epoch) == ("placement:eu-b", 2)
    assert store.get_run(run.run_id).placement == "eu-b"
    assert publisher.log.fence.highest(run.run_id) == 2  # the target was fenced before anyone resumed

    requested = one(store, run.run_id, EventType.HANDOFF_REQUESTED)
    assert (requested.reason, requested.source_placement, requested.source_epoch) == ("scheduler_rebalance", "eu-a", 1)
    assert requested.detail["source_alive"] is False

    sealed = [e for e in events(store, run.run_id, EventType.CHECKPOINT_SEALED)]
    assert sealed and sealed[-1].checkpoint_id == run.latest.checkpoint_id
    assert sealed[-1].detail["checkpoint_hash"] == run.latest.checkpoint_hash

    selected = one(store, run.run_id, EventType.TARGET_SELECTED)
    assert (selected.source_placement, selected.target_placement, selected.source_epoch) == ("eu-a", "eu-b", 1)
    assert selected.detail["pending_operations"] == []

    passed = one(store, run.run_id, EventType.COMPATIBILITY_PASSED)
    decision = HandoffDecision.model_validate(passed.compatibility_decision)
    assert decision.allowed and decision.migration_class is MigrationClass.PHYSICAL
    assert decision.resume_mode is ResumeMode.RESUME_WITH_RECORDED_OBSERVATIONS
    assert GateReason.ENVIRONMENT_CHANGED in decision.reasons

    fenced = [e for e in events(store, run.run_id, EventType.SOURCE_FENCED) if e.source_epoch == 1]
    assert fenced[-1].target_epoch == 2 and fenced[-1].detail["source_quiesced"] is False

    moved = one(store, run.run_id, EventType.OWNERSHIP_TRANSFERRED)
    for name in SEC24_FIELDS:
        assert getattr(moved, name) is not None, f"ownership_transferred lacks {name}"
    assert (moved.checkpoint_id, moved.release_id, moved.state_schema) == (
        run.latest.checkpoint_id, run.latest.release_id, run.latest.schema_version)
    assert (moved.source_epoch, moved.target_epoch, moved.resume_boundary) == (1, 2, "AUTHORIZED")
    assert (moved.authority_before, moved.authority_after) == ("EXTERNAL_MUTATE", "EXTERNAL_MUTATE")
    assert moved.detail["new_owner"] == "placement:eu-b"
    assert one(store, run.run_id, EventType.HANDOFF_REQUESTED) and not events(store, run.run_id, EventType.HANDOFF_ABORTED)


def test_new_owner_restores_resumes_and_confirms(store: SqlStore, blobs: BlobStore) -> None:
    run = seed_run(store, blobs, boundary=Boundary.AUTHORIZED)
    outcome = coordinator(store, blobs, PEER).handoff(HandoffRequest(run.run_id, "gpu_reclaimed", source_alive=False))
    assert outcome.target_epoch is not None

    plan = prepare_resume(store, blobs, run.run_id, placement=PEER, epoch=outcome.target_epoch)
    assert plan.checkpoint == run.latest and plan.boundary is Boundary.AUTHORIZED
    assert plan.environment_changed and len(plan.observations_to_revalidate) == 2
    assert plan.valid_evidence and not plan.dropped_evidence and len(plan.authority.approvals) == 1
    assert plan.resume_release_id == run.latest.release_id and plan.budget_exhausted == ()

    restored_event = one(store, run.run_id, EventType.STATE_RESTORED)
    assert (restored_event.checkpoint_id, restored_event.target_placement, restored_event.target_epoch) == (
        run.latest.checkpoint_id, "eu-b", 2)
    assert restored_event.resume_boundary == "AUTHORIZED" and restored_event.state_schema == "3"
    assert one(store, run.run_id, EventType.REVALIDATION_STARTED).detail["modes"] == {
        o.source: "REVALIDATE_LIVE_STATE" for o in run.observations}
    started = one(store, run.run_id, EventType.RESUME_STARTED)
    assert (started.resume_boundary, started.authority_before, started.authority_after) == (
        "AUTHORIZED", "EXTERNAL_MUTATE", "EXTERNAL_MUTATE")

    # The new owner seals its first checkpoint at its own epoch, on its own placement.
    import dataclasses

    run.lease = store.get_lease(run.run_id)
    first = run.seal(Boundary.AUTHORIZED, parts=dataclasses.replace(run.parts, placement=PEER))
    assert confirm_resume(store, plan, first, restore(blobs, first)) == []
    verified = one(store, run.run_id, EventType.RESUME_VERIFIED)
    assert (verified.checkpoint_id, verified.target_epoch, verified.resume_boundary) == (first.checkpoint_id, 2, "AUTHORIZED")


def test_prepare_and_commit_are_separate_phases(store: SqlStore, blobs: BlobStore) -> None:
    run = seed_run(store, blobs, boundary=Boundary.VERIFIED)
    mover = coordinator(store, blobs, PEER, place("eu-c"))
    prepared = mover.prepare(HandoffRequest(run.run_id, "scheduler_rebalance", preferred_targets=("eu-c",),
                                            source_alive=False))
    assert isinstance(prepared, PreparedHandoff)
    assert prepared.target.name == "eu-c" and prepared.checkpoint == run.latest and prepared.source_epoch == 1
    # Phase one reserved nothing irreversible: the source still owns the run and may seal.
    assert store.get_lease(run.run_id).owner == "source-worker" and store.current_epoch(run.run_id) == 1
    assert not events(store, run.run_id, EventType.OWNERSHIP_TRANSFERRED)
    outcome = mover.commit(prepared)
    assert outcome.committed and outcome.target_placement == "eu-c" and outcome.target_epoch == 2


def test_old_owner_is_fenced_everywhere_after_commit(
    store: SqlStore, blobs: BlobStore, publisher: LogTarget, authority: AuthorityService
) -> None:
    run = seed_run(store, blobs, boundary=Boundary.AUTHORIZED)
    stale_capability = run.capability(authority)  # issued while the source still owned epoch 1
    coordinator(store, blobs, PEER, fence_targets=[publisher]).handoff(
        HandoffRequest(run.run_id, "scheduler_rebalance", source_alive=False))
    gateway = MutationGateway(store, authority, {"publisher": publisher})

    with pytest.raises(StaleEpochError):
        gateway.submit(run.publish_request(stale_capability))
    with pytest.raises(StaleEpochError):
        run.seal(Boundary.AUTHORIZED)  # sealing is a mutation too
    from baton.errors import TargetRejectedError

    with pytest.raises(TargetRejectedError) as refused:  # even bypassing the gateway
        publisher.apply("op-direct", "k-direct", FencingToken(run.run_id, 1), {"intent": "publish"})
    assert refused.value.fenced
    assert publisher.records() == []
    assert events(store, run.run_id, EventType.STALE_WORKER_REJECTED)


def test_stale_epoch_refused_by_prepare_resume(store: SqlStore, blobs: BlobStore) -> None:
    run = seed_run(store, blobs, boundary=Boundary.VERIFIED)
    coordinator(store, blobs, PEER).handoff(HandoffRequest(run.run_id, "scheduler_rebalance", source_alive=False))
    with pytest.raises(StaleEpochError):
        prepare_resume(store, blobs, run.run_id, placement=SOURCE, epoch=1)
    with pytest.raises(StaleEpochError):
        prepare_resume(store, blobs, run.run_id, placement=PEER, epoch=3)  # an epoch nobody was granted
    assert not events(store, run.run_id, EventType.STATE_RESTORED)
