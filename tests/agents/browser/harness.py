"""A live world for browser-agent tests: the web application, Baton's store, an authority, workers in-process.

The web application runs as a real subprocess on loopback (its own records
under `home/targets/webapp/`); workers are `RunExecutor`s in the test's thread
so they can share the module's one Chromium (the sync Playwright API is bound
to the thread that started it). Handoffs go through the real coordinator.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from baton.agents.browser_agent import default_answers
from baton.agents.browser_session import BrowserPool
from baton.authority import AuthorityService
from baton.authority_keys import KeyRing
from baton.catalog.releases import RELEASES
from baton.gateway import MutationGateway
from baton.handoff.coordinator import HandoffCoordinator
from baton.models import AuthorityLevel, EventType, Placement, RunKind
from baton.placements import DEFAULT_PLACEMENTS, placement_named
from baton.runtime.agent_registry import agent_for
from baton.runtime.executor import RunExecutor, RunOutcome
from baton.runtime.launch import RunSpec, launch_run
from baton.runtime.services import RuntimeServices
from baton.runtime.tools import read_only_tools
from baton.store.base import SqlStore
from baton.store.blobs import Blobs
from baton.store.factory import open_blobs, open_store
from baton.targets.service_process import ServiceProcess, target_data_dir
from baton.targets.webapp_service import WebappClient, webapp_process

POOL = "browser-pool-eu"
SPARE = "browser-pool-eu-b"


def spare_pool() -> Placement:
    """A second browser pool, identical to the first but for its name."""
    pool = placement_named(DEFAULT_PLACEMENTS, POOL)
    return pool.model_copy(update={"name": SPARE, "environment": pool.environment.model_copy(update={"placement": SPARE})})


@dataclass
class BrowserWorld:
    """Everything a browser run needs, live."""

    home: Path
    store: SqlStore
    blobs: Blobs
    authority: AuthorityService
    app: ServiceProcess
    client: WebappClient
    placements: dict[str, Placement] = field(default_factory=dict)

    @property
    def data_dir(self) -> Path:
        return target_data_dir("webapp", self.home)

    def services(self, pool: BrowserPool, *, boundary_pause_s: float = 0.0) -> RuntimeServices:
        return RuntimeServices(
            store=self.store, blobs=self.blobs, authority=self.authority,
            gateway=MutationGateway(self.store, self.authority, {self.client.name: self.client}),
            targets={self.client.name: self.client},
            releases={release.release_id: release for release in RELEASES.values()},
            tools=read_only_tools({"browser": pool, "webapp": self.client}),
            boundary_pause_s=boundary_pause_s,
        )

    def launch(self, run_id: str, *, account: str = "acme", placement: str = POOL) -> None:
        spec = RunSpec(run_id, RunKind.BROWSER, RELEASES["model-v7"], self.placements[placement],
                       "fill in and submit the signup form", {"account": account, "answers": default_answers("Acme")},
                       AuthorityLevel.SANDBOX_MUTATE)
        launch_run(self.store, self.blobs, spec, reservation_ttl_s=60.0)

    def executor(self, services: RuntimeServices, owner: str, placement: str = POOL) -> RunExecutor:
        return RunExecutor(services, self.placements[placement], owner, agent_for=agent_for, lease_ttl_s=15.0,
                           fence_targets=(self.client,), handoff_wait_s=60.0)

    def run_once(self, executor: RunExecutor, run_id: str) -> RunOutcome:
        """Adopt the run from its reservation and execute it until it ends or moves."""
        won = executor.adopt(run_id, self.store.get_lease(run_id))
        assert won is not None, f"{executor.owner} could not adopt {run_id}"
        return executor.execute(won)

    def coordinator(self) -> HandoffCoordinator:
        return HandoffCoordinator(self.store, self.blobs, self.placements, fence_targets=(self.client,),
                                  lease_ttl_s=15.0, quiesce_timeout_s=30.0)

    def records(self, name: str) -> list[dict[str, Any]]:
        """The application's own JSON Lines file `name`, read with the json module alone."""
        path = self.data_dir / name
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []

    def resume_events(self, run_id: str) -> list[dict[str, Any]]:
        return [{"epoch": e.source_epoch, **e.detail, "reason": e.reason}
                for _, e in self.store.list_events(run_id=run_id, event_types=[EventType.BROWSER_RESUME_CHOSEN])]

    def close(self) -> None:
        self.client.close()
        self.app.stop()
        self.store.close()


def open_world(home: Path, *, session_ttl_s: float = 600.0) -> BrowserWorld:
    keys_dir = home / "authority"
    KeyRing.generate().save(keys_dir)
    app = webapp_process(target_data_dir("webapp", home), trust=keys_dir / "jwks.json", session_ttl_s=session_ttl_s)
    app.start()
    store = open_store(None, home)
    pool = placement_named(DEFAULT_PLACEMENTS, POOL)
    return BrowserWorld(home=home, store=store, blobs=open_blobs(home, store),
                        authority=AuthorityService(KeyRing.load(keys_dir)), app=app,
                        client=WebappClient(app.url, timeout_s=5.0), placements={POOL: pool, SPARE: spare_pool()})
