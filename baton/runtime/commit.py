"""Sending one consequential operation: gateway first, reconciliation whenever the outcome is open.

The rules (sec. 12 of the spec, invariant 4):

* a fresh key goes through `MutationGateway.submit`;
* a key the target confirmed NOT_COMMITTED is retried only through the
  reconciler (`Reconciler.retry`, which re-arms the key under the current
  epoch), and only while the retry budget lasts;
* a timeout (UNKNOWN) or a key left UNKNOWN or PREPARED is reconciled against the target
  before anything else: COMMITTED ends the call as committed, NOT_COMMITTED
  allows one more attempt, still UNKNOWN escalates the run;
* a stale epoch, at the gateway or at the target, means this worker has been
  fenced: it stops.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from baton.errors import (
    OperationInFlightError,
    OperationUnknownError,
    OutcomeUnknownError,
    RetryRefusedError,
    StaleEpochError,
)
from baton.gateway import MutationGateway, MutationRequest, MutationResult
from baton.models import OperationState
from baton.reconcile import Decision, Reconciler
from baton.runtime.errors import RunEscalated, RunFenced
from baton.store.base import SqlStore


@dataclass(frozen=True)
class CommitAttempts:
    """How a commit went: the result and how many retries and reconciliations it took."""

    result: MutationResult
    retries: int
    reconciliations: int


def _committed(store: SqlStore, request: MutationRequest, operation_id: str) -> MutationResult:
    record = store.get_idempotency(request.run_id, request.idempotency_key)
    return MutationResult(
        operation_id=operation_id,
        idempotency_key=request.idempotency_key,
        state=OperationState.COMMITTED,
        outcome=None if record is None else record.outcome,
        replayed=False,
    )


def commit_operation(
    store: SqlStore,
    gateway: MutationGateway,
    reconciler: Reconciler,
    request_for: Callable[[], MutationRequest],
    *,
    max_retries: int,
) -> CommitAttempts:
    """Commit the operation `request_for()` describes (a fresh capability per attempt)."""
    retries = reconciliations = 0
    while True:
        request = request_for()
        record = store.get_idempotency(request.run_id, request.idempotency_key)
        try:
            if record is not None and record.state is OperationState.NOT_COMMITTED:
                if retries >= max_retries:
                    raise RunEscalated(
                        f"run {request.run_id!r}: key {request.idempotency_key!r} was not committed and the retry "
                        f"budget ({max_retries}) is spent"
                    )
                retries += 1
                result = reconciler.retry(gateway, request)
            else:
                result = gateway.submit(request)
            return CommitAttempts(result=result, retries=retries, reconciliations=reconciliations)
        except StaleEpochError as exc:  # includes FencedTokenError from the target
            raise RunFenced(f"run {request.run_id!r}: fenced while committing: {exc}") from exc
        except RetryRefusedError as exc:
            raise RunEscalated(f"run {request.run_id!r}: retry refused: {exc}") from exc
        except (OutcomeUnknownError, OperationUnknownError, OperationInFlightError) as exc:
            reconciliations += 1
            outcome = _reconcile(store, reconciler, request, exc)
            if outcome is not None:
                return CommitAttempts(result=outcome, retries=retries, reconciliations=reconciliations)


def _reconcile(
    store: SqlStore, reconciler: Reconciler, request: MutationRequest, exc: Exception
) -> MutationResult | None:
    """Settle an open outcome: a committed result, None to try again, or escalation."""
    operation_id = getattr(exc, "operation_id", "") or ""
    if not operation_id:
        record = store.get_idempotency(request.run_id, request.idempotency_key)
        operation_id = record.operation_id if record is not None else ""
    settled = reconciler.reconcile(operation_id)
    if settled.decision is Decision.CONTINUE:
        return _committed(store, request, operation_id)
    if settled.decision is Decision.ESCALATE:
        raise RunEscalated(
            f"run {request.run_id!r}: operation {operation_id} is still UNKNOWN after asking the target"
        ) from exc
    if settled.decision is Decision.ABANDON:
        raise RunEscalated(f"run {request.run_id!r}: operation {operation_id} was not committed and may not be retried")
    return None
