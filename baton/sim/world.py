"""One simulated world: Baton's unchanged protocol on a virtual clock, with seeded faults.

What runs here is production code: `launch_run`, the worker's `RunExecutor`
(adopt, heartbeat, resume, reconcile, the agent, finish), the SDK, the
reference deploy and research agents, the scripted model provider and the
verifiers, the `MutationGateway`, the `HandoffCoordinator` built the way the
fleet builds it, the in-process `AuthorityService`, and the deploy and corpus
services' own apps over their own record files. What is simulated: the
clock (`Scheduler`), the store's database (`MemoryStore`: the same SQL in
memory), the blobs (the store's blob table), the network (`Network`), the
processes (actors that crash, stall and skew), and randomness (a seeded
`uuid4` while the world runs).
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as dt
import json
import itertools
import os
import random
import shutil
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from baton import clock as clocks
from baton.ablation import ablation_env
from baton.authority import AuthorityService
from baton.catalog.releases import RELEASES
from baton.chaos import ChaosReason, affected_placements, preferred_targets
from baton.compat import MigrationApproval
from baton.gateway import MutationGateway
from baton.faults.cases_binding import REPLANNED_VERSION, replanned_spec
from baton.faults.replan_side import append_unverified_replan
from baton.handoff.coordinator import HandoffRequest, HandoffStatus, reserved_owner
from baton.lifecycle import TERMINAL  # noqa: F401 - documents what "ended" means to the agents
from baton.models import AuthorityLevel, Placement, PortabilityConstraints, RunKind
from baton.placements import DEFAULT_PLACEMENTS
from baton.runtime.agent_registry import agent_for
from baton.runtime.dispatch import DispatchSettings, build_coordinator
from baton.runtime.executor import RunExecutor
from baton.runtime.launch import RunSpec, launch_run
from baton.runtime.services import RuntimeServices
from baton.runtime.tools import read_only_tools
from baton.runtime.worker import worker_owner
from baton.sim import browser_world, catalog_faults, faults, legacy_import
from baton.sim.approver import APPROVER_FILE, RecordingApprover
from baton.sim.coding_twin import CodingTwin
from baton.sim.faults import Fault, FaultPlan
from baton.sim.memory_store import MemoryStore
from baton.sim.network import Network
from baton.sim.scheduler import Crash, Process, Scheduler
from baton.store.sql_blobs import SqlBlobStore
from baton.store.records import ENDED_STATUSES, awaits_an_owner
from baton.targets import corpus_service, deploy_service, git_remote_service
from baton.agents.deploy_agent import DEPLOY_POLICY
from baton.agents.research_agent import PUBLISH_POLICY
from baton.targets.capability_guard import KeyFile, TargetGuard, TargetPolicy
from baton.targets.corpus_documents import INITIAL_DOCUMENTS, DocumentStore
from baton.targets.corpus_service import CorpusClient
from baton.targets.deploy_service import DeployClient
from baton.targets.http_server import Ambiguity
from baton.targets.mutation_log import MutationLog
from baton.targets.webapp_state import Drafts, Sessions

ENDED = ENDED_STATUSES
LEASE_EXPIRED = "lease_expired"
PLACEMENTS: tuple[Placement, ...] = tuple(p for p in DEFAULT_PLACEMENTS if p.name in ("local-gpu-eu", "cloud-eu"))
LAPSED_APPROVAL = MigrationApproval(
    approval_id="release-board-model-v8-2026q1", from_release_id=RELEASES["model-v7"].release_id,
    to_release_id=RELEASES["model-v8"].release_id, approved_by="release-board",
    expires_at=dt.datetime(2025, 12, 1, tzinfo=dt.timezone.utc))
"""The owner's only approval of the v7 -> v8 migration under `approval_lapsed`: it ran out before any world starts."""
RULED_KINDS = (RunKind.DEPLOY, RunKind.RESEARCH)
"""The runs an `owner_rule` binds (the coding and browser runs keep their own launch; the fleet policy binds all)."""
VERDICTS_FILE = "verifier/verdicts.jsonl"
"""The verifiers' own record of their verdicts under the world's root (what `baton.sim.oracles_verdicts` reads)."""
_SHM = Path("/dev/shm")
_WORLDS = itertools.count(1)


def _guarded(factory: Callable[..., Any], policy: TargetPolicy) -> Callable[[Path], Any]:
    """The live service's app checking capabilities itself, as the fleet starts it (`--trust`): against the world's
    authority keys, published beside the targets' directories (`browser_world.prepare`)."""
    def build(data_dir: Path) -> Any:
        return factory(data_dir, guard=TargetGuard(KeyFile(data_dir.parent / browser_world.TRUST_FILE), policy))
    return build


TARGET_APPS: dict[str, Callable[[Path], Any]] = {"deploy": deploy_service.create_app, "corpus": corpus_service.create_app,
                                                 "webapp": browser_world.webapp_app}
"""The targets every world hosts, unguarded: the transcript controls' targets (the live matrix starts theirs
without `--trust` too; a control has no authority). Baton's worlds use `GUARDED_APPS` where they differ."""
GUARDED_APPS: dict[str, Callable[[Path], Any]] = {"deploy": _guarded(deploy_service.create_app, DEPLOY_POLICY),
                                                  "corpus": _guarded(corpus_service.create_app, PUBLISH_POLICY)}
"""The targets every world hosts: name -> the live service's `create_app(data_dir)` (its records under root/name)."""
TARGET_APPS["git"] = git_remote_service.create_app  # coding runs (baton.sim.coding_twin)

_APP_CACHE: dict[tuple[str, Path, bool], tuple[Any, list[Any]]] = {}
"""(target, data dir) -> the app built once in this process and its stateful parts (reset per world)."""
_STATEFUL = (MutationLog, DocumentStore, Ambiguity, Sessions, Drafts)


