"""Approval policy: which operations may be approved, at what level, on what evidence.

An approval is granted for one operation on one exact artifact hash, only when
the run presents passing verifier evidence bound to that very hash, and only up
to the level the policy allows for the operation. It expires; nothing about it
is a credential. The authority process runs this policy in its approver role
and signs with the approver's key (`baton.authority_http.SigningApprover`).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from baton.models import Approval, AuthorityLevel, VerifierEvidence


@dataclass(frozen=True)
class ApprovalRequest:
    """What a run asks to be allowed to do, and the evidence it offers."""

    run_id: str
    operation: str
    artifact_hash: str
    level: AuthorityLevel
    evidence: Sequence[VerifierEvidence]
    now: dt.datetime


class Approver(Protocol):
    """Anything that can answer an approval request (a policy, a human queue)."""

    def approve(self, request: ApprovalRequest) -> Approval | None:
        """An approval bound to the request's artifact hash, or None when refused."""
        ...


@dataclass(frozen=True)
class PolicyApprover:
    """Approves verified artifacts for the operations the policy lists, up to a level each."""

    allowed: Mapping[str, AuthorityLevel] = field(
        default_factory=lambda: {"deploy": AuthorityLevel.EXTERNAL_MUTATE, "publish": AuthorityLevel.SANDBOX_MUTATE,
                                 "submit": AuthorityLevel.SANDBOX_MUTATE,
                                 "push": AuthorityLevel.EXTERNAL_MUTATE}
    )
    ttl_s: float = 900.0
    name: str = "policy:verified-artifacts"

    def approve(self, request: ApprovalRequest) -> Approval | None:
        ceiling = self.allowed.get(request.operation)
        if ceiling is None or not ceiling.allows(request.level):
            return None
        if not any(e.passed and e.applies_to(request.artifact_hash) for e in request.evidence):
            return None
        return Approval(
            approval_id=f"appr-{uuid.uuid4().hex[:12]}",
            operation=request.operation,
            artifact_hash=request.artifact_hash,
            level=request.level,
            approved_by=self.name,
            expires_at=request.now + dt.timedelta(seconds=self.ttl_s),
        )
