"""lease-cas: granting a run is a compare-and-set on the epoch the coordinator observed.

Two coordinators decide on the same observation (epoch 1). The first grant
takes epoch 2; the second, made on the now stale observation, must fail.
With the switch on it succeeds, and two owners hold epoch 2 at once: the
store's lease row (read by plain SQL) changes owner without a new epoch, and
the deploy service's own records show deployments from both owners at that
one epoch.
"""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

import pytest

from baton.ablation import Ablation, ablation_env
from baton.authority import AuthorityService
from baton.ownership import Coordinator
from baton.store.base import SqlStore

from . import rig


def lease_row(store: SqlStore, run_id: str) -> tuple[str | None, int]:
    rows = store.execute_raw("SELECT owner, epoch FROM leases WHERE run_id = ?", (run_id,))
    return rows[0][0], int(rows[0][1])


@pytest.mark.parametrize("ablated", [False, True], ids=["cas-on", "lease-cas-off"])
def test_a_grant_on_a_stale_observation_makes_two_owners_only_without_the_cas(
    store: SqlStore, authority: AuthorityService, tmp_path: Path, ablated: bool
) -> None:
    names = [Ablation.LEASE_CAS.value] if ablated else []
    data = tmp_path / "deploy"
    with rig.deploy_service(data) as client, ablation_env(*names) if names else nullcontext():
        first = rig.start_run(store, owner="worker:a")
        observed = first.epoch
        b = Coordinator(store, name="coordinator-1").grant("run-1", "worker:b", ttl_s=120.0, observed_epoch=observed,
                                                             force=True)
        assert b is not None and b.epoch == 2 and lease_row(store, "run-1") == ("worker:b", 2)
        c = Coordinator(store, name="coordinator-2").grant("run-1", "worker:c", ttl_s=120.0, observed_epoch=observed,
                                                             force=True)
        if not ablated:
            assert c is None and lease_row(store, "run-1") == ("worker:b", 2)
            return
        assert c is not None and lease_row(store, "run-1") == ("worker:c", 2)  # the stale claim succeeded
        gateway = rig.Rig(store, authority, client).gateway
        for owner, lease in (("b", b), ("c", c)):
            key = f"deploy-by-{owner}"
            cap = rig.capability(authority, store, lease, key)
            gateway.submit(rig.request(lease, cap, key, rig.deployment(version=f"1.4.0-{owner}"), process=owner))
    at_epoch_2 = {line["version"] for line in rig.effects(data) if line["epoch"] == 2}
    assert at_epoch_2 == {"1.4.0-b", "1.4.0-c"}  # two owners acted for one epoch