def _stateful_parts(app: Any) -> list[Any]:
    """The record-keeping objects a target app's routes close over (its log, its documents, its ambiguity)."""
    found: dict[int, Any] = {}
    functions = [getattr(route, "endpoint", None) for route in getattr(app, "routes", ())]
    seen: set[int] = set()
    while functions:  # the routes' closures, and the closures of the helpers they call (the webapp's session_of)
        function = functions.pop()
        if id(function) in seen:
            continue
        seen.add(id(function))
        for cell in getattr(function, "__closure__", None) or ():
            with contextlib.suppress(ValueError):
                if isinstance(cell.cell_contents, _STATEFUL):
                    found.setdefault(id(cell.cell_contents), cell.cell_contents)
                elif getattr(cell.cell_contents, "__closure__", None):
                    functions.append(cell.cell_contents)
    return list(found.values())


def _reset(part: Any) -> None:
    """Start a part afresh over its (emptied) directory, through its own constructor."""
    if isinstance(part, MutationLog):
        part.close()  # the directory lock released, so the constructor can take it again
        part.__init__(part.directory, part.effects_path.name)  # type: ignore[misc]
    elif isinstance(part, DocumentStore):
        part.__init__(part.path.parent)  # type: ignore[misc]
    elif isinstance(part, Sessions):
        part.__init__(part.path.parent, part.ttl_s)  # type: ignore[misc]
    elif isinstance(part, Drafts):
        part.__init__(part.path.parent)  # type: ignore[misc]
    else:
        part.__init__(part.rate, 0, part.delay_s)  # type: ignore[misc]


def _target_app(name: str, factory: Callable[[Path], Any], root: Path, *, guarded: bool = False) -> Any:
    """The target's app over root/name: built once per process and data dir, then reset for each world.

    Building a FastAPI app (routes, pydantic schemas) cost about a sixth of a seed; its state is only its
    record files and the objects reading them, so each world empties the directory and re-runs those objects'
    constructors: the world starts from the records a freshly built app would see.
    """
    data_dir = root / name
    other = _APP_CACHE.get((name, data_dir, not guarded))  # the same service as the other strategy kind runs it
    for part in other[1] if other is not None else ():
        if isinstance(part, MutationLog):
            part.close()  # its directory lock, which this world's app takes
    cached = _APP_CACHE.get((name, data_dir, guarded))
    # Empty the directory in either case: a world of the other strategy kind (or an earlier process of the same
    # pid) may have left its records there, and an app built afresh would read them as its own.
    for entry in data_dir.iterdir() if data_dir.is_dir() else ():
        if entry.name != ".lock":
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    if cached is None:
        app = factory(data_dir)
        parts = _stateful_parts(app)
        if data_dir.parent == _process_root() and parts:
            _APP_CACHE[(name, data_dir, guarded)] = (app, parts)
        return app
    app, parts = cached
    for part in parts:
        _reset(part)
    return app


def _process_root() -> Path:
    """This process's world directory (reused by every world it runs, one at a time)."""
    return Path(_SHM if _SHM.is_dir() else tempfile.gettempdir()) / f"baton-sim-{os.getpid()}"


_ROOT_BUSY = threading.Lock()


@dataclass(frozen=True)
class SimConfig:
    """What one simulated run varies."""

    seed: int
    plan: FaultPlan = field(default_factory=FaultPlan)
    kinds: tuple[RunKind, ...] = (RunKind.DEPLOY,)
    lease_ttl_s: float = 6.0
    reservation_ttl_s: float = 20.0
    target_timeout_s: float = 1.0
    max_time_s: float = 1800.0
    """How long the world runs after its faults' pauses: the horizon is this plus `FaultPlan.paused_s` (a schedule
    that keeps workers still for longer than the horizon would otherwise end before the faults stop)."""
    restart_after_s: float = 2.0
    poll_s: float = 2.0
    """How often idle workers, supervisors and the coordinator look again (virtual seconds)."""
    stranded_after_s: float = 60.0
    """How long an unowned run that no placement can take waits before the coordinator escalates it."""
    ablate: tuple[str, ...] = ()
    keep_trail: bool = False
    strategy: str = "baton"
    """Who runs the runs: `baton`, a transcript-only control, `naive` or `competent` (`baton.sim.control_world`), or a
    baseline run by Baton's machinery under another recovery policy (`baton.sim.baseline_world`)."""
    outage_s: float = 300.0
    """How long a placement a reclaimed GPU (a `handoff` fault whose reason kills the worker) takes out stays without
    a worker: its supervisor starts none until then (0: restarted after `restart_after_s`). The same for
    every strategy: a run that moves away does not wait for it; one that stays does."""
    human_delay_s: float = 900.0
    """`human_assisted`: how long a human takes to act on a recovery (the experiment's `Parameters.human_delay_s`)."""
    human_cost_usd: float = 5.0
    """`human_assisted`: what one intervention costs (the experiment's `Parameters.human_cost_usd`)."""
    await_stalled: bool = False
    """Keep the world running until every stalled worker process has woken and finished what it was doing, even after
    every run ended (a zombie's late acts are judged too); off, the world ends once every run ended."""


@dataclass
class SimRecords:
    """What the oracles read: raw rows, the targets' files, the network's log, the lease history."""

    root: Path
    store: MemoryStore
    network: Network
    lease_history: list[tuple[float, str, str | None, int]]
    run_ids: tuple[str, ...]
    senders: dict[str, str]
    """process name -> placement of the worker process that sent messages."""
    settled: bool
    launch_authority: dict[str, AuthorityLevel]
    reported: dict[str, str] | None = None
    """Each run's status as a system without Baton's store reported it (a control's transcript); None: the store's
    `runs` rows hold it."""
    documents: tuple[bytes, ...] = ()
    """What such a system stored besides the store's blobs (a control's candidates, observations, verdicts)."""
    reported_budget: dict[str, float] | None = None
    """The model calls each run accounted for, as such a system reported them (None: Baton's checkpoints hold it)."""


@dataclass
class SimOutcome:
    """The end of one simulated run."""

    seed: int
    plan: FaultPlan
    trail_hash: str
    steps: int
    virtual_s: float
    statuses: dict[str, str]
    fired: list[Fault]
    violations: list[str]
    errors: list[str]
    last_boundaries: dict[str, str] = field(default_factory=dict)
    """Each run's latest sealed boundary (raw `checkpoints` rows)."""
    trail: list[str] | None = None
    strategy: str = "baton"
    skipped: list[Fault] = field(default_factory=list)
    """Scheduled faults with no counterpart for the strategy (a control has no catalog and no lease calls)."""
    interventions: int = 0
    """Human interventions the strategy needed (`human_assisted`, `baton.sim.baseline_world`; 0 for the others)."""

    @property
    def ok(self) -> bool:
        return not self.violations


