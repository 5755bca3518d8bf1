"""Reads and writes of the handoff path in fewer statements, with the same results, on every SQL backend.

Issue 16: the newest checkpoint with the rows its delta is rebuilt from, the
catalog snapshot, and an event append with its lock each take one statement;
PostgreSQL write transactions run in pipeline mode and still fail and roll
back statement by statement (and at COMMIT) as before.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import pytest

from baton.errors import RecordNotFoundError, StaleEpochError, StoreError
from baton.identity import canonical_json, ref_of
from baton.models import EventType, OperationState
from baton.store import manifest_delta
from baton.store.base import SqlStore
from baton.store.core import Tx
from builders.fixtures import Backend
from builders.rows import chain, checkpoint, event, new_run


@contextmanager
def counted_statements() -> Iterator[list[str]]:
    seen: list[str] = []
    original = Tx.rows

    def rows(handle: Tx, sql: str, params: Any = ()) -> Any:
        seen.append(sql)
        return original(handle, sql, params)

    with mock.patch.object(Tx, "rows", rows):
        yield seen


@pytest.mark.parametrize("length", [1, 5, manifest_delta.FULL_EVERY, manifest_delta.FULL_EVERY + 7])
def test_latest_checkpoint_is_one_statement_from_a_fresh_store(store: SqlStore, backend: Backend, length: int) -> None:
    run = new_run(store)
    ckpts = chain(run.run_id, length)
    for ckpt in ckpts:
        store.append_checkpoint(ckpt)
    fresh = backend.open()  # no bodies remembered: the delta is rebuilt from its last full ancestor
    try:
        with counted_statements() as seen:
            assert fresh.latest_checkpoint(run.run_id) == ckpts[-1]
        assert len(seen) == 1
        assert fresh.latest_checkpoint(new_run(fresh).run_id) is None
        assert fresh.list_checkpoints(run.run_id) == ckpts
    finally:
        fresh.close()


def test_catalog_snapshot_is_one_statement(store: SqlStore) -> None:
    from baton.catalog.seed import seed_catalog

    seed_catalog(store)
    placements = store.catalog_placements(offered_only=False)
    published = {r.release_id for r in store.catalog_releases() if r.state.value == "published"}
    with counted_statements() as seen:
        version, offered = store.catalog_snapshot()
    assert len(seen) == 1
    assert version > 0
    assert [p.name for p in offered] == sorted(p.name for p in placements)
    for placement, listed in zip(sorted(placements, key=lambda p: p.name), offered, strict=True):
        assert listed.supported_release_ids == tuple(r for r in placement.supported_release_ids if r in published)
    assert store.catalog_snapshot(offered_only=False) == (version, sorted(placements, key=lambda p: p.name))


def test_event_append_takes_its_lock_in_the_same_statement(store: SqlStore) -> None:
    run = new_run(store)
    with counted_statements() as seen:
        first = store.append_events([event(run.run_id, EventType.LEASE_ACQUIRED)])
    assert len(seen) == 1
    with counted_statements() as seen:
        second = store.append_events([event(run.run_id, EventType.LEASE_ACQUIRED)] * 3, stamp=True)
    assert len(seen) == 2  # the clock (read once the lock is held), then the rows
    assert first[0] < second[0] < second[1] < second[2]
    times = [e.at for _, e in store.list_events(run.run_id)]
    assert times == sorted(times)
    with store.atomic():  # a second append in one transaction does not take the lock again
        with counted_statements() as seen:
            store.append_events([event(run.run_id, EventType.LEASE_ACQUIRED)])
            store.append_events([event(run.run_id, EventType.LEASE_ACQUIRED)])
    assert len(seen) == 2
    assert len(store.list_events(run.run_id)) == 6


def test_a_failing_statement_rolls_the_write_back_and_the_connection_stays_usable(store: SqlStore) -> None:
    run = new_run(store)
    with pytest.raises(StoreError):
        with store.atomic():
            store.append_events([event(run.run_id, EventType.LEASE_ACQUIRED)])
            store.execute_raw("SELECT * FROM no_such_table")
    assert store.list_events(run.run_id) == []
    with pytest.raises(RuntimeError):
        with store.atomic():
            store.append_events([event(run.run_id, EventType.LEASE_ACQUIRED)])
            raise RuntimeError("the caller gives up")
    assert store.list_events(run.run_id) == []
    store.append_events([event(run.run_id, EventType.LEASE_ACQUIRED)])
    assert len(store.list_events(run.run_id)) == 1


@pytest.fixture
def postgres_store(postgres_url: str) -> Iterator[SqlStore]:
    """A store on a fresh PostgreSQL database (the failing-COMMIT case below exists only there)."""
    opened = Backend("postgres", postgres_url).open()
    try:
        yield opened
    finally:
        opened.close()


def test_a_failing_commit_is_an_error_and_nothing_commits(postgres_store: SqlStore) -> None:
    """A deferred constraint is refused only at COMMIT, a PostgreSQL case."""
    store = postgres_store
    store.execute_raw("CREATE TEMP TABLE deferred_check (x INT UNIQUE DEFERRABLE INITIALLY DEFERRED)")
    run = new_run(store)
    with pytest.raises(StoreError, match="deferred_check|duplicate"):
        with store.atomic():
            store.append_events([event(run.run_id, EventType.LEASE_ACQUIRED)])
            store.execute_raw("INSERT INTO deferred_check VALUES (1), (1)")  # refused only at COMMIT
    assert store.list_events(run.run_id) == []
    assert store.execute_raw("SELECT COUNT(*) FROM deferred_check") == [(0,)]
    store.append_events([event(run.run_id, EventType.LEASE_ACQUIRED)])
    assert len(store.list_events(run.run_id)) == 1


def test_run_and_lease_in_one_statement(store: SqlStore) -> None:
    run = new_run(store)
    store.acquire_lease(run.run_id, "worker-1", 60, 0)
    with counted_statements() as seen:
        got_run, got_lease = store.get_run_and_lease(run.run_id)
    assert len(seen) == 1
    assert (got_run, got_lease) == (store.get_run(run.run_id), store.get_lease(run.run_id))
    assert got_lease.owner == "worker-1" and got_lease.epoch == 1
    with pytest.raises(RecordNotFoundError):
        store.get_run_and_lease("no-such-run")


def test_a_sent_statement_that_fails_rolls_the_transaction_back(store: SqlStore) -> None:
    """`Tx.send` skips waiting for a result, never the error: it surfaces at the next statement or at COMMIT."""
    run = new_run(store)
    insert = "INSERT INTO events (run_id, event_type, at, body) VALUES (?, ?, {now}, {json})"
    body = event(run.run_id, EventType.LEASE_ACQUIRED).model_dump_json()
    with pytest.raises(StoreError, match="no_such_table"):
        with store._tx() as tx:
            tx.rows(insert, (run.run_id, "lease_acquired", body))
            tx.send("SELECT * FROM no_such_table")
            tx.rows("SELECT 1")
    with pytest.raises(StoreError, match="no_such_table"):
        with store._tx() as tx:
            tx.rows(insert, (run.run_id, "lease_acquired", body))
            tx.send("INSERT INTO no_such_table VALUES (1)")  # the last statement: its error comes with the commit
    assert store.list_events(run.run_id) == []
    with store._tx() as tx:
        tx.send(insert, (run.run_id, "lease_acquired", body))
    assert len(store.list_events(run.run_id)) == 1


def test_a_one_statement_write_leaves_no_pipeline_behind(postgres_store: SqlStore) -> None:
    """The gateway's claim and outcome run in autocommit: no pipeline is entered, so none is left open.

    Before, each such write entered pipeline mode and never left it: the
    connection stayed in pipeline mode, every later autocommit switch cost a
    round trip of its own, and the abandoned pipelines were reported at exit.
    """
    from psycopg import pq

    from builders.rows import entry

    store = postgres_store
    run = new_run(store)
    claim = store.claim_operation(entry(run.run_id, "k", 0))
    store.finish_operation(claim.entry.operation_id, OperationState.COMMITTED, {"ok": True})
    conn = store._conn()
    assert conn.pgconn.pipeline_status == pq.PipelineStatus.OFF
    assert store._pipelines == {}
    with store.atomic():  # a pipelined write transaction still opens and closes its own
        store.append_events([event(run.run_id, EventType.LEASE_ACQUIRED)])
    assert conn.pgconn.pipeline_status == pq.PipelineStatus.OFF and store._pipelines == {}
    assert store.get_operation(claim.entry.operation_id).state is OperationState.COMMITTED


def _jit_functions(store: SqlStore, *settings: str) -> int:
    """Functions PostgreSQL JIT-compiled to run the segment-chain query on one of the store's connections,
    with every query's estimated cost over the JIT threshold (as a new store's misestimates put it)."""
    from baton.store.blobs_sql import _SEGMENT_CHAIN_SQL

    conn = store._conn()
    try:
        for setting in ("SET LOCAL jit_above_cost = 0", *settings):
            conn.execute(setting)
        sql = store.dialect.render(_SEGMENT_CHAIN_SQL["postgres"])
        ((plan,),) = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, (b"\0" * 32,)).fetchall()
    finally:
        conn.rollback()
    return int(plan[0].get("JIT", {}).get("Functions", 0))


def test_the_store_never_jit_compiles(postgres_store: SqlStore) -> None:
    """Before autovacuum analyzes a new store, the planner overestimates the segment-chain query (a blob
    digest is unique by an exclusion constraint, which it does not count on) and JIT-compiled it on every
    call: about 130 ms each, against 5 once analyzed (`baton bench handoff`, PostgreSQL, SQL blobs, stop 34).
    The store's connections run with JIT off."""
    assert _jit_functions(postgres_store, "SET LOCAL jit = on") > 0, "this server cannot JIT: the check is void"
    assert _jit_functions(postgres_store) == 0



