"""The mutation gateway: the only path from a worker to a consequential side effect.

Each request passes three checks, in this order, before anything is sent:

1. epoch - the caller's epoch must be the run's current epoch. A stale caller
   is refused with `StaleEpochError` and a STALE_WORKER_REJECTED event;
2. capability - a signed capability scoped to this run, epoch, operation,
   artifact hash and authority level, unexpired by the database clock;
3. idempotency key - the store claims the key atomically with the epoch
   check: same key and payload returns the recorded outcome without a second
   side effect, a different payload is refused, an unfinished key is refused.

Then the operation is recorded PREPARED, sent to the target with the fencing
token (run, epoch), and recorded COMMITTED, NOT_COMMITTED or UNKNOWN. A
timeout or transport error is UNKNOWN, never success: the caller gets
`OutcomeUnknownError` and `baton.reconcile` asks the target later.

A mutation is two store transactions (each one statement on PostgreSQL). The
first, `claim_operation`, locks the run's lease row, reads its epoch and the
database clock, and records the operation PREPARED only if the epoch is
current, the capability is unexpired at that clock and the key is new; the
gateway then judges its answer in the order above. So the caller sees the same
errors as from three checks made one by one, the epoch checked is the epoch at
the moment of the claim, and nothing is written for a refused request. The
parts of the capability check that need neither epoch nor clock (signature,
scope, level, ceiling; a verified token's claims are cached) run before the
claim; a capability refused there takes the step-by-step way (epoch read,
clock read, capability), so a stale caller is still refused for its epoch
first. The second transaction records the outcome.

Every call is written to a Jepsen-style history (`baton.history`).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from pydantic import Field, JsonValue

from baton.ablation import Ablation, is_ablated
from baton.authority import AuthorityService, CapabilityClaims, CapabilityVerifier
from baton.errors import (
    CapabilityError,
    FencedTokenError,
    IdempotencyConflictError,
    OperationInFlightError,
    OperationNotCommittedError,
    OperationUnknownError,
    OutcomeUnknownError,
    PayloadMismatchError,
    RetryRefusedError,
    StaleEpochError,
    StoreError,
    TargetRejectedError,
)
from baton.fencing import FencingToken
from baton.history import HistorySink, Recorder
from baton.identity import ref_of
from baton.models.authority import AuthorityLevel
from baton.models.base import Record, Ref
from baton.models.events import Event, EventType
from baton.models.operation import OperationEntry, OperationState
from baton.store.base import SqlStore
from baton.store.records import IdempotencyRecord


@runtime_checkable
class MutationTarget(Protocol):
    """A system that applies consequential requests and can say what became of one."""

    name: str

    def apply(
        self, operation_id: str, idempotency_key: str, fencing_token: FencingToken, payload: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        """Apply once per idempotency key; refuse a fencing token below the highest seen.

        Return a receipt when applied (or already applied with this key);
        raise `TargetRejectedError` when certainly not applied; anything else
        (timeouts, transport errors) leaves the outcome unknown.
        """
        ...

    def lookup(self, operation_id: str) -> OperationState:
        """COMMITTED, NOT_COMMITTED or UNKNOWN: the target's authoritative answer for one operation."""
        ...


class MutationRequest(Record):
    """One consequential request from a worker."""

    run_id: str = Field(min_length=1)
    epoch: int = Field(ge=0)
    operation: str = Field(min_length=1, description="the logical operation the capability and approval name")
    idempotency_key: str = Field(min_length=1)
    target: str = Field(min_length=1)
    payload: dict[str, JsonValue]
    artifact_hash: Ref | None = None
    capability: str = Field(min_length=1, repr=False)
    required_level: AuthorityLevel = AuthorityLevel.EXTERNAL_MUTATE
    process: str = Field(default="worker", min_length=1, description="the caller's name in the history")

    @property
    def payload_ref(self) -> str:
        return ref_of(self.payload)


class MutationResult(Record):
    """A committed operation: freshly applied, or the recorded outcome of an earlier identical request."""

    operation_id: str
    idempotency_key: str
    state: OperationState
    outcome: dict[str, JsonValue] | None
    replayed: bool


def _new_operation_id() -> str:
    return "op-" + uuid.uuid4().hex


