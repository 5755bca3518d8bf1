"""Cancellation: "told to stop" and "actually stopped" are tracked apart.

When ownership moves, the old owner is cancelled logically at once (its epoch
is fenced, so the gateway and fenced targets refuse it). Whether its process,
model call or tool execution has physically stopped is a separate fact,
unconfirmed until someone observes it. Meanwhile the operations it had
started and not settled (PREPARED or UNKNOWN) are listed so the new owner
reconciles them instead of assuming they never happened.

Both facts are recorded as events: SOURCE_FENCED for the logical cancellation,
SOURCE_QUIESCED when a physical stop is confirmed.
"""

from __future__ import annotations

import datetime as dt
from enum import StrEnum

from pydantic import Field

from baton.models.base import Record
from baton.models.events import Event, EventType
from baton.models.operation import OperationState
from baton.store.base import SqlStore


class PhysicalStatus(StrEnum):
    """What is known about the old owner's processes."""

    UNCONFIRMED = "unconfirmed"  # cancel requested; it may still be running
    STOPPED = "stopped"  # a stop was observed (exit status, process gone, tool acknowledged)


class OutstandingOperation(Record):
    """An operation of an earlier owner whose outcome is not settled."""

    operation_id: str
    idempotency_key: str
    epoch: int
    state: OperationState
    target: str
    kind: str


class CancellationRecord(Record):
    """The cancellation of one owner at one epoch."""

    run_id: str = Field(min_length=1)
    owner: str = Field(min_length=1)
    epoch: int = Field(ge=0)
    logical_cancelled_at: dt.datetime
    physical: PhysicalStatus = PhysicalStatus.UNCONFIRMED
    physical_evidence: str | None = None
    outstanding: tuple[OutstandingOperation, ...] = ()

    @property
    def may_assume_stopped(self) -> bool:
        """True only when a physical stop was observed and nothing of the old owner is unsettled."""
        return self.physical is PhysicalStatus.STOPPED and not self.outstanding


def outstanding_operations(store: SqlStore, run_id: str, *, up_to_epoch: int | None = None) -> tuple[OutstandingOperation, ...]:
    """PREPARED or UNKNOWN operations of the run, optionally only those at or below `up_to_epoch`."""
    entries = store.list_operations(run_id, states=[OperationState.PREPARED, OperationState.UNKNOWN])
    return tuple(
        OutstandingOperation(
            operation_id=entry.operation_id,
            idempotency_key=entry.idempotency_key,
            epoch=entry.epoch,
            state=entry.state,
            target=entry.target,
            kind=entry.kind,
        )
        for entry in entries
        if up_to_epoch is None or entry.epoch <= up_to_epoch
    )


class CancellationTracker:
    """Records logical cancellation, physical stop and the old owner's unsettled operations."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store

    def cancel_logically(self, run_id: str, owner: str, epoch: int, *, reason: str = "ownership moved") -> CancellationRecord:
        """Mark `owner` at `epoch` cancelled; its physical stop stays unconfirmed."""
        record = CancellationRecord(
            run_id=run_id,
            owner=owner,
            epoch=epoch,
            logical_cancelled_at=self.store.db_now(),
            outstanding=outstanding_operations(self.store, run_id, up_to_epoch=epoch),
        )
        self._emit(EventType.SOURCE_FENCED, record, reason)
        return record

    def confirm_physical_stop(self, record: CancellationRecord, evidence: str) -> CancellationRecord:
        """Record that the old owner was observed stopped (say how), and list what is still unsettled."""
        stopped = record.model_copy(
            update={
                "physical": PhysicalStatus.STOPPED,
                "physical_evidence": evidence,
                "outstanding": outstanding_operations(self.store, record.run_id, up_to_epoch=record.epoch),
            }
        )
        self._emit(EventType.SOURCE_QUIESCED, stopped, evidence)
        return stopped

    def refresh(self, record: CancellationRecord) -> CancellationRecord:
        """The same record with the unsettled operations listed again (after reconciliation)."""
        return record.model_copy(
            update={"outstanding": outstanding_operations(self.store, record.run_id, up_to_epoch=record.epoch)}
        )

    def _emit(self, event_type: EventType, record: CancellationRecord, reason: str) -> None:
        self.store.append_event(
            Event(
                event_type=event_type,
                run_id=record.run_id,
                at=self.store.db_now(),
                source_epoch=record.epoch,
                reason=reason,
                detail={
                    "cancellation": "logical" if event_type is EventType.SOURCE_FENCED else "physical",
                    "owner": record.owner,
                    "physical": record.physical.value,
                    "outstanding_operations": [op.operation_id for op in record.outstanding],
                },
            )
        )
