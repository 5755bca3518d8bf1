"""Reconciliation: settle operations whose outcome is not known by asking the target.

An operation left PREPARED (its owner died between sending and recording) or
UNKNOWN (a timeout) is never retried blindly and never reported as success.
The reconciler asks the target's authoritative state by operation id:

* COMMITTED - recorded as such; the run continues with postcondition checks;
* NOT_COMMITTED - recorded as such; a retry is allowed only when policy allows
  it and the operation is idempotent, and it goes through the gateway again
  (re-arming the key under the current epoch and a fresh capability);
* UNKNOWN (after the configured attempts) - stays UNKNOWN, the run is marked
  escalated and a RUN_ESCALATED event is recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from pydantic import Field

from baton.ablation import Ablation, is_ablated
from baton import clock
from baton.errors import RetryRefusedError
from baton.gateway import MutationGateway, MutationRequest, MutationResult, MutationTarget
from baton.history import HistorySink, Recorder
from baton.models.base import Record
from baton.models.events import Event, EventType
from baton.models.operation import OperationEntry, OperationState
from baton.store.base import SqlStore


class RetryPolicy(Record):
    """What may be retried, and how hard to ask a target before escalating."""

    allow_retry: bool = True
    idempotent_operations: frozenset[str] | None = Field(
        default=None, description="logical operations safe to retry; None means every operation is idempotent"
    )
    lookup_attempts: int = Field(default=1, ge=1)
    lookup_interval_s: float = Field(default=0.0, ge=0.0)

    def permits_retry(self, operation: str) -> bool:
        """True when a NOT_COMMITTED `operation` may be sent again."""
        idempotent = self.idempotent_operations is None or operation in self.idempotent_operations
        return self.allow_retry and idempotent


class Decision(StrEnum):
    """What the run does next about one operation."""

    CONTINUE = "continue"  # committed: go on to postcondition verification
    RETRY = "retry"  # not committed, and policy allows a retry
    ABANDON = "abandon"  # not committed, and policy forbids a retry
    ESCALATE = "escalate"  # still unknown: a human or a further reconciliation must decide


class ReconcileResult(Record):
    """The settled state of one operation and the decision that follows."""

    operation_id: str
    run_id: str
    idempotency_key: str
    state: OperationState
    decision: Decision
    asked_target: bool


class Reconciler:
    """Resolves PREPARED and UNKNOWN operations against their targets."""

    def __init__(
        self,
        store: SqlStore,
        targets: Mapping[str, MutationTarget],
        *,
        policy: RetryPolicy | None = None,
        history: HistorySink | None = None,
        process: str = "reconciler",
    ) -> None:
        self.store = store
        self.targets = dict(targets)
        self.policy = policy or RetryPolicy()
        self._history = history
        self.process = process

    def reconcile(self, operation_id: str) -> ReconcileResult:
        """Settle one operation (asking its target when its outcome is not final)."""
        entry = self.store.get_operation(operation_id)
        if entry.state.is_final:
            return self._result(entry, entry.state, asked=False)
        target = self.targets.get(entry.target)
        history = Recorder(self._history, self.process)
        fields = {"epoch": entry.epoch, "key": entry.idempotency_key, "operation_id": entry.operation_id}
        history.invoke("reconcile", entry.run_id, **fields, value={"previous": entry.state.value})
        try:
            state = self._ask(target, operation_id)
            self._record(entry, state)
        except BaseException as exc:
            history.info("reconcile", entry.run_id, **fields, value={"error": repr(exc)})
            raise
        history.ok("reconcile", entry.run_id, **fields, value={"state": state.value})
        return self._result(entry, state, asked=True)

    def reconcile_run(self, run_id: str) -> list[ReconcileResult]:
        """Settle every PREPARED or UNKNOWN operation of a run, oldest first."""
        pending = self.store.list_operations(run_id, states=[OperationState.PREPARED, OperationState.UNKNOWN])
        return [self.reconcile(entry.operation_id) for entry in pending]

    def retry(self, gateway: MutationGateway, request: MutationRequest) -> MutationResult:
        """Send a NOT_COMMITTED key again through the gateway, if policy allows; RetryRefusedError otherwise."""
        record = self.store.get_idempotency(request.run_id, request.idempotency_key)
        if record is None:
            raise RetryRefusedError(f"run {request.run_id!r} has no operation under key {request.idempotency_key!r}")
        if record.state is not OperationState.NOT_COMMITTED:
            raise RetryRefusedError(
                f"key {request.idempotency_key!r} is {record.state.value} (operation {record.operation_id}); only an "
                "operation the target confirmed NOT_COMMITTED may be retried"
            )
        if not self.policy.permits_retry(request.operation):
            raise RetryRefusedError(
                f"policy does not allow retrying {request.operation!r} (allow_retry={self.policy.allow_retry}, "
                "or the operation is not idempotent)"
            )
        return gateway.resubmit(request)

    # -- internals ----------------------------------------------------------------------------

    def _ask(self, target: MutationTarget | None, operation_id: str) -> OperationState:
        if is_ablated(Ablation.RECONCILE_BEFORE_RETRY):  # an open outcome taken as failed, without asking
            return OperationState.NOT_COMMITTED
        if target is None:
            return OperationState.UNKNOWN
        state = OperationState.UNKNOWN
        for attempt in range(self.policy.lookup_attempts):
            if attempt:
                clock.sleep(self.policy.lookup_interval_s)
            try:
                state = OperationState(target.lookup(operation_id))
            except Exception:  # noqa: BLE001 - a target that cannot answer leaves the outcome unknown
                state = OperationState.UNKNOWN
            if state is not OperationState.UNKNOWN and state is not OperationState.PREPARED:
                return state
        return OperationState.UNKNOWN

    def _record(self, entry: OperationEntry, state: OperationState) -> None:
        detail = f"reconciled against target {entry.target!r}"
        outcome = {"reconciled": state.value, "target": entry.target}
        if state is OperationState.UNKNOWN:
            self.store.finish_operation(entry.operation_id, state, None, detail)
        else:
            try:
                self.store.finish_operation(entry.operation_id, state, outcome, detail)
            except Exception:
                # Someone (the old owner, waking up) recorded it meanwhile; the ledger must agree with the target.
                recorded = self.store.get_operation(entry.operation_id).state
                if recorded is not state:
                    raise
        decision = self._decide(entry, state)
        self.store.append_event(
            Event(
                event_type=EventType.OPERATION_RECONCILED,
                run_id=entry.run_id,
                at=self.store.db_now(),
                reason=f"target {entry.target!r} says {state.value}",
                detail={"operation_id": entry.operation_id, "idempotency_key": entry.idempotency_key,
                        "state": state.value, "decision": decision.value, "previous": entry.state.value},
            )
        )
        if decision is Decision.ESCALATE:
            self.store.append_event(
                Event(
                    event_type=EventType.RUN_ESCALATED,
                    run_id=entry.run_id,
                    at=self.store.db_now(),
                    reason=f"operation {entry.operation_id} is still UNKNOWN after asking {entry.target!r}",
                    detail={"operation_id": entry.operation_id, "idempotency_key": entry.idempotency_key},
                )
            )
            self.store.set_run_status(
                entry.run_id, "escalated", {"escalated_operation": entry.operation_id}
            )

    def _decide(self, entry: OperationEntry, state: OperationState) -> Decision:
        if state is OperationState.COMMITTED:
            return Decision.CONTINUE
        if state is OperationState.NOT_COMMITTED:
            return Decision.RETRY if self.policy.permits_retry(entry.kind) else Decision.ABANDON
        return Decision.ESCALATE

    def _result(self, entry: OperationEntry, state: OperationState, *, asked: bool) -> ReconcileResult:
        return ReconcileResult(
            operation_id=entry.operation_id,
            run_id=entry.run_id,
            idempotency_key=entry.idempotency_key,
            state=state,
            decision=self._decide(entry, state),
            asked_target=asked,
        )
