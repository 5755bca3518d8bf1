"""Issue 13: a move is judged on the catalog as it is when it commits, and a run nobody holds that no placement can
take is escalated after a bounded wait (the simulation's seeds 258 and 39)."""

from __future__ import annotations

import json
import time

import pytest

from baton.catalog.changes import update_placement, withdraw_release
from baton.catalog.seed import seed_catalog
from baton.compat import GateReason, HandoffDecision
from baton.faults.target import LogTarget
from baton.checkpoints import restore
from baton.handoff import HandoffCoordinator, HandoffRequest, HandoffStatus, PreparedHandoff
from baton.handoff.escalation import escalate_sealing_ledger
from baton.models import Boundary, BudgetUsage, EventType, ExecutionCheckpoint
from baton.models.checkpoint import checkpoint_id_for
from baton.store.base import SqlStore
from baton.store.blobs import BlobStore

from builders.handoff import SOURCE, V7, V8, events, one, place, seed_run

EU_B = place("eu-b")


def mover(store: SqlStore, blobs: BlobStore, publisher: LogTarget, **options: float) -> HandoffCoordinator:
    """A coordinator built with the catalog as it was before any change (its own copy of the placements)."""
    return HandoffCoordinator(store, blobs, {p.name: p for p in (SOURCE, EU_B)}, quiesce_timeout_s=0.1,
                              fence_targets=[publisher], **options)


def catalog_of_two(store: SqlStore) -> None:
    seed_catalog(store, [SOURCE, EU_B], {"model-v7": V7, "model-v8": V8})


def assert_nothing_moved(store: SqlStore, run_id: str, publisher: LogTarget) -> None:
    lease = store.get_lease(run_id)
    assert (lease.owner, lease.epoch) == ("source-worker", 1)
    assert store.get_run(run_id).placement == "eu-a"
    assert publisher.log.fence.highest(run_id) is None  # the target's own record: nobody was fenced
    assert not events(store, run_id, EventType.OWNERSHIP_TRANSFERRED)


def test_a_move_decided_before_the_target_lost_the_schema_aborts_at_commit(
    store: SqlStore, blobs: BlobStore, publisher: LogTarget
) -> None:
    catalog_of_two(store)
    run = seed_run(store, blobs, boundary=Boundary.VERIFIED)
    coordinator = mover(store, blobs, publisher)
    prepared = coordinator.prepare(HandoffRequest(run.run_id, "scheduler_rebalance", source_alive=False))
    assert isinstance(prepared, PreparedHandoff) and prepared.target.name == "eu-b"
    update_placement(store, "eu-b", readable_schema_versions=["1", "2"], actor="operator")  # seed 258's change

    outcome = coordinator.commit(prepared)
    assert outcome.status is HandoffStatus.ABORTED
    assert "catalog changed" in (outcome.abort_reason or "") and "state_schema_incompatible" in outcome.abort_reason
    refused = [e for e in events(store, run.run_id, EventType.COMPATIBILITY_FAILED)]
    assert [e.reason for e in refused] == ["the catalog changed before the commit"]
    decision = HandoffDecision.model_validate(refused[0].compatibility_decision)
    assert GateReason.STATE_SCHEMA_INCOMPATIBLE in decision.blocking_reasons and refused[0].target_placement == "eu-b"
    assert_nothing_moved(store, run.run_id, publisher)


