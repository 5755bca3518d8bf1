"""In-process pieces for the SDK tests: a memory target, runtime services, and a run to drive."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from baton.agents.releases import RELEASES
from baton.authority import AuthorityService
from baton.errors import TargetRejectedError, TargetUnavailableError
from baton.fencing import FencingToken
from baton.gateway import MutationGateway
from baton.handoff.resume import prepare_resume
from baton.models import AuthorityLevel, OperationState, RunKind
from baton.ownership import Coordinator
from baton.placements import DEFAULT_PLACEMENTS, placement_named
from baton.runtime.launch import RunSpec, launch_run
from baton.runtime.sdk import RunContext
from baton.runtime.services import RuntimeServices
from baton.store.factory import open_blobs, open_store

TARGET = "memory"


@dataclass
class MemoryTarget:
    """A fenced, idempotent target in memory; `ambiguous` keys commit and then time out once."""

    name: str = TARGET
    effects: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    by_operation: dict[str, str] = field(default_factory=dict)
    fences: dict[str, int] = field(default_factory=dict)
    ambiguous: set[str] = field(default_factory=set)

    def apply(self, operation_id: str, idempotency_key: str, fencing_token: FencingToken,
              payload: Mapping[str, Any]) -> dict[str, Any]:
        mark = self.fences.get(fencing_token.run_id, 0)
        if fencing_token.epoch < mark:
            raise TargetRejectedError(f"epoch {fencing_token.epoch} < {mark}", reason="fenced", fenced=True)
        self.fences[fencing_token.run_id] = fencing_token.epoch
        self.by_operation[operation_id] = idempotency_key
        if any(key == idempotency_key for key, _, _ in self.effects):
            return {"status": "replayed"}
        self.effects.append((idempotency_key, operation_id, dict(payload)))
        if idempotency_key in self.ambiguous:
            self.ambiguous.discard(idempotency_key)
            raise TargetUnavailableError("committed, but the answer was lost")
        return {"status": "applied"}

    def lookup(self, operation_id: str) -> OperationState:
        return OperationState.COMMITTED if operation_id in self.by_operation else OperationState.NOT_COMMITTED

    def advance_fence(self, token: FencingToken) -> int:
        self.fences[token.run_id] = max(self.fences.get(token.run_id, 0), token.epoch)
        return self.fences[token.run_id]


def make_services(home: Path, target: MemoryTarget) -> RuntimeServices:
    store = open_store(None, home)
    authority = AuthorityService(b"runtime-tests-signing-key-0123456789abcdef")
    return RuntimeServices(
        store=store,
        blobs=open_blobs(home, store),
        authority=authority,
        gateway=MutationGateway(store, authority, {target.name: target}),
        targets={target.name: target},
        releases={release.release_id: release for release in RELEASES.values()},
    )


def launch(services: RuntimeServices, run_id: str = "run-1", *, placement: str = "local-gpu-eu",
           kind: RunKind = RunKind.DEPLOY, limits: Any = None) -> None:
    spec = RunSpec(run_id, kind, RELEASES["model-v7"], placement_named(DEFAULT_PLACEMENTS, placement), "test task",
                   {"service": "checkout"}, AuthorityLevel.EXTERNAL_MUTATE, limits=limits)
    launch_run(services.store, services.blobs, spec, reservation_ttl_s=30.0)


def adopt(services: RuntimeServices, run_id: str = "run-1", *, owner: str = "worker:a",
          placement: str = "local-gpu-eu") -> RunContext:
    """Take the run's current epoch away from whoever holds it, restore, and return a context."""
    store = services.store
    lease = store.get_lease(run_id)
    won = Coordinator(store, name="tests").grant(run_id, owner, ttl_s=30.0, observed_epoch=lease.epoch, force=True)
    assert won is not None
    plan = prepare_resume(store, services.blobs, run_id, placement=placement_named(DEFAULT_PLACEMENTS, placement),
                          epoch=won.epoch)
    return RunContext(services, plan, owner=owner)
