"""A real deploy run for the ablation tests: a store, an authority, the gateway and the deploy service.

The oracles are the deploy service's own files, read here as plain JSON
Lines (`deployments.jsonl`: one line per side effect; `requests.jsonl`: one
line per request it answered), and the store's rows read by plain SQL. None
of them goes through the code a switch removes.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from baton.ablation import ablation_env
from baton.authority import AuthorityService, Capability
from baton.gateway import MutationGateway, MutationRequest
from baton.identity import ref_of
from baton.models import Approval, AuthorityContext, AuthorityLevel, RunKind
from baton.store.base import SqlStore
from baton.store.records import Lease
from baton.targets.deploy_service import DeployClient
from baton.targets.service_process import ServiceProcess

from builders.records import placement

OPERATION = "deploy"
TARGET = "deploy"
ARTIFACT = ref_of({"build": "svc-a 1.4.0"})
OTHER_ARTIFACT = ref_of({"build": "svc-a 1.4.1-unverified"})


def deployment(artifact: str = ARTIFACT, version: str = "1.4.0") -> dict[str, Any]:
    """A deploy payload for service svc-a."""
    return {"service": "svc-a", "version": version, "artifact_hash": artifact, "strategy": "rolling"}


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every complete line of a JSON Lines file, parsed with the standard library only."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def effects(data_dir: Path, key: str | None = None) -> list[dict[str, Any]]:
    """The deploy service's side effects (deployments.jsonl), optionally for one idempotency key."""
    lines = read_jsonl(data_dir / "deployments.jsonl")
    return [line for line in lines if key is None or line["idempotency_key"] == key]


def answered(data_dir: Path, key: str) -> list[str]:
    """The results the deploy service recorded (requests.jsonl) for requests with `key`, in order."""
    return [line["result"] for line in read_jsonl(data_dir / "requests.jsonl") if line["idempotency_key"] == key]


@contextmanager
def deploy_service(
    data_dir: Path, *ablations: str, guard: Sequence[str] = (), ambiguous_rate: float = 0.0, timeout_s: float = 5.0,
) -> Iterator[DeployClient]:
    """A deploy service subprocess, started with `ablations` in its environment (it inherits them), and a client.

    With `ambiguous_rate` 1.0 every fresh deployment is committed, then answered only after 3 s.
    """
    with ablation_env(*ablations) if ablations else nullcontext():
        service = ServiceProcess.deploy(data_dir, guard=guard, ambiguous_rate=ambiguous_rate, seed=1,
                                        ambiguous_delay_s=3.0).start()
    try:
        with DeployClient(service.url, timeout_s=timeout_s) as client:
            yield client
    finally:
        service.stop()


def start_run(store: SqlStore, run_id: str = "run-1", owner: str = "worker:a") -> Lease:
    """A deploy run whose lease `owner` holds at epoch 1."""
    store.create_run(run_id, RunKind.DEPLOY, ref_of({"release": run_id}), placement().name)
    lease = store.acquire_lease(run_id, owner, 120.0, expected_epoch=0)
    assert lease is not None
    return lease


def approved(store: SqlStore, artifact: str = ARTIFACT, operation: str = OPERATION) -> AuthorityContext:
    """An authority context holding an approval for `operation` on `artifact`."""
    approval = Approval(approval_id="appr-1", operation=operation, artifact_hash=artifact,
                        level=AuthorityLevel.EXTERNAL_MUTATE, approved_by="release-manager",
                        expires_at=store.db_now() + dt.timedelta(hours=1))
    return AuthorityContext(level=AuthorityLevel.EXTERNAL_MUTATE, policy_id="policy-1", approvals=(approval,))


def capability(
    authority: AuthorityService, store: SqlStore, lease: Lease, key: str, *, artifact: str = ARTIFACT,
    operation: str = OPERATION, context: AuthorityContext | None = None,
) -> Capability:
    """A capability issued from policy for `key`, bound to `artifact`."""
    return authority.issue(
        run_id=lease.run_id, epoch=lease.epoch, operation=operation, artifact_hash=artifact,
        level=AuthorityLevel.EXTERNAL_MUTATE, lease=lease, placement=placement(),
        context=context or approved(store, artifact, operation), now=store.db_now(), idempotency_key=key,
    )


def request(lease: Lease, cap: Capability, key: str, payload: dict[str, Any], *, artifact: str = ARTIFACT,
            process: str = "worker:a") -> MutationRequest:
    """A gateway request for the deploy target, speaking for `lease`'s epoch."""
    return MutationRequest(run_id=lease.run_id, epoch=lease.epoch, operation=OPERATION, idempotency_key=key,
                           target=TARGET, payload=payload, artifact_hash=artifact, capability=cap.token,
                           process=process)


@dataclass
class Rig:
    """One store, one authority and a gateway in front of the deploy service."""

    store: SqlStore
    authority: AuthorityService
    client: DeployClient

    @property
    def gateway(self) -> MutationGateway:
        return MutationGateway(self.store, self.authority, {TARGET: self.client})


def operation_rows(store: SqlStore, run_id: str, key: str) -> list[tuple[int, str]]:
    """(epoch, state) of each operation the store holds for a key, by plain SQL."""
    rows = store.execute_raw("SELECT epoch, state FROM operations WHERE run_id = ? AND idempotency_key = ?",
                             (run_id, key))
    return [(int(epoch), str(state)) for epoch, state in rows]