_INSERT = "INSERT INTO events (run_id, event_type, at, body) VALUES (?, ?, {now}, {json})"
_COUNT = "SELECT COUNT(*) FROM events WHERE run_id = ?"


def _count_between_two_inserts(store: SqlStore, run_id: str, *, later: bool) -> list[Any]:
    """Insert an event, count the run's events (`rows_later` or `rows`), insert another; the count's rows."""
    body = event(run_id, EventType.LEASE_ACQUIRED).model_dump_json()
    with store._tx() as tx:
        tx.send(_INSERT, (run_id, "lease_acquired", body))
        if later:
            rows = tx.rows_later(_COUNT, (run_id,))
        else:
            found = tx.rows(_COUNT, (run_id,))
            rows = lambda: found  # noqa: E731
        tx.send(_INSERT, (run_id, "lease_acquired", body))
    return rows()


@contextmanager
def counted_syncs(store: SqlStore) -> Iterator[list[str]]:
    """Each time a pipelined transaction of `store` waits for its statements' results before its commit."""
    syncs: list[str] = []
    original = type(store)._after_execute

    def counting(handle: SqlStore, conn: Any) -> Any:
        sync = original(handle, conn)
        return None if sync is None else lambda: (syncs.append("sync"), sync())[1]

    with mock.patch.object(type(store), "_after_execute", counting):
        yield syncs


