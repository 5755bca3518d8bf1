"""The world's approver: the in-process policy approver, writing down each approval it grants in its own record.

Live, the authority process's `SigningApprover` appends every approval it signs to its own `approvals.jsonl` (when it
was granted, for which run, operation and artifact, until when); the live matrix's oracle reads that file against the
deploy service's own record of what it applied (`baton.faults.oracles.expired_approval`). The simulated world
approves in process with the policy approver, which kept no record, so no oracle could say an approval had run out
when a deployment landed. `RecordingApprover` decides exactly as `PolicyApprover` does and writes the same line the
signing approver writes, to `APPROVER_FILE` under the world's root: a file, not the store (no store call, no
interleaving point, no random draw: a seed keeps its schedule).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from baton.approval_policy import ApprovalRequest, PolicyApprover
from baton.models import Approval

APPROVER_FILE = "approver/approvals.jsonl"
"""The approver's own record of the approvals it granted (the live signing approver's `approvals.jsonl` lines)."""


@dataclass(frozen=True)
class RecordingApprover:
    """`PolicyApprover`'s decision, and a line in the approver's own record for each approval granted."""

    record: Path
    policy: PolicyApprover = field(default_factory=PolicyApprover)

    def approve(self, request: ApprovalRequest) -> Approval | None:
        approval = self.policy.approve(request)
        if approval is not None:
            self.record.parent.mkdir(parents=True, exist_ok=True)
            with open(self.record, "a", encoding="utf-8") as out:
                out.write(json.dumps({"at": request.now.isoformat(), "run_id": request.run_id,
                                      "approval_id": approval.approval_id, "operation": approval.operation,
                                      "artifact_hash": approval.artifact_hash, "level": approval.level.value,
                                      "expires_at": approval.expires_at.isoformat()}, sort_keys=True) + "\n")
        return approval
