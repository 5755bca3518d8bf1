"""A handoff's events keep their order while each phase writes them in as few transactions as it can."""

from __future__ import annotations


from baton.handoff import HandoffCoordinator, HandoffRequest, PreparedHandoff, prepare_resume
from baton.models import Boundary, EventType
from baton.store.base import SqlStore
from baton.store.blobs import BlobStore

from builders.handoff import PEER, SOURCE, events, seed_run
from builders.rows import counted_transactions as write_transactions


def test_each_phase_commits_its_events_together_in_order(store: SqlStore, blobs: BlobStore) -> None:
    run = seed_run(store, blobs, boundary=Boundary.VERIFIED)
    coordinator = HandoffCoordinator(store, blobs, {p.name: p for p in (SOURCE, PEER)}, quiesce_timeout_s=0.1)
    start = max((seq for seq, _ in store.list_events(run_id=run.run_id)), default=0)

    with write_transactions() as prepare_tx:
        prepared = coordinator.prepare(HandoffRequest(run.run_id, "rebalance", source_alive=False))
    assert isinstance(prepared, PreparedHandoff)
    with write_transactions() as commit_tx:
        outcome = coordinator.commit(prepared)
    assert outcome.committed and outcome.target_epoch is not None
    with write_transactions() as restore_tx:
        prepare_resume(store, blobs, run.run_id, placement=PEER, epoch=outcome.target_epoch)

    # prepare: the request on its own (a live source answers it), then its findings together;
    # commit: ONE transaction for the compare-and-set, its lease event, the fence record, the move and the transfer;
    # restore: everything it records in one.
    assert (prepare_tx.count(True), commit_tx.count(True), restore_tx.count(True)) == (2, 1, 1)

    recorded = store.list_events(run_id=run.run_id, after_seq=start)
    assert [e.event_type for _, e in recorded] == [
        EventType.HANDOFF_REQUESTED, EventType.CHECKPOINT_SEALED, EventType.TARGET_SELECTED,
        EventType.COMPATIBILITY_PASSED, EventType.LEASE_ACQUIRED, EventType.SOURCE_FENCED,
        EventType.OWNERSHIP_TRANSFERRED, EventType.STATE_RESTORED,
        EventType.REVALIDATION_STARTED,  # another environment: the recorded observations are revalidated
        EventType.RESUME_STARTED,
    ]
    times = [e.at for _, e in recorded]
    assert times == sorted(times)  # database clock, in seq order
    request_seq = recorded[0][0]
    assert all(e.detail.get("request_seq") == request_seq for _, e in recorded[1:7])
    assert store.get_run(run.run_id).placement == PEER.name


def test_refused_move_records_seal_refusal_and_abort_together(store: SqlStore, blobs: BlobStore) -> None:
    run = seed_run(store, blobs, boundary=Boundary.VERIFIED)
    coordinator = HandoffCoordinator(store, blobs, {SOURCE.name: SOURCE}, quiesce_timeout_s=0.1)
    with write_transactions() as opened:
        outcome = coordinator.prepare(HandoffRequest(run.run_id, "rebalance", source_alive=False))
    assert not isinstance(outcome, PreparedHandoff) and not outcome.committed
    assert opened.count(True) == 2
    kinds = [e.event_type for e in events(store, run.run_id, EventType.HANDOFF_REQUESTED, EventType.CHECKPOINT_SEALED,
                                           EventType.COMPATIBILITY_FAILED, EventType.HANDOFF_ABORTED)]
    assert kinds[-4:] == [EventType.HANDOFF_REQUESTED, EventType.CHECKPOINT_SEALED, EventType.COMPATIBILITY_FAILED,
                          EventType.HANDOFF_ABORTED]
