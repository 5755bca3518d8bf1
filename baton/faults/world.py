"""One fault scenario's world: Baton's real store, blobs, authority and gateway, plus the outside world.

A world lives in one directory, so a worker in another process (the one a
scenario SIGKILLs) can open the same world: the SQLite store (WAL), the blob
store, the gateway history and the fact log are files, and everything seeded
is rebuilt identically from the seed. Targets hold their directory lock, so
only the parent process opens them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from baton.agents.releases import RELEASES
from baton.authority import AuthorityService, Capability
from baton.authority_http import CapabilityRequest, LocalAuthorityClient
from baton.compat import HandoffPolicy
from baton.faults.external import (
    BUILDS,
    FORM,
    REPO,
    Approver,
    ExternalWorld,
    Meter,
    ModelProvider,
    Session,
    VerifierService,
)
from baton.faults.facts import FactLog
from baton.faults.target import LogTarget
from baton.fencing import FencingToken
from baton.gateway import MutationGateway, MutationTarget
from baton.handoff import HandoffCoordinator
from baton.history import JsonlHistory
from baton.models import (
    AuthorityLevel,
    BehavioralRelease,
    BudgetLimits,
    EnvironmentIdentity,
    OperationState,
    Placement,
    PortabilityConstraints,
)
from baton.ownership import Coordinator
from baton.reconcile import Reconciler
from baton.store.base import SqlStore
from baton.store.blobs import BlobStore
from baton.store.factory import open_store

V7: BehavioralRelease = RELEASES["model-v7"]
V8: BehavioralRelease = RELEASES["model-v8"]
LEASE_TTL_S = 30.0
TARGET_NAMES = ("deploy", "publisher", "repo", "webapp")


def _placement(name: str, region: str, provider: str, *, image: str = "worker:1", schemas: tuple[str, ...] = ("1", "2", "3"),
               verifiers: tuple[str, ...] = (V7.verifier_bundle,),
               ceiling: AuthorityLevel = AuthorityLevel.EXTERNAL_MUTATE) -> Placement:
    return Placement(
        name=name, region=region, provider=provider, authority_ceiling=ceiling,
        supported_release_ids=(V7.release_id, V8.release_id), readable_schema_versions=schemas,
        verifiers=verifiers, tools=(V7.tool_contract,),
        environment=EnvironmentIdentity(placement=name, region=region, provider=provider, runtime_image=image),
    )


POOL: dict[str, Placement] = {
    p.name: p
    for p in (
        _placement("eu-a", "eu-west", "local"),
        _placement("eu-b", "eu-west", "local"),
        _placement("eu-c", "eu-west", "cloudco", image="worker:2"),
        _placement("us-a", "us-east", "cloudco", image="worker:2"),
        _placement("legacy-eu", "eu-west", "local", schemas=("1",)),
        _placement("lite-eu", "eu-west", "local", verifiers=()),
    )
}
"""Every placement a scenario may list; each scenario picks its catalog from these."""


@dataclass(frozen=True)
class WorldConfig:
    """What a scenario varies about its world."""

    seed: int
    case_id: str
    task: str = "deploy"
    catalog: tuple[str, ...] = ("eu-a", "eu-b", "eu-c", "us-a")
    source: str = "eu-a"
    authority: AuthorityLevel = AuthorityLevel.EXTERNAL_MUTATE
    deadline_s: float = 3600.0
    approval_ttl_s: float = 3600.0
    session_ttl_s: float = 3600.0
    constraints: PortabilityConstraints = field(default_factory=PortabilityConstraints)
    freshness_s: dict[str, float] = field(default_factory=dict)

    @property
    def run_id(self) -> str:
        return f"{self.case_id}-{self.task}-s{self.seed}"

    def with_(self, **changes: object) -> WorldConfig:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


class SessionTarget:
    """The web application's submit endpoint as one worker sees it: its own session attached."""

    def __init__(self, inner: LogTarget, world: World, session: Session | None) -> None:
        self.name = inner.name
        self._inner, self._world, self.session = inner, world, session

    def apply(self, operation_id: str, idempotency_key: str, fencing_token: FencingToken,
              payload: Mapping[str, Any]) -> dict[str, Any]:
        from baton.errors import TargetRejectedError

        session = self.session
        if session is None or not self._world.external.webapp.accepts(session.token, session.csrf):
            raise TargetRejectedError("the web application refused the session (expired or unknown)",
                                      reason="session_expired")
        return self._inner.apply(operation_id, idempotency_key, fencing_token, payload)

    def lookup(self, operation_id: str) -> OperationState:
        return self._inner.lookup(operation_id)

    def advance_fence(self, token: FencingToken) -> int:
        return self._inner.advance_fence(token)


