"""Every SqlStore backend behaves the same: this suite runs on SQLite and on PostgreSQL."""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from decimal import Decimal

import pytest

from baton.errors import (
    AppendOnlyViolation,
    CheckpointIntegrityError,
    RecordNotFoundError,
    StaleEpochError,
    StoreError,
)
from baton.models import Boundary, BudgetUsage, EventType, OperationState, RunKind
from baton.store.base import SqlStore
from baton.store.migrations import MIGRATIONS
from baton.store.records import IMPORTED_BUNDLE_KEY, awaits_an_owner

from builders.fixtures import Backend
from builders.rows import RELEASE, chain, checkpoint, entry, event, new_run

# -- schema and clock ------------------------------------------------------------------


def test_backend_name(store: SqlStore, backend: Backend) -> None:
    assert store.backend == backend.name


def test_migrations_are_recorded_and_idempotent(store: SqlStore, backend: Backend) -> None:
    every = [migration.version for migration in MIGRATIONS]
    assert store.applied_migrations() == every
    assert store.migrate() == []
    with backend.open() as again:
        assert again.migrate() == []
        assert again.applied_migrations() == every
    rows = store.execute_raw("SELECT version, name, applied_at FROM schema_migrations ORDER BY version")
    assert [(row[0], row[1]) for row in rows] == [(m.version, m.name) for m in MIGRATIONS]
    assert all(row[2] is not None for row in rows)


def test_concurrent_openers_migrate_once(backend: Backend) -> None:
    """Several threads (each its own store) open a fresh database at the same moment."""
    results: list[object] = []
    barrier = threading.Barrier(4)

    def opener() -> None:
        barrier.wait()
        try:
            with backend.open() as opened:
                results.append(opened.applied_migrations())
        except Exception as exc:  # noqa: BLE001 - reported below
            results.append(exc)

    threads = [threading.Thread(target=opener) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [[m.version for m in MIGRATIONS]] * 4


def test_database_from_a_newer_baton_is_refused(store: SqlStore, backend: Backend) -> None:
    store.execute_raw("INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, 'future', {now})")
    with pytest.raises(StoreError, match="999"):
        backend.open()


def test_db_now_is_aware_utc_and_current(store: SqlStore) -> None:
    now = store.db_now()
    assert now.tzinfo is not None and now.utcoffset() == dt.timedelta(0)
    assert abs((now - dt.datetime.now(dt.timezone.utc)).total_seconds()) < 60
    later = store.db_now()
    assert later >= now


def test_closed_store_refuses_work(backend: Backend) -> None:
    opened = backend.open()
    opened.close()
    with pytest.raises(StoreError, match="closed"):
        opened.db_now()


def test_store_works_from_several_threads(store: SqlStore) -> None:
    run = new_run(store)
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        try:
            for step in range(5):
                store.append_event(event(run.run_id, detail={"thread": index, "step": step}))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(index,)) for index in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(store.list_events(run.run_id)) == 20


# -- runs --------------------------------------------------------------------------------


def test_create_and_get_run(store: SqlStore) -> None:
    created = store.create_run("r-1", RunKind.DEPLOY, RELEASE, "eu-1", {"task": "ship"})
    assert created.status == "active"
    assert created.kind is RunKind.DEPLOY and created.placement == "eu-1"
    assert created.detail == {"task": "ship"}
    assert created.created_at.tzinfo is not None
    assert store.get_run("r-1") == created


def test_create_run_makes_an_unowned_lease_at_epoch_zero(store: SqlStore) -> None:
    run = new_run(store)
    lease = store.get_lease(run.run_id)
    assert (lease.owner, lease.epoch, lease.expires_at) == (None, 0, None)
    assert store.current_epoch(run.run_id) == 0


def test_an_imported_run_nobody_holds_is_lapsed_a_launch_at_epoch_zero_is_not(store: SqlStore) -> None:
    """A bundle import creates its run at epoch 0 and grants nothing, so nobody else will; a launch creates its run
    at epoch 0 and grants the first reservation in the next transaction. Only the first waits for an owner."""
    launching = store.create_run("r-launching", RunKind.DEPLOY, RELEASE, "eu-1", {})
    imported = store.create_run("r-imported", RunKind.DEPLOY, RELEASE, "eu-1",
                                {IMPORTED_BUNDLE_KEY: "sha256:" + "ab" * 32})
    now, lapsed = store.lapsed_leases()
    assert [lease.run_id for lease in lapsed] == [imported.run_id]
    assert lapsed[0].epoch == 0 and lapsed[0].owner is None
    assert not awaits_an_owner(store.get_lease(launching.run_id), launching.detail, now)
    granted = store.acquire_lease(imported.run_id, "worker-a", 60, expected_epoch=0)
    assert granted is not None and store.lapsed_leases()[1] == []


