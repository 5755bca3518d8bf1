"""Signed approvals: an approver's Ed25519 signature over the approval's canonical form.

The approver's keys are separate from the authority's capability keys: an
approval says a person (or policy) allowed one operation on one exact artifact
at one level until a time; a capability is what the authority derives from it.
Anything holding the approvers' public keys (`TrustedKeys`) can check one:

- `unsigned`: no signature at all;
- `untrusted_approver`: signed by a key nobody trusts (or retired);
- `forged`: the signature does not cover these bytes (forged, or altered after signing);
- `retargeted`: a genuine approval used for another operation or artifact than it names;
- `expired`: past its `expires_at` at the time it is judged.
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Collection

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from baton.authority_keys import TrustedKeys, kid_of
from baton.errors import ApprovalError, CapabilityError
from baton.identity import canonical_json
from baton.models.authority import Approval

SIGNED_PREFIX = b"baton-approval-v1\n"  # domain separation: these bytes can never be a capability or a record


def signed_bytes(approval: Approval) -> bytes:
    """What the approver signs: the approval's canonical form without its signature."""
    return SIGNED_PREFIX + canonical_json(approval.model_copy(update={"signature": None, "approver_kid": None}))


def sign_approval(approval: Approval, key: Ed25519PrivateKey) -> Approval:
    """`approval` signed by the approver's `key` (its kid recorded beside the signature)."""
    unsigned = approval.model_copy(update={"signature": None, "approver_kid": None})
    signature = base64.urlsafe_b64encode(key.sign(signed_bytes(unsigned))).rstrip(b"=").decode("ascii")
    return unsigned.model_copy(update={"signature": signature, "approver_kid": kid_of(key.public_key())})


def verify_approval(
    approval: Approval,
    approvers: TrustedKeys,
    *,
    now: dt.datetime | None = None,
    operation: str | None = None,
    artifacts: Collection[str] | None = None,
) -> Approval:
    """`approval` if its signature verifies under a trusted approver key and it fits; else ApprovalError(reason).

    `operation` and `artifacts` (when given) are what it is being used for;
    `now` (when given) judges expiry.
    """
    where = f"approval {approval.approval_id} by {approval.approved_by!r}"
    if not approval.signature or not approval.approver_kid:
        raise ApprovalError(f"{where} carries no signature", reason="unsigned")
    try:
        key = approvers.key_for(approval.approver_kid, now=now)
    except CapabilityError as exc:
        raise ApprovalError(f"{where} is signed by approver key {approval.approver_kid!r}, which is not trusted",
                            reason="untrusted_approver") from exc
    try:
        signature = base64.urlsafe_b64decode(approval.signature + "=" * (-len(approval.signature) % 4))
        key.verify(signature, signed_bytes(approval))
    except (InvalidSignature, ValueError) as exc:
        raise ApprovalError(f"{where}: the signature does not match its content (forged or altered)",
                            reason="forged") from exc
    if operation is not None and approval.operation != operation:
        raise ApprovalError(f"{where} approves {approval.operation!r}, not {operation!r}", reason="retargeted")
    if artifacts is not None and approval.artifact_hash not in artifacts:
        raise ApprovalError(f"{where} is bound to artifact {approval.artifact_hash}, which is not this run's",
                            reason="retargeted")
    if now is not None and now >= approval.expires_at:
        raise ApprovalError(f"{where} expired at {approval.expires_at.isoformat()}", reason="expired")
    return approval
