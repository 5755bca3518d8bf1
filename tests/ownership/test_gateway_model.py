"""Model-based test: random interleavings of owners, stale workers, keys and faults against the real gateway.

The model knows the current epoch and, per key, what the ledger must say. Each
step runs against the real store, coordinator, gateway and reconciler, and the
outcome must match the model; after each step invariants 1 and 2 are checked
against the target's own records, and at the end the history checker runs over
everything the example produced.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from baton.authority import AuthorityService
from baton.checker import check
from baton.errors import (
    OperationNotCommittedError,
    OperationUnknownError,
    OutcomeUnknownError,
    PayloadMismatchError,
    StaleEpochError,
    TargetRejectedError,
)
from baton.fencing import FencingToken
from baton.gateway import MutationGateway
from baton.history import ListHistory
from baton.ownership import Coordinator
from baton.reconcile import Reconciler
from baton.store.base import SqlStore

from .model_target import InProcessLedger
from builders.authority import TARGET, capability, new_run, request

WORKERS = ("w1", "w2", "w3")
KEYS = ("k1", "k2", "k3")
FAULTS = (None, None, "reject", "lose_request", "lose_reply")


@dataclass
class KeyModel:
    state: str  # COMMITTED, NOT_COMMITTED or UNKNOWN
    payload: int
    operation_id: str


def make_machine(store: SqlStore, authority: AuthorityService, workdir: Path) -> type[RuleBasedStateMachine]:
    class GatewayModel(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.run_id = new_run(store)
            self.history = ListHistory()
            self.target = InProcessLedger(workdir / f"fence-{uuid.uuid4().hex}.db")
            self.coordinator = Coordinator(store, history=self.history)
            self.gateway = MutationGateway(store, authority, {TARGET: self.target}, history=self.history)
            self.reconciler = Reconciler(store, {TARGET: self.target}, history=self.history, process="reconciler")
            self.epoch = 0
            self.workers: dict[str, tuple[int, str]] = {}
            self.keys: dict[str, KeyModel] = {}

        def _owner(self) -> str:
            return next(name for name, (epoch, _) in self.workers.items() if epoch == self.epoch)

        def _request(self, worker: str, key: str, payload: int):  # type: ignore[no-untyped-def]
            epoch, token = self.workers[worker]
            return request((self.run_id, epoch), token, key, {"value": payload}, process=worker)

        @rule(worker=st.sampled_from(WORKERS))
        def take_over(self, worker: str) -> None:
            lease = self.coordinator.grant(self.run_id, worker, ttl_s=300, force=True, fence_targets=[self.target])
            assert lease is not None and lease.epoch == self.epoch + 1
            self.epoch = lease.epoch
            self.workers[worker] = (lease.epoch, capability(authority, store, lease).token)

        @precondition(lambda self: bool(self.workers))
        @rule(data=st.data(), key=st.sampled_from(KEYS), payload=st.integers(0, 1), fault=st.sampled_from(FAULTS))
        def mutate(self, data: st.DataObject, key: str, payload: int, fault: str | None) -> None:
            worker = data.draw(st.sampled_from(sorted(self.workers)))
            epoch = self.workers[worker][0]
            before = len(self.target.effects)
            self.target.next_fault = fault  # type: ignore[assignment]
            known = self.keys.get(key)
            call = lambda: self.gateway.submit(self._request(worker, key, payload))  # noqa: E731
            try:
                if epoch < self.epoch:
                    with pytest.raises(StaleEpochError):
                        call()
                elif known is not None and known.payload != payload:
                    with pytest.raises(PayloadMismatchError):
                        call()
                elif known is not None and known.state == "COMMITTED":
                    result = call()
                    assert result.replayed and result.operation_id == known.operation_id
                elif known is not None and known.state == "NOT_COMMITTED":
                    with pytest.raises(OperationNotCommittedError):
                        call()
                elif known is not None:
                    with pytest.raises(OperationUnknownError):
                        call()
                elif fault is None:
                    result = call()
                    assert not result.replayed
                    self.keys[key] = KeyModel("COMMITTED", payload, result.operation_id)
                elif fault == "reject":
                    with pytest.raises(OperationNotCommittedError) as refused:
                        call()
                    self.keys[key] = KeyModel("NOT_COMMITTED", payload, refused.value.operation_id)
                else:
                    with pytest.raises(OutcomeUnknownError) as unknown:
                        call()
                    self.keys[key] = KeyModel("UNKNOWN", payload, unknown.value.operation_id)
            finally:
                self.target.next_fault = None
            applied = self.target.effects[before:]
            expect_effect = known is None and epoch == self.epoch and fault in (None, "lose_reply")
            assert len(applied) == (1 if expect_effect else 0)
            assert all(effect.epoch == self.epoch for effect in applied)

        @precondition(lambda self: any(k.state == "UNKNOWN" for k in self.keys.values()))
        @rule(data=st.data())
        def reconcile(self, data: st.DataObject) -> None:
            key = data.draw(st.sampled_from(sorted(k for k, m in self.keys.items() if m.state == "UNKNOWN")))
            model = self.keys[key]
            applied = any(effect.operation_id == model.operation_id for effect in self.target.effects)
            settled = self.reconciler.reconcile(model.operation_id)
            assert settled.state.value == ("COMMITTED" if applied else "NOT_COMMITTED")
            model.state = settled.state.value

        @precondition(lambda self: any(k.state == "NOT_COMMITTED" for k in self.keys.values()))
        @rule(data=st.data())
        def retry(self, data: st.DataObject) -> None:
            key = data.draw(st.sampled_from(sorted(k for k, m in self.keys.items() if m.state == "NOT_COMMITTED")))
            model = self.keys[key]
            result = self.reconciler.retry(self.gateway, self._request(self._owner(), key, model.payload))
            assert not result.replayed and result.operation_id != model.operation_id
            self.keys[key] = KeyModel("COMMITTED", model.payload, result.operation_id)

        @precondition(lambda self: any(epoch < self.epoch for epoch, _ in self.workers.values()))
        @rule(data=st.data(), key=st.sampled_from(KEYS))
        def stale_worker_bypasses_the_gateway(self, data: st.DataObject, key: str) -> None:
            worker = data.draw(st.sampled_from(sorted(w for w, (e, _) in self.workers.items() if e < self.epoch)))
            token = FencingToken(self.run_id, self.workers[worker][0])
            with pytest.raises(TargetRejectedError) as refused:
                self.target.apply(f"op-{uuid.uuid4().hex}", key, token, {"value": 7})
            assert refused.value.fenced

        @invariant()
        def one_effect_per_key_and_never_a_stale_one(self) -> None:
            keys = [effect.idempotency_key for effect in self.target.effects]
            assert len(keys) == len(set(keys)), keys  # invariant 1, at the target
            epochs = [effect.epoch for effect in self.target.effects]
            assert epochs == sorted(epochs)  # invariant 2 at the target: nothing older lands after something newer

        @invariant()
        def ledger_agrees_with_the_model(self) -> None:
            for key, model in self.keys.items():
                record = store.get_idempotency(self.run_id, key)
                assert record is not None and record.state.value == model.state
                assert record.operation_id == model.operation_id

        def teardown(self) -> None:
            ledger = store.list_operations(self.run_id)
            events = [event for _, event in store.list_events(self.run_id)]
            violations = check(self.history.ops, ledger, self.target.effects, events)
            assert violations == [], [v.explain() for v in violations]

    return GatewayModel


def test_gateway_protocol_model(store: SqlStore, authority: AuthorityService, tmp_path: Path) -> None:
    machine = make_machine(store, authority, tmp_path)
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=25,
            stateful_step_count=20,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        ),
    )