def test_duplicate_run_is_refused(store: SqlStore) -> None:
    new_run(store, "r-dup")
    with pytest.raises(StoreError, match="r-dup"):
        new_run(store, "r-dup")


def test_unknown_run_is_named(store: SqlStore) -> None:
    with pytest.raises(RecordNotFoundError, match="ghost"):
        store.get_run("ghost")
    with pytest.raises(StoreError, match="ghost"):
        store.get_lease("ghost")


def test_list_runs_and_status(store: SqlStore) -> None:
    first, second, third = new_run(store, "a"), new_run(store, "b"), new_run(store, "c")
    assert [run.run_id for run in store.list_runs()] == ["a", "b", "c"]
    updated = store.set_run_status("b", "verified", {"verdict": "pass"})
    assert updated.status == "verified" and updated.detail == {"verdict": "pass"}
    store.set_run_status("b", "verified", {"note": "again"})
    assert store.get_run("b").detail == {"verdict": "pass", "note": "again"}
    store.set_run_status("c", "escalated")
    assert [run.run_id for run in store.list_runs("active")] == [first.run_id]
    assert [run.run_id for run in store.list_runs("verified")] == [second.run_id]
    assert [run.run_id for run in store.list_runs("escalated")] == [third.run_id]
    assert store.list_runs("failed") == []
    with pytest.raises(StoreError, match="bogus"):
        store.set_run_status("a", "bogus")
    with pytest.raises(RecordNotFoundError):
        store.set_run_status("ghost", "failed")


def test_set_run_placement(store: SqlStore) -> None:
    run = new_run(store)
    moved = store.set_run_placement(run.run_id, "us-2")
    assert moved.placement == "us-2"
    assert store.get_run(run.run_id).placement == "us-2"
    assert moved.updated_at >= run.updated_at


# -- checkpoints ---------------------------------------------------------------------------


def test_checkpoint_chain_round_trips(store: SqlStore) -> None:
    run = new_run(store)
    assert store.latest_checkpoint(run.run_id) is None
    assert store.list_checkpoints(run.run_id) == []
    ckpts = chain(run.run_id, 3)
    for ckpt in ckpts:
        store.append_checkpoint(ckpt)
    assert store.list_checkpoints(run.run_id) == ckpts
    assert store.latest_checkpoint(run.run_id) == ckpts[-1]
    assert store.get_checkpoint(ckpts[1].checkpoint_id) == ckpts[1]
    assert store.checkpoint_by_hash(ckpts[2].checkpoint_hash) == ckpts[2]
    assert store.checkpoint_by_hash("sha256:" + "f" * 64) is None
    with pytest.raises(RecordNotFoundError):
        store.get_checkpoint(f"{run.run_id}/000099")


def test_first_checkpoint_must_be_seq_zero_without_parent(store: SqlStore) -> None:
    run = new_run(store)
    with pytest.raises(StoreError, match="seq must be 0"):
        store.append_checkpoint(checkpoint(run.run_id, 1))
    other = new_run(store)
    foreign_parent = checkpoint(other.run_id, 0)
    store.append_checkpoint(foreign_parent)
    with pytest.raises(StoreError, match="cannot name a parent"):
        store.append_checkpoint(checkpoint(run.run_id, 0, foreign_parent))
    store.append_checkpoint(checkpoint(run.run_id, 0))
    assert len(store.list_checkpoints(run.run_id)) == 1


def test_checkpoint_seq_must_follow_the_latest(store: SqlStore) -> None:
    run = new_run(store)
    first, second, third = chain(run.run_id, 3)
    store.append_checkpoint(first)
    with pytest.raises(StoreError, match="seq must be 1"):
        store.append_checkpoint(third)
    store.append_checkpoint(second)
    with pytest.raises(StoreError, match="seq must be 2"):
        store.append_checkpoint(checkpoint(run.run_id, 1, first, note="fork"))
    assert store.list_checkpoints(run.run_id) == [first, second]


def test_checkpoint_parent_must_be_the_latest(store: SqlStore) -> None:
    run = new_run(store)
    first, second = chain(run.run_id, 2)
    store.append_checkpoint(first)
    store.append_checkpoint(second)
    wrong_parent = checkpoint(run.run_id, 2, first)  # skips `second`
    with pytest.raises(StoreError, match="parent must be"):
        store.append_checkpoint(wrong_parent)
    lookalike = checkpoint(run.run_id, 1, None, note="x")  # a different second
    forged_parent = checkpoint(run.run_id, 2, lookalike)
    with pytest.raises(StoreError, match="parent must be"):
        store.append_checkpoint(forged_parent)


