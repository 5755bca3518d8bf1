"""store-claim-expiry: the store's claim refuses a capability that expired before it, on both backends.

The claim locks the run's lease row, reads the database clock and records the
operation only while that clock is before the capability's `valid_until`.
With the switch on it stops judging the time (the epoch and the key are still
judged). The oracles are the store's own rows read by plain SQL and, through
the gateway, the deploy service's `deployments.jsonl`.
"""

from __future__ import annotations

import datetime as dt
from contextlib import nullcontext
from pathlib import Path

import pytest

from baton.ablation import Ablation, ablation_env
from baton.authority import AuthorityService
from baton.errors import CapabilityError, StoreError
from baton.models import AuthorityLevel
from baton.store.base import SqlStore
from baton.targets.capability_guard import TargetPolicy

from builders.rows import entry

from . import rig

ON_OFF = pytest.mark.parametrize("ablated", [False, True], ids=["check-on", "check-off"])
GUARD = TargetPolicy(operation=rig.OPERATION, level=AuthorityLevel.EXTERNAL_MUTATE, artifact_field="artifact_hash")


def _switched(*names: str) -> object:
    return ablation_env(*names) if names else nullcontext()


@ON_OFF
def test_a_claim_past_valid_until_is_refused_unless_switched_off(store: SqlStore, ablated: bool) -> None:
    lease = rig.start_run(store)
    past = store.db_now() - dt.timedelta(seconds=1)
    claimed = entry(lease.run_id, "deploy-expired", lease.epoch)
    with _switched(*([Ablation.STORE_CLAIM_EXPIRY.value] if ablated else [])):
        claim = store.claim_operation(claimed, valid_until=past)
    assert claim.kind == ("new" if ablated else "refused")
    assert rig.operation_rows(store, lease.run_id, "deploy-expired") == ([(lease.epoch, "PREPARED")] if ablated else [])


def test_the_switch_leaves_the_epoch_check_standing(store: SqlStore) -> None:
    lease = rig.start_run(store)
    stale = entry(lease.run_id, "deploy-stale", lease.epoch - 1)
    with ablation_env(Ablation.STORE_CLAIM_EXPIRY.value):
        claim = store.claim_operation(stale, valid_until=store.db_now() + dt.timedelta(minutes=1))
    assert claim.kind == "refused"
    assert rig.operation_rows(store, lease.run_id, "deploy-stale") == []


def _expired_capability(authority: AuthorityService, store: SqlStore, key: str) -> tuple[object, object]:
    lease = rig.start_run(store)
    cap = authority.issue(
        run_id=lease.run_id, epoch=lease.epoch, operation=rig.OPERATION, artifact_hash=rig.ARTIFACT,
        level=AuthorityLevel.EXTERNAL_MUTATE, lease=lease, placement=rig.placement(),
        context=rig.approved(store), now=store.db_now(), idempotency_key=key, ttl_s=0.2,
    )
    deadline = store.db_now() + dt.timedelta(seconds=30)
    while store.db_now() <= cap.claims.expires_at:  # poll the database clock past the expiry
        assert store.db_now() < deadline
    return lease, cap


@ON_OFF
def test_with_the_capability_check_off_the_claim_alone_stops_an_expired_capability(
    store: SqlStore, authority: AuthorityService, tmp_path: Path, ablated: bool
) -> None:
    """capability-check off (gateway and target); the claim's expiry check is all that is left."""
    names = [Ablation.CAPABILITY_CHECK.value] + ([Ablation.STORE_CLAIM_EXPIRY.value] if ablated else [])
    data = tmp_path / "deploy"
    trust = tmp_path / "authority" / "jwks.json"
    key = "deploy-expired-in-hand"
    with rig.deploy_service(data, *names, guard=GUARD.arguments(trust)) as client:
        lease, cap = _expired_capability(authority, store, key)
        stale = rig.request(lease, cap, key, rig.deployment())  # type: ignore[arg-type]
        with ablation_env(*names):
            gateway = rig.Rig(store, authority, client).gateway
            if ablated:
                gateway.submit(stale)
            else:
                with pytest.raises(StoreError, match="refused"):
                    gateway.submit(stale)
    assert [line["idempotency_key"] for line in rig.effects(data)] == ([key] if ablated else [])


def test_with_the_claim_check_off_the_gateway_still_refuses_an_expired_capability(
    store: SqlStore, authority: AuthorityService, tmp_path: Path
) -> None:
    data = tmp_path / "deploy"
    trust = tmp_path / "authority" / "jwks.json"
    key = "deploy-expired-gateway"
    with rig.deploy_service(data, Ablation.STORE_CLAIM_EXPIRY.value, guard=GUARD.arguments(trust)) as client:
        lease, cap = _expired_capability(authority, store, key)
        stale = rig.request(lease, cap, key, rig.deployment())  # type: ignore[arg-type]
        with ablation_env(Ablation.STORE_CLAIM_EXPIRY.value):
            with pytest.raises(CapabilityError, match="expired"):
                rig.Rig(store, authority, client).gateway.submit(stale)
    assert rig.effects(data) == []
