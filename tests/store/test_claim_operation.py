"""claim_operation: the gateway's one-transaction fence (epoch, capability expiry, key), on every backend."""

from __future__ import annotations

import datetime as dt
import threading

import pytest

from baton.errors import RecordNotFoundError, StoreError
from baton.models import OperationState
from baton.store.base import SqlStore

from builders.fixtures import Backend
from builders.rows import entry, new_run
from builders.records import T0


def _operations(store: SqlStore, run_id: str) -> int:
    return int(store.execute_raw("SELECT count(*) FROM operations WHERE run_id = ?", (run_id,))[0][0])


def test_a_claim_is_stamped_with_the_clock_read_under_the_lock(store: SqlStore) -> None:
    run = new_run(store)
    before = store.db_now()
    claim = store.claim_operation(entry(run.run_id, "k", 0), valid_until=before + dt.timedelta(minutes=5))
    after = store.db_now()
    assert claim.kind == "new" and claim.epoch == 0 and claim.record is None
    assert before <= claim.now <= after
    assert claim.entry.recorded_at == claim.now
    stored = store.get_operation(claim.entry.operation_id)
    assert stored == claim.entry and stored.state is OperationState.PREPARED
    assert [step.state for step in store.operation_history(stored.operation_id)] == [OperationState.PREPARED]
    idem = store.get_idempotency(run.run_id, "k")
    assert idem is not None and idem.operation_id == stored.operation_id and idem.state is OperationState.PREPARED

    kept = store.claim_operation(entry(run.run_id, "k2", 0), stamp=False)
    assert kept.kind == "new" and kept.entry.recorded_at == T0
    assert store.get_operation(kept.entry.operation_id).recorded_at == T0


def test_a_refused_claim_writes_nothing_and_says_what_it_read(store: SqlStore) -> None:
    run = new_run(store)
    store.acquire_lease(run.run_id, "w", 60, expected_epoch=0)
    stale = store.claim_operation(entry(run.run_id, "k", 0))
    assert stale.kind == "refused" and stale.epoch == 1
    ahead = store.claim_operation(entry(run.run_id, "k", 2))
    assert ahead.kind == "refused" and ahead.epoch == 1
    now = store.db_now()
    expired = store.claim_operation(entry(run.run_id, "k", 1), valid_until=now)
    assert expired.kind == "refused" and expired.epoch == 1 and expired.now >= now
    assert _operations(store, run.run_id) == 0 and store.get_idempotency(run.run_id, "k") is None
    fine = store.claim_operation(entry(run.run_id, "k", 1), valid_until=now + dt.timedelta(minutes=5))
    assert fine.kind == "new"


def test_a_claim_reports_what_the_key_holds(store: SqlStore) -> None:
    run = new_run(store)
    first = store.claim_operation(entry(run.run_id, "k", 0, payload="a"))
    again = store.claim_operation(entry(run.run_id, "k", 0, payload="a"))
    assert again.kind == "in_flight" and again.record is not None
    assert again.record.operation_id == first.entry.operation_id and again.record.state is OperationState.PREPARED
    other = store.claim_operation(entry(run.run_id, "k", 0, payload="b"))
    assert other.kind == "payload_mismatch" and other.record is not None
    assert other.record.payload_ref == first.entry.payload_ref
    store.finish_operation(first.entry.operation_id, OperationState.COMMITTED, {"id": 7}, "done")
    replay = store.claim_operation(entry(run.run_id, "k", 0, payload="a"))
    assert replay.kind == "replay" and replay.record is not None and replay.record.outcome == {"id": 7}
    assert _operations(store, run.run_id) == 1


def test_claims_need_a_prepared_entry_of_a_known_run(store: SqlStore) -> None:
    run = new_run(store)
    with pytest.raises(StoreError, match="PREPARED"):
        store.claim_operation(entry(run.run_id, state=OperationState.COMMITTED))
    with pytest.raises(RecordNotFoundError, match="ghost"):
        store.claim_operation(entry("ghost"))


def test_finish_keeps_the_detail_when_none_is_given_and_takes_the_current_epoch(store: SqlStore) -> None:
    run = new_run(store)
    claim = store.claim_operation(entry(run.run_id, "k", 0))
    op = claim.entry.operation_id
    store.finish_operation(op, OperationState.UNKNOWN, None, "timeout")
    store.acquire_lease(run.run_id, "w", 60, expected_epoch=0)
    store.finish_operation(op, OperationState.COMMITTED, {"found": True})
    stored = store.get_operation(op)
    assert stored.state is OperationState.COMMITTED and stored.detail == "timeout"
    assert stored.recorded_at == claim.entry.recorded_at and stored.capability_id == claim.entry.capability_id
    history = store.operation_history(op)
    assert [(step.state, step.epoch, step.detail) for step in history] == [
        (OperationState.PREPARED, 0, ""),
        (OperationState.UNKNOWN, 0, "timeout"),
        (OperationState.COMMITTED, 1, ""),
    ]
    idem = store.get_idempotency(run.run_id, "k")
    assert idem is not None and idem.state is OperationState.COMMITTED and idem.outcome == {"found": True}


def test_claims_of_one_key_waiting_on_the_lease_lock_make_one_operation(backend: Backend, store: SqlStore) -> None:
    """Claimers queue behind a held lease lock; each later one must see the first one's claim.

    On PostgreSQL their statements took their snapshots before the first claim
    committed, so the key's primary key refuses their insert and the claim is
    retried: they must come back in flight, not as errors.
    """
    run = new_run(store)
    count = 6
    stores = [backend.open() for _ in range(count)]
    results: list[object] = [None] * count
    holder = backend.open()
    started = threading.Barrier(count + 1)

    def claimer(index: int) -> None:
        started.wait(30)
        try:
            results[index] = stores[index].claim_operation(entry(run.run_id, "k", 0)).kind
        except Exception as exc:  # noqa: BLE001 - inspected below
            results[index] = exc

    try:
        with holder._tx() as tx:  # hold the lease row's lock while every claimer starts
            tx.rows("SELECT epoch FROM leases WHERE run_id = ? {for_update}", (run.run_id,))
            threads = [threading.Thread(target=claimer, args=(index,)) for index in range(count)]
            for thread in threads:
                thread.start()
            started.wait(30)
            threading.Event().wait(0.5)  # let them reach the lock
        for thread in threads:
            thread.join(60)
    finally:
        holder.close()
        for opened in stores:
            opened.close()
    assert sorted(map(str, results)) == ["in_flight"] * (count - 1) + ["new"], results
    assert _operations(store, run.run_id) == 1
