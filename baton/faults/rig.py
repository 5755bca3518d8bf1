"""One case's live world: a directory, real target services, the provider's bill, kill and freeze verbs.

Every strategy of a case gets a fresh `Rig` under its own directory: the
deploy and corpus services (subprocesses keeping their own JSONL records),
the build registry and the model provider's bill file. Baton's strategy adds
the authority service, worker processes and a store on top (`BatonRig`); the
transcript controls add their own agent processes. Fault points are named to
a process through `baton.fault_points` (environment), and the rig waits for
the `.reached` marker before it SIGKILLs or SIGSTOPs that process.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from baton import fault_points
from baton.agents.deploy_agent import build_catalog
from baton.agents.scripted_models import BILL_ENV
from baton.agents.verifiers import VERIFIER_RECORD_ENV
from baton.faults.oracles import RESTORED_FILE
from baton.faults.rig_agents import start_agent_targets
from baton.runtime.restore_record import RESTORE_RECORD_ENV
from baton.targets.service_process import ServiceProcess, target_data_dir

REGISTRY_FILE = "build-registry.json"
BILL_FILE = "bill.jsonl"
RELEASE_CHANGES_FILE = "release-changes.jsonl"
PLANTED_FILE = "planted-secrets.json"
PLACEMENT_CHANGES_FILE = "placement-changes.jsonl"
RESIDENCY_FILE = "residency.json"
REPORTED_FILE = "reported.json"
VERDICTS_FILE = "verdicts.jsonl"
WAIT_S = 180.0
T = TypeVar("T")


class RigError(RuntimeError):
    """The live world did not do what the case script waited for."""


def wait_until(probe: Callable[[], T], *, timeout_s: float = WAIT_S, what: str, poll_s: float = 0.05) -> T:
    """Poll `probe()` until it returns something truthy; RigError after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise RigError(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(poll_s)


@dataclass
class TargetOptions:
    """How the deploy service misbehaves in a case (seeded, from the service's own options)."""

    ambiguous_rate: float = 0.0
    ambiguous_delay_s: float = 4.0
    guard: list[str] = field(default_factory=list)
    corpus_guard: list[str] = field(default_factory=list)
    agents: tuple[str, ...] = ()
    """Agent targets to start too: `git` (the git remote), `webapp` (the web application)."""
    agent_trust: str | None = None
    """The jwks.json those targets check capabilities against (none: they check none)."""


class Rig:
    """Directories, target services and the provider's bill of one strategy's run of one case."""

    def __init__(self, root: Path, seed: int) -> None:
        self.root = Path(root)
        self.home = self.root / "home"
        self.fault_dir = self.root / "fault"
        self.seed = seed
        self.home.mkdir(parents=True, exist_ok=True)
        self.fault_dir.mkdir(parents=True, exist_ok=True)
        self.bill = self.root / "provider" / BILL_FILE
        self.bill.parent.mkdir(parents=True, exist_ok=True)
        self.verdicts = target_data_dir("verifier", self.home) / VERDICTS_FILE
        """The deploy verifier's own record of its verdicts (created empty: a run judged by `unverified_effect`)."""
        self.verdicts.parent.mkdir(parents=True, exist_ok=True)
        self.verdicts.touch()
        self.restored = self.home / "targets" / Path(*RESTORED_FILE)
        """Each worker's own record of the checkpoints it restored (`unfit_placement` judges a handed-over state by it)."""
        self.restored.parent.mkdir(parents=True, exist_ok=True)
        self.deploy_service: ServiceProcess | None = None
        self.corpus_service: ServiceProcess | None = None
        self.agent_services: dict[str, ServiceProcess] = {}
        self.cleanup = contextlib.ExitStack()

    # -- the outside world ---------------------------------------------------------------------

    def write_registry(self, service: str) -> None:
        """The build registry as its own file: what an oracle checks a deployed artifact against."""
        builds = [b.model_dump(mode="json") for b in build_catalog(service)]
        (self.root / REGISTRY_FILE).write_text(json.dumps({"service": service, "builds": builds}, indent=1))

    def start_targets(self, options: TargetOptions) -> None:
        deploy = ServiceProcess.deploy(target_data_dir("deploy", self.home), ambiguous_rate=options.ambiguous_rate,
                                       seed=self.seed, ambiguous_delay_s=options.ambiguous_delay_s,
                                       guard=options.guard)
        self.cleanup.callback(deploy.stop)
        self.deploy_service = deploy.start()
        corpus = ServiceProcess.corpus(target_data_dir("corpus", self.home), seed=self.seed, guard=options.corpus_guard)
        self.cleanup.callback(corpus.stop)
        self.corpus_service = corpus.start()
        if options.agents:
            self.agent_services = start_agent_targets(self.home, self.cleanup, options.agents, options.agent_trust)

    @property
    def deploy_dir(self) -> Path:
        return target_data_dir("deploy", self.home)

    @property
    def corpus_dir(self) -> Path:
        return target_data_dir("corpus", self.home)

    def kill_deploy_service(self) -> None:
        """The deploy service dies (SIGKILL) and stays down for the rest of the case."""
        assert self.deploy_service is not None
        self.deploy_service.kill()

    @contextlib.contextmanager
    def process_env(self, point: str | None = None) -> Iterator[None]:
        """The environment a started process inherits: the bill, the verifier's and the restore record always, a fault
        point when named."""
        names = {BILL_ENV: str(self.bill), VERIFIER_RECORD_ENV: str(self.verdicts), RESTORE_RECORD_ENV: str(self.restored),
                 fault_points.DIR_ENV: str(self.fault_dir)}
        if point:
            names[fault_points.POINT_ENV] = point
        previous = {name: os.environ.get(name) for name in [*names, fault_points.POINT_ENV]}
        os.environ.update(names)
        if not point:
            os.environ.pop(fault_points.POINT_ENV, None)
        try:
            yield
        finally:
            for name, value in previous.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value

    # -- fault points --------------------------------------------------------------------------

    def wait_reached(self, point: str, timeout_s: float = WAIT_S) -> int:
        """Wait until a process reached `point`; return its pid."""
        path = fault_points.marker(self.fault_dir, point, "reached")
        wait_until(lambda: path.exists() and path.read_text().strip(), timeout_s=timeout_s, what=f"fault point {point}")
        return int(path.read_text().strip())

    def release(self, point: str) -> None:
        """Let a process held at `point` go on."""
        fault_points.marker(self.fault_dir, point, "go").write_text("go")

    def effects_of(self, run_id: str, target: str = "deploy") -> list[dict[str, Any]]:
        """The target's own effect lines for `run_id` (read from its file, as an oracle would)."""
        name = "deployments.jsonl" if target == "deploy" else "publications.jsonl"
        return _rows_of((self.deploy_dir if target == "deploy" else self.corpus_dir) / name, run_id)

    def requests_of(self, run_id: str) -> list[dict[str, Any]]:
        """The deploy service's own request log lines for `run_id`."""
        return _rows_of(self.deploy_dir / "requests.jsonl", run_id)

    def record_release_change(self, *, withdrawn: list[str], published: dict[str, str]) -> None:
        """The provider's own record of a release change (ids withdrawn, name -> id published), with its time.

        Written by the case, as the provider announces it, before any strategy hears of it.
        """
        line = json.dumps({"at": dt.datetime.now(dt.timezone.utc).isoformat(), "withdrawn": withdrawn,
                           "published": published}, sort_keys=True)
        with open(self.bill.parent / RELEASE_CHANGES_FILE, "a", encoding="utf-8") as out:
            out.write(line + "\n")

    def record_placement_change(self, placement: str, **facts: str) -> None:
        """The operator's own record of a placement change (its new region, ceiling, ...), with its time."""
        line = json.dumps({"at": dt.datetime.now(dt.timezone.utc).isoformat(), "placement": placement, **facts},
                          sort_keys=True)
        with open(self.root / PLACEMENT_CHANGES_FILE, "a", encoding="utf-8") as out:
            out.write(line + "\n")

    def record_residency(self, regions: list[str] | None = None, providers: list[str] | None = None) -> None:
        """The residency rule the run's owner set: the regions and/or providers its work may run on."""
        rule = {"regions": sorted(regions or []), "providers": sorted(providers or [])}
        (self.root / RESIDENCY_FILE).write_text(json.dumps(rule))

    def plant_secret(self, secret: str) -> None:
        """Record a credential the case put into the world, for the oracle to look for in portable state."""
        path = self.root / PLANTED_FILE
        planted = json.loads(path.read_text()) if path.exists() else []
        path.write_text(json.dumps([*planted, secret]))

    def write_reported(self, reported: dict[str, object]) -> None:
        """What the run reported about itself, for the oracles to hold against the outside truth."""
        (self.root / REPORTED_FILE).write_text(json.dumps(reported, indent=1, sort_keys=True, default=str))

    def close(self) -> None:
        self.cleanup.close()


def _rows_of(path: Path, run_id: str) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [row for row in rows if row.get("run_id") == run_id]


def sigkill(pid: int) -> None:
    """SIGKILL a process we started (no goodbye)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def sigstop(pid: int) -> None:
    os.kill(pid, signal.SIGSTOP)


def sigcont(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGCONT)
