"""`commit_handoff` and `abort_open_handoff` behave the same on every backend (SQLite and PostgreSQL).

The commit is one transaction: the epoch compare-and-set, the placement and the
events land together or not at all; a handoff request gets exactly one answer.
"""

from __future__ import annotations

import threading

import pytest

from baton.errors import RecordNotFoundError, StoreError
from baton.models import EventType
from baton.store.base import SqlStore
from baton.store.handoff_sql import HandoffRefusal

from builders.fixtures import Backend
from builders.rows import chain, event, new_run


def _seeded(store: SqlStore) -> tuple[str, str, int]:
    """A run on eu-1 with two checkpoints, held by `source` at epoch 1, and a handoff request: (run, head hash, seq)."""
    run = new_run(store)
    for ckpt in chain(run.run_id, 2):
        store.append_checkpoint(ckpt)
    assert store.acquire_lease(run.run_id, "source", 30, expected_epoch=0) is not None
    request_seq = store.append_event(event(run.run_id, EventType.HANDOFF_REQUESTED))
    head = store.latest_checkpoint(run.run_id)
    assert head is not None
    return run.run_id, head.checkpoint_hash, request_seq


def _commit_events(run_id: str, request_seq: int, epoch: int = 2) -> list:
    return [
        event(run_id, EventType.LEASE_ACQUIRED, source_epoch=epoch - 1, target_epoch=epoch),
        event(run_id, EventType.SOURCE_FENCED, source_epoch=epoch - 1, target_epoch=epoch,
              detail={"request_seq": request_seq}),
        event(run_id, EventType.OWNERSHIP_TRANSFERRED, source_epoch=epoch - 1, target_epoch=epoch,
              detail={"request_seq": request_seq}),
    ]


def _state(store: SqlStore, run_id: str) -> tuple:
    """Everything a commit could change, read by plain SQL."""
    lease = store.execute_raw("SELECT owner, epoch, expires_at FROM leases WHERE run_id = ?", (run_id,))
    run = store.execute_raw("SELECT placement, status FROM runs WHERE run_id = ?", (run_id,))
    events = store.execute_raw("SELECT COUNT(*) FROM events WHERE run_id = ?", (run_id,))
    return tuple(lease[0]), tuple(run[0]), int(events[0][0])


def test_commit_moves_lease_placement_and_events_together(store: SqlStore) -> None:
    run_id, head, request_seq = _seeded(store)
    before = store.db_now()
    result = store.commit_handoff(run_id, owner="placement:us-2", ttl_s=30, observed_epoch=1,
                                  expected_checkpoint_hash=head, placement="us-2",
                                  events=_commit_events(run_id, request_seq), request_seq=request_seq)
    assert result.committed and result.refusal is None and result.lease is not None
    assert (result.lease.owner, result.lease.epoch) == ("placement:us-2", 2)
    assert store.get_lease(run_id) == result.lease
    assert result.lease.expires_at is not None and result.lease.expires_at > before
    assert store.get_run(run_id).placement == "us-2"
    recorded = store.list_events(run_id=run_id, after_seq=request_seq)
    assert [seq for seq, _ in recorded] == list(result.seqs)
    assert [e.event_type for _, e in recorded] == [EventType.LEASE_ACQUIRED, EventType.SOURCE_FENCED,
                                                   EventType.OWNERSHIP_TRANSFERRED]
    assert all(e.at >= before for _, e in recorded)  # stamped by the database clock in the transaction


@pytest.mark.parametrize("case", ["epoch_moved", "newer_checkpoint", "run_not_active", "already_answered"])
def test_a_refused_commit_writes_nothing(store: SqlStore, case: str) -> None:
    run_id, head, request_seq = _seeded(store)
    observed, expected_hash = 1, head
    if case == "epoch_moved":
        observed = 0
    elif case == "newer_checkpoint":
        expected_hash = chain(run_id, 1)[0].checkpoint_hash  # the first, no longer the latest
    elif case == "run_not_active":
        store.set_run_status(run_id, "failed")
    else:
        assert store.abort_open_handoff(run_id, request_seq, [event(
            run_id, EventType.HANDOFF_ABORTED, detail={"request_seq": request_seq})]) is not None
    snapshot = _state(store, run_id)
    result = store.commit_handoff(run_id, owner="placement:us-2", ttl_s=30, observed_epoch=observed,
                                  expected_checkpoint_hash=expected_hash, placement="us-2",
                                  events=_commit_events(run_id, request_seq, observed + 1), request_seq=request_seq)
    assert not result.committed and result.refusal is HandoffRefusal(case) and result.detail
    assert _state(store, run_id) == snapshot