def test_checkpoint_of_unknown_run_is_refused(store: SqlStore) -> None:
    with pytest.raises(RecordNotFoundError, match="nobody"):
        store.append_checkpoint(checkpoint("nobody", 0))


def test_duplicate_checkpoint_hash_is_refused(store: SqlStore) -> None:
    run = new_run(store)
    first = checkpoint(run.run_id, 0)
    store.append_checkpoint(first)
    with pytest.raises(StoreError):
        store.append_checkpoint(first)


def test_checkpoint_with_a_wrong_seal_is_refused_before_writing(store: SqlStore) -> None:
    run = new_run(store)
    good = checkpoint(run.run_id, 0)
    unsealed = good.model_copy(update={"boundary": Boundary.VERIFIED})  # model_copy skips validation
    with pytest.raises(CheckpointIntegrityError):
        store.append_checkpoint(unsealed)
    assert store.latest_checkpoint(run.run_id) is None


def _insert_checkpoint_row(store: SqlStore, run_id: str, seq: int, stored_hash: str, body: str) -> None:
    store.execute_raw(
        "INSERT INTO checkpoints (checkpoint_id, run_id, seq, checkpoint_hash, parent_checkpoint_id, "
        "schema_version, boundary, body, sealed_at) VALUES (?, ?, ?, ?, NULL, '2', 'VERIFIED', ?, {now})",
        (f"{run_id}/{seq:06d}", run_id, seq, stored_hash, body),
    )


def test_tampered_checkpoint_body_is_detected(store: SqlStore) -> None:
    run = new_run(store)
    honest = checkpoint(run.run_id, 0)
    body = json.loads(honest.model_dump_json())
    body["boundary"] = Boundary.VERIFIED.value  # claim more progress than was sealed
    _insert_checkpoint_row(store, run.run_id, 0, honest.checkpoint_hash, json.dumps(body))
    with pytest.raises(CheckpointIntegrityError, match="does not match"):
        store.get_checkpoint(honest.checkpoint_id)
    with pytest.raises(CheckpointIntegrityError):
        store.latest_checkpoint(run.run_id)
    with pytest.raises(CheckpointIntegrityError):
        store.checkpoint_by_hash(honest.checkpoint_hash)


def test_checkpoint_row_hash_must_match_its_body(store: SqlStore) -> None:
    run = new_run(store)
    honest = checkpoint(run.run_id, 0)
    _insert_checkpoint_row(store, run.run_id, 0, "sha256:" + "a" * 64, honest.model_dump_json())
    with pytest.raises(CheckpointIntegrityError, match="row hash"):
        store.get_checkpoint(honest.checkpoint_id)


def test_unparseable_checkpoint_body_is_an_integrity_error(store: SqlStore) -> None:
    run = new_run(store)
    _insert_checkpoint_row(store, run.run_id, 0, "sha256:" + "b" * 64, '{"not": "a checkpoint"}')
    with pytest.raises(CheckpointIntegrityError):
        store.get_checkpoint(f"{run.run_id}/000000")


# -- append-only, enforced by the database ---------------------------------------------------


def _fill_append_only_tables(store: SqlStore) -> str:
    run = new_run(store)
    store.append_checkpoint(checkpoint(run.run_id, 0))
    store.append_event(event(run.run_id))
    outcome = store.begin_operation(entry(run.run_id))
    store.finish_operation(outcome.record.operation_id, OperationState.COMMITTED, {"ok": True})
    store.append_budget_charge(run.run_id, 0, BudgetUsage(model_calls=1), "call")
    return run.run_id


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE checkpoints SET boundary = 'VERIFIED'",
        "UPDATE checkpoints SET body = '{}'",
        "DELETE FROM checkpoints",
        "UPDATE events SET event_type = 'run_finished'",
        "DELETE FROM events",
        "UPDATE operation_transitions SET state = 'NOT_COMMITTED'",
        "DELETE FROM operation_transitions",
        "UPDATE budget_charges SET reason = 'refund'",
        "DELETE FROM budget_charges",
    ],
)
def test_append_only_tables_refuse_change(store: SqlStore, statement: str) -> None:
    run_id = _fill_append_only_tables(store)
    table = statement.split()[1] if statement.startswith("UPDATE") else statement.split()[2]
    before = store.execute_raw(f"SELECT count(*) FROM {table}")
    with pytest.raises(AppendOnlyViolation, match="append-only"):
        store.execute_raw(statement)
    assert store.execute_raw(f"SELECT count(*) FROM {table}") == before
    assert len(store.list_checkpoints(run_id)) == 1
    assert store.budget_used(run_id) == BudgetUsage(model_calls=1)