class World:
    """Build, drive and check one seed's world (use `run_world`)."""

    GUARDED = True
    """The targets check capabilities (Baton's machinery runs the runs); a transcript control's do not."""

    def __init__(self, config: SimConfig, root: Path) -> None:
        self.config = config
        self.root = root
        self.sched = Scheduler(config.seed)
        if config.keep_trail:
            self.sched.trail_lines = []
        self.plan = config.plan
        self.store = MemoryStore(f"sim-{config.seed}-{next(_WORLDS)}", clock=self.sched)
        self.store.hooks = self  # after migrating: the world watches its own transactions from here on
        self.blobs = SqlBlobStore(self.store)
        self.network = Network(self.sched, self.plan, self._lease_epoch)
        self.placements = browser_world.world_placements(config.kinds, PLACEMENTS)
        self.authority = AuthorityService(f"baton-sim-{config.seed}".encode().ljust(32, b"."), max_ttl_s=120.0)
        browser_world.prepare(root, self.authority)  # the authority's keys, where the guarded targets read them
        guarded = self.GUARDED
        for name, factory in TARGET_APPS.items():
            built = GUARDED_APPS.get(name, factory) if guarded else factory
            self.network.add_target(name, _target_app(name, built, root, guarded=guarded))
        self.coding = CodingTwin(root, self.network, config.target_timeout_s) if RunKind.CODING in config.kinds \
            else None
        self.writes = 0
        self.writes_of: dict[str, int] = {}
        """Worker writes per store call (the count a fault with `on` names)."""
        self.workers_started = 0
        self.fired: list[Fault] = []
        self.pending_crash: dict[int, Process] = {}
        self.handoff_queue: list[Fault] = []
        self.doc_queue: list[str] = []
        self.secret_queue: list[str] = []
        self.catalog_touched = False
        """True once a catalog fault changed the store's catalog (until then it equals PLACEMENTS, unseeded)."""
        self.policy_update: dict[str, Any] = {}
        """The owner's change to the fleet policy (`owner_rule`: same region, same provider)."""
        self.constraint_update: dict[str, Any] = {}
        """The owner's portability constraints on every run (`owner_rule`: trust domain, attestation, data scope)."""
        self.import_moves: list[str] = []
        """Runs the operator imported (`legacy_import`) and is to move at the coordinator's first poll."""
        for record in (catalog_faults.OPERATOR_FILE, catalog_faults.OWNER_FILE, catalog_faults.BILL_FILE,
                       faults.PLANTED_FILE, faults.OWNER_RULES_FILE, faults.INVENTORY_FILE, faults.APPROVALS_FILE,
                       APPROVER_FILE, legacy_import.SCHEMAS_FILE):
            (root / record).unlink(missing_ok=True)  # the process's directory is reused world after world
        (root / catalog_faults.BILL_FILE).parent.mkdir(parents=True, exist_ok=True)
        self.lease_history: list[tuple[float, str, str | None, int]] = []
        self._last_lease: dict[str, tuple[str | None, int]] = {}
        self.senders: dict[str, str] = {}
        self.run_ids: list[str] = []
        self.kind_of: dict[str, str] = {}
        """run id -> its kind (what a seal-triggered fault, `faults.sealed_on`, names)."""
        self.seals_of: dict[tuple[str, str], int] = {}
        """(run kind, boundary) -> seals of it so far (what a seal-triggered fault's `at` counts)."""
        self._seal_faults = any(f.on.startswith(faults.SEALED) for f in self.plan.faults)
        self._checkpoint_rows = 0
        self.launch_authority: dict[str, AuthorityLevel] = {}
        self.down_until: dict[str, float] = {}
        """placement -> virtual second until which it has no worker (`SimConfig.outage_s`)."""
        self._settled = False
        self._writes_seen = 0  # committed writes: only one can settle a run
        self._settled_checked = -1

    # -- store hooks: interleaving, durable-step faults, the lease oracle's observations ----------------

    def before_tx(self, store: MemoryStore, write: bool, caller: str) -> None:
        actor = self.sched.actor()
        if actor is None:
            return
        if write and actor.process.name.startswith("w:"):
            self.writes += 1
            self.writes_of[caller] = self.writes_of.get(caller, 0) + 1
            for fault in self.plan.write_faults(self.writes, caller, self.writes_of[caller]):
                self._fire_write_fault(fault, actor.process)
        self.sched.yield_(f"{'w' if write else 'r'} {caller}")

    def after_tx(self, store: MemoryStore, write: bool, caller: str) -> None:
        if write:
            self._writes_seen += 1
            self._observe_leases()
        actor = self.sched.actor()
        if write and self._seal_faults:
            self._observe_seals(actor.process if actor is not None else None)
        if actor is not None and self.pending_crash.get(id(actor)) is actor.process:
            del self.pending_crash[id(actor)]
            self.sched.kill(actor.process, f"crash after {caller}")
            raise Crash(actor.process.name)

    def _observe_seals(self, process: Process | None) -> None:
        """The checkpoints sealed by this write (raw rows, in sealing order): fire the faults named on a worker's."""
        rows = self.store.raw("SELECT rowid, run_id, boundary FROM checkpoints WHERE rowid > ? ORDER BY rowid",
                              (self._checkpoint_rows,))
        for rowid, run_id, boundary in rows:
            self._checkpoint_rows = max(self._checkpoint_rows, int(rowid))
            if process is not None and process.name.startswith("w:"):
                for fault in self.seal_faults(str(run_id), str(boundary)):
                    self._fire_write_fault(fault, process)

    def seal_faults(self, run_id: str, boundary: str) -> list[Fault]:
        """A worker sealed `boundary` of `run_id` (a checkpoint, or a control's transcript at that step): count it,
        and the schedule's faults named on that seal (`faults.sealed_on`), for every strategy alike."""
        key = (self.kind_of.get(run_id, ""), boundary)
        self.seals_of[key] = self.seals_of.get(key, 0) + 1
        return self.plan.seal_faults(*key, self.seals_of[key])

    def _fire_write_fault(self, fault: Fault, process: Process) -> None:
        self.fired.append(fault)
        self.sched.record(f"fault {fault.describe()} on {process.name}")
        actor = self.sched.actor()
        if fault.kind == "crash" and fault.arg == "before":
            self.sched.kill(process, "crash before a durable step")
            raise Crash(process.name)
        if fault.kind == "crash":
            assert actor is not None
            self.pending_crash[id(actor)] = process
        elif fault.kind == catalog_faults.CATALOG_CHANGE:  # the operator acts now, the fleet moves the runs
            self.sched.spawn(f"operator {fault.arg}", self.sched.process("operator"), lambda: self._operate(fault))
        elif fault.kind == faults.REPLAN:  # a second writer at the run's epoch, once this worker's write is done
            self.sched.spawn("second writer", self.sched.process("second-writer"), self._replan)
        else:
            self.apply_common_fault(fault, process)

    def apply_common_fault(self, fault: Fault, process: Process) -> None:
        """The write faults every strategy's world applies alike: stall, handoff, doc_change, doc_secret, hold."""
        if fault.kind == "stall":
            process.paused_until = self.sched.elapsed_s + float(fault.arg)
        elif fault.kind == "handoff":
            self.handoff_queue.append(fault)
        elif fault.kind == "doc_change":
            self.doc_queue.append(fault.arg)
        elif fault.kind == faults.DOC_SECRET:
            self.secret_queue.append(fault.arg)
        elif fault.kind == faults.HOLD:  # this worker waits before its write; the rest of its process goes on
            self.sched.sleep(float(fault.arg))

    def _replan(self) -> None:
        """A second writer holding the epoch of each deploy run now at VERIFIED seals one more VERIFIED checkpoint over
        a re-planned spec nobody verified (`baton.faults.replan_side`, the live case's writer)."""
        for run_id in self.run_ids:
            latest = self.store.latest_checkpoint(run_id) if self.kind_of.get(run_id) == RunKind.DEPLOY.value else None
            if latest is None or latest.boundary.value != "VERIFIED":
                continue
            try:
                note = append_unverified_replan(self.store, self.blobs, run_id, replanned_spec(),
                                                f"{REPLANNED_VERSION} (rolling), re-planned after VERIFIED")
                self.sched.record(note)
            except Exception as exc:  # noqa: BLE001 - the writer lost a race (the run moved on): nothing sealed
                self.sched.record(f"second writer on {run_id} refused: {type(exc).__name__}")

    def change_documents(self, corpus: CorpusClient) -> None:
        """The corpus changes the fired `doc_change` and `doc_secret` faults asked for, through the corpus's own
        admin call (for Baton's worlds and the controls' alike). An unreachable corpus loses the change."""
        for doc in self._take(self.doc_queue):
            try:
                corpus.change_document(doc, f"Revised at {self.sched.elapsed_s:.3f}: {doc} changed under the run.")
            except Exception:  # noqa: BLE001 - whatever the client raised, the change did not land
                self.sched.record(f"doc change {doc} lost")
        for doc in self._take(self.secret_queue):
            self._plant(faults.PLANTED_KEY)
            try:
                corpus.change_document(doc, f"Revised at {self.sched.elapsed_s:.3f}: operators reach {doc} "
                                            f"with access key {faults.PLANTED_KEY}.")
            except Exception:  # noqa: BLE001
                self.sched.record(f"doc change {doc} lost")

    def _plant(self, secret: str) -> None:
        """Record a credential the world put into a document, for the oracle to look for in the store."""
        path = self.root / faults.PLANTED_FILE
        planted = json.loads(path.read_text()) if path.exists() else []
        path.write_text(json.dumps([*planted, secret]))

    def take_out(self, placement: str) -> None:
        """A reclaimed GPU: `placement` has no worker for `SimConfig.outage_s` (its workers are killed by the caller)."""
        if self.config.outage_s > 0:
            self.down_until[placement] = max(self.down_until.get(placement, 0.0),
                                             self.sched.elapsed_s + self.config.outage_s)
            self.sched.record(f"placement {placement} gone until {self.down_until[placement]:.1f}s")

    def is_down(self, placement: str) -> bool:
        return self.sched.elapsed_s < self.down_until.get(placement, 0.0)

    def _lease_epoch(self, run_id: str) -> int:
        rows = self.store.raw("SELECT epoch FROM leases WHERE run_id = ?", (run_id,))
        return int(rows[0][0]) if rows else -1

    def _observe_leases(self) -> None:
        for run_id, owner, epoch in self.store.raw("SELECT run_id, owner, epoch FROM leases ORDER BY run_id"):
            seen = (owner, int(epoch))
            if self._last_lease.get(run_id) != seen:
                self._last_lease[run_id] = seen
                self.lease_history.append((self.sched.elapsed_s, run_id, owner, int(epoch)))

    # -- launching ----------------------------------------------------------------------------------------

    def workload(self) -> list[tuple[str, RunKind, Placement, dict[str, Any]]]:
        """The seed's runs: (run id, kind, first placement, task input), drawn the same for every strategy."""
        rng = random.Random(f"launch:{self.config.seed}")
        runs = []
        for index, kind in enumerate(self.config.kinds):
            run_id = f"sim{self.config.seed}-{kind.value}-{index}"
            placement = PLACEMENTS[rng.randrange(len(PLACEMENTS))]
            documents = sorted(INITIAL_DOCUMENTS)
            task_input: dict[str, Any] = {"service": "checkout"} if kind is RunKind.DEPLOY else {
                "topic": "one side effect per key", "documents": [documents[(index + k) % len(documents)]
                                                                   for k in range(3)]}
            runs.append((run_id, kind, placement, task_input))
        return runs

    def owner_rules(self) -> tuple[str, ...]:
        """The rules the runs' owner set before launching them (the schedule's `owner_rule` faults)."""
        return tuple(sorted({f.arg for f in self.plan.faults if f.kind == faults.OWNER_RULE}))

    def _declare_rules(self, rules: tuple[str, ...]) -> None:
        """The owner's rules in force: the run constraints and fleet policy they set, the operator's inventory."""
        for fault in self.plan.faults:
            if fault.kind == faults.OWNER_RULE:
                self.fired.append(fault)
                self.sched.record(f"owner rule {fault.arg}")
        self.policy_update = {**({"require_same_region": True} if "same_region" in rules else {}),
                              **({"require_same_provider": True} if "same_provider" in rules else {}),
                              **({"approvals": (LAPSED_APPROVAL,)} if faults.APPROVAL_LAPSED in rules else {}),
                              **({"allow_authority_downgrade": True} if faults.DOWNGRADE_ALLOWED in rules else {})}
        if faults.APPROVAL_LAPSED in rules:  # the owner's record, in its own words, before launch
            path = self.root / faults.APPROVALS_FILE
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"pinned_release": RELEASES["model-v7"].release_id,
                                        "approvals": [LAPSED_APPROVAL.model_dump(mode="json")]}, sort_keys=True))
        self.constraint_update = {
            **({"contains_non_exportable_state": True} if {"non_exportable", "unsafe"} & set(rules) else {}),
            **({"requires_hardware_attestation": True} if {"attested", "unsafe"} & set(rules) else {}),
            **({"data_scope": faults.DATA_SCOPE} if "data_scope" in rules else {})}

    def _owner_rule(self, rules: tuple[str, ...], placement: Placement) -> dict[str, Any]:
        """One run's rule as its owner words it: values, not Baton's constraint record."""
        return {**({"same_region": placement.region} if "same_region" in rules else {}),
                **({"same_provider": placement.provider} if "same_provider" in rules else {}),
                **({"trust_domain": [placement.region, placement.provider]}
                   if {"non_exportable", "unsafe"} & set(rules) else {}),
                **({"attested_hardware": True} if {"attested", "unsafe"} & set(rules) else {}),
                **({"data_scope": faults.DATA_SCOPE} if "data_scope" in rules else {})}

    def write_inventory(self) -> None:
        """The operator's own inventory of the world's placements (what it seeded the catalog from), before launch."""
        inventory = {p.name: {"region": p.region, "provider": p.provider, "hardware_attested": p.hardware_attested,
                              "data_scopes": list(p.data_scopes), "runtime_image": p.environment.runtime_image,
                              "tool_versions": dict(p.environment.tool_versions)} for p in self.placements}
        path = self.root / faults.INVENTORY_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(inventory, sort_keys=True))

    def launch(self) -> None:
        needs: dict[str, dict[str, Any]] = {}
        self.write_inventory()
        rules = self.owner_rules()
        owner_rules: dict[str, dict[str, Any]] = {}
        if rules:
            self._declare_rules(rules)
        legacy = next((f for f in self.plan.faults if f.kind == faults.LEGACY_IMPORT), None)
        if legacy is not None and legacy.arg == legacy_import.NO_TRANSFORM:
            self.policy_update = {**self.policy_update, "allow_schema_transform": False}
        for run_id, kind, placement, task_input in self.workload():
            index = len(self.run_ids)
            authority = AuthorityLevel.EXTERNAL_MUTATE if kind is RunKind.DEPLOY else AuthorityLevel.SANDBOX_MUTATE
            constraints = PortabilityConstraints(portable_to_regions=catalog_faults.REGIONS,
                                                 portable_to_providers=catalog_faults.PROVIDERS,
                                                 **(self.constraint_update if kind in RULED_KINDS else {}))
            if kind is RunKind.BROWSER:
                placement, task_input, authority = browser_world.browser_launch(self.root, run_id, index)
            if kind is RunKind.CODING and self.coding is not None:
                spec = self.coding.spec(run_id, placement, constraints)
            else:
                spec = RunSpec(run_id, kind, RELEASES["model-v7"], placement, f"simulated {kind.value} run",
                               task_input, authority, constraints=constraints)
            if rules and kind in RULED_KINDS:
                owner_rules[run_id] = self._owner_rule(rules, spec.placement)
                (self.root / faults.OWNER_RULES_FILE).parent.mkdir(parents=True, exist_ok=True)
                (self.root / faults.OWNER_RULES_FILE).write_text(json.dumps(owner_rules, sort_keys=True))
            imported: str | None = None  # the state schema of the imported bundle's newest checkpoint
            if legacy is not None and kind is RunKind.DEPLOY:  # started by an older site; the operator imports it
                self.fired.append(legacy)
                imported, note = legacy_import.import_legacy(self.store, self.blobs, spec, self.root, self.sched,
                                                             self.placements)
                self.sched.record(note)
            # the owner's declared needs, before any worker starts; an imported run needs the schema it arrived at
            needs[run_id] = catalog_faults.owner_needs("model-v7", spec.authority.value, state_schema=imported)
            catalog_faults.write_owner_record(self.root, needs)
            if imported is not None:
                self.import_moves.append(run_id)
            else:
                launch_run(self.store, self.blobs, spec, reservation_ttl_s=self.config.reservation_ttl_s)
            self.run_ids.append(run_id)
            self.kind_of[run_id] = kind.value
            self.launch_authority[run_id] = spec.authority
        self._observe_leases()

    # -- actors ---------------------------------------------------------------------------------------------

    def settled(self) -> bool:
        if not self._settled and self._settled_checked != self._writes_seen:  # only a write can settle a run
            self._settled_checked = self._writes_seen
            rows = self.store.raw("SELECT status FROM runs")
            self._settled = bool(rows) and all(row[0] in ENDED for row in rows)
        return self._settled

    def clients(self, process: Process) -> tuple[DeployClient, CorpusClient]:
        timeout = self.config.target_timeout_s
        return (DeployClient("http://deploy.sim", timeout_s=timeout, transport=self.network.transport("deploy", process)),
                CorpusClient("http://corpus.sim", timeout_s=timeout, transport=self.network.transport("corpus", process)))

    def fenced(self, process: Process) -> tuple[Any, ...]:
        """Every target `process` fences on a move: deploy and corpus, the git remote in worlds with coding runs and
        the web application in worlds with browser runs."""
        return (*self.clients(process), *(() if self.coding is None else (self.coding.client(process),)),
                *browser_world.fence_clients(self, process))

    def supervise(self, placement: Placement) -> None:
        """Keep one worker process of `placement` alive (restart it after a crash)."""
        process: Process | None = None
        incarnation = 0
        while not self.settled():
            if process is None or process.dead:
                if process is not None:
                    self.sched.sleep(self.config.restart_after_s)
                if self.is_down(placement.name):  # the placement is gone for now: nothing to start a worker on
                    self.sched.sleep(self.config.poll_s)
                    continue
                incarnation += 1
                self.workers_started += 1
                process = self.sched.process(f"w:{placement.name}#{incarnation}")
                process.skew_s = self.plan.skew_for(self.workers_started)
                if process.skew_s:
                    self.fired.extend(f for f in self.plan.faults if f.kind == "skew" and f.at == self.workers_started)
                    self.sched.record(f"skew {process.name} {process.skew_s:+.1f}s")
                self.senders[process.name] = placement.name
                worker_id = f"{placement.name}-{incarnation}"
                self.sched.spawn(f"worker {worker_id}", process, lambda p=process, w=worker_id: self.work(placement, p, w))
            self.sched.sleep(self.config.poll_s)

    def work(self, placement: Placement, process: Process, worker_id: str) -> None:
        """A worker process: poll for runs reserved for its placement, adopt, execute (as `Worker` does)."""
        deploy, corpus = self.clients(process)
        coding_targets = () if self.coding is None else (self.coding.client(process),)
        targets = {target.name: target for target in (deploy, corpus, *coding_targets)}
        tools: dict[str, Any] = {"corpus": corpus, "deploy": deploy}
        if self.coding is not None:
            tools.update(self.coding.tools(coding_targets[0]))
        browsing = browser_world.lend(self, process, targets, tools)  # the app, `webapp` and `browser` for browser runs
        owner = worker_owner(worker_id)
        if self.catalog_touched:  # as the live worker: its placement from the store's catalog when it starts
            placement = next(p for p in self.placements_now() if p.name == placement.name)
        services = RuntimeServices(
            store=self.store, blobs=self.blobs, authority=self.authority,
            gateway=MutationGateway(self.store, self.authority, targets, ceiling=placement.authority_ceiling),
            targets=targets, releases={release.release_id: release for release in RELEASES.values()},
            tools=read_only_tools(tools), approver=RecordingApprover(self.root / APPROVER_FILE),
        )
        executor = RunExecutor(services, placement, owner, agent_for=agent_for, lease_ttl_s=self.config.lease_ttl_s,
                               fence_targets=(deploy, corpus, *coding_targets, *browsing), handoff_wait_s=30.0,
                               placement_of=self.placement_now)
        reserved = reserved_owner(placement)
        while not self.settled():
            try:
                for run in self.store.list_runs(status="active"):
                    if run.placement != placement.name:
                        continue
                    lease = self.store.get_lease(run.run_id)
                    if lease.owner != reserved:
                        continue
                    won = executor.adopt(run.run_id, lease)
                    if won is not None:
                        self.adopted(services, won, owner)
                        outcome = executor.execute(won)
                        self.sched.record(f"{owner} {run.run_id}: {outcome.result}")
            except Exception as exc:  # noqa: BLE001 - as the live worker: a failed poll is logged, not fatal
                self.sched.record(f"{owner} poll failed: {type(exc).__name__}")
            self.sched.sleep(self.config.poll_s)

    def adopted(self, services: RuntimeServices, lease: Any, owner: str) -> None:
        """A worker won a run's lease and is about to resume it: nothing to do for Baton (a baseline may rewind the
        run first, `baton.sim.baseline_world`)."""

    def coordinate(self) -> None:
        """The fleet's coordinator: move runs whose lease lapsed, and the runs chaos displaces."""
        coordinator_process = self.sched.process("coordinator")
        fences = self.fenced(coordinator_process)
        corpus = fences[1]
        coordinator = self._coordinator(fences)
        tried: dict[str, float] = {}
        for run_id in self._take(self.import_moves):
            self._move_imported(coordinator, run_id)
        while not self.settled():
            for fault in self._take(self.handoff_queue):
                self._chaos_handoff(coordinator, fault)
            for request in self.deferred_moves():
                self._handoff(coordinator, request)
            self.change_documents(corpus)
            now = self.store.db_now()
            for run_id in self.run_ids:
                lease = self.store.get_lease(run_id)
                run = self.store.get_run(run_id)
                if run.status != "active" or not awaits_an_owner(lease, run.detail, now):
                    continue
                if self.sched.elapsed_s - tried.get(run_id, -1e9) < 2.0:
                    continue
                request = self.recovery(HandoffRequest(run_id=run_id, reason=LEASE_EXPIRED, source_alive=False,
                                                       allow_same_placement=True), "lapsed")
                if request is None:  # the strategy holds the run for now: ask again on the next poll
                    continue
                tried[run_id] = self.sched.elapsed_s
                self._handoff(coordinator, request)
            self.sched.sleep(self.config.poll_s)

    def _move_imported(self, coordinator: Any, run_id: str) -> None:
        """The operator moves the run it imported (`legacy_import`) to cloud-eu; if that does not commit, it has the
        run resumed where it imported it."""
        rebalance = ChaosReason.SCHEDULER_REBALANCE.handoff_reason
        for request in (HandoffRequest(run_id=run_id, reason=rebalance, preferred_targets=(legacy_import.TARGET,),
                                       source_alive=False),
                        HandoffRequest(run_id=run_id, reason=rebalance, preferred_targets=(legacy_import.SOURCE,),
                                       source_alive=False, allow_same_placement=True)):
            try:
                outcome = coordinator.handoff(request)
            except Exception as exc:  # noqa: BLE001 - the operator tries the next move
                self.sched.record(f"operator's move of {run_id} raised {type(exc).__name__}")
                continue
            self.sched.record(f"operator's move of {run_id}: {outcome.status.value} {outcome.target_placement} "
                              f"{outcome.abort_reason or ''}")
            if outcome.status is HandoffStatus.COMMITTED:
                return

    def recovery(self, request: HandoffRequest, why: str) -> HandoffRequest | None:
        """The move the world's strategy makes of `request` (`why`: `lapsed`, `chaos` or `catalog`); None: no move now.
        Baton makes every move the fleet asks for; a baseline (`baton.sim.baseline_world`) restricts or holds them."""
        return request

    def deferred_moves(self) -> list[HandoffRequest]:
        """Moves the strategy held back earlier and makes now (none for Baton)."""
        return []

    def _coordinator(self, fences: tuple[Any, ...]) -> Any:
        """The fleet's coordinator, under the fleet policy as the owner's rule changed it (the live matrix's
        `FaultCase.handoff_policy` the same way)."""
        coordinator = build_coordinator(self.store, self.blobs, self.placements, fences, self._dispatch())
        if self.policy_update:
            coordinator.policy = coordinator.policy.model_copy(update=self.policy_update)
        return coordinator

    def _dispatch(self) -> DispatchSettings:
        """The fleet's coordinator settings in this world (it reads the store's catalog itself at each move)."""
        return DispatchSettings(reservation_ttl_s=self.config.reservation_ttl_s, quiesce_timeout_s=3.0,
                                stranded_after_s=self.config.stranded_after_s)

    def placements_now(self) -> tuple[Placement, ...]:
        """The world's placements as the store's catalog has them now (PLACEMENTS until a catalog fault)."""
        return catalog_faults.current_catalog(self.store, [p.name for p in self.placements]) if self.catalog_touched \
            else self.placements

    def placement_now(self, name: str) -> Placement:
        """A placement as the store's catalog has it now: what the live worker's executor reads at each resume
        (`RunExecutor.placement_of`), so a change since the worker started (a lowered ceiling) binds the resume,
        its gateway's cap and the capabilities it asks for. Until a catalog fault the catalog is the world's
        placements, unchanged, and the store is not read (no read, no interleaving point: a seed without a catalog
        fault keeps its schedule)."""
        return next(p for p in self.placements_now() if p.name == name)

    def _catalog_target(self) -> str:
        """The placement a catalog fault changes: the one the first active run is not on."""
        for run_id in self.run_ids:
            run = self.store.get_run(run_id)
            if run.status == "active" and run.placement is not None:
                return next(p.name for p in self.placements if p.name != run.placement)
        return self.placements[-1].name

    def _operate(self, fault: Fault) -> None:
        """A catalog fault: the change (whatever moves are in flight), then the fleet moving every active run onto
        what changed."""
        if fault.arg == catalog_faults.AFTER_MOVE:  # the move first; the change once it has committed
            target = self._catalog_target()
            self._catalog_handoff(self._coordinator(self.fenced(self.sched.process("operator"))), target)
            self._catalog_change(fault, target)
            return
        target = self._catalog_change(fault, self._catalog_target())
        self._catalog_handoff(self._coordinator(self.fenced(self.sched.process("operator"))), target)

    def _catalog_change(self, fault: Fault, target: str) -> str:
        at = self.store.db_now().isoformat()
        self.catalog_touched = True
        try:
            note = catalog_faults.apply_catalog_change(self.store, self.root, fault.arg, target, at,
                                                       [p.name for p in self.placements])
            self.sched.record(f"catalog {fault.arg}: {note}")
        except Exception as exc:  # noqa: BLE001 - a refused change (it would change nothing) is the operator's
            self.sched.record(f"catalog {fault.arg} on {target} refused: {type(exc).__name__}")
        return target

    def _catalog_handoff(self, coordinator: Any, target: str) -> None:
        """The fleet moves every active run onto the placement that changed (a planned move, as a rebalance)."""
        for run_id in self.run_ids:
            run = self.store.get_run(run_id)
            if run.status != "active" or run.placement is None or run.placement == target:
                continue
            owner = self.store.get_lease(run_id).owner or ""
            request = self.recovery(HandoffRequest(
                run_id=run_id, reason=ChaosReason.SCHEDULER_REBALANCE.handoff_reason, preferred_targets=(target,),
                source_alive=owner.startswith("worker:"), allow_same_placement=False), "catalog")
            if request is not None:
                self._handoff(coordinator, request)

    def _take(self, queue: list[Any]) -> list[Any]:
        taken, queue[:] = list(queue), []
        return taken

    def _chaos_handoff(self, coordinator: Any, fault: Fault) -> None:
        reason = ChaosReason(fault.arg)
        for run_id in self.run_ids:
            run = self.store.get_run(run_id)
            if run.status != "active" or run.placement is None:
                continue
            source = next((p for p in self.placements if p.name == run.placement), None)
            if source is None:
                continue
            owner = self.store.get_lease(run_id).owner or ""
            if reason.kills_worker:
                for process in self.sched.processes.values():
                    if process.name.startswith(f"w:{source.name}#"):
                        self.sched.kill(process, f"chaos {reason.value}")
                self.take_out(source.name)
            request = self.recovery(HandoffRequest(
                run_id=run_id, reason=reason.handoff_reason,
                preferred_targets=preferred_targets(reason, source, self.placements, "model-v8"),
                excluded_placements=tuple(p for p in affected_placements(reason, source, self.placements)
                                          if p != source.name),
                source_alive=owner.startswith("worker:") and not reason.kills_worker,
                allow_same_placement=reason.targets_one_run,
            ), "chaos")
            if request is not None:
                self._handoff(coordinator, request)

    def _handoff(self, coordinator: Any, request: HandoffRequest) -> None:
        try:
            outcome = coordinator.handoff(request)
            self.sched.record(f"handoff {request.run_id} {request.reason}: {outcome.status.value} "
                              f"{outcome.target_placement} {outcome.abort_reason or ''}")
        except Exception as exc:  # noqa: BLE001 - a failed move is retried on the next lapse
            self.sched.record(f"handoff {request.run_id} {request.reason} raised {type(exc).__name__}")

    # -- driving ----------------------------------------------------------------------------------------------

    def drive(self) -> bool:
        supervisor = self.sched.process("supervisor")
        for placement in self.placements:
            self.sched.spawn(f"supervisor {placement.name}", supervisor, lambda p=placement: self.supervise(p))
        self.sched.spawn("coordinator", self.sched.process("coordinator"), self.coordinate)

        def done() -> bool:
            return self.settled() and not any(not a.done and (a.name.startswith("late-") or self._zombie(a))
                                              for a in self.sched.actors)

        finished = self.sched.run(done, max_time_s=self.config.max_time_s + self.config.plan.paused_s())
        return finished

    def _zombie(self, actor: Any) -> bool:
        """With `await_stalled`: an actor of a worker process that was stalled and is still alive (it is to wake and
        finish what it was doing, even after every run ended)."""
        process = actor.process
        return (self.config.await_stalled and process.name.startswith("w:") and not process.dead
                and process.paused_until > 0.0)

    def records(self, settled: bool) -> SimRecords:
        return SimRecords(self.root, self.store, self.network, self.lease_history, tuple(self.run_ids),
                          dict(self.senders), settled, dict(self.launch_authority))


