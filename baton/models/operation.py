"""Operation ledger: side-effect lineage, so a new owner knows what may have happened."""

from __future__ import annotations

import datetime as dt
from enum import StrEnum

from pydantic import Field

from baton.models.base import Record, Ref


class OperationState(StrEnum):
    """PREPARED before sending; then COMMITTED, NOT_COMMITTED or UNKNOWN."""

    PREPARED = "PREPARED"
    COMMITTED = "COMMITTED"
    NOT_COMMITTED = "NOT_COMMITTED"
    UNKNOWN = "UNKNOWN"

    @property
    def is_final(self) -> bool:
        return self in (OperationState.COMMITTED, OperationState.NOT_COMMITTED)


class OperationEntry(Record):
    """One consequential operation requested through the gateway."""

    operation_id: str = Field(min_length=1)
    run_id: str = Field(min_length=1)
    idempotency_key: str = Field(min_length=1)
    epoch: int = Field(ge=0)
    kind: str = Field(min_length=1)
    target: str = Field(min_length=1)
    payload_ref: Ref
    artifact_hash: Ref | None = None
    capability_id: str | None = None
    state: OperationState
    recorded_at: dt.datetime
    detail: str = ""


class OperationLedger(Record):
    """The operations a run has prepared, with their latest known state."""

    entries: tuple[OperationEntry, ...] = ()

    def unresolved(self) -> tuple[OperationEntry, ...]:
        """Operations whose outcome is not final (PREPARED or UNKNOWN)."""
        return tuple(entry for entry in self.entries if not entry.state.is_final)