def test_bulk_removal_is_refused(store: SqlStore) -> None:
    """PostgreSQL's TRUNCATE skips row triggers, so it has its own; SQLite's is an unqualified DELETE."""
    _fill_append_only_tables(store)
    for table in ("checkpoints", "events", "operation_transitions", "budget_charges"):
        statement = f"TRUNCATE {table}" if store.backend == "postgres" else f"DELETE FROM {table}"
        with pytest.raises(AppendOnlyViolation):
            store.execute_raw(statement)
    assert len(store.list_events()) == 1


# -- events ---------------------------------------------------------------------------------


def test_events_append_and_filter(store: SqlStore) -> None:
    run_a, run_b = new_run(store), new_run(store)
    created = event(run_a.run_id, EventType.RUN_CREATED, detail={"n": 1, "nested": {"x": [1, 2]}})
    leased = event(run_a.run_id, EventType.LEASE_ACQUIRED, target_epoch=1)
    other = event(run_b.run_id, EventType.RUN_CREATED)
    finished = event(run_a.run_id, EventType.RUN_FINISHED, reason="verified")
    seqs = [store.append_event(e) for e in (created, leased, other, finished)]
    assert seqs == sorted(seqs) and len(set(seqs)) == 4

    assert store.list_events() == list(zip(seqs, [created, leased, other, finished], strict=True))
    assert [e for _, e in store.list_events(run_a.run_id)] == [created, leased, finished]
    assert [s for s, _ in store.list_events(after_seq=seqs[1])] == seqs[2:]
    assert [e for _, e in store.list_events(event_types=[EventType.RUN_CREATED])] == [created, other]
    assert [e for _, e in store.list_events(run_a.run_id, event_types=["run_created", "run_finished"])] == [
        created,
        finished,
    ]
    assert [s for s, _ in store.list_events(limit=2)] == seqs[:2]
    assert store.list_events(event_types=[]) == []


def test_naive_event_time_is_refused(store: SqlStore) -> None:
    naive = event("r").model_copy(update={"at": dt.datetime(2026, 1, 1)})
    with pytest.raises(StoreError, match="naive"):
        store.append_event(naive)


# -- leases ---------------------------------------------------------------------------------


def test_acquire_is_a_compare_and_set_on_the_epoch(store: SqlStore) -> None:
    run = new_run(store)
    lease = store.acquire_lease(run.run_id, "worker-a", 30, expected_epoch=0)
    assert lease is not None and (lease.owner, lease.epoch) == ("worker-a", 1)
    assert lease.expires_at is not None
    assert store.get_lease(run.run_id) == lease
    assert store.current_epoch(run.run_id) == 1
    # A stale expectation never wins, even when the lease is free.
    assert store.acquire_lease(run.run_id, "worker-b", 30, expected_epoch=0, require_expired=False) is None
    # The current epoch, but the lease is held and unexpired.
    assert store.acquire_lease(run.run_id, "worker-b", 30, expected_epoch=1) is None
    assert store.get_lease(run.run_id) == lease


def test_expiry_is_set_from_the_database_clock(store: SqlStore) -> None:
    run = new_run(store)
    before = store.db_now()
    lease = store.acquire_lease(run.run_id, "w", 60, expected_epoch=0)
    after = store.db_now()
    assert lease is not None and lease.expires_at is not None
    slack = dt.timedelta(milliseconds=5)
    assert before + dt.timedelta(seconds=60) - slack <= lease.expires_at <= after + dt.timedelta(seconds=60) + slack
    assert lease.held_at(after)


def test_expired_lease_can_be_taken(store: SqlStore) -> None:
    run = new_run(store)
    first = store.acquire_lease(run.run_id, "worker-a", 0.2, expected_epoch=0)
    assert first is not None
    assert store.acquire_lease(run.run_id, "worker-b", 5, expected_epoch=1) is None
    time.sleep(0.3)
    assert not first.held_at(store.db_now())
    second = store.acquire_lease(run.run_id, "worker-b", 5, expected_epoch=1)
    assert second is not None and (second.owner, second.epoch) == ("worker-b", 2)
    # The old holder is fenced: it can neither renew nor release.
    assert store.renew_lease(run.run_id, "worker-a", 1, 5) is None
    assert store.release_lease(run.run_id, "worker-a", 1) is False
    assert store.get_lease(run.run_id) == second


def test_forced_takeover_without_expiry(store: SqlStore) -> None:
    run = new_run(store)
    store.acquire_lease(run.run_id, "worker-a", 300, expected_epoch=0)
    taken = store.acquire_lease(run.run_id, "coordinator", 300, expected_epoch=1, require_expired=False)
    assert taken is not None and (taken.owner, taken.epoch) == ("coordinator", 2)


