"""evidence-binding: verifier evidence for one build must not approve the deployment of another.

The policy approver (the authority's approver role) grants an approval only
on passing evidence bound to the exact artifact hash. Evidence exists for
build A only (by construction); the run asks to deploy build B. The oracle is
the deploy service's `deployments.jsonl`: which artifact it really deployed.
"""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

import pytest

from baton.ablation import Ablation, ablation_env
from baton.approval_policy import ApprovalRequest, PolicyApprover
from baton.authority import AuthorityService
from baton.errors import AuthorityDeniedError
from baton.models import AuthorityContext, AuthorityLevel, VerdictResult, VerifierEvidence
from baton.store.base import SqlStore

from . import rig

KEY = "deploy-svc-a-unverified"


@pytest.mark.parametrize("ablated", [False, True], ids=["binding-on", "evidence-binding-off"])
def test_evidence_for_build_a_approves_build_b_only_without_binding(
    store: SqlStore, authority: AuthorityService, tmp_path: Path, ablated: bool
) -> None:
    names = [Ablation.EVIDENCE_BINDING.value] if ablated else []
    data = tmp_path / "deploy"
    with rig.deploy_service(data) as client, ablation_env(*names) if names else nullcontext():
        lease = rig.start_run(store)
        now = store.db_now()
        verified_a = VerifierEvidence(candidate_hash=rig.ARTIFACT, verifier_version="deploy-check-1",
                                      result=VerdictResult.PASS, verified_at=now)
        approval = PolicyApprover().approve(ApprovalRequest(
            lease.run_id, rig.OPERATION, rig.OTHER_ARTIFACT, AuthorityLevel.EXTERNAL_MUTATE, (verified_a,), now))
        context = AuthorityContext(level=AuthorityLevel.EXTERNAL_MUTATE, policy_id="policy-1",
                                   approvals=() if approval is None else (approval,))
        if ablated:
            cap = rig.capability(authority, store, lease, KEY, artifact=rig.OTHER_ARTIFACT, context=context)
            payload = rig.deployment(rig.OTHER_ARTIFACT, "1.4.1")
            rig.Rig(store, authority, client).gateway.submit(
                rig.request(lease, cap, KEY, payload, artifact=rig.OTHER_ARTIFACT))
        else:
            assert approval is None
            with pytest.raises(AuthorityDeniedError, match="approval"):
                rig.capability(authority, store, lease, KEY, artifact=rig.OTHER_ARTIFACT, context=context)
    deployed = [line["artifact_hash"] for line in rig.effects(data)]
    assert deployed == ([rig.OTHER_ARTIFACT] if ablated else [])
    assert rig.ARTIFACT not in deployed  # the only verified build was never the one deployed