def test_events_naming_another_epoch_and_unknown_runs_are_refused(store: SqlStore) -> None:
    run_id, head, request_seq = _seeded(store)
    snapshot = _state(store, run_id)
    with pytest.raises(StoreError, match="target epoch other than 2"):
        store.commit_handoff(run_id, owner="placement:us-2", ttl_s=30, observed_epoch=1,
                             expected_checkpoint_hash=head, placement="us-2",
                             events=_commit_events(run_id, request_seq, epoch=5))
    with pytest.raises(StoreError, match="owner must not be empty"):
        store.commit_handoff(run_id, owner="", ttl_s=30, observed_epoch=1, expected_checkpoint_hash=head,
                             placement="us-2", events=[])
    assert _state(store, run_id) == snapshot
    with pytest.raises(RecordNotFoundError):
        store.commit_handoff("no-such-run", owner="x", ttl_s=30, observed_epoch=0, expected_checkpoint_hash=head,
                             placement="us-2", events=[])
    with pytest.raises(RecordNotFoundError):
        store.abort_open_handoff("no-such-run", 1, [])


def test_abort_after_a_commit_is_refused(store: SqlStore) -> None:
    run_id, head, request_seq = _seeded(store)
    assert store.commit_handoff(run_id, owner="placement:us-2", ttl_s=30, observed_epoch=1,
                                expected_checkpoint_hash=head, placement="us-2",
                                events=_commit_events(run_id, request_seq), request_seq=request_seq).committed
    count = _state(store, run_id)[2]
    abort = [event(run_id, EventType.HANDOFF_ABORTED, detail={"request_seq": request_seq})]
    assert store.abort_open_handoff(run_id, request_seq, abort) is None
    assert _state(store, run_id)[2] == count
    # Another request of the same run is still open, so it can be aborted.
    later = store.append_event(event(run_id, EventType.HANDOFF_REQUESTED))
    seqs = store.abort_open_handoff(run_id, later, [event(run_id, EventType.HANDOFF_ABORTED,
                                                          detail={"request_seq": later})])
    assert seqs is not None and len(seqs) == 1


def test_racing_commits_and_aborts_give_one_answer(store: SqlStore, backend: Backend) -> None:
    """Three coordinators commit and three recoverers abort the same request at once: one answer, one epoch."""
    run_id, head, request_seq = _seeded(store)
    stores = [backend.open() for _ in range(6)]
    barrier = threading.Barrier(len(stores))
    results: list[object] = []

    def contend(index: int) -> None:
        mine = stores[index]
        barrier.wait()
        try:
            if index % 2 == 0:
                outcome = mine.commit_handoff(run_id, owner=f"placement:p{index}", ttl_s=30, observed_epoch=1,
                                              expected_checkpoint_hash=head, placement=f"p{index}",
                                              events=_commit_events(run_id, request_seq), request_seq=request_seq)
                results.append(("commit", outcome.committed))
            else:
                seqs = mine.abort_open_handoff(run_id, request_seq, [event(
                    run_id, EventType.HANDOFF_ABORTED, detail={"request_seq": request_seq})])
                results.append(("abort", seqs is not None))
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            results.append(("error", repr(exc)))

    threads = [threading.Thread(target=contend, args=(index,)) for index in range(len(stores))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for opened in stores:
        opened.close()
    assert len(results) == 6 and not [r for r in results if r[0] == "error"], results
    assert sum(1 for _, won in results if won) == 1, results
    answers = [e for _, e in store.list_events(run_id=run_id, after_seq=request_seq)
               if e.event_type in (EventType.OWNERSHIP_TRANSFERRED, EventType.HANDOFF_ABORTED)]
    assert len(answers) == 1
    lease = store.get_lease(run_id)
    committed = answers[0].event_type is EventType.OWNERSHIP_TRANSFERRED
    assert lease.epoch == (2 if committed else 1)
    assert (store.get_run(run_id).placement != "eu-1") is committed