def test_renew_extends_only_for_the_live_holder(store: SqlStore) -> None:
    run = new_run(store)
    lease = store.acquire_lease(run.run_id, "w", 1, expected_epoch=0)
    assert lease is not None and lease.expires_at is not None
    renewed = store.renew_lease(run.run_id, "w", 1, 120)
    assert renewed is not None and renewed.expires_at is not None
    assert renewed.expires_at > lease.expires_at and renewed.epoch == 1 and renewed.owner == "w"
    assert store.renew_lease(run.run_id, "intruder", 1, 120) is None
    assert store.renew_lease(run.run_id, "w", 0, 120) is None
    assert store.get_lease(run.run_id) == renewed


def test_renew_after_expiry_fails(store: SqlStore) -> None:
    run = new_run(store)
    store.acquire_lease(run.run_id, "w", 0.2, expected_epoch=0)
    time.sleep(0.3)
    assert store.renew_lease(run.run_id, "w", 1, 10) is None


def test_release_keeps_the_epoch(store: SqlStore) -> None:
    run = new_run(store)
    store.acquire_lease(run.run_id, "w", 60, expected_epoch=0)
    assert store.release_lease(run.run_id, "other", 1) is False
    assert store.release_lease(run.run_id, "w", 1) is True
    released = store.get_lease(run.run_id)
    assert (released.owner, released.epoch, released.expires_at) == (None, 1, None)
    assert store.release_lease(run.run_id, "w", 1) is False
    # A released lease is free at once.
    again = store.acquire_lease(run.run_id, "next", 60, expected_epoch=1)
    assert again is not None and again.epoch == 2


def test_lease_calls_on_unknown_run_and_bad_ttl(store: SqlStore) -> None:
    with pytest.raises(RecordNotFoundError, match="ghost"):
        store.acquire_lease("ghost", "w", 1, expected_epoch=0)
    with pytest.raises(RecordNotFoundError):
        store.renew_lease("ghost", "w", 1, 1)
    with pytest.raises(RecordNotFoundError):
        store.release_lease("ghost", "w", 1)
    run = new_run(store)
    with pytest.raises(StoreError, match="duration"):
        store.acquire_lease(run.run_id, "w", -1, expected_epoch=0)
    with pytest.raises(StoreError, match="duration"):
        store.acquire_lease(run.run_id, "w", float("nan"), expected_epoch=0)


