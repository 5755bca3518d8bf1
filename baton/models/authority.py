"""Authority: levels, approvals bound to artifacts, and the authority context of a run.

Credentials never appear here: authority is re-issued from policy as short-lived
capabilities, never copied inside a checkpoint.
"""

from __future__ import annotations

import datetime as dt
from enum import StrEnum

from pydantic import Field

from baton.models.base import Record, Ref


class AuthorityLevel(StrEnum):
    """Ordered from least to most consequential."""

    NONE = "NONE"
    OBSERVE = "OBSERVE"
    PLAN = "PLAN"
    VERIFY = "VERIFY"
    SANDBOX_MUTATE = "SANDBOX_MUTATE"
    EXTERNAL_MUTATE = "EXTERNAL_MUTATE"

    @property
    def rank(self) -> int:
        return _ORDER.index(self)

    def allows(self, required: AuthorityLevel) -> bool:
        """True when this level is at least `required`."""
        return self.rank >= required.rank

    @staticmethod
    def lesser(first: AuthorityLevel, second: AuthorityLevel) -> AuthorityLevel:
        return first if first.rank <= second.rank else second


_ORDER = list(AuthorityLevel)


class Approval(Record):
    """A human or policy approval for one operation on one exact artifact, until it expires."""

    approval_id: str = Field(min_length=1)
    operation: str = Field(min_length=1)
    artifact_hash: Ref
    level: AuthorityLevel
    approved_by: str = Field(min_length=1)
    expires_at: dt.datetime
    approver_kid: str | None = None
    signature: str | None = Field(default=None, repr=False)
    """The approver's Ed25519 signature (`baton.approval_signing`); None for an unsigned (legacy) approval."""

    def valid_for(self, operation: str, artifact_hash: str, now: dt.datetime) -> bool:
        return self.operation == operation and self.artifact_hash == artifact_hash and now < self.expires_at


class AuthorityContext(Record):
    """What a run may do and on what grounds; no secrets."""

    level: AuthorityLevel
    policy_id: str = Field(min_length=1)
    approvals: tuple[Approval, ...] = ()
    downgraded_from: AuthorityLevel | None = None
