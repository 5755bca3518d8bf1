"""A failed prepare aborts: the epoch stays, the source keeps its lease and goes on mutating."""

from __future__ import annotations

from pathlib import Path

import pytest

from baton.authority import AuthorityService
from baton.compat import GateReason, HandoffDecision
from baton.faults.target import LogTarget
from baton.gateway import MutationGateway
from baton.handoff import HandoffCoordinator, HandoffRequest, HandoffStatus
from baton.identity import hex_of
from baton.models import AuthorityLevel, Boundary, EventType, PortabilityConstraints
from baton.store.base import SqlStore
from baton.store.blobs import BlobStore

from builders.handoff import SOURCE, V7, V8, events, one, place, seed_run


def mover(store: SqlStore, blobs: BlobStore, *placements, **options) -> HandoffCoordinator:
    return HandoffCoordinator(store, blobs, {p.name: p for p in (SOURCE, *placements)}, quiesce_timeout_s=0.1, **options)


def test_no_compatible_target_aborts_and_the_source_carries_on(
    store: SqlStore, blobs: BlobStore, publisher: LogTarget, authority: AuthorityService
) -> None:
    run = seed_run(store, blobs, boundary=Boundary.AUTHORIZED)
    v8_only = place("us-v8", region="us-east", releases=(V8,))
    old_reader = place("eu-old", schemas=("1",))
    outcome = mover(store, blobs, v8_only, old_reader, fence_targets=[publisher]).handoff(
        HandoffRequest(run.run_id, "region_capacity_lost", source_alive=False))

    assert outcome.status is HandoffStatus.ABORTED and not outcome.committed
    assert outcome.abort_reason == "no compatible target" and outcome.target_epoch is None
    failed = one(store, run.run_id, EventType.COMPATIBILITY_FAILED)
    assert failed.detail["refusals"] == {
        "eu-old": [GateReason.STATE_SCHEMA_INCOMPATIBLE.value, GateReason.ENVIRONMENT_CHANGED.value],
        "us-v8": [GateReason.RELEASE_INCOMPATIBLE.value, GateReason.ENVIRONMENT_CHANGED.value],
    }
    assert failed.checkpoint_id == run.latest.checkpoint_id and failed.release_id == V7.release_id
    assert not HandoffDecision.model_validate(failed.compatibility_decision).allowed
    aborted = one(store, run.run_id, EventType.HANDOFF_ABORTED)
    assert (aborted.reason, aborted.source_placement, aborted.source_epoch) == ("no compatible target", "eu-a", 1)
    assert aborted.detail["requested_for"] == "region_capacity_lost"

    lease = store.get_lease(run.run_id)
    assert (lease.owner, lease.epoch) == ("source-worker", 1)
    assert store.get_run(run.run_id).placement == "eu-a"
    assert publisher.log.fence.highest(run.run_id) is None  # nobody was fenced
    assert not events(store, run.run_id, EventType.SOURCE_FENCED, EventType.OWNERSHIP_TRANSFERRED)

    # The source is still the owner: it mutates through the gateway and seals its next boundary.
    gateway = MutationGateway(store, authority, {"publisher": publisher})
    result = gateway.submit(run.publish_request(run.capability(authority)))
    assert result.state.value == "COMMITTED" and not result.replayed
    assert [r["epoch"] for r in publisher.records()] == [1]
    run.seal(Boundary.COMMITTED)
    assert store.latest_checkpoint(run.run_id) == run.latest


def test_authority_downgrade_can_be_forbidden_by_policy(store: SqlStore, blobs: BlobStore) -> None:
    from baton.compat import HandoffPolicy

    run = seed_run(store, blobs, boundary=Boundary.VERIFIED)
    sandbox = place("sandbox", ceiling=AuthorityLevel.SANDBOX_MUTATE)
    outcome = mover(store, blobs, sandbox, policy=HandoffPolicy(allow_authority_downgrade=False)).handoff(
        HandoffRequest(run.run_id, "rebalance", source_alive=False))
    assert not outcome.committed
    assert one(store, run.run_id, EventType.COMPATIBILITY_FAILED).detail["refusals"]["sandbox"][0] == (
        GateReason.AUTHORITY_DOWNGRADE_FORBIDDEN.value)


def test_region_constraint_refuses_foreign_targets(store: SqlStore, blobs: BlobStore) -> None:
    run = seed_run(store, blobs, boundary=Boundary.VERIFIED,
                   constraints=PortabilityConstraints(portable_to_regions=("eu-west",)))
    outcome = mover(store, blobs, place("us-1", region="us-east")).handoff(
        HandoffRequest(run.run_id, "rebalance", source_alive=False))
    assert not outcome.committed and store.current_epoch(run.run_id) == 1
    assert GateReason.REGION_NOT_ALLOWED.value in one(store, run.run_id, EventType.COMPATIBILITY_FAILED).detail[
        "refusals"]["us-1"]


def test_missing_blob_aborts_before_anything_moves(store: SqlStore, blobs: BlobStore, tmp_path: Path) -> None:
    run = seed_run(store, blobs, boundary=Boundary.VERIFIED)
    digest = hex_of(run.latest.verifier_evidence_ref)
    (blobs.root / digest[:2] / digest[2:]).unlink()
    outcome = mover(store, blobs, place("eu-b")).handoff(HandoffRequest(run.run_id, "rebalance", source_alive=False))
    assert not outcome.committed and "checkpoint does not verify" in (outcome.abort_reason or "")
    assert "evidence manifest" in (outcome.abort_reason or "") and "missing" in (outcome.abort_reason or "")
    assert outcome.checkpoint_id == run.latest.checkpoint_id
    assert store.current_epoch(run.run_id) == 1 and not events(store, run.run_id, EventType.TARGET_SELECTED)


def test_altered_artifact_bytes_abort_the_handoff(store: SqlStore, blobs: BlobStore) -> None:
    run = seed_run(store, blobs, boundary=Boundary.VERIFIED)
    digest = hex_of(run.candidate.artifact_hash)
    path = blobs.root / digest[:2] / digest[2:]
    path.write_bytes(path.read_bytes().replace(b"states that", b"proves that"))
    outcome = mover(store, blobs, place("eu-b")).handoff(HandoffRequest(run.run_id, "rebalance", source_alive=False))
    assert not outcome.committed and "corrupt" in (outcome.abort_reason or "")
    assert store.current_epoch(run.run_id) == 1


@pytest.mark.parametrize("status", ["verified", "escalated"])
def test_finished_runs_do_not_move(store: SqlStore, blobs: BlobStore, status: str) -> None:
    run = seed_run(store, blobs, boundary=Boundary.VERIFIED)
    store.set_run_status(run.run_id, status)
    outcome = mover(store, blobs, place("eu-b")).handoff(HandoffRequest(run.run_id, "rebalance", source_alive=False))
    assert not outcome.committed and outcome.abort_reason == f"run is {status}, not active"


def test_a_run_without_a_checkpoint_does_not_move(store: SqlStore, blobs: BlobStore) -> None:
    store.create_run("bare-run", "research", V7.release_id, "eu-a")
    outcome = mover(store, blobs, place("eu-b")).handoff(HandoffRequest("bare-run", "rebalance", source_alive=False))
    assert not outcome.committed and outcome.abort_reason == "no sealed checkpoint to move"