def test_concurrent_acquirers_in_threads_one_wins(store: SqlStore, backend: Backend) -> None:
    run = new_run(store)
    stores = [backend.open() for _ in range(6)]
    barrier = threading.Barrier(len(stores))
    results: list[object] = []

    def contend(index: int) -> None:
        barrier.wait()
        results.append(stores[index].acquire_lease(run.run_id, f"t{index}", 30, expected_epoch=0))

    threads = [threading.Thread(target=contend, args=(index,)) for index in range(len(stores))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for opened in stores:
        opened.close()
    winners = [result for result in results if result is not None]
    assert len(results) == len(stores) and len(winners) == 1
    assert store.get_lease(run.run_id) == winners[0]


# -- operations and idempotency ------------------------------------------------------------------


def test_begin_new_then_in_flight_then_replay(store: SqlStore) -> None:
    run = new_run(store)
    first = entry(run.run_id, "k1", 0)
    began = store.begin_operation(first)
    assert began.kind == "new"
    assert began.record.operation_id == first.operation_id
    assert began.record.state is OperationState.PREPARED and began.record.outcome is None
    assert store.get_idempotency(run.run_id, "k1") == began.record
    assert store.get_operation(first.operation_id) == first

    retry = entry(run.run_id, "k1", 0)
    in_flight = store.begin_operation(retry)
    assert in_flight.kind == "in_flight" and in_flight.record == began.record
    with pytest.raises(RecordNotFoundError):
        store.get_operation(retry.operation_id)

    store.finish_operation(first.operation_id, OperationState.COMMITTED, {"deployment": "d-7"}, "200 OK")
    replay = store.begin_operation(retry)
    assert replay.kind == "replay"
    assert replay.record.state is OperationState.COMMITTED
    assert replay.record.outcome == {"deployment": "d-7"}
    assert store.get_operation(first.operation_id).state is OperationState.COMMITTED
    assert store.get_operation(first.operation_id).detail == "200 OK"


def test_begin_with_another_payload_is_a_mismatch(store: SqlStore) -> None:
    run = new_run(store)
    store.begin_operation(entry(run.run_id, "k", 0, payload="a"))
    mismatch = store.begin_operation(entry(run.run_id, "k", 0, payload="b"))
    assert mismatch.kind == "payload_mismatch"
    assert mismatch.record.payload_ref == entry(run.run_id, payload="a").payload_ref


def test_unknown_outcome_stays_in_flight(store: SqlStore) -> None:
    run = new_run(store)
    first = entry(run.run_id, "k", 0)
    store.begin_operation(first)
    store.finish_operation(first.operation_id, OperationState.UNKNOWN, None, "timeout")
    again = store.begin_operation(entry(run.run_id, "k", 0))
    assert again.kind == "in_flight" and again.record.state is OperationState.UNKNOWN
    store.finish_operation(first.operation_id, OperationState.UNKNOWN, None, "still unknown")
    store.finish_operation(first.operation_id, OperationState.COMMITTED, {"found": True}, "reconciled")
    history = store.operation_history(first.operation_id)
    assert [step.state for step in history] == [
        OperationState.PREPARED,
        OperationState.UNKNOWN,
        OperationState.UNKNOWN,
        OperationState.COMMITTED,
    ]
    assert [step.detail for step in history][1:] == ["timeout", "still unknown", "reconciled"]
    assert all(step.at.tzinfo is not None for step in history)


def test_stale_epoch_is_refused(store: SqlStore) -> None:
    run = new_run(store)
    store.acquire_lease(run.run_id, "w", 60, expected_epoch=0)
    store.acquire_lease(run.run_id, "w2", 60, expected_epoch=1, require_expired=False)
    with pytest.raises(StaleEpochError) as caught:
        store.begin_operation(entry(run.run_id, "k", 1))
    message = str(caught.value)
    assert run.run_id in message and "epoch 1" in message and "epoch is 2" in message
    assert store.get_idempotency(run.run_id, "k") is None
    with pytest.raises(StaleEpochError):
        store.begin_operation(entry(run.run_id, "k", 3))
    assert store.begin_operation(entry(run.run_id, "k", 2)).kind == "new"


def test_begin_refuses_non_prepared_entries_and_unknown_runs(store: SqlStore) -> None:
    run = new_run(store)
    with pytest.raises(StoreError, match="PREPARED"):
        store.begin_operation(entry(run.run_id, state=OperationState.COMMITTED))
    with pytest.raises(RecordNotFoundError, match="ghost"):
        store.begin_operation(entry("ghost"))


def test_final_states_are_final(store: SqlStore) -> None:
    run = new_run(store)
    op = entry(run.run_id, "k", 0)
    store.begin_operation(op)
    store.finish_operation(op.operation_id, OperationState.COMMITTED, {"id": 1})
    store.finish_operation(op.operation_id, OperationState.COMMITTED, {"id": 1})  # same: no-op
    store.finish_operation(op.operation_id, OperationState.COMMITTED, None)  # same: no-op
    with pytest.raises(StoreError, match="already COMMITTED"):
        store.finish_operation(op.operation_id, OperationState.NOT_COMMITTED, None)
    with pytest.raises(StoreError, match="already COMMITTED"):
        store.finish_operation(op.operation_id, OperationState.COMMITTED, {"id": 2})
    with pytest.raises(StoreError, match="PREPARED"):
        store.finish_operation(op.operation_id, OperationState.PREPARED, None)
    with pytest.raises(RecordNotFoundError):
        store.finish_operation("op-ghost", OperationState.COMMITTED, None)
    assert len(store.operation_history(op.operation_id)) == 2
    assert store.get_idempotency(run.run_id, "k").outcome == {"id": 1}  # type: ignore[union-attr]


def test_rearm_replaces_a_not_committed_key(store: SqlStore) -> None:
    run = new_run(store)
    first = entry(run.run_id, "k", 0)
    store.begin_operation(first)
    second = entry(run.run_id, "k", 0)
    with pytest.raises(StoreError, match="only NOT_COMMITTED"):
        store.rearm_operation(run.run_id, "k", second)
    store.finish_operation(first.operation_id, OperationState.NOT_COMMITTED, {"reason": "rejected"})
    assert store.begin_operation(entry(run.run_id, "k", 0)).kind == "replay"

    with pytest.raises(StoreError, match="new idempotency key"):
        store.rearm_operation(run.run_id, "k", entry(run.run_id, "k", 0, payload="other"))
    with pytest.raises(StoreError):
        store.rearm_operation(run.run_id, "k", entry(run.run_id, "other-key", 0))
    with pytest.raises(RecordNotFoundError):
        store.rearm_operation(run.run_id, "nope", entry(run.run_id, "nope", 0))

    rearmed = store.rearm_operation(run.run_id, "k", second)
    assert rearmed.operation_id == second.operation_id
    assert rearmed.state is OperationState.PREPARED and rearmed.outcome is None
    assert store.get_idempotency(run.run_id, "k") == rearmed
    assert store.begin_operation(entry(run.run_id, "k", 0)).kind == "in_flight"
    assert store.get_operation(first.operation_id).state is OperationState.NOT_COMMITTED
    with pytest.raises(StoreError, match="only NOT_COMMITTED"):
        store.rearm_operation(run.run_id, "k", entry(run.run_id, "k", 0))
    store.finish_operation(second.operation_id, OperationState.COMMITTED, {"deployment": "d-9"})
    replay = store.begin_operation(entry(run.run_id, "k", 0))
    assert replay.kind == "replay" and replay.record.outcome == {"deployment": "d-9"}


def test_rearm_is_epoch_checked(store: SqlStore) -> None:
    run = new_run(store)
    first = entry(run.run_id, "k", 0)
    store.begin_operation(first)
    store.finish_operation(first.operation_id, OperationState.NOT_COMMITTED, None)
    store.acquire_lease(run.run_id, "w", 60, expected_epoch=0)
    with pytest.raises(StaleEpochError):
        store.rearm_operation(run.run_id, "k", entry(run.run_id, "k", 0))
    assert store.rearm_operation(run.run_id, "k", entry(run.run_id, "k", 1)).state is OperationState.PREPARED


def test_list_operations_in_order_and_by_state(store: SqlStore) -> None:
    run = new_run(store)
    ops = [entry(run.run_id, f"k{index}", 0, operation_id=f"op-{9 - index}") for index in range(4)]
    for op in ops:
        store.begin_operation(op)
    store.finish_operation(ops[1].operation_id, OperationState.COMMITTED, None)
    store.finish_operation(ops[2].operation_id, OperationState.UNKNOWN, None)
    listed = store.list_operations(run.run_id)
    assert [op.operation_id for op in listed] == [op.operation_id for op in ops]
    unresolved = store.list_operations(run.run_id, states=[OperationState.PREPARED, OperationState.UNKNOWN])
    assert [op.operation_id for op in unresolved] == [ops[0].operation_id, ops[2].operation_id, ops[3].operation_id]
    assert [op.operation_id for op in store.list_operations(run.run_id, states=["COMMITTED"])] == [
        ops[1].operation_id
    ]
    assert store.list_operations(run.run_id, states=[]) == []
    assert store.list_operations("ghost") == []


def test_duplicate_operation_id_is_refused(store: SqlStore) -> None:
    run = new_run(store)
    store.begin_operation(entry(run.run_id, "k1", 0, operation_id="op-same"))
    with pytest.raises(StoreError):
        store.begin_operation(entry(run.run_id, "k2", 0, operation_id="op-same"))
    assert store.get_idempotency(run.run_id, "k2") is None


def test_concurrent_begins_claim_a_key_once(store: SqlStore, backend: Backend) -> None:
    run = new_run(store)
    stores = [backend.open() for _ in range(6)]
    barrier = threading.Barrier(len(stores))
    kinds: list[str] = []

    def claim(index: int) -> None:
        barrier.wait()
        kinds.append(stores[index].begin_operation(entry(run.run_id, "once", 0)).kind)

    threads = [threading.Thread(target=claim, args=(index,)) for index in range(len(stores))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for opened in stores:
        opened.close()
    assert sorted(kinds) == ["in_flight"] * 5 + ["new"]
    assert len(store.list_operations(run.run_id)) == 1


# -- budget ----------------------------------------------------------------------------------------


def test_budget_charges_sum(store: SqlStore) -> None:
    run = new_run(store)
    assert store.budget_used(run.run_id) == BudgetUsage()
    store.append_budget_charge(run.run_id, 0, BudgetUsage(model_spend_usd=Decimal("0.10"), model_calls=1), "call")
    store.append_budget_charge(run.run_id, 1, BudgetUsage(model_spend_usd=Decimal("0.25"), tool_calls=2), "tools")
    store.append_budget_charge(run.run_id, 1, BudgetUsage(browser_seconds=1.5, retries=1), "retry")
    used = store.budget_used(run.run_id)
    assert used == BudgetUsage(
        model_spend_usd=Decimal("0.35"), model_calls=1, tool_calls=2, browser_seconds=1.5, retries=1
    )
    other = new_run(store)
    assert store.budget_used(other.run_id) == BudgetUsage()
    with pytest.raises(RecordNotFoundError):
        store.append_budget_charge("ghost", 0, BudgetUsage(), "x")


def test_a_fenced_charge_is_refused_at_a_stale_epoch_and_records_nothing(store: SqlStore) -> None:
    run = new_run(store)
    store.acquire_lease(run.run_id, "worker-a", 300, expected_epoch=0)
    store.append_budget_charge(run.run_id, 1, BudgetUsage(model_calls=1), "reserved by the owner", fenced=True)
    store.acquire_lease(run.run_id, "worker-b", 300, expected_epoch=1, require_expired=False)
    with pytest.raises(StaleEpochError, match="fenced"):
        store.append_budget_charge(run.run_id, 1, BudgetUsage(model_calls=1), "reserved by the old owner", fenced=True)
    store.append_budget_charge(run.run_id, 1, BudgetUsage(model_spend_usd=Decimal("0.02")), "spend already incurred")
    assert store.budget_used(run.run_id) == BudgetUsage(model_calls=1, model_spend_usd=Decimal("0.02"))


def test_forked_child_opens_its_own_connection(store: SqlStore) -> None:
    """A store inherited over fork() must not reuse (or close) the parent's connection."""
    import os

    run = new_run(store)
    pid = os.fork()
    if pid == 0:  # child
        code = 1
        try:
            store.append_event(event(run.run_id, detail={"from": "child"}))
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    store.append_event(event(run.run_id, detail={"from": "parent"}))
    assert [e.detail["from"] for _, e in store.list_events(run.run_id)] == ["child", "parent"]



def test_fenced_worker_cannot_append_a_checkpoint(store: SqlStore) -> None:
    """Sealing is a mutation: a checkpoint from an epoch below the current one is refused."""
    from baton.errors import StaleEpochError

    run_id = new_run(store).run_id
    first = store.acquire_lease(run_id, "w1", 30.0, 0)
    assert first is not None
    store.append_checkpoint(checkpoint(run_id, 0, owner_epoch=first.epoch))
    taken = store.acquire_lease(run_id, "w2", 30.0, first.epoch, require_expired=False)
    assert taken is not None
    latest = store.latest_checkpoint(run_id)
    with pytest.raises(StaleEpochError, match="fenced"):
        store.append_checkpoint(checkpoint(run_id, 1, latest, owner_epoch=first.epoch))
    assert store.latest_checkpoint(run_id) == latest
    store.append_checkpoint(checkpoint(run_id, 1, latest, owner_epoch=taken.epoch))


# -- checkpoint rows stored as deltas ---------------------------------------------------------


def test_checkpoint_rows_are_deltas_between_full_snapshots(store: SqlStore, backend: Backend) -> None:
    from baton.store.checkpoints_sql import body_text
    from baton.store.manifest_delta import FULL_EVERY

    run = new_run(store)
    written = chain(run.run_id, FULL_EVERY + 3)
    for ckpt in written:
        store.append_checkpoint(ckpt)
    rows = [(seq, kind, body_text(str(seq), body, packed)) for seq, kind, body, packed in store.execute_raw(
        "SELECT seq, body_kind, body, packed FROM checkpoints WHERE run_id = ? ORDER BY seq", (run.run_id,)
    )]
    kinds = {int(seq): kind for seq, kind, _ in rows}
    assert [seq for seq, kind in kinds.items() if kind == "full"] == [0, FULL_EVERY]
    for _, kind, body in rows:  # an unchanged field (the release) is stored only in full rows
        assert ("release_id" in json.loads(body)) == (kind == "full")
        if kind == "delta":
            assert "release_id" not in json.loads(body)["set"]
    fresh = backend.open()  # an empty cache: every body is rebuilt from the rows
    try:
        assert fresh.list_checkpoints(run.run_id) == written
        assert fresh.get_checkpoint(written[FULL_EVERY - 1].checkpoint_id) == written[FULL_EVERY - 1]
        assert fresh.latest_checkpoint(run.run_id) == written[-1]
    finally:
        fresh.close()


def test_tampered_delta_row_is_detected(store: SqlStore, backend: Backend) -> None:
    run = new_run(store)
    first, second = chain(run.run_id, 2)
    store.append_checkpoint(first)
    forged = json.dumps({"set": {"checkpoint_id": second.checkpoint_id, "seq": 1,
                                 "parent_checkpoint_id": first.checkpoint_id,
                                 "parent_checkpoint_hash": first.checkpoint_hash,
                                 "boundary": Boundary.POSTCONDITION_VERIFIED.value,
                                 "checkpoint_hash": second.checkpoint_hash}, "unset": []})
    store.execute_raw(
        "INSERT INTO checkpoints (checkpoint_id, run_id, seq, checkpoint_hash, parent_checkpoint_id, schema_version, "
        "boundary, body, sealed_at, body_kind) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'delta')",
        (second.checkpoint_id, run.run_id, 1, second.checkpoint_hash, first.checkpoint_id, "2", "VERIFIED", forged,
         store.dialect.ts_in(second.sealed_at)),
    )
    fresh = backend.open()
    try:
        with pytest.raises(CheckpointIntegrityError, match="does not match"):
            fresh.get_checkpoint(second.checkpoint_id)
    finally:
        fresh.close()
