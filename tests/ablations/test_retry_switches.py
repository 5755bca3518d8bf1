"""idempotency and reconcile-before-retry: a lost reply, and what a retry then does at the target.

The deploy service commits a fresh deployment and holds its answer past the
client's timeout, so the gateway records UNKNOWN: the effect happened, the
reply was lost. The oracles are the deploy service's own `deployments.jsonl`
(how many deployments per key, under which operation ids) and the store's
operation rows read by plain SQL (what the run believes).
"""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

import pytest

from baton.ablation import Ablation, ablation_env
from baton.authority import AuthorityService
from baton.fencing import FencingToken
from baton.reconcile import Reconciler
from baton.runtime.commit import commit_operation
from baton.runtime.errors import RunEscalated
from baton.store.base import SqlStore

from . import rig

KEY = "deploy-svc-a-1.4.0"
IDEMPOTENCY, RECONCILE = Ablation.IDEMPOTENCY.value, Ablation.RECONCILE_BEFORE_RETRY.value


@pytest.mark.parametrize("ablated", [False, True], ids=["dedup-on", "idempotency-off"])
def test_the_same_key_twice_deploys_twice_only_without_idempotency(tmp_path: Path, ablated: bool) -> None:
    """A resend of one logical deployment under its key (a new operation id, as after a lost reply)."""
    data = tmp_path / "deploy"
    with rig.deploy_service(data, *([IDEMPOTENCY] if ablated else [])) as client:
        token = FencingToken("run-1", 1)
        client.apply("op-1", KEY, token, rig.deployment())
        client.apply("op-2", KEY, token, rig.deployment())
    assert [line["operation_id"] for line in rig.effects(data, KEY)] == (["op-1", "op-2"] if ablated else ["op-1"])
    assert rig.answered(data, KEY) == (["applied", "applied"] if ablated else ["applied", "replayed"])


def lost_reply(store: SqlStore, authority: AuthorityService, tmp_path: Path, *ablations: str) -> tuple[Path, str]:
    """One deployment whose reply is lost, sent by the runtime's commit path; returns the data dir and how it ended."""
    data = tmp_path / "deploy"
    with rig.deploy_service(data, *ablations, ambiguous_rate=1.0, timeout_s=0.5) as client:
        lease = rig.start_run(store)
        services = rig.Rig(store, authority, client)
        gateway = services.gateway
        reconciler = Reconciler(store, {rig.TARGET: client})

        def request_for() -> object:
            return rig.request(lease, rig.capability(authority, store, lease, KEY), KEY, rig.deployment())

        with ablation_env(*ablations) if ablations else nullcontext():
            try:
                commit_operation(store, gateway, reconciler, request_for, max_retries=1)  # type: ignore[arg-type]
                ended = "committed"
            except RunEscalated:
                ended = "escalated"
    return data, ended


def test_reconciliation_asks_the_target_and_never_resends(store: SqlStore, authority: AuthorityService, tmp_path: Path) -> None:
    data, ended = lost_reply(store, authority, tmp_path)
    assert ended == "committed"
    deployed = rig.effects(data, KEY)
    assert len(deployed) == 1
    assert rig.operation_rows(store, "run-1", KEY) == [(1, "COMMITTED")]
    assert rig.answered(data, KEY) == ["applied"]  # asked by lookup, never sent twice


def test_without_reconciliation_the_run_hides_a_committed_deployment(store: SqlStore, authority: AuthorityService, tmp_path: Path) -> None:
    """The open outcome is taken as failed and resent; the target's dedup absorbs the resend, the ledger lies."""
    data, ended = lost_reply(store, authority, tmp_path, RECONCILE)
    assert ended == "committed"
    deployed = rig.effects(data, KEY)
    assert len(deployed) == 1
    first = deployed[0]["operation_id"]
    rows = store.execute_raw("SELECT operation_id, state FROM operations WHERE idempotency_key = ?", (KEY,))
    assert (first, "NOT_COMMITTED") in {(str(op), str(state)) for op, state in rows}  # the target applied it
    assert rig.answered(data, KEY) == ["applied", "replayed"]


def test_without_reconciliation_or_idempotency_the_deployment_happens_twice(store: SqlStore, authority: AuthorityService, tmp_path: Path) -> None:
    data, ended = lost_reply(store, authority, tmp_path, RECONCILE, IDEMPOTENCY)
    assert ended == "escalated"  # every resend's reply is lost too, until the retry budget is spent
    assert len(rig.effects(data, KEY)) == 2