def _world_class(config: SimConfig) -> type[World]:
    if config.strategy == "baton":
        return World
    from baton.sim.baseline_world import BASELINES, BaselineWorld

    if config.strategy in BASELINES:
        return BaselineWorld
    from baton.sim.control_world import ControlWorld

    return ControlWorld


@contextlib.contextmanager
def seeded_uuid4(seed: int) -> Iterator[None]:
    """`uuid.uuid4` drawn from `seed` while the world runs (ids appear in the trail)."""
    rng = random.Random(f"uuid:{seed}")
    original = uuid.uuid4

    def seeded() -> uuid.UUID:
        return uuid.UUID(int=rng.getrandbits(128), version=4)

    uuid.uuid4 = seeded  # type: ignore[assignment]
    try:
        yield
    finally:
        uuid.uuid4 = original  # type: ignore[assignment]


def run_world(config: SimConfig, *, before_check: Callable[[SimRecords], None] | None = None) -> SimOutcome:
    """Build the world for `config`, run it until every run ended (or time ran out), and check it.

    `before_check` sees the raw records first (tests use it to show an oracle catches a tampered record).
    """
    from baton.sim.oracles import check

    shared = _ROOT_BUSY.acquire(blocking=False)  # a world inside a world (never in `baton sim`) gets its own dir
    if shared:
        root = _process_root()
        if not _APP_CACHE:  # this process's first world: nothing left from an earlier process of the same pid
            shutil.rmtree(root, ignore_errors=True)
            atexit.register(shutil.rmtree, root, True)
        root.mkdir(parents=True, exist_ok=True)
    else:
        root = Path(tempfile.mkdtemp(prefix=f"baton-sim-{config.seed}-", dir=_SHM if _SHM.is_dir() else None))
    ablated = ablation_env(*config.ablate) if config.ablate else contextlib.nullcontext()
    try:
        with ablated, seeded_uuid4(config.seed), browser_world.seeded_tokens(config.seed), _quiet(), \
                _billed(root / catalog_faults.BILL_FILE), _verdicts_recorded(root / VERDICTS_FILE), \
                _restores_recorded(root / legacy_import.RESTORED_FILE):
            world = _world_class(config)(config, root)
            with clocks.use_clock(world.sched):
                try:
                    world.launch()
                    settled = world.drive()
                finally:
                    world.sched.shutdown()
                records = world.records(settled)
                if before_check is not None:
                    before_check(records)
                violations = check(records)
            outcome = SimOutcome(
                seed=config.seed, plan=config.plan, trail_hash=world.sched.trail_hash, steps=world.sched.steps,
                virtual_s=world.sched.elapsed_s,
                statuses=records.reported if records.reported is not None else
                {row[0]: row[1] for row in world.store.raw("SELECT run_id, status FROM runs ORDER BY run_id")},
                fired=list(world.fired) + list(world.network.fired), violations=violations,
                errors=[f"{name}: {type(exc).__name__}: {exc}" for name, exc in world.sched.errors],
                trail=world.sched.trail_lines,
                last_boundaries={row[0]: row[1] for row in world.store.raw(
                    "SELECT run_id, boundary FROM checkpoints c WHERE seq = "
                    "(SELECT MAX(seq) FROM checkpoints d WHERE d.run_id = c.run_id) ORDER BY run_id")},
                strategy=config.strategy, skipped=list(getattr(world, "skipped", [])),
                interventions=sum(getattr(world, "interventions", {}).values()),
            )
            if hasattr(world, "steps_reached"):  # a control's last step, as its transcript has it
                outcome.last_boundaries = world.steps_reached()
            world.network.close()
            world.store.close()
            return outcome
    finally:
        if shared:
            _ROOT_BUSY.release()
        else:
            shutil.rmtree(root, ignore_errors=True)



