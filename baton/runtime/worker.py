"""A worker process bound to one placement.

    python -m baton.runtime.worker --placement NAME --home DIR [--database-url URL] --worker-id ID

It polls the store for runs reserved to `placement:<NAME>` (by a launch or a
handoff), adopts each with a compare-and-set on the reserved epoch (so of
several workers of one placement exactly one wins), and executes it in a
thread of its own (see `baton.runtime.executor`). It reaches the target
services through the ports they publish under `<home>/targets/<service>/port`.
SIGTERM stops adoption; running runs stop at their next boundary and give
their lease up. SIGKILL is what chaos uses: then the fleet hands the runs off.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from baton import fault_points
from baton.ablation import warn_if_ablated
from baton.agents.browser_session import BrowserPool
from baton.authority import CapabilityVerifier
from baton.authority_delegation import DelegatingAuthorityClient
from baton.authority_http import HttpAuthorityClient
from baton.catalog.changes import current_placements
from baton.catalog.manifests import CatalogManifests
from baton.gateway import MutationGateway, MutationTarget
from baton.handoff.coordinator import reserved_owner
from baton.history import HistorySink, JsonlHistory
from baton.models import Placement
from baton.placements import load_placements, placement_named
from baton.agents.coding_model import PatchModelProvider, patch_model_dir
from baton.runtime.agent_registry import agent_for
from baton.runtime.approvals import AuthorityApprover
from baton.runtime.executor import RunExecutor, RunOutcome
from baton.runtime.services import RuntimeServices
from baton.runtime.supervisor import WORKER_OWNER_PREFIX
from baton.runtime.tools import read_only_tools
from baton.store.base import SqlStore
from baton.store.factory import open_blobs, open_store
from baton.targets.corpus_service import CorpusClient
from baton.targets.deploy_service import DeployClient
from baton.targets.git_remote_service import GitRemoteClient
from baton.targets.http_server import PORT_FILE
from baton.targets.service_process import target_data_dir
from baton.targets.webapp_service import WebappClient

log = logging.getLogger("baton.worker")



def worker_owner(worker_id: str) -> str:
    """The lease owner name of a worker."""
    return WORKER_OWNER_PREFIX + worker_id


@dataclass(frozen=True)
class WorkerConfig:
    """How one worker behaves."""

    placement: str
    home: Path
    worker_id: str
    database_url: str | None = None
    history_path: Path | None = None
    placements_file: Path | None = None
    lease_ttl_s: float = 3.0
    poll_s: float = 0.2
    max_runs: int = 16
    boundary_pause_s: float = 0.0
    target_timeout_s: float = 1.0
    authority_url: str = ""
    """The live authority service. The worker has no other way to a capability or an approval."""


def target_url(home: Path, service: str) -> str:
    """The loopback URL a target service published in its data directory."""
    port = (target_data_dir(service, home) / PORT_FILE).read_text().strip()
    return f"http://127.0.0.1:{int(port)}"


def connect_webapp(home: Path, timeout_s: float) -> WebappClient | None:
    """A client of the web application running for this home, or None when none runs."""
    if not (target_data_dir("webapp", home) / PORT_FILE).exists():
        return None
    return WebappClient(target_url(home, "webapp"), timeout_s=timeout_s)


def connect_targets(home: Path, timeout_s: float) -> tuple[DeployClient, CorpusClient]:
    """Clients for the deploy and corpus services running for this home."""
    return (
        DeployClient(target_url(home, "deploy"), timeout_s=timeout_s),
        CorpusClient(target_url(home, "corpus"), timeout_s=timeout_s),
    )


def connect_git_remote(home: Path, timeout_s: float) -> GitRemoteClient | None:
    """A client for the git remote of this home, or None when none is running (no coding runs here)."""
    if not (target_data_dir("git", home) / PORT_FILE).exists():
        return None
    return GitRemoteClient(target_url(home, "git"), timeout_s=timeout_s)


class Worker:
    """Adopts and runs the runs reserved for its placement until stopped."""

    def __init__(self, config: WorkerConfig) -> None:
        self.config = config
        self.store: SqlStore = open_store(config.database_url, config.home)
        # The placement comes from the store's catalog unless a catalog file is given.
        catalog = current_placements(self.store) if config.placements_file is None else load_placements(
            config.placements_file)
        self.placement: Placement = placement_named(catalog, config.placement)
        self.owner = worker_owner(config.worker_id)
        history: HistorySink | None = JsonlHistory(config.history_path) if config.history_path else None
        deploy, corpus = connect_targets(config.home, config.target_timeout_s)
        targets: dict[str, MutationTarget] = {deploy.name: deploy, corpus.name: corpus}
        clients: dict[str, object] = {"corpus": corpus, "deploy": deploy,
                                      "patch_model": PatchModelProvider(patch_model_dir(config.home))}
        git_remote = connect_git_remote(config.home, max(config.target_timeout_s, 5.0))
        if git_remote is not None:
            targets[git_remote.name] = clients["git"] = git_remote
        webapp = connect_webapp(config.home, config.target_timeout_s)
        if webapp is not None:  # browser runs: the app as a target, a Chromium pool and the app's reads as tools
            targets[webapp.name] = webapp
            clients.update(webapp=webapp, browser=BrowserPool(webapp.base_url))
        if not config.authority_url:
            raise ValueError("a worker needs --authority-url: it holds no signing key and mints nothing itself")
        # It proves who it is with the secret its supervisor provisioned (environment), and checks with public keys.
        authority = HttpAuthorityClient(config.authority_url, caller=self.owner)
        verifier = CapabilityVerifier(authority.trusted_keys())
        self.services = RuntimeServices(
            store=self.store,
            blobs=open_blobs(config.home, self.store),
            authority=DelegatingAuthorityClient(authority),  # one grant per scope, not a request per mutation
            approver=AuthorityApprover(authority, self.owner),
            gateway=MutationGateway(self.store, verifier, targets, history=history,
                                    ceiling=self.placement.authority_ceiling),
            targets=targets,
            releases=CatalogManifests(self.store),
            tools=read_only_tools(clients),
            history=history,
            boundary_pause_s=config.boundary_pause_s,
        )
        self.executor = RunExecutor(
            self.services, self.placement, self.owner, agent_for=agent_for, lease_ttl_s=config.lease_ttl_s,
            fence_targets=(deploy, corpus, *(() if git_remote is None else (git_remote,)),
                           *(() if webapp is None else (webapp,))),
            placement_of=None if config.placements_file is not None else (
                lambda name: placement_named(current_placements(self.store), name)),
        )
        self.stop = threading.Event()
        self._running: dict[str, Future[RunOutcome]] = {}
        self._lock = threading.Lock()

    def request_stop(self) -> None:
        """Stop adopting; running runs stop at their next boundary."""
        self.stop.set()
        self.services.stopping.set()

    def poll_once(self, pool: ThreadPoolExecutor) -> int:
        """Adopt every run reserved for this placement that capacity allows; return how many."""
        reserved = reserved_owner(self.placement)
        adopted = 0
        with self._lock:
            self._running = {run: f for run, f in self._running.items() if not f.done()}
            busy = set(self._running)
        for run in self.store.list_runs(status="active"):
            if run.run_id in busy or run.placement != self.placement.name:
                continue
            if len(busy) + adopted >= self.config.max_runs or self.stop.is_set():
                break
            lease = self.store.get_lease(run.run_id)
            if lease.owner != reserved:
                continue
            fault_points.reached(fault_points.RESERVATION_READ)  # the claim below compares against this read
            won = self.executor.adopt(run.run_id, lease)
            if won is None:
                continue
            log.info("adopted %s at epoch %d", run.run_id, won.epoch)
            with self._lock:
                self._running[run.run_id] = pool.submit(self.executor.execute, won)
            adopted += 1
        return adopted

    def serve(self) -> None:
        """Poll and adopt until stopped, then wait for running runs to stop."""
        with ThreadPoolExecutor(max_workers=self.config.max_runs, thread_name_prefix="run") as pool:
            while not self.stop.is_set():
                try:
                    self.poll_once(pool)
                except Exception:  # noqa: BLE001 - a store hiccup must not kill the worker
                    log.exception("poll failed")
                self.stop.wait(self.config.poll_s)
        self.store.close()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="A Baton worker bound to one placement")
    parser.add_argument("--placement", required=True, help="placement name (see baton.placements)")
    parser.add_argument("--home", required=True, type=Path, help="BATON_HOME: blobs, SQLite store, target ports")
    parser.add_argument("--database-url", default=None, help="postgresql://... (default: SQLite under --home)")
    parser.add_argument("--worker-id", required=True, help="unique name of this worker incarnation")
    parser.add_argument("--history", type=Path, default=None, help="JSONL history file shared by the fleet")
    parser.add_argument("--placements-file", type=Path, default=None,
                        help="JSON placement catalog (default: the catalog in the store)")
    parser.add_argument("--lease-ttl-s", type=float, default=3.0)
    parser.add_argument("--poll-s", type=float, default=0.2)
    parser.add_argument("--max-runs", type=int, default=16)
    parser.add_argument("--boundary-pause-s", type=float, default=0.0, help="simulated work time per boundary")
    parser.add_argument("--target-timeout-s", type=float, default=1.0, help="HTTP timeout towards the targets")
    parser.add_argument("--authority-url", required=True, help="the authority service (the only source of capabilities)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `python -m baton.runtime.worker`."""
    args = _parser().parse_args(argv)
    warn_if_ablated(f"worker {args.worker_id}")
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"%(asctime)s {args.worker_id} %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    worker = Worker(WorkerConfig(
        placement=args.placement, home=args.home, worker_id=args.worker_id, database_url=args.database_url,
        history_path=args.history, placements_file=args.placements_file, lease_ttl_s=args.lease_ttl_s,
        poll_s=args.poll_s, max_runs=args.max_runs, boundary_pause_s=args.boundary_pause_s,
        target_timeout_s=args.target_timeout_s, authority_url=args.authority_url,
    ))

    def _on_term(_signum: int, _frame: FrameType | None) -> None:
        worker.request_stop()

    signal.signal(signal.SIGTERM, _on_term)
    signal.signal(signal.SIGINT, _on_term)
    log.info("worker %s serving placement %s", args.worker_id, worker.placement.name)
    worker.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
