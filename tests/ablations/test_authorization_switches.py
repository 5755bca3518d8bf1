"""capability-check and approval-check: with each switched off, an unauthorized deployment lands.

The oracle is the deploy service's `deployments.jsonl`: which artifact it
really deployed. The deploy service checks capabilities itself (started with
the authority's public keys), so `capability-check` is shown both through the
gateway and straight at the target, around the gateway.
"""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

import pytest

from baton.ablation import Ablation, ablation_env
from baton.authority import AuthorityService
from baton.errors import AuthorityDeniedError, CapabilityError, TargetRejectedError
from baton.fencing import FencingToken
from baton.models import AuthorityContext, AuthorityLevel
from baton.store.base import SqlStore
from baton.targets.capability_guard import TargetPolicy

from . import rig

KEY = "deploy-svc-a"
GUARD = TargetPolicy(operation=rig.OPERATION, level=AuthorityLevel.EXTERNAL_MUTATE, artifact_field="artifact_hash")
ON_OFF = pytest.mark.parametrize("ablated", [False, True], ids=["check-on", "check-off"])


def deployed_artifacts(data: Path) -> list[str]:
    return [line["artifact_hash"] for line in rig.effects(data)]


@ON_OFF
def test_capability_for_another_artifact_deploys_only_when_the_check_is_off(
    store: SqlStore, authority: AuthorityService, tmp_path: Path, ablated: bool
) -> None:
    """A capability for the verified build, presented for an unverified one."""
    names = [Ablation.CAPABILITY_CHECK.value] if ablated else []
    data = tmp_path / "deploy"
    trust = tmp_path / "authority" / "jwks.json"
    with rig.deploy_service(data, *names, guard=GUARD.arguments(trust)) as client:
        lease = rig.start_run(store)
        cap = rig.capability(authority, store, lease, KEY, artifact=rig.ARTIFACT)
        wrong = rig.request(lease, cap, KEY, rig.deployment(rig.OTHER_ARTIFACT, "1.4.1"), artifact=rig.OTHER_ARTIFACT)
        with ablation_env(*names) if names else nullcontext():
            if ablated:
                rig.Rig(store, authority, client).gateway.submit(wrong)
            else:
                with pytest.raises(CapabilityError, match="artifact"):
                    rig.Rig(store, authority, client).gateway.submit(wrong)
    assert deployed_artifacts(data) == ([rig.OTHER_ARTIFACT] if ablated else [])


@ON_OFF
def test_the_targets_own_capability_check_around_the_gateway(
    store: SqlStore, authority: AuthorityService, tmp_path: Path, ablated: bool
) -> None:
    names = [Ablation.CAPABILITY_CHECK.value] if ablated else []
    data = tmp_path / "deploy"
    with rig.deploy_service(data, *names, guard=GUARD.arguments(tmp_path / "authority" / "jwks.json")) as client:
        lease = rig.start_run(store)
        cap = rig.capability(authority, store, lease, KEY, artifact=rig.ARTIFACT)
        token = FencingToken(lease.run_id, lease.epoch, cap.token)
        try:
            client.apply("op-direct", KEY, token, rig.deployment(rig.OTHER_ARTIFACT, "1.4.1"))
            refusal = ""
        except TargetRejectedError as exc:
            refusal = exc.reason
    if ablated:
        assert refusal == "" and deployed_artifacts(data) == [rig.OTHER_ARTIFACT]
    else:
        assert refusal == "capability:wrong_artifact"
        assert deployed_artifacts(data) == [] and rig.answered(data, KEY) == ["capability:wrong_artifact"]


@ON_OFF
def test_a_deployment_without_approval_lands_only_when_the_approval_check_is_off(
    store: SqlStore, authority: AuthorityService, tmp_path: Path, ablated: bool
) -> None:
    names = [Ablation.APPROVAL_CHECK.value] if ablated else []
    unapproved = AuthorityContext(level=AuthorityLevel.EXTERNAL_MUTATE, policy_id="policy-1", approvals=())
    data = tmp_path / "deploy"
    with rig.deploy_service(data, *names) as client:
        lease = rig.start_run(store)
        with ablation_env(*names) if names else nullcontext():
            if not ablated:
                with pytest.raises(AuthorityDeniedError, match="approval"):
                    rig.capability(authority, store, lease, KEY, context=unapproved)
            else:
                cap = rig.capability(authority, store, lease, KEY, context=unapproved)
                rig.Rig(store, authority, client).gateway.submit(rig.request(lease, cap, KEY, rig.deployment()))
    assert deployed_artifacts(data) == ([rig.ARTIFACT] if ablated else [])
