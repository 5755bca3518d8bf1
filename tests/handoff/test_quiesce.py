"""A live source quiesces through the event protocol while the coordinator waits for it."""

from __future__ import annotations

import threading
import time

from baton.handoff import (
    HandoffCoordinator,
    HandoffRequest,
    acknowledge_quiesce,
    pending_handoff_request,
    wait_for_handoff_result,
)
from baton.models import Boundary, EventType, ExecutionCheckpoint
from baton.store.base import SqlStore
from baton.store.blobs import BlobStore

from builders.handoff import SOURCE, SeededRun, events, one, place, seed_run


class LiveSource(threading.Thread):
    """Plays the source worker: at its next boundary it seals, answers the request, waits for the verdict."""

    def __init__(self, run: SeededRun, boundary: Boundary) -> None:
        super().__init__(daemon=True)
        self.seeded, self.boundary = run, boundary
        self.sealed: ExecutionCheckpoint | None = None
        self.verdict: EventType | None = None
        self.after_verdict: ExecutionCheckpoint | None = None
        self.error: BaseException | None = None

    def run(self) -> None:  # noqa: D102 - thread body
        try:
            store, run = self.seeded.store, self.seeded
            deadline = time.monotonic() + 10
            signal = None
            while signal is None and time.monotonic() < deadline:
                signal = pending_handoff_request(store, run.run_id)
                time.sleep(0.01)
            assert signal is not None, "no handoff request reached the source"
            self.sealed = run.seal(self.boundary)
            acknowledge_quiesce(store, signal, checkpoint_id=self.sealed.checkpoint_id, epoch=run.lease.epoch,
                                placement=run.placement.name, note="stopped at a boundary")
            self.verdict = wait_for_handoff_result(store, run.run_id, signal.request_seq, timeout_s=10)
            if self.verdict is EventType.HANDOFF_ABORTED:
                self.after_verdict = run.seal(Boundary.AUTHORIZED)  # carries on as the owner
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            self.error = exc


def test_live_source_quiesces_and_the_move_takes_its_newest_checkpoint(store: SqlStore, blobs: BlobStore) -> None:
    run = seed_run(store, blobs, boundary=Boundary.VERIFIED)
    source = LiveSource(run, Boundary.AWAITING_AUTHORITY)
    source.start()
    outcome = HandoffCoordinator(store, blobs, {p.name: p for p in (SOURCE, place("eu-b"))},
                                 quiesce_timeout_s=10).handoff(HandoffRequest(run.run_id, "provider_unhealthy"))
    source.join(10)
    assert source.error is None
    assert source.sealed is not None and outcome.committed
    assert outcome.checkpoint_id == source.sealed.checkpoint_id  # what the source sealed while quiescing
    assert source.verdict is EventType.OWNERSHIP_TRANSFERRED

    quiesced = one(store, run.run_id, EventType.SOURCE_QUIESCED)
    requested = store.list_events(run_id=run.run_id, event_types=[EventType.HANDOFF_REQUESTED])[0]
    assert quiesced.detail["request_seq"] == requested[0] and quiesced.checkpoint_id == source.sealed.checkpoint_id
    assert (quiesced.source_placement, quiesced.source_epoch) == ("eu-a", 1)
    fenced = [e for e in events(store, run.run_id, EventType.SOURCE_FENCED) if e.source_epoch == 1]
    assert fenced[-1].detail["source_quiesced"] is True
    moved = one(store, run.run_id, EventType.OWNERSHIP_TRANSFERRED)
    assert moved.resume_boundary == "AWAITING_AUTHORITY" and moved.detail["request_seq"] == requested[0]
    assert pending_handoff_request(store, run.run_id) is None  # the request is answered


def test_live_source_continues_when_the_move_aborts(store: SqlStore, blobs: BlobStore) -> None:
    run = seed_run(store, blobs, boundary=Boundary.VERIFIED)
    source = LiveSource(run, Boundary.AWAITING_AUTHORITY)
    source.start()
    outcome = HandoffCoordinator(store, blobs, {SOURCE.name: SOURCE}, quiesce_timeout_s=10).handoff(
        HandoffRequest(run.run_id, "scheduler_rebalance"))
    source.join(10)
    assert source.error is None and not outcome.committed
    assert source.verdict is EventType.HANDOFF_ABORTED
    assert source.after_verdict is not None and store.latest_checkpoint(run.run_id) == source.after_verdict
    assert store.get_lease(run.run_id).owner == "source-worker"


def test_silent_source_is_fenced_after_the_quiesce_timeout(store: SqlStore, blobs: BlobStore) -> None:
    run = seed_run(store, blobs, boundary=Boundary.VERIFIED)  # the holder is alive on paper but never answers
    started = time.monotonic()
    outcome = HandoffCoordinator(store, blobs, {p.name: p for p in (SOURCE, place("eu-b"))},
                                 quiesce_timeout_s=0.3).handoff(HandoffRequest(run.run_id, "lease_suspect"))
    assert outcome.committed and time.monotonic() - started >= 0.3
    assert not events(store, run.run_id, EventType.SOURCE_QUIESCED)
    fenced = [e for e in events(store, run.run_id, EventType.SOURCE_FENCED) if e.source_epoch == 1]
    assert fenced[-1].detail["source_quiesced"] is False


def test_a_lapsed_lease_is_not_waited_for(store: SqlStore, blobs: BlobStore) -> None:
    run = seed_run(store, blobs, boundary=Boundary.VERIFIED, ttl_s=0.05)
    time.sleep(0.1)
    started = time.monotonic()
    outcome = HandoffCoordinator(store, blobs, {p.name: p for p in (SOURCE, place("eu-b"))},
                                 quiesce_timeout_s=5).handoff(HandoffRequest(run.run_id, "lease_expired"))
    assert outcome.committed and time.monotonic() - started < 4
