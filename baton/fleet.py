"""A live fleet: real target services, worker processes across placements, runs, chaos, handoffs.

`run_fleet` starts the deploy and corpus services and the git remote under `BATON_HOME/targets/`,
one worker process per slot (each bound to a placement), launches N runs
(research and deploy, each reserved for a placement), and then drives a small
coordinator loop until every run is verified, failed or escalated:

* it consumes the seeded chaos schedule: a reclaimed GPU SIGKILLs the
  placement's worker and moves its runs without quiescing; every other reason
  is a live handoff (the worker quiesces at its next boundary); a better model
  moves a run to a placement that runs only the newer release, a behavioral
  migration the policy allows under the release board's approval;
* it hands off runs whose lease expired (their worker died), allowing the
  same placement (a restarted worker may pick the run up again);
* it restarts killed workers;
* with `pause_worker`, it freezes one worker (SIGSTOP) as it is about to send a
  mutation, moves its runs once their leases lapse (never back to a placement
  whose every worker is frozen), and wakes it (SIGCONT) once they moved: the
  targets' own fences must refuse its held request (`baton.runtime.fleet_pause`).

Work arrives over time: runs are launched one every `launch_interval_s` once
the workers are up, so chaos finds runs at every stage. A chaos event that
would displace no run (its placement is empty right now) waits up to
`chaos_patience_s` for one.

Every move is exactly one call, `trigger_handoff(coordinator, request)` ->
`HandoffCoordinator.handoff`, the coordinator built by `baton.runtime.dispatch` (which
Dagster's `handoff_job` uses too), so a Dagster sensor can replace this loop as the
trigger without a second handoff path. A run still active at the timeout is
fenced (its epoch advanced), marked failed, and named in the summary.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from baton.chaos_catalog import record_chaos
from baton.catalog.seed import hosted_placements
from baton.chaos import ChaosEvent, ChaosReason, ChaosRun, ChaosSchedule
from baton.fencing import FenceAware
from baton.handoff.coordinator import STRANDED_AFTER_S, HandoffRequest
from baton.runtime.dispatch import DispatchSettings, build_coordinator
from baton.models import Event, EventType, Placement, RunKind
from baton.ownership import Coordinator
from baton.placements import DEFAULT_PLACEMENTS
from baton.runtime.fleet_chaos import moves_for, revoke_drained_sessions
from baton.runtime.fleet_pause import WorkerPause, pause_placement
from baton.runtime.fleet_plan import plan_runs, worker_placements
from baton.runtime.fleet_summary import FleetSummary, summarize
from baton.runtime.handoff_dispatch import HandoffDispatcher, trigger_handoff, with_source_alive
from baton.runtime.launch import RunSpec, launch_run
from baton.runtime.supervisor import Supervisor
from baton.runtime.worker import WORKER_OWNER_PREFIX, connect_targets, connect_webapp
from baton.agents.deploy_agent import DEPLOY_POLICY
from baton.agents.research_agent import PUBLISH_POLICY
from baton.authority_http import AuthorityServiceProcess
from baton.authority_keys import JWKS_FILE
from baton.store.base import SqlStore
from baton.store.blobs import Blobs
from baton.store.factory import baton_home, open_blobs, open_store
from baton.store.records import RunRecord, awaits_an_owner
from baton.targets.git_remote_service import PUSH_POLICY, GitRemoteClient, git_remote_process
from baton.targets.service_process import ServiceProcess, target_data_dir
from baton.targets.webapp_service import WebappClient, webapp_process

LEASE_EXPIRED = "lease_expired"
COORDINATORS = ("local", "dagster")


@dataclass(frozen=True)
class FleetConfig:
    """Size, chaos and timing of a fleet. The defaults suit a laptop with two cores."""

    runs: int = 12
    workers: int = 3
    chaos: bool = False
    seed: int = 1
    home: Path | None = None
    database_url: str | None = None
    timeout_s: float = 180.0
    lease_ttl_s: float = 3.0
    reservation_ttl_s: float = 10.0
    boundary_pause_s: float = 0.35
    chaos_window_s: float = 8.0
    extra_chaos_events: int = 2
    ambiguous_rate: float = 0.3
    ambiguous_delay_s: float = 2.0
    target_timeout_s: float = 1.0
    drift_every_s: float = 2.0
    restart_after_s: float = 1.5
    quiesce_timeout_s: float = 3.0
    stranded_after_s: float = STRANDED_AFTER_S
    """How long a run nobody holds that no placement can take waits before the coordinator escalates it."""
    expiry_retry_s: float = 2.0
    launch_interval_s: float = 0.6
    chaos_patience_s: float = 8.0
    workers_up_s: float = 90.0
    """The fleet clock (launches, chaos) starts when a worker first adopts a run, or this long after the
    workers were started if none has: on a loaded machine a worker can take most of a minute to come up."""
    placements: tuple[Placement, ...] = DEFAULT_PLACEMENTS
    browser: bool = False
    """Every third run is a browser run (real Chromium in the workers, the web application as its target)."""
    pause_worker: bool = False
    """Freeze one worker with SIGSTOP as it is about to send a mutation, past its lease; wake it (SIGCONT)
    once its runs moved, so its held request reaches the targets with a stale epoch (`baton.runtime.fleet_pause`)."""
    pause_placement: str | None = None
    """The placement of the worker to freeze (default: the first without a GPU that may mutate, not a browser pool)."""
    coordinator: str = "local"
    """`local`: this loop hands off runs itself. `dagster`: it only changes the infrastructure (kills
    workers, restarts them); Dagster's sensors see lapsed leases and launch `handoff_job`."""

    def __post_init__(self) -> None:
        if self.coordinator not in COORDINATORS:
            raise ValueError(f"coordinator must be one of {', '.join(COORDINATORS)}, not {self.coordinator!r}")

    @property
    def reacts_itself(self) -> bool:
        """True when this loop, not Dagster, reacts to lost workers and chaos events."""
        return self.coordinator == "local"


