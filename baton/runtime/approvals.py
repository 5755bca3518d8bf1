"""The worker's side of approvals: it asks the authority process, whose approver key signs.

The policy itself (`PolicyApprover`, `ApprovalRequest`, the `Approver` protocol)
lives in `baton.approval_policy`, beside the authority; it is re-exported here
for agent code.
"""

from __future__ import annotations

from baton.approval_policy import ApprovalRequest, Approver, PolicyApprover
from baton.authority_http import ApprovalAsk, HttpAuthorityClient
from baton.errors import AuthorityDeniedError, CallerUnauthenticatedError
from baton.models import Approval

__all__ = ["ApprovalRequest", "Approver", "AuthorityApprover", "PolicyApprover"]


class AuthorityApprover:
    """The worker's side of the approver role: it asks the authority process, whose approver key signs.

    The worker never holds an approver key; a refusal by policy is None, as from any approver.
    """

    def __init__(self, client: HttpAuthorityClient, owner: str) -> None:
        self.client = client
        self.owner = owner

    def approve(self, request: ApprovalRequest) -> Approval | None:
        ask = ApprovalAsk(run_id=request.run_id, owner=self.owner, operation=request.operation,
                          artifact_hash=request.artifact_hash, level=request.level, evidence=list(request.evidence))
        try:
            return self.client.approve(ask)
        except CallerUnauthenticatedError:
            raise
        except AuthorityDeniedError:
            return None