def test_a_catalog_change_inside_the_commit_window_is_caught_by_the_commits_transaction(
    store: SqlStore, blobs: BlobStore, publisher: LogTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The change lands after the commit read the catalog and before its transaction: the store compares the
    catalog version in the transaction, so the move is judged again and refused."""
    catalog_of_two(store)
    run = seed_run(store, blobs, boundary=Boundary.VERIFIED)
    coordinator = mover(store, blobs, publisher)
    prepared = coordinator.prepare(HandoffRequest(run.run_id, "scheduler_rebalance", source_alive=False))
    assert isinstance(prepared, PreparedHandoff)
    commit_handoff = store.commit_handoff
    refusals: list[str] = []

    def change_then_commit(*args, **kwargs):  # the operator acts in the instant before the transaction
        if not refusals:
            update_placement(store, "eu-b", verifiers=["citations-1"], actor="operator")
        result = commit_handoff(*args, **kwargs)
        refusals.append(str(result.refusal))
        return result

    monkeypatch.setattr(store, "commit_handoff", change_then_commit)
    outcome = coordinator.commit(prepared)
    assert refusals == ["catalog_changed"]
    assert outcome.status is HandoffStatus.ABORTED and "verifier_unavailable" in (outcome.abort_reason or "")
    assert_nothing_moved(store, run.run_id, publisher)


def test_a_harmless_change_is_judged_again_and_committed_with_the_new_decision(
    store: SqlStore, blobs: BlobStore, publisher: LogTarget
) -> None:
    catalog_of_two(store)
    run = seed_run(store, blobs, boundary=Boundary.VERIFIED)
    coordinator = mover(store, blobs, publisher)
    prepared = coordinator.prepare(HandoffRequest(run.run_id, "scheduler_rebalance", source_alive=False))
    assert isinstance(prepared, PreparedHandoff)
    update_placement(store, "eu-b", runtime_image="worker:rebuilt", actor="operator")
    outcome = coordinator.commit(prepared)
    assert outcome.committed and outcome.target_placement == "eu-b"
    moved = one(store, run.run_id, EventType.OWNERSHIP_TRANSFERRED)
    assert HandoffDecision.model_validate(moved.compatibility_decision).reasons == outcome.decision.reasons  # type: ignore[union-attr]
    assert publisher.log.fence.highest(run.run_id) == 2


def test_an_unowned_run_no_placement_can_take_is_escalated_after_the_wait(
    store: SqlStore, blobs: BlobStore, publisher: LogTarget
) -> None:
    """Seed 39: the run's releases are withdrawn everywhere while its worker is gone."""
    catalog_of_two(store)
    run = seed_run(store, blobs, boundary=Boundary.VERIFIED)
    for release in (V7, V8):
        withdraw_release(store, release.release_id, actor="provider")
    request = HandoffRequest(run.run_id, "lease_expired", source_alive=False, allow_same_placement=True)

    held = mover(store, blobs, publisher, stranded_after_s=0.0).handoff(request)  # the worker still holds it
    assert held.abort_reason == "no compatible target" and store.get_run(run.run_id).status == "active"
    assert store.release_lease(run.run_id, "source-worker", 1)  # the worker is gone
    wait_s = 0.5
    first = mover(store, blobs, publisher, stranded_after_s=wait_s).handoff(request)
    assert first.abort_reason == "no compatible target"  # a refusal while the worker held it does not count
    assert store.get_run(run.run_id).status == "active" and publisher.log.fence.highest(run.run_id) is None
    time.sleep(wait_s + 0.1)

    outcome = mover(store, blobs, publisher, stranded_after_s=wait_s).handoff(request)
    assert outcome.status is HandoffStatus.ABORTED and "no placement can take it" in (outcome.abort_reason or "")
    assert store.get_run(run.run_id).status == "escalated"
    escalated = one(store, run.run_id, EventType.RUN_ESCALATED)
    assert {name: GateReason.RELEASE_INCOMPATIBLE.value in reasons
            for name, reasons in escalated.detail["refusals"].items()} == {"eu-a": True, "eu-b": True}
    lease = store.get_lease(run.run_id)
    assert (lease.owner, lease.epoch) == (None, 2)  # the old epoch is fenced at the store
    assert publisher.log.fence.highest(run.run_id) == 2  # and at the target, by its own record
    assert mover(store, blobs, publisher).handoff(request).abort_reason == "run is escalated, not active"


def _ledger_model_calls(blobs: BlobStore, checkpoint: ExecutionCheckpoint) -> float:
    """Model calls in a checkpoint's budget ledger, read from the blob's own JSON (not through `restore`)."""
    return float(json.loads(blobs.get(checkpoint.budget_ledger_ref))["used"]["model_calls"])


def test_an_escalated_run_ends_on_a_checkpoint_holding_a_call_charged_after_its_last_seal(
    store: SqlStore, blobs: BlobStore, publisher: LogTarget
) -> None:
    """The sim's `bill` finding: the owner reserved a model call (charged before making it), then was lost before
    its next seal. Escalating the run seals an ESCALATED checkpoint whose ledger holds that call."""
    catalog_of_two(store)
    run = seed_run(store, blobs, boundary=Boundary.VERIFIED)
    before = store.latest_checkpoint(run.run_id)
    assert before is not None
    sealed_calls = _ledger_model_calls(blobs, before)
    # the store's ledger, as the owner's seals charged it, then one call reserved after the last seal
    store.append_budget_charge(run.run_id, 1, BudgetUsage(model_calls=sealed_calls), "calls of the sealed boundaries")
    store.append_budget_charge(run.run_id, 1, BudgetUsage(model_calls=1), "model call reserved", fenced=True)
    for release in (V7, V8):
        withdraw_release(store, release.release_id, actor="provider")
    assert store.release_lease(run.run_id, "source-worker", 1)
    request = HandoffRequest(run.run_id, "lease_expired", source_alive=False, allow_same_placement=True)
    assert mover(store, blobs, publisher, stranded_after_s=0.0).handoff(request).abort_reason == "no compatible target"

    outcome = mover(store, blobs, publisher, stranded_after_s=0.0).handoff(request)
    assert "no placement can take it" in (outcome.abort_reason or "")
    final = store.latest_checkpoint(run.run_id)
    assert final is not None and final.seq == before.seq + 1 and final.parent_checkpoint_hash == before.checkpoint_hash
    assert (final.boundary, final.owner_epoch) == (Boundary.ESCALATED, 2)
    assert _ledger_model_calls(blobs, final) == sealed_calls + 1
    assert one(store, run.run_id, EventType.RUN_ESCALATED).source_epoch == 1
    assert [e.checkpoint_id for e in events(store, run.run_id, EventType.CHECKPOINT_SEALED)][-1] == final.checkpoint_id
    assert store.get_run(run.run_id).status == "escalated" and store.get_lease(run.run_id).epoch == 2


def test_an_escalation_whose_lease_or_chain_moved_writes_nothing(store: SqlStore, blobs: BlobStore) -> None:
    run = seed_run(store, blobs, boundary=Boundary.VERIFIED)
    head = store.latest_checkpoint(run.run_id)
    assert head is not None
    restored = restore(blobs, head)
    assert store.release_lease(run.run_id, "source-worker", 1)
    now = store.db_now()
    assert escalate_sealing_ledger(store, blobs, restored, observed_epoch=0, at=now, events=lambda _: []) is None
    assert store.latest_checkpoint(run.run_id) == head and store.get_run(run.run_id).status == "active"
    assert store.get_lease(run.run_id).epoch == 1

    store.append_checkpoint(_next_of(head))  # sealed after the checkpoint the escalation was judged on
    assert escalate_sealing_ledger(store, blobs, restored, observed_epoch=1, at=now, events=lambda _: []) is None
    assert store.get_run(run.run_id).status == "active" and store.get_lease(run.run_id).epoch == 1


def _next_of(head: ExecutionCheckpoint) -> ExecutionCheckpoint:
    fields = head.model_dump(exclude={"checkpoint_hash", "checkpoint_id", "seq", "parent_checkpoint_id",
                                      "parent_checkpoint_hash"})
    return ExecutionCheckpoint.seal(**{**fields, "checkpoint_id": checkpoint_id_for(head.run_id, head.seq + 1),
                                       "seq": head.seq + 1, "parent_checkpoint_id": head.checkpoint_id,
                                       "parent_checkpoint_hash": head.checkpoint_hash})