class World:
    """Store, blobs, authority, history, facts, targets and the outside world of one scenario."""

    def __init__(self, root: Path | str, config: WorldConfig, *, open_targets: bool = True) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.config = config
        self.rng = random.Random(f"{config.case_id}:{config.seed}")
        self.store: SqlStore = open_store("sqlite:///" + str((self.root / "baton.db").resolve()))
        self.blobs = BlobStore(self.root / "blobs")
        self.facts = FactLog(self.root / "facts.jsonl")
        self.history = JsonlHistory(self.root / "history.jsonl")
        key = hashlib.sha256(f"baton-faults:{config.seed}".encode()).hexdigest().encode()
        self.authority = AuthorityService(key, max_ttl_s=60.0)
        self.external = ExternalWorld(self.rng, self.facts, config.run_id, session_ttl_s=config.session_ttl_s)
        self.external.freshness_s.update({BUILDS: 3600.0, REPO: 3600.0, FORM: 3600.0, **config.freshness_s})
        self.provider = ModelProvider()
        self.meter = Meter(self.facts)
        self.verifier = VerifierService(self.facts)
        self.approver = Approver(ttl_s=config.approval_ttl_s)
        self.placements: dict[str, Placement] = {name: POOL[name] for name in config.catalog}
        self.release = V7
        self._targets: dict[str, LogTarget] = {}
        self._workers = 0
        self.naive_at = config.source
        if open_targets:
            for name in TARGET_NAMES:
                self._targets[name] = LogTarget(self.root / "targets" / name, name)

    # -- identity and time ------------------------------------------------------------------

    @property
    def run_id(self) -> str:
        return self.config.run_id

    def now(self) -> dt.datetime:
        return self.store.db_now()

    def worker_name(self, placement: str, epoch: int | None = None) -> str:
        """`<placement>/w<n>`: n is the epoch the worker owns (Baton), else a running count (naive)."""
        self._workers += 1
        return f"{placement}/w{self._workers if epoch is None else epoch}"

    def limits(self, now: dt.datetime) -> BudgetLimits:
        return BudgetLimits(
            model_spend_usd=Decimal("2.00"), model_calls=12, search_expansions=0, tool_calls=40,
            browser_seconds=600, sandbox_seconds=600, verification_reserve_usd=Decimal("0.50"), retries=3,
            deadline=now + dt.timedelta(seconds=self.config.deadline_s),
        )

    # -- placements and policy --------------------------------------------------------------

    def request_capability(self, ask: CapabilityRequest) -> Capability:
        """The in-process authority, asked through the interface live workers use over HTTP."""
        return LocalAuthorityClient(self.authority, self.store, {ask.placement: self.placement(ask.placement)}).request(ask)

    def placement(self, name: str) -> Placement:
        """The placement as current policy defines it (ceilings can change mid-run)."""
        return self.placements.get(name) or POOL[name]

    def lower_region_ceiling(self, region: str, ceiling: AuthorityLevel) -> None:
        """A region policy change: every placement of `region` may do at most `ceiling` from now on."""
        for name, placement in list(self.placements.items()):
            if placement.region == region and not ceiling.allows(placement.authority_ceiling):
                self.placements[name] = placement.model_copy(update={"authority_ceiling": ceiling})

    # -- Baton's machinery ------------------------------------------------------------------

    @property
    def targets(self) -> dict[str, LogTarget]:
        if not self._targets:
            raise RuntimeError("this world was opened without its targets (a worker subprocess)")
        return self._targets

    def gateway(self, session: Session | None = None) -> MutationGateway:
        targets: dict[str, MutationTarget] = dict(self.targets)
        targets["webapp"] = SessionTarget(self.targets["webapp"], self, session)
        return MutationGateway(self.store, self.authority, targets, history=self.history)

    def reconciler(self, worker: str) -> Reconciler:
        return Reconciler(self.store, dict(self.targets), history=self.history, process=worker)

    def ownership(self, name: str = "scheduler") -> Coordinator:
        return Coordinator(self.store, name=name, history=self.history)

    def coordinator(self, policy: HandoffPolicy | None = None, *, quiesce_timeout_s: float = 0.3) -> HandoffCoordinator:
        return HandoffCoordinator(
            self.store, self.blobs, dict(self.placements), policy=policy, fence_targets=list(self.targets.values()),
            lease_ttl_s=LEASE_TTL_S, quiesce_timeout_s=quiesce_timeout_s, owner_for=lambda p: self.worker_name(p.name, self.store.current_epoch(self.run_id) + 1),
            ownership=self.ownership("handoff-coordinator"),
        )

    def close(self) -> None:
        for target in self._targets.values():
            target.close()
        self.store.close()