@dataclass(frozen=True)
class FleetProgress:
    """A snapshot for a progress bar."""

    total: int
    finished: int
    verified: int
    failed: int
    escalated: int
    handoffs: int
    elapsed_s: float
    note: str = ""


@dataclass
class _Launcher:
    """Launches the planned runs one every `interval` seconds of the fleet clock (work arrives over time)."""

    store: SqlStore
    blobs: Blobs
    specs: list[RunSpec]
    reservation_ttl_s: float
    ownership: Coordinator
    launched: int = 0

    @property
    def done(self) -> bool:
        return self.launched >= len(self.specs)

    def launch_due(self, elapsed_s: float, interval_s: float) -> None:
        while not self.done and self.launched * interval_s <= elapsed_s:
            spec = self.specs[self.launched]
            launch_run(self.store, self.blobs, spec, reservation_ttl_s=self.reservation_ttl_s, ownership=self.ownership)
            self.launched += 1


class Fleet:
    """One fleet run from start to summary."""

    def __init__(self, config: FleetConfig, on_progress: Callable[[FleetProgress], None] | None = None) -> None:
        self.config = config
        self.on_progress = on_progress
        self.home = (config.home or baton_home()).resolve()
        self.fleet_id = f"fleet{config.seed}-{uuid.uuid4().hex[:6]}"
        self.dir = self.home / "fleets" / self.fleet_id
        self.history_path = self.dir / "history.jsonl"
        self.chaos_fired: dict[str, int] = {}
        self.run_ids: list[str] = []
        self.timed_out: list[str] = []
        self.webapp: WebappClient | None = None
        self.pause: WorkerPause | None = None

    # -- setup --------------------------------------------------------------------------------

    def _webapp(self, cleanup: contextlib.ExitStack) -> ServiceProcess:
        """Start the web application (sessions, CSRF, drafts; submissions checked against the authority's keys)."""
        webapp = webapp_process(target_data_dir("webapp", self.home), trust=self.home / "authority" / JWKS_FILE)
        cleanup.callback(webapp.stop)
        return webapp.start(detached=True)

    def _git_remote(self, cleanup: contextlib.ExitStack) -> ServiceProcess:
        """Start the git remote of the coding runs, checking capabilities itself (stopped by `cleanup`)."""
        trust = self.home / "authority" / JWKS_FILE
        remote = git_remote_process(target_data_dir("git", self.home), guard=PUSH_POLICY.arguments(trust))
        cleanup.callback(remote.stop)
        return remote.start(detached=True)

    def _services(self, cleanup: contextlib.ExitStack) -> tuple[ServiceProcess, ServiceProcess]:
        """Start the deploy and corpus services (stopped by `cleanup` whatever happens)."""
        c = self.config
        trust = self.home / "authority" / JWKS_FILE  # published by the authority service, started first
        deploy = ServiceProcess.deploy(target_data_dir("deploy", self.home), ambiguous_rate=c.ambiguous_rate,
                                       seed=c.seed, ambiguous_delay_s=c.ambiguous_delay_s,
                                       guard=DEPLOY_POLICY.arguments(trust))
        cleanup.callback(deploy.stop)
        deploy.start(detached=True)
        corpus = ServiceProcess.corpus(target_data_dir("corpus", self.home), seed=c.seed,
                                       drift_every_s=c.drift_every_s,
                                       guard=PUBLISH_POLICY.arguments(trust))
        cleanup.callback(corpus.stop)
        corpus.start(detached=True)
        return deploy, corpus

    def _authority(self, cleanup: contextlib.ExitStack) -> AuthorityServiceProcess:
        """Start the authority service, the only process that reads the signing key (stopped by `cleanup`)."""
        url = self.config.database_url or f"sqlite:///{self.home / 'baton.db'}"
        authority = AuthorityServiceProcess(self.home / "authority", url)  # placements from the store's catalog
        cleanup.callback(authority.stop)
        return authority.start(detached=True)

    def _supervisor(self, names: list[str], authority: AuthorityServiceProcess) -> Supervisor:
        c = self.config
        supervisor = Supervisor(
            home=self.home, log_dir=self.dir, database_url=c.database_url, history_path=self.history_path,
            options={"lease-ttl-s": str(c.lease_ttl_s), "boundary-pause-s": str(c.boundary_pause_s),
                     "target-timeout-s": str(c.target_timeout_s), "authority-url": authority.url},
            provision=authority.provision,
        )
        for index, placement in enumerate(names):
            supervisor.add(f"w{index + 1}-{placement}", placement)
        return supervisor

    # -- the loop -----------------------------------------------------------------------------

    def run(self) -> FleetSummary:
        c = self.config
        self.dir.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        names = worker_placements(c.placements, c.workers)
        store = open_store(c.database_url, self.home)
        launcher: _Launcher | None = None
        with contextlib.ExitStack() as cleanup:
            cleanup.callback(store.close)
            hosting = hosted_placements(store, c.placements, names)  # the store's catalog, seeded if empty
            supervisor = self._supervisor(names, self._authority(cleanup))
            blobs = open_blobs(self.home, store)
            deploy_service, corpus_service = self._services(cleanup)
            webapp_service = self._webapp(cleanup) if c.browser else None
            specs = plan_runs(c.runs, list(hosting.values()), prefix=self.fleet_id, browser=c.browser)
            coding = [str(spec.task_input["repository"]) for spec in specs if spec.kind is RunKind.CODING]
            git_service = self._git_remote(cleanup) if coding else None  # only a fleet with coding runs needs it
            deploy, corpus = connect_targets(self.home, timeout_s=5.0)
            cleanup.callback(corpus.close)
            cleanup.callback(deploy.close)
            fenced: tuple[FenceAware, ...] = (deploy, corpus)
            if git_service is not None:
                git = GitRemoteClient(git_service.url, timeout_s=5.0)
                cleanup.callback(git.close)
                for repository in coding:
                    git.create_repository(repository)
                fenced = (*fenced, git)
            webapp = connect_webapp(self.home, timeout_s=5.0) if c.browser else None
            if webapp is not None:
                cleanup.callback(webapp.close)
                fenced = (*fenced, webapp)
            self.webapp = webapp
            dispatcher = HandoffDispatcher(build_coordinator(
                store, blobs, hosting, fenced,
                DispatchSettings(reservation_ttl_s=c.reservation_ttl_s, quiesce_timeout_s=c.quiesce_timeout_s,
                                 stranded_after_s=c.stranded_after_s),
            ))
            if c.pause_worker:
                self.pause = WorkerPause.arm(supervisor, self.dir / "pause", lease_ttl_s=c.lease_ttl_s,
                                             placement=c.pause_placement or pause_placement(names, hosting))
            try:
                cleanup.callback(supervisor.stop_all)
                supervisor.start_all()
                self.run_ids = [spec.run_id for spec in specs]
                launcher = _Launcher(store, blobs, specs, c.reservation_ttl_s, Coordinator(store, name="fleet-launcher"))
                launcher.launch_due(0.0, c.launch_interval_s)
                schedule = None
                if c.chaos:
                    schedule = ChaosSchedule.generate(
                        c.seed, c.chaos_window_s, list(hosting.values()),
                        [ChaosRun(run_id=s.run_id, placement=s.placement.name, release_id=s.release.release_id)
                         for s in specs],
                        extra_events=c.extra_chaos_events,
                    )
                self._loop(store, supervisor, dispatcher, launcher, schedule, hosting, started, fenced)
            finally:
                self.run_ids = self.run_ids[: launcher.launched] if launcher is not None else []
                dispatcher.drain()
            supervisor.stop_all()  # before the services, so no worker talks to a stopped target
            deploy_service.stop()
            corpus_service.stop()
            if webapp_service is not None:
                webapp_service.stop()
            if git_service is not None:
                git_service.stop()
            summary = summarize(
                store, blobs, fleet_id=self.fleet_id, run_ids=self.run_ids, home=self.home, history_path=self.history_path,
                duration_s=time.monotonic() - started, planned=c.runs, chaos_fired=self.chaos_fired,
                timed_out=self.timed_out, pause=None if self.pause is None else self.pause.report(),
                workers={"slots": len(supervisor.slots), "started": supervisor.starts,
                         "killed": sum(s.kills for s in supervisor.slots), "restarted": supervisor.restarts},
            )
        return summary

    def _loop(
        self,
        store: SqlStore,
        supervisor: Supervisor,
        dispatcher: HandoffDispatcher,
        launcher: _Launcher,
        schedule: ChaosSchedule | None,
        hosting: dict[str, Placement],
        started: float,
        fence_targets: tuple[FenceAware, ...],
    ) -> None:
        c = self.config
        ours = set(self.run_ids)
        clock: float | None = None  # starts when the first run is adopted: the workers are up
        workers_started = time.monotonic()  # the loop starts right after the supervisor started them
        last_s = 0.0
        waiting: list[ChaosEvent] = []
        expiry_tried: dict[str, float] = {}
        while True:
            now = time.monotonic()
            runs = [run for run in store.list_runs() if run.run_id in ours]
            active = {run.run_id: run.placement or "" for run in runs if run.status == "active"}
            self._report(runs, store, now - started)
            if not active and launcher.done:
                return
            if now - started > c.timeout_s:
                self._time_out(store, sorted(active), fence_targets)
                return
            if clock is None and (self._any_adopted(store, active) or now - workers_started > c.workers_up_s):
                clock = now
            if clock is not None:
                elapsed = now - clock
                launcher.launch_due(elapsed, c.launch_interval_s)
                if schedule is not None:
                    waiting += schedule.due(last_s, elapsed)
                    waiting = [e for e in waiting if not self._fire(e, store, supervisor, dispatcher, active, hosting)
                               and elapsed - e.at_s < c.chaos_patience_s]
                last_s = elapsed
            if self.pause is not None:
                self.pause.step(store, supervisor, set(active))
            if c.reacts_itself:
                self._react(store, dispatcher, active, expiry_tried, now, supervisor.paused_placements())
            supervisor.restart_dead(after_s=c.restart_after_s)
            time.sleep(0.2)

    def _react(
        self, store: SqlStore, dispatcher: HandoffDispatcher, active: dict[str, str], expiry_tried: dict[str, float],
        now: float, unavailable: frozenset[str] = frozenset(),
    ) -> None:
        """The local coordinator: ask again for moves that lost a race, hand off runs whose lease expired
        (never to a placement in `unavailable`: every worker there is frozen, none would adopt the run)."""
        for request in dispatcher.take_raced():
            if request.run_id in active:
                owner = store.get_lease(request.run_id).owner or ""
                dispatcher.submit(with_source_alive(request, owner.startswith(WORKER_OWNER_PREFIX)))
        self._hand_off_expired(store, dispatcher, active, expiry_tried, now, unavailable)

    def _any_adopted(self, store: SqlStore, active: dict[str, str]) -> bool:
        return any((store.get_lease(run_id).owner or "").startswith(WORKER_OWNER_PREFIX) for run_id in active)

    def _fire(
        self,
        event: ChaosEvent,
        store: SqlStore,
        supervisor: Supervisor,
        dispatcher: HandoffDispatcher,
        active: dict[str, str],
        hosting: dict[str, Placement],
    ) -> bool:
        """Act on a due event; False (it waits) while it would displace no run."""
        movable = {run: placement for run, placement in active.items() if not dispatcher.busy(run)}

        def release_of(run_id: str) -> str | None:
            latest = store.latest_checkpoint(run_id)
            return None if latest is None else latest.release_id

        moves = [
            move.request
            for move in moves_for(event, movable, placements=list(hosting.values()),
                                  lease_owner=lambda run_id: store.get_lease(run_id).owner, release_of=release_of)
            if move.request is not None
        ]
        if not moves:
            return False
        self.chaos_fired[event.reason.value] = self.chaos_fired.get(event.reason.value, 0) + 1
        record_chaos(store, event, list(hosting))  # the infrastructure change, as a catalog event
        revoke_drained_sessions(event, [m.run_id for m in moves], self.webapp)  # they die with the pool's browsers
        if event.kill_worker:
            for slot in supervisor.on_placement(event.source_placement):
                supervisor.kill(slot)
        if self.config.reacts_itself:
            for request in moves:
                dispatcher.submit(request)
        return True

    def _hand_off_expired(
        self, store: SqlStore, dispatcher: HandoffDispatcher, active: dict[str, str], tried: dict[str, float], now: float,
        unavailable: frozenset[str] = frozenset(),
    ) -> None:
        db_now = store.db_now()
        for run_id in active:
            if dispatcher.busy(run_id) or now - tried.get(run_id, -1e9) < self.config.expiry_retry_s:
                continue
            lease = store.get_lease(run_id)
            detail = store.get_run(run_id).detail if lease.epoch == 0 else {}  # only an import's epoch 0 counts
            if not awaits_an_owner(lease, detail, db_now):
                continue
            tried[run_id] = now
            dispatcher.submit(HandoffRequest(run_id=run_id, reason=LEASE_EXPIRED, source_alive=False,
                                             allow_same_placement=True, excluded_placements=tuple(sorted(unavailable))))

    def _time_out(self, store: SqlStore, leftovers: list[str], fence_targets: tuple[FenceAware, ...]) -> None:
        """Fence every leftover run (advance its epoch) and mark it failed, saying why."""
        fencer = Coordinator(store, name="fleet-timeout")
        for run_id in leftovers:
            for _ in range(5):  # a handoff in flight may move the epoch under us: read it again
                observed = store.get_lease(run_id).epoch
                if fencer.grant(run_id, "fleet:timeout", ttl_s=60.0, observed_epoch=observed, force=True,
                                fence_targets=fence_targets, reason="fleet timeout") is not None:
                    break
            store.set_run_status(run_id, "failed", {"timed_out": True, "detail": "fleet timeout"})
            store.append_event(Event(event_type=EventType.RUN_FINISHED, run_id=run_id, at=store.db_now(),
                                     reason="failed", detail={"detail": "fleet timeout: fenced and marked failed"}))
            self.timed_out.append(run_id)

    def _report(self, runs: list[RunRecord], store: SqlStore, elapsed: float) -> None:
        if self.on_progress is None:
            return
        counts = {status: sum(1 for run in runs if run.status == status) for status in ("verified", "failed", "escalated")}
        handoffs = sum(
            1 for _, event in store.list_events(event_types=[EventType.OWNERSHIP_TRANSFERRED])
            if event.run_id in set(self.run_ids)
        )
        self.on_progress(FleetProgress(
            total=len(self.run_ids), finished=sum(counts.values()), verified=counts["verified"],
            failed=counts["failed"], escalated=counts["escalated"], handoffs=handoffs, elapsed_s=elapsed,
            note=", ".join(f"{reason}x{n}" for reason, n in sorted(self.chaos_fired.items())),
        ))


def run_fleet(config: FleetConfig, on_progress: Callable[[FleetProgress], None] | None = None) -> FleetSummary:
    """Run one fleet to the end and return its summary."""
    return Fleet(config, on_progress).run()


__all__ = ["ChaosReason", "FleetConfig", "FleetProgress", "FleetSummary", "run_fleet", "trigger_handoff"]