@contextlib.contextmanager
def _env_path(variable: str, path: Path, *, fresh: bool = False) -> Iterator[None]:
    """`variable` names `path` for the world's life (emptied first when `fresh`), then is put back as it was."""
    if fresh:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)
    previous = os.environ.get(variable)
    os.environ[variable] = str(path)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(variable, None)
        else:
            os.environ[variable] = previous


def _billed(path: Path) -> contextlib.AbstractContextManager[None]:
    """The scripted model provider bills every call it serves in the world's own bill file."""
    from baton.agents.scripted_models import BILL_ENV

    return _env_path(BILL_ENV, path)


def _verdicts_recorded(path: Path) -> contextlib.AbstractContextManager[None]:
    """The deploy and citation verifiers write their own record of every verdict (`baton.agents.verifiers`) in the
    world's file, as the live matrix has them write theirs; emptied for each world."""
    from baton.agents.verifiers import VERIFIER_RECORD_ENV

    return _env_path(VERIFIER_RECORD_ENV, path, fresh=True)


def _restores_recorded(path: Path) -> contextlib.AbstractContextManager[None]:
    """The workers write their own record of every state they restore (`baton.runtime.restore_record`) in the
    world's file, as the live matrix's workers do; emptied for each world."""
    from baton.runtime.restore_record import RESTORE_RECORD_ENV

    return _env_path(RESTORE_RECORD_ENV, path, fresh=True)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Workers log every failed agent step; thousands of simulated failures would drown the output."""
    import logging

    logging.disable(logging.CRITICAL)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)