def test_a_later_read_sees_what_stands_before_it_in_the_transaction(store: SqlStore) -> None:
    """`Tx.rows_later` runs where it stands: it sees the transaction's earlier writes, not its later ones, and
    gives the rows `Tx.rows` gives, read after the commit."""
    run = new_run(store)
    assert _count_between_two_inserts(store, run.run_id, later=True) == [(1,)]
    assert _count_between_two_inserts(store, run.run_id, later=False) == [(3,)]
    with store._tx(write=False) as tx:
        assert tx.rows(_COUNT, (run.run_id,)) == [(4,)]


def test_a_later_read_costs_the_pipelined_transaction_no_round_trip(postgres_store: SqlStore) -> None:
    """On PostgreSQL a write transaction's `rows_later` is queued like `send`: the commit's sync is the only one.
    The same read through `Tx.rows` waits for a sync of its own (as the seal's pending-handoff lookup did)."""
    store = postgres_store
    run = new_run(store)
    with counted_syncs(store) as syncs:
        assert _count_between_two_inserts(store, run.run_id, later=False) == [(1,)]
        assert syncs == ["sync"]
        syncs.clear()
        assert _count_between_two_inserts(store, run.run_id, later=True) == [(3,)]
        assert syncs == []


class _Fallback(Exception):
    """Raised instead of the statement-by-statement append: the one-round-trip append refused on its own."""


