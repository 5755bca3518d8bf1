"""A worker killed mid-request; reconciliation against the target settles it with one side effect."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from pathlib import Path
from typing import Literal

import pytest

from baton.authority import AuthorityService
from baton.cancellation import CancellationTracker, PhysicalStatus
from baton.checker import check
from baton.errors import OperationUnknownError, OutcomeUnknownError, RetryRefusedError
from baton.gateway import MutationGateway
from baton.history import JsonlHistory, ListHistory
from baton.models import EventType, OperationState
from baton.ownership import Coordinator
from baton.reconcile import Decision, Reconciler, RetryPolicy
from baton.store.base import SqlStore
from baton.targets.ledger_target import LedgerTargetProcess

from builders.authority import TARGET, capability, new_run, request

from .worker_authority import WorkerAuthority
from .workers import doomed_worker

WORKER_TTL_S = 1.0


def _until(predicate, timeout_s: float = 30.0, what: str = "condition") -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.mark.integration
@pytest.mark.parametrize("target_outcome", ["COMMITTED", "NOT_COMMITTED"])
def test_worker_killed_between_send_and_record_is_reconciled_with_exactly_one_side_effect(
    target_outcome: Literal["COMMITTED", "NOT_COMMITTED"],
    store: SqlStore,
    store_url: str,
    authority: AuthorityService,
    ledger_service: LedgerTargetProcess,
    tmp_path: Path,
    worker_authority: WorkerAuthority,
) -> None:
    run_id = new_run(store)
    key = f"deploy-{target_outcome.lower()}"
    history_path = tmp_path / "history.jsonl"
    history = JsonlHistory(history_path)
    client = ledger_service.client(timeout_s=5.0)
    coordinator = Coordinator(store, history=history)
    first = coordinator.grant(run_id, "worker-1", ttl_s=WORKER_TTL_S * 30, fence_targets=[client])
    assert first is not None
    if target_outcome == "COMMITTED":
        client.inject_fault(key, "commit_then_timeout", delay_s=8.0)  # applied, answer held back
    else:
        client.inject_fault(key, "hang_then_abort", delay_s=1.0)  # held, then dropped unapplied

    ctx = multiprocessing.get_context("spawn")
    worker = ctx.Process(
        target=doomed_worker, args=(store_url, run_id, "worker-1", ledger_service.url, str(history_path), key), daemon=True
    )
    worker.start()
    try:
        if target_outcome == "COMMITTED":
            _until(lambda: any(e.run_id == run_id for e in ledger_service.effects()), what="the target to apply")
        else:
            _until(lambda: bool(ledger_service.pending()), what="the target to hold the request")
        assert worker.pid is not None
        os.kill(worker.pid, signal.SIGKILL)
        worker.join(10)
    finally:
        if worker.is_alive():
            worker.kill()
    assert worker.exitcode == -signal.SIGKILL

    # The ledger knows the request was prepared, and nothing more.
    (prepared,) = store.list_operations(run_id)
    assert prepared.state is OperationState.PREPARED and prepared.epoch == 1

    # The coordinator moves the run to a new owner once the old lease lapses (forced here, to save time).
    second = coordinator.grant(run_id, "worker-2", ttl_s=60, force=True, fence_targets=[client])
    assert second is not None and second.epoch == 2
    tracker = CancellationTracker(store)
    cancelled = tracker.cancel_logically(run_id, "worker-1", 1)
    assert [op.operation_id for op in cancelled.outstanding] == [prepared.operation_id]
    cancelled = tracker.confirm_physical_stop(cancelled, f"exit status {worker.exitcode}")
    assert cancelled.physical is PhysicalStatus.STOPPED
    assert not cancelled.may_assume_stopped, "a stopped process may still have left an operation in flight"

    reconciler = Reconciler(
        store, {TARGET: client}, policy=RetryPolicy(lookup_attempts=50, lookup_interval_s=0.1),
        history=history, process="worker-2",
    )
    (settled,) = reconciler.reconcile_run(run_id)
    assert settled.operation_id == prepared.operation_id and settled.asked_target
    assert settled.state.value == target_outcome
    gateway = MutationGateway(store, authority, {TARGET: client}, history=history)
    retry = request(second, capability(authority, store, second), key, {"deploy": key}, process="worker-2")
    if target_outcome == "COMMITTED":
        assert settled.decision is Decision.CONTINUE
        with pytest.raises(RetryRefusedError, match="COMMITTED"):
            reconciler.retry(gateway, retry)
        replay = gateway.submit(retry)
        assert replay.replayed and replay.operation_id == prepared.operation_id
    else:
        assert settled.decision is Decision.RETRY
        again = reconciler.retry(gateway, retry)
        assert not again.replayed and again.operation_id != prepared.operation_id

    assert tracker.refresh(cancelled).may_assume_stopped
    effects = [effect for effect in ledger_service.effects() if effect.run_id == run_id]
    assert len(effects) == 1 and effects[0].idempotency_key == key
    ledger = store.list_operations(run_id)
    committed = [entry for entry in ledger if entry.state is OperationState.COMMITTED]
    assert len(committed) == 1 and committed[0].operation_id == effects[0].operation_id
    reconciled = store.list_events(run_id, event_types=[EventType.OPERATION_RECONCILED])
    assert [event.detail["state"] for _, event in reconciled] == [target_outcome]
    assert store.get_run(run_id).status == "active"
    ops = history.ops
    assert any(op.f == "mutate" and op.process == "worker-1" for op in ops)
    assert not any(op.process == "worker-1" and op.f == "mutate" and op.type.value != "invoke" for op in ops)
    events = [event for _, event in store.list_events(run_id)]
    assert check(ops, ledger, effects, events) == []


@pytest.mark.integration
def test_an_outcome_still_unknown_after_asking_escalates_the_run_and_blocks_retries(
    store: SqlStore, authority: AuthorityService, ledger_service: LedgerTargetProcess
) -> None:
    run_id = new_run(store)
    history = ListHistory()
    client = ledger_service.client(timeout_s=0.3)
    lease = Coordinator(store, history=history).grant(run_id, "owner", ttl_s=60, fence_targets=[client])
    assert lease is not None
    gateway = MutationGateway(store, authority, {TARGET: client}, history=history)
    client.inject_fault("wire-funds", "hang_then_abort", delay_s=1.5)
    wire = request(lease, capability(authority, store, lease), "wire-funds", {"eur": 100}, process="owner")
    with pytest.raises(OutcomeUnknownError) as unknown:
        gateway.submit(wire)
    reconciler = Reconciler(store, {TARGET: client}, policy=RetryPolicy(lookup_attempts=1), history=history, process="owner")
    escalated = reconciler.reconcile(unknown.value.operation_id)
    assert escalated.state is OperationState.UNKNOWN and escalated.decision is Decision.ESCALATE
    assert store.get_run(run_id).status == "escalated"
    (event,) = [event for _, event in store.list_events(run_id, event_types=[EventType.RUN_ESCALATED])]
    assert event.detail["operation_id"] == unknown.value.operation_id
    assert store.get_operation(unknown.value.operation_id).state is OperationState.UNKNOWN
    with pytest.raises(RetryRefusedError, match="UNKNOWN"):
        reconciler.retry(gateway, wire)
    with pytest.raises(OperationUnknownError):
        gateway.submit(wire)
    # Reconciling further, once the target has settled it, gives the real answer.
    _until(lambda: not ledger_service.pending(), what="the target to drop the request")
    later = reconciler.reconcile(unknown.value.operation_id)
    assert later.state is OperationState.NOT_COMMITTED and later.decision is Decision.RETRY
    assert [e for e in ledger_service.effects() if e.run_id == run_id] == []
    assert check(history.ops, store.list_operations(run_id), ledger_service.effects()) == []


def test_policy_forbids_retrying_a_non_idempotent_operation() -> None:
    policy = RetryPolicy(idempotent_operations=frozenset({"deploy"}))
    assert policy.permits_retry("deploy") and not policy.permits_retry("send-email")
    assert not RetryPolicy(allow_retry=False).permits_retry("deploy")
