"""The three epoch fences, one switch each: gateway-epoch, store-claim-epoch, target-fence.

A worker holds epoch 1, the run is handed over to epoch 2 (and the deploy
service is told so), and the old worker, still holding an unexpired
capability for epoch 1, sends a deployment. The oracles are the deploy
service's own records and the store's rows read by plain SQL.

The fences are layered: the gateway judges the epoch the store's claim read
under the lease lock, the store's claim refuses to record a stale operation,
and the target refuses a token below the highest epoch it has seen. Each
switch is shown against the layer that would otherwise still stop it.
"""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

import pytest

from baton.ablation import Ablation, ablation_env
from baton.authority import AuthorityService
from baton.errors import FencedTokenError, StaleEpochError, StoreError, TargetRejectedError
from baton.fencing import FencingToken
from baton.ownership import Coordinator
from baton.store.base import SqlStore

from . import rig

GATEWAY, STORE, TARGET = Ablation.GATEWAY_EPOCH.value, Ablation.STORE_CLAIM_EPOCH.value, Ablation.TARGET_FENCE.value
KEY = "deploy-svc-a-1.4.0"


def stale_attempt(store: SqlStore, authority: AuthorityService, tmp_path: Path, *ablations: str) -> tuple[Path, type[BaseException] | None]:
    """The old owner's deployment after a handoff, with `ablations` on (also in the deploy service)."""
    data = tmp_path / "deploy"
    with rig.deploy_service(data, *ablations) as client:
        old = rig.start_run(store)
        cap = rig.capability(authority, store, old, KEY)
        new = Coordinator(store).grant(old.run_id, "worker:b", ttl_s=120.0, force=True, fence_targets=[client])
        assert new is not None and new.epoch == 2
        raised: type[BaseException] | None = None
        with ablation_env(*ablations) if ablations else nullcontext():
            try:
                rig.Rig(store, authority, client).gateway.submit(rig.request(old, cap, KEY, rig.deployment()))
            except (StaleEpochError, StoreError) as exc:
                raised = type(exc)
    return data, raised


def test_with_every_fence_on_the_stale_worker_reaches_nothing(store: SqlStore, authority: AuthorityService, tmp_path: Path) -> None:
    data, raised = stale_attempt(store, authority, tmp_path)
    assert raised is StaleEpochError
    assert rig.answered(data, KEY) == [] and rig.effects(data) == []
    assert rig.operation_rows(store, "run-1", KEY) == []


def test_store_claim_epoch_off_records_the_stale_claim(store: SqlStore, authority: AuthorityService, tmp_path: Path) -> None:
    data, raised = stale_attempt(store, authority, tmp_path, STORE)
    assert rig.operation_rows(store, "run-1", KEY) == [(1, "PREPARED")]  # the stale claim succeeded in the store
    assert raised is StaleEpochError  # the gateway's own check still refuses to send it
    assert rig.answered(data, KEY) == []


def test_gateway_epoch_off_alone_is_still_refused_by_the_store_claim(store: SqlStore, authority: AuthorityService, tmp_path: Path) -> None:
    data, raised = stale_attempt(store, authority, tmp_path, GATEWAY)
    assert raised is StoreError  # the claim, not the gateway, refused it
    assert rig.operation_rows(store, "run-1", KEY) == []
    assert rig.answered(data, KEY) == []


def test_gateway_epoch_off_lets_the_stale_request_reach_the_target(store: SqlStore, authority: AuthorityService, tmp_path: Path) -> None:
    data, raised = stale_attempt(store, authority, tmp_path, STORE, GATEWAY)
    assert raised is FencedTokenError  # the deploy service's own fence refused it
    assert rig.answered(data, KEY) == ["fenced"]
    assert rig.effects(data) == []


def test_every_fence_off_lets_the_stale_worker_deploy(store: SqlStore, authority: AuthorityService, tmp_path: Path) -> None:
    data, raised = stale_attempt(store, authority, tmp_path, STORE, GATEWAY, TARGET)
    assert raised is None
    assert [(line["epoch"], line["idempotency_key"]) for line in rig.effects(data)] == [(1, KEY)]
    assert rig.answered(data, KEY) == ["applied"]


@pytest.mark.parametrize("ablated", [False, True], ids=["fence-on", "target-fence-off"])
def test_target_fence_alone_decides_at_the_target(tmp_path: Path, ablated: bool) -> None:
    """Straight to the deploy service, around the gateway: only its own fence stands in the way."""
    data = tmp_path / "deploy"
    with rig.deploy_service(data, *([TARGET] if ablated else [])) as client:
        client.advance_fence(FencingToken("run-1", 2))
        try:
            client.apply("op-stale", KEY, FencingToken("run-1", 1), rig.deployment())
            refused = False
        except TargetRejectedError as exc:
            refused = exc.fenced
    if ablated:
        assert not refused and [line["epoch"] for line in rig.effects(data)] == [1]
    else:
        assert refused and rig.effects(data) == [] and rig.answered(data, KEY) == ["fenced"]