class MutationGateway:
    """Fences, authorizes, deduplicates and records every consequential request."""

    def __init__(
        self,
        store: SqlStore,
        authority: AuthorityService | CapabilityVerifier,
        targets: Mapping[str, MutationTarget],
        *,
        history: HistorySink | None = None,
        ceiling: AuthorityLevel | None = None,
        new_operation_id: Callable[[], str] = _new_operation_id,
    ) -> None:
        self.store = store
        self.authority = authority
        self.targets = dict(targets)
        self.ceiling = ceiling
        self._history = history
        self._new_id = new_operation_id

    def _ceiling(self) -> AuthorityLevel | None:
        """The placement's ceiling this gateway caps capabilities at (None: no cap; also when ablated in tests)."""
        return None if self.ceiling is None or is_ablated(Ablation.GATEWAY_CEILING) else self.ceiling

    # -- public API ---------------------------------------------------------------------------

    def submit(self, request: MutationRequest) -> MutationResult:
        """Run one request through epoch, capability and idempotency checks, then the target.

        Returns a COMMITTED result (fresh or replayed). Raises StaleEpochError,
        CapabilityError, PayloadMismatchError, OperationInFlightError,
        OperationUnknownError, OperationNotCommittedError, FencedTokenError or
        OutcomeUnknownError; none of them means success.
        """
        return self._handle(request, rearm=False)

    def resubmit(self, request: MutationRequest) -> MutationResult:
        """Retry a key whose last attempt is NOT_COMMITTED, as a new operation (used by reconciliation)."""
        return self._handle(request, rearm=True)

    # -- the protocol -------------------------------------------------------------------------

    def _handle(self, request: MutationRequest, *, rearm: bool) -> MutationResult:
        target = self.targets.get(request.target)
        if target is None:
            raise ValueError(f"unknown target {request.target!r}; registered: {sorted(self.targets)}")
        operation_id = self._new_id()
        payload_ref = request.payload_ref
        history: Recorder | _Silent = Recorder(self._history, request.process) if self._history is not None else _SILENT
        common: dict[str, Any] = {"epoch": request.epoch, "key": request.idempotency_key}
        history.invoke(
            "mutate", request.run_id, operation_id=operation_id, **common,
            value={"operation": request.operation, "payload_ref": payload_ref, "rearm": rearm},
        )
        try:
            result = self._checked_apply(request, target, operation_id, payload_ref, rearm)
        except (StaleEpochError, CapabilityError, IdempotencyConflictError, RetryRefusedError) as exc:
            history.fail("mutate", request.run_id, operation_id=getattr(exc, "operation_id", "") or operation_id,
                         **common, value={"error": _error_name(exc), "message": str(exc)})
            raise
        except OperationNotCommittedError as exc:
            history.fail("mutate", request.run_id, operation_id=exc.operation_id or operation_id, **common,
                         value={"error": "not_committed", "state": "NOT_COMMITTED", "reason": exc.reason})
            raise
        except OutcomeUnknownError as exc:
            history.info("mutate", request.run_id, operation_id=exc.operation_id or operation_id, **common,
                         value={"state": "UNKNOWN", "message": str(exc)})
            raise
        except BaseException as exc:
            history.info("mutate", request.run_id, operation_id=operation_id, **common,
                         value={"error": type(exc).__name__, "message": str(exc)})
            raise
        history.ok("mutate", request.run_id, operation_id=result.operation_id, **common,
                   value={"state": result.state.value, "replayed": result.replayed})
        return result

    def _checked_apply(
        self, request: MutationRequest, target: MutationTarget, operation_id: str, payload_ref: str, rearm: bool
    ) -> MutationResult:
        claims = self._timeless_claims(request)
        if claims is not None and not rearm:
            entry = self._entry(request, operation_id, payload_ref, claims, _STAMPED_BY_STORE)
            claimed = self._claim_key(request, entry, claims)
            if isinstance(claimed, MutationResult):
                return claimed
            return self._send(request, target, claimed)
        # Step by step, each check its own store read: a retry through reconciliation, or a
        # capability that will be refused (but only after the epoch check, in its turn).
        self._check_epoch(request, self.store.current_epoch(request.run_id))
        now = self.store.db_now()
        claims = self._check_capability(request, claims, now)
        entry = self._entry(request, operation_id, payload_ref, claims, now)
        if rearm:
            return self._send(request, target, self._rearm(request, entry))
        claimed = self._claim_key(request, entry, claims)
        return claimed if isinstance(claimed, MutationResult) else self._send(request, target, claimed)

    def _timeless_claims(self, request: MutationRequest) -> CapabilityClaims | None:
        """The capability's claims if everything but its expiry fits this request; None if it will be refused."""
        try:
            claims = self.authority.decode(request.capability)
            return self.authority.check_scope(
                claims,
                run_id=request.run_id,
                epoch=request.epoch,
                operation=request.operation,
                artifact_hash=request.artifact_hash,
                required_level=request.required_level,
                ceiling=self._ceiling(),
                idempotency_key=request.idempotency_key,
            )
        except CapabilityError:
            return None

    def _claim_key(
        self, request: MutationRequest, entry: OperationEntry, claims: CapabilityClaims
    ) -> OperationEntry | MutationResult:
        """Epoch, capability expiry and idempotency key, judged together in one store transaction.

        The store locks the run's lease row, reads the epoch and the database
        clock, and records the entry PREPARED only if the epoch is current, the
        capability is unexpired at that clock and the key is new. Its answer is
        then judged in the gateway's order. Returns the recorded entry, or the
        recorded outcome of an earlier identical request; raises otherwise.
        """
        claim = self.store.claim_operation(entry, valid_until=claims.expires_at)
        self._check_epoch(request, claim.epoch, at=claim.now)
        self._check_capability(request, claims, claim.now)
        if claim.kind == "new":
            return claim.entry
        if claim.kind == "refused" or claim.record is None:
            raise StoreError(f"run {request.run_id!r}: the store refused a claim that passed the gateway's checks")
        return self._taken(request, entry.payload_ref, claim.kind, claim.record)

    @staticmethod
    def _entry(
        request: MutationRequest, operation_id: str, payload_ref: str, claims: CapabilityClaims, now: dt.datetime
    ) -> OperationEntry:
        # Every field comes from the validated request, the verified claims or the database clock.
        return OperationEntry.model_construct(
            operation_id=operation_id,
            run_id=request.run_id,
            idempotency_key=request.idempotency_key,
            epoch=request.epoch,
            kind=request.operation,
            target=request.target,
            payload_ref=payload_ref,
            artifact_hash=request.artifact_hash,
            capability_id=claims.capability_id,
            state=OperationState.PREPARED,
            recorded_at=now,
            detail="",
        )

    def _check_epoch(self, request: MutationRequest, current: int, *, at: dt.datetime | None = None) -> None:
        """Refuse a request whose epoch is not the run's current one; a stale caller's refusal is an event."""
        if request.epoch == current or is_ablated(Ablation.GATEWAY_EPOCH):
            return
        if request.epoch < current:
            self._record_stale(request, current, where="gateway", at=at)
            raise StaleEpochError(
                f"run {request.run_id!r}: {request.process} acted with epoch {request.epoch}, but the run is now at "
                f"epoch {current}; this worker was fenced and may not cause side effects (key "
                f"{request.idempotency_key!r} refused)"
            )
        raise StaleEpochError(
            f"run {request.run_id!r}: epoch {request.epoch} has not been issued (current epoch is {current}); refused"
        )

    def _record_stale(
        self, request: MutationRequest, current: int, *, where: str, at: dt.datetime | None = None
    ) -> None:
        self.store.append_event(
            Event(
                event_type=EventType.STALE_WORKER_REJECTED,
                run_id=request.run_id,
                at=at if at is not None else self.store.db_now(),
                source_epoch=request.epoch,
                target_epoch=current,
                reason=f"mutation with a stale epoch refused at the {where}",
                detail={"process": request.process, "idempotency_key": request.idempotency_key,
                        "operation": request.operation, "target": request.target},
            )
        )

    def _check_capability(
        self, request: MutationRequest, claims: CapabilityClaims | None, now: dt.datetime
    ) -> CapabilityClaims:
        if claims is None:
            claims = self.authority.decode(request.capability)  # raises if that is why it was refused
        return self.authority.check(
            claims,
            run_id=request.run_id,
            epoch=request.epoch,
            operation=request.operation,
            artifact_hash=request.artifact_hash,
            required_level=request.required_level,
            ceiling=self._ceiling(),
            now=now,
            idempotency_key=request.idempotency_key,
        )

    def _taken(
        self, request: MutationRequest, payload_ref: str, kind: str, record: IdempotencyRecord
    ) -> MutationResult:
        """The key was claimed before: the recorded outcome on a replay; raise on a conflict."""
        key = f"key {request.idempotency_key!r} of run {request.run_id!r}"
        ids = {"run_id": request.run_id, "idempotency_key": request.idempotency_key,
               "operation_id": record.operation_id}
        if kind == "payload_mismatch":
            raise PayloadMismatchError(
                f"{key} was already used by operation {record.operation_id} with payload {record.payload_ref}; "
                f"this request carries a different payload {payload_ref}. Use a new idempotency key for a "
                "different operation.",
                **ids,
            )
        if kind == "in_flight":
            if record.state is OperationState.UNKNOWN:
                raise OperationUnknownError(
                    f"{key}: operation {record.operation_id} has an UNKNOWN outcome; it must be reconciled against "
                    "the target before any retry",
                    **ids,
                )
            raise OperationInFlightError(
                f"{key} is in flight as operation {record.operation_id} (state {record.state.value}); "
                "a concurrent request with the same key is refused until its outcome is recorded",
                **ids,
            )
        return self._replayed(request, record)

    @staticmethod
    def _replayed(request: MutationRequest, record: IdempotencyRecord) -> MutationResult:
        if record.state is OperationState.COMMITTED:
            return MutationResult(
                operation_id=record.operation_id,
                idempotency_key=record.idempotency_key,
                state=OperationState.COMMITTED,
                outcome=record.outcome,
                replayed=True,
            )
        raise OperationNotCommittedError(
            f"key {request.idempotency_key!r} of run {request.run_id!r}: operation {record.operation_id} was not "
            "committed by the target; a retry goes through reconciliation, where policy decides",
            operation_id=record.operation_id,
            reason="recorded_not_committed",
        )

    def _rearm(self, request: MutationRequest, entry: OperationEntry) -> OperationEntry:
        try:
            self.store.rearm_operation(entry.run_id, entry.idempotency_key, entry)
        except StaleEpochError:  # the epoch moved between the check and the re-arm
            self._record_stale(request, self.store.current_epoch(request.run_id), where="gateway")
            raise
        except StoreError as exc:
            raise RetryRefusedError(f"cannot retry key {entry.idempotency_key!r}: {exc}") from exc
        return entry

    def _send(self, request: MutationRequest, target: MutationTarget, entry: OperationEntry) -> MutationResult:
        token = FencingToken(request.run_id, request.epoch, request.capability)
        try:
            receipt = dict(target.apply(entry.operation_id, entry.idempotency_key, token, request.payload))
        except TargetRejectedError as exc:
            self._finish(entry.operation_id, OperationState.NOT_COMMITTED, {"refused": exc.reason}, str(exc))
            if exc.fenced:
                self._record_stale(request, self.store.current_epoch(request.run_id), where=f"target {target.name}")
                raise FencedTokenError(
                    f"target {target.name!r} refused operation {entry.operation_id}: {exc}", run_id=request.run_id,
                    epoch=request.epoch,
                ) from exc
            raise OperationNotCommittedError(
                f"target {target.name!r} refused operation {entry.operation_id}: {exc}",
                operation_id=entry.operation_id,
                reason=exc.reason,
            ) from exc
        except Exception as exc:  # noqa: BLE001 - every other failure leaves the outcome unknown
            self._finish(entry.operation_id, OperationState.UNKNOWN, None, f"{type(exc).__name__}: {exc}")
            raise OutcomeUnknownError(
                f"operation {entry.operation_id} (key {entry.idempotency_key!r}) was sent to {target.name!r} but "
                f"not confirmed ({type(exc).__name__}: {exc}); recorded UNKNOWN, reconcile before any retry",
                operation_id=entry.operation_id,
            ) from exc
        outcome: dict[str, Any] = {"target": target.name, "receipt": receipt}
        state = self._finish(entry.operation_id, OperationState.COMMITTED, outcome, "applied by target")
        if state is not OperationState.COMMITTED:
            raise OutcomeUnknownError(
                f"operation {entry.operation_id}: the target confirmed it, but the ledger holds {state.value}",
                operation_id=entry.operation_id,
            )
        return MutationResult(
            operation_id=entry.operation_id,
            idempotency_key=entry.idempotency_key,
            state=OperationState.COMMITTED,
            outcome=outcome,
            replayed=False,
        )

    def _finish(self, operation_id: str, state: OperationState, outcome: dict[str, Any] | None, detail: str) -> OperationState:
        """Record the outcome; if reconciliation already decided it, return what the ledger holds."""
        try:
            self.store.finish_operation(operation_id, state, outcome, detail)
            return state
        except StoreError:
            return self.store.get_operation(operation_id).state


_STAMPED_BY_STORE = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
"""recorded_at of an entry the store records at its own clock, read when it claims the key."""


class _Silent:
    """Stands in for a history Recorder when the gateway keeps no history."""

    def invoke(self, f: str, run_id: str, **fields: Any) -> None:
        del f, run_id, fields

    ok = fail = info = invoke


_SILENT = _Silent()


def _error_name(exc: BaseException) -> str:
    names: dict[type[BaseException], str] = {
        FencedTokenError: "fenced_at_target",
        StaleEpochError: "stale_epoch",
        CapabilityError: "capability",
        PayloadMismatchError: "payload_mismatch",
        OperationUnknownError: "unknown_unreconciled",
        OperationInFlightError: "in_flight",
        RetryRefusedError: "retry_refused",
    }
    for kind, name in names.items():
        if isinstance(exc, kind):
            return name
    return type(exc).__name__