def _refused_by_the_guard_alone(store: SqlStore, ckpt: Any, **kwargs: Any) -> None:
    def fallback(*_args: Any, **_kwargs: Any) -> None:
        raise _Fallback

    with mock.patch.object(type(store), "_append_in", fallback), pytest.raises(_Fallback):
        store.append_checkpoint(ckpt, **kwargs)


def test_a_seal_is_one_round_trip_on_postgres(postgres_store: SqlStore) -> None:
    """With its parent at hand, an append sends its checks and writes in one pipeline: the commit's sync only."""
    store = postgres_store
    run = new_run(store)
    lease = store.acquire_lease(run.run_id, "w1", 30.0, 0)
    assert lease is not None
    first = checkpoint(run.run_id, 0, owner_epoch=lease.epoch)
    with counted_syncs(store) as syncs:
        store.append_checkpoint(first, events=[event(run.run_id, EventType.CHECKPOINT_SEALED)])
        second = checkpoint(run.run_id, 1, first, owner_epoch=lease.epoch)
        store.append_checkpoint(second, blobs={ref_of({"x": 1}): canonical_json({"x": 1})})
    assert syncs == []
    assert store.list_checkpoints(run.run_id) == [first, second]
    assert len(store.list_events(run.run_id)) == 1


def test_the_one_round_trip_seal_refuses_a_stale_epoch_and_a_moved_head_by_itself(postgres_store: SqlStore) -> None:
    """The guard statement alone keeps a fenced worker's seal, and one whose parent is no longer the run's latest
    checkpoint, from committing anything (row, blobs, events); the statement-by-statement append, which then
    names the reason, is replaced here by a sentinel so that only the guard is tested."""
    store = postgres_store
    run = new_run(store)
    first = store.acquire_lease(run.run_id, "w1", 30.0, 0)
    assert first is not None
    zero = checkpoint(run.run_id, 0, owner_epoch=first.epoch)
    store.append_checkpoint(zero)
    taken = store.acquire_lease(run.run_id, "w2", 30.0, first.epoch, require_expired=False)
    assert taken is not None
    blob = canonical_json({"stale": True})
    stale = checkpoint(run.run_id, 1, zero, owner_epoch=first.epoch)
    _refused_by_the_guard_alone(store, stale, blobs={ref_of({"stale": True}): blob},
                                events=[event(run.run_id, EventType.CHECKPOINT_SEALED)])
    with pytest.raises(StaleEpochError, match="fenced"):
        store.append_checkpoint(stale)
    one = checkpoint(run.run_id, 1, zero, owner_epoch=taken.epoch)
    store.append_checkpoint(one)
    _refused_by_the_guard_alone(store, checkpoint(run.run_id, 2, zero, owner_epoch=taken.epoch))  # zero is not latest
    _refused_by_the_guard_alone(store, checkpoint(run.run_id, 1, zero, owner_epoch=taken.epoch, note="a rival's"))
    assert store.list_checkpoints(run.run_id) == [zero, one]
    assert store.list_events(run.run_id) == []
    assert store.execute_raw("SELECT COUNT(*) FROM blobs") == [(0,)]
