"""One run's handoff trail holds every event type of sec. 24, in the order of the protocol."""

from __future__ import annotations

import dataclasses
import threading
import time

from baton.checkpoints import build_checkpoint, restore
from baton.handoff import (
    HandoffCoordinator,
    HandoffRequest,
    acknowledge_quiesce,
    confirm_resume,
    pending_handoff_request,
    prepare_resume,
    wait_for_handoff_result,
)
from baton.models import Boundary, BudgetLedger, Event, EventType
from baton.store.base import SqlStore
from baton.store.blobs import BlobStore

from builders.handoff import SOURCE, V8, SeededRun, place, seed_run

SEC24 = [
    EventType.CHECKPOINT_STARTED, EventType.CHECKPOINT_SEALED, EventType.HANDOFF_REQUESTED, EventType.SOURCE_QUIESCED,
    EventType.SOURCE_FENCED, EventType.TARGET_SELECTED, EventType.COMPATIBILITY_PASSED, EventType.COMPATIBILITY_FAILED,
    EventType.OWNERSHIP_TRANSFERRED, EventType.STATE_RESTORED, EventType.REVALIDATION_STARTED,
    EventType.REVALIDATION_FAILED, EventType.RESUME_STARTED, EventType.RESUME_VERIFIED, EventType.HANDOFF_ABORTED,
]


def source_answers(run: SeededRun) -> threading.Thread:
    """The live source: at its next boundary it seals (with its own events) and acknowledges the request."""

    def body() -> None:
        store = run.store
        while (signal := pending_handoff_request(store, run.run_id)) is None:
            time.sleep(0.01)
        store.append_event(Event(event_type=EventType.CHECKPOINT_STARTED, run_id=run.run_id, at=store.db_now(),
                                 source_placement=run.placement.name, source_epoch=run.lease.epoch,
                                 resume_boundary="AWAITING_AUTHORITY"))
        checkpoint = run.seal(Boundary.AWAITING_AUTHORITY)
        store.append_event(Event(event_type=EventType.CHECKPOINT_SEALED, run_id=run.run_id, at=store.db_now(),
                                 checkpoint_id=checkpoint.checkpoint_id, release_id=checkpoint.release_id,
                                 state_schema=checkpoint.schema_version, resume_boundary=checkpoint.boundary.value,
                                 source_epoch=run.lease.epoch))
        acknowledge_quiesce(store, signal, checkpoint_id=checkpoint.checkpoint_id, epoch=run.lease.epoch,
                            placement=run.placement.name)
        wait_for_handoff_result(store, run.run_id, signal.request_seq, timeout_s=10)

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread


def test_the_trail_tells_the_whole_story(store: SqlStore, blobs: BlobStore) -> None:
    run = seed_run(store, blobs, boundary=Boundary.VERIFIED)
    target = place("eu-b")
    # First attempt: the only other placement runs v8 alone, so the gate refuses and the move aborts.
    refused = HandoffCoordinator(store, blobs, {p.name: p for p in (SOURCE, place("us-v8", releases=(V8,)))},
                                 quiesce_timeout_s=0.1).handoff(HandoffRequest(run.run_id, "rebalance", source_alive=False))
    assert not refused.committed
    # Second attempt: the live source quiesces and the run moves.
    thread = source_answers(run)
    outcome = HandoffCoordinator(store, blobs, {p.name: p for p in (SOURCE, target)}, quiesce_timeout_s=10).handoff(
        HandoffRequest(run.run_id, "provider_unhealthy"))
    thread.join(10)
    assert outcome.committed and outcome.target_epoch == 2
    plan = prepare_resume(store, blobs, run.run_id, placement=target, epoch=2)
    run.lease = store.get_lease(run.run_id)
    moved = dataclasses.replace(run.parts, placement=target)
    # A candidate first transition that forgot the budget is refused (built, never recorded) ...
    bad = build_checkpoint(blobs, run_id=run.run_id, parts=dataclasses.replace(moved, budget=BudgetLedger(limits=moved.budget.limits)),
                           new_observations=(), parent=run.latest, boundary=Boundary.AWAITING_AUTHORITY,
                           resumability=run.latest.resumability, resumability_reasons=(), owner_epoch=2,
                           sealed_at=store.db_now())
    assert confirm_resume(store, plan, bad, restore(blobs, bad))
    # ... and the faithful one is verified.
    good = run.seal(Boundary.AWAITING_AUTHORITY, parts=moved)
    assert confirm_resume(store, plan, good, restore(blobs, good)) == []

    trail = store.list_events(run_id=run.run_id)
    seen = {event.event_type for _, event in trail}
    assert set(SEC24) <= seen, f"missing: {sorted(set(SEC24) - seen)}"

    def first(event_type: EventType, after: int = 0) -> tuple[int, Event]:
        return next((seq, e) for seq, e in trail if e.event_type is event_type and seq > after)

    request_seq, _ = first(EventType.HANDOFF_REQUESTED, first(EventType.HANDOFF_ABORTED)[0])
    order = [EventType.SOURCE_QUIESCED, EventType.CHECKPOINT_SEALED, EventType.TARGET_SELECTED,
             EventType.COMPATIBILITY_PASSED, EventType.SOURCE_FENCED, EventType.OWNERSHIP_TRANSFERRED,
             EventType.STATE_RESTORED, EventType.REVALIDATION_STARTED, EventType.RESUME_STARTED,
             EventType.REVALIDATION_FAILED, EventType.RESUME_VERIFIED]
    cursor = request_seq
    for event_type in order:
        cursor, event = first(event_type, cursor)
        assert event.run_id == run.run_id

    by_type = {e.event_type: e for _, e in trail}
    moved_event = by_type[EventType.OWNERSHIP_TRANSFERRED]
    assert moved_event.checkpoint_id == by_type[EventType.SOURCE_QUIESCED].checkpoint_id
    assert by_type[EventType.COMPATIBILITY_FAILED].compatibility_decision is not None
    assert by_type[EventType.HANDOFF_ABORTED].reason == "no compatible target"
    for event_type in (EventType.STATE_RESTORED, EventType.RESUME_STARTED, EventType.RESUME_VERIFIED):
        event = by_type[event_type]
        assert (event.target_placement, event.target_epoch, event.release_id, event.state_schema) == (
            "eu-b", 2, run.latest.release_id, "3")
