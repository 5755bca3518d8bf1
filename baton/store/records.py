"""Rows of the SQL store as frozen records: runs, leases, idempotency and operation history."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Literal

from pydantic import Field, JsonValue, field_validator

from baton.models.base import Record, Ref
from baton.models.checkpoint import RunKind
from baton.models.operation import OperationState

ENDED_STATUSES: tuple[str, ...] = ("verified", "failed", "escalated")
"""The statuses that are a run's outcome (terminal)."""
RUN_STATUSES: frozenset[str] = frozenset({"active", *ENDED_STATUSES})
"""Every status a run can have; all but 'active' are terminal outcomes."""

IMPORTED_BUNDLE_KEY = "imported_bundle_manifest"
"""The `runs.detail` key a bundle import writes (the bundle's manifest ref)."""

BeginKind = Literal["new", "replay", "in_flight", "payload_mismatch"]


def check_run_status(status: str) -> str:
    """Return `status` if it is a known run status; raise ValueError otherwise."""
    if status not in RUN_STATUSES:
        raise ValueError(f"unknown run status {status!r}; expected one of {sorted(RUN_STATUSES)}")
    return status


class RunRecord(Record):
    """One agent run as the store knows it."""

    run_id: str = Field(min_length=1)
    kind: RunKind
    release_id: str
    placement: str | None
    status: str
    created_at: dt.datetime
    updated_at: dt.datetime
    detail: dict[str, JsonValue] = Field(default_factory=dict)

    @field_validator("status")
    @classmethod
    def _known_status(cls, value: str) -> str:
        return check_run_status(value)


class Lease(Record):
    """Ownership of a run: the holder (if any), its fencing epoch and the expiry by database clock."""

    run_id: str = Field(min_length=1)
    owner: str | None
    epoch: int = Field(ge=0)
    expires_at: dt.datetime | None

    def held_at(self, now: dt.datetime) -> bool:
        """True when an owner holds the lease and it has not expired at `now` (a database time)."""
        return self.owner is not None and self.expires_at is not None and now < self.expires_at


def awaits_an_owner(lease: Lease, run_detail: Mapping[str, object], now: dt.datetime) -> bool:
    """True when nobody holds the run's lease at `now` and nothing else will grant it: it has had an owner before
    (epoch above 0), or it came in by a bundle import, which grants none. A launched run at epoch 0 is excluded:
    its launch grants the first reservation right after creating it, in a transaction of its own."""
    if lease.held_at(now):
        return False
    return lease.epoch > 0 or IMPORTED_BUNDLE_KEY in run_detail


class IdempotencyRecord(Record):
    """What the store remembers about one idempotency key of a run."""

    run_id: str = Field(min_length=1)
    idempotency_key: str = Field(min_length=1)
    payload_ref: Ref
    operation_id: str = Field(min_length=1)
    state: OperationState
    outcome: dict[str, JsonValue] | None = None


class BeginOutcome(Record):
    """The answer to begin_operation: a new operation, or why the key is already taken."""

    kind: BeginKind
    record: IdempotencyRecord


class OperationTransition(Record):
    """One step of an operation's state history (append-only)."""

    seq: int = Field(ge=1)
    operation_id: str = Field(min_length=1)
    state: OperationState
    epoch: int = Field(ge=0)
    at: dt.datetime
    detail: str = ""
