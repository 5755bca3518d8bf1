"""One idempotency key, many concurrent callers: exactly one side effect, counted at the target."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from baton.authority import AuthorityService
from baton.checker import check
from baton.errors import (
    OperationInFlightError,
    OperationUnknownError,
    OutcomeUnknownError,
    PayloadMismatchError,
    TargetRejectedError,
)
from baton.fencing import FencingToken
from baton.gateway import MutationGateway, MutationResult
from baton.history import ListHistory
from baton.ownership import Coordinator
from baton.store.base import SqlStore
from baton.targets.ledger_target import LedgerTargetProcess

from builders.authority import TARGET, capability, new_run, request

CALLERS = 16


def _together(count: int, call: Callable[[int], Any]) -> list[Any]:
    """Run `call(i)` on `count` threads released at the same instant; return results or exceptions."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count

    def body(index: int) -> None:
        barrier.wait(30)
        try:
            results[index] = call(index)
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            results[index] = exc

    threads = [threading.Thread(target=body, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results


@pytest.mark.integration
def test_sixteen_concurrent_requests_with_one_key_cause_exactly_one_side_effect(
    store: SqlStore, authority: AuthorityService, ledger_service: LedgerTargetProcess
) -> None:
    run_id = new_run(store)
    history = ListHistory()
    lease = Coordinator(store, history=history).grant(run_id, "owner", ttl_s=120)
    assert lease is not None
    cap = capability(authority, store, lease)
    payload = {"service": "api", "version": "1.4.2"}
    clients = [ledger_service.client(timeout_s=10.0) for _ in range(CALLERS)]
    gateways = [MutationGateway(store, authority, {TARGET: client}, history=history) for client in clients]
    # The target takes a while to answer the first request, so the others arrive while it is in flight.
    clients[0].inject_fault("deploy-1", "commit_then_timeout", delay_s=1.0)

    first_wave = _together(
        CALLERS, lambda i: gateways[i].submit(request(lease, cap, "deploy-1", payload, process=f"caller-{i}"))
    )
    fresh = [r for r in first_wave if isinstance(r, MutationResult) and not r.replayed]
    in_flight = [r for r in first_wave if isinstance(r, OperationInFlightError)]
    replayed = [r for r in first_wave if isinstance(r, MutationResult) and r.replayed]
    assert len(fresh) == 1, first_wave
    assert len(fresh) + len(in_flight) + len(replayed) == CALLERS, first_wave
    assert in_flight, "the slow first request should have left others in flight"
    for refusal in in_flight:
        assert "in flight" in str(refusal) and "deploy-1" in str(refusal)
        assert refusal.operation_id == fresh[0].operation_id

    second_wave = _together(
        CALLERS, lambda i: gateways[i].submit(request(lease, cap, "deploy-1", payload, process=f"caller-{i}"))
    )
    assert all(isinstance(r, MutationResult) and r.replayed for r in second_wave), second_wave
    assert {r.operation_id for r in second_wave} == {fresh[0].operation_id}
    assert all(r.outcome == fresh[0].outcome for r in second_wave)

    with pytest.raises(PayloadMismatchError, match="different payload") as mismatch:
        gateways[0].submit(request(lease, cap, "deploy-1", {**payload, "version": "9.9.9"}, process="caller-0"))
    assert mismatch.value.operation_id == fresh[0].operation_id

    effects = [effect for effect in ledger_service.effects() if effect.run_id == run_id]
    assert len(effects) == 1 and effects[0].operation_id == fresh[0].operation_id
    ledger = store.list_operations(run_id)
    assert [entry.state.value for entry in ledger] == ["COMMITTED"]
    assert check(history.ops, ledger, effects) == []
    for client in clients:
        client.close()


@pytest.mark.integration
def test_a_key_in_flight_or_with_an_unknown_outcome_is_refused_until_settled(
    store: SqlStore, authority: AuthorityService, ledger_service: LedgerTargetProcess
) -> None:
    run_id = new_run(store)
    history = ListHistory()
    lease = Coordinator(store, history=history).grant(run_id, "owner", ttl_s=120)
    assert lease is not None
    cap = capability(authority, store, lease)
    slow = ledger_service.client(timeout_s=10.0)
    quick = ledger_service.client(timeout_s=0.3)
    slow.inject_fault("migrate-db", "commit_then_timeout", delay_s=1.0)
    gateway = MutationGateway(store, authority, {TARGET: slow}, history=history)
    started = threading.Event()
    outcome: list[Any] = []

    def first_caller() -> None:
        started.set()
        outcome.append(gateway.submit(request(lease, cap, "migrate-db", {"to": 42}, process="first")))

    thread = threading.Thread(target=first_caller)
    thread.start()
    started.wait(5)
    # Wait until the first request is PREPARED in the ledger, then collide with it.
    for _ in range(200):
        record = store.get_idempotency(run_id, "migrate-db")
        if record is not None:
            break
        threading.Event().wait(0.01)
    with pytest.raises(OperationInFlightError, match="in flight as operation"):
        gateway.submit(request(lease, cap, "migrate-db", {"to": 42}, process="second"))
    thread.join(10)
    assert isinstance(outcome[0], MutationResult) and not outcome[0].replayed

    # A timeout leaves the outcome UNKNOWN: it is reported as such, and the key is blocked until reconciled.
    quick.inject_fault("rotate-keys", "commit_then_timeout", delay_s=1.0)
    timed_out = MutationGateway(store, authority, {TARGET: quick}, history=history)
    with pytest.raises(OutcomeUnknownError, match="recorded UNKNOWN"):
        timed_out.submit(request(lease, cap, "rotate-keys", {"all": True}, process="third"))
    with pytest.raises(OperationUnknownError, match="reconciled against the target before any retry"):
        timed_out.submit(request(lease, cap, "rotate-keys", {"all": True}, process="fourth"))
    states = {entry.idempotency_key: entry.state.value for entry in store.list_operations(run_id)}
    assert states == {"migrate-db": "COMMITTED", "rotate-keys": "UNKNOWN"}
    effects = [effect for effect in ledger_service.effects() if effect.run_id == run_id]
    assert sorted(effect.idempotency_key for effect in effects) == ["migrate-db", "rotate-keys"]
    assert check(history.ops, store.list_operations(run_id), effects) == []
    slow.close()
    quick.close()


@pytest.mark.integration
def test_the_target_itself_applies_one_key_once_under_sixteen_direct_callers(ledger_service: LedgerTargetProcess) -> None:
    run_id = f"direct-{uuid.uuid4().hex[:8]}"
    token = FencingToken(run_id, 1)
    clients = [ledger_service.client(timeout_s=10.0) for _ in range(CALLERS)]
    results = _together(
        CALLERS, lambda i: clients[i].apply(f"op-{i}-{uuid.uuid4().hex}", "one-key", token, {"amount": 10})
    )
    statuses = Counter(r["status"] for r in results if isinstance(r, dict))
    assert statuses == {"applied": 1, "replayed": CALLERS - 1}, results
    with pytest.raises(TargetRejectedError) as refused:
        clients[0].apply("op-other", "one-key", token, {"amount": 11})
    assert refused.value.reason == "payload_mismatch"
    effects = [effect for effect in ledger_service.effects() if effect.run_id == run_id]
    assert len(effects) == 1 and check([], effects=effects) == []
    for client in clients:
        client.close()
