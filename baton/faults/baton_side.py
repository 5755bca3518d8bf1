"""Baton under the fault matrix: the real authority service, worker processes, agents, store and coordinator.

Nothing here runs an agent itself. A run is launched with `launch_run` and
adopted by a `python -m baton.runtime.worker` process of its placement (the
fleet's supervisor starts it); handoffs go through the dispatch coordinator
the fleet and Dagster use. The case script only acts from outside: it names
a fault point, SIGKILLs or SIGSTOPs a worker, kills a target, tampers with
files on disk, changes corpus documents.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from pathlib import Path
from typing import Any

from baton.agents.deploy_agent import DEPLOY_POLICY
from baton.agents.research_agent import PUBLISH_POLICY
from baton.authority_http import AuthorityServiceProcess
from baton.authority_keys import JWKS_FILE
from baton.catalog.changes import publish_release, update_placement, withdraw_release
from baton.catalog.releases import RELEASES
from baton.catalog.seed import hosted_placements
from baton.faults.pg import fresh_database
from baton.faults.rig import Rig, TargetOptions, sigcont, wait_until
from baton.faults.replan_side import append_unverified_replan
from baton.faults.rig_agents import AGENT_KINDS, agent_clients, agent_spec, agent_task, source_placement, write_intent
from baton.handoff.coordinator import HandoffRequest
from baton.models import (
    AuthorityLevel,
    BehavioralRelease,
    BudgetLedger,
    BudgetUsage,
    EventType,
    PortabilityConstraints,
    RunKind,
)
from baton.placements import DEFAULT_PLACEMENTS
from baton.runtime.dispatch import DispatchSettings, build_coordinator
from baton.runtime.executor import ADOPTION_REFUSAL
from baton.runtime.launch import RunSpec, default_limits, launch_run
from baton.runtime.supervisor import Supervisor, WorkerSlot, stop_outside_store_transactions
from baton.runtime.worker import connect_targets
from baton.store.factory import open_blobs, open_store
from baton.store.records import ENDED_STATUSES
from baton.targets.corpus_documents import INITIAL_DOCUMENTS

SOURCE = "local-gpu-eu"
LEASE_TTL_S = 2.0
TERMINAL = ENDED_STATUSES


class BatonRun:
    """One run of a case under Baton: its processes, store and verbs."""

    strategy = "baton"

    def __init__(self, rig: Rig, *, kind: str, store_url: str | None, case_id: str, limits: dict[str, Any],
                 task: dict[str, Any] | None = None, constraints: dict[str, Any] | None = None,
                 lease_ttl_s: float | None = None, handoff_policy: dict[str, Any] | None = None,
                 approval_ttl_s: float | None = None) -> None:
        self.rig, self.kind, self.case_id = rig, kind, case_id
        self.run_id = f"{case_id}-{uuid.uuid4().hex[:6]}"
        self.database_url, drop = fresh_database(store_url, self.run_id) if store_url else (None, None)
        if drop is not None:
            rig.cleanup.callback(drop)
        self.store = open_store(self.database_url, rig.home)
        rig.cleanup.callback(self.store.close)
        self.blobs = open_blobs(rig.home, self.store)
        self.hosting = hosted_placements(self.store, DEFAULT_PLACEMENTS, [p.name for p in DEFAULT_PLACEMENTS])
        self.limits = limits
        self.task_extra = dict(task or {})
        self.constraints = PortabilityConstraints(**(constraints or {}))
        self.slots: dict[str, WorkerSlot] = {}
        self.lease_ttl_s = lease_ttl_s or LEASE_TTL_S
        self.handoff_policy = dict(handoff_policy or {})
        self.approval_ttl_s = approval_ttl_s
        self._supervisor: Supervisor | None = None

    @property
    def history_path(self) -> Path:
        """The JSONL history every worker of this run appends its ownership and gateway calls to."""
        return self.rig.root / "history.jsonl"

    # -- setup ----------------------------------------------------------------------------------

    def start(self, options: TargetOptions) -> None:
        """Authority service, then the target services guarded by its public keys."""
        url = self.database_url or f"sqlite:///{self.rig.home / 'baton.db'}"
        # no catalog file: the authority reads each placement from the store's catalog at each request, so an
        # operator's change (a lowered ceiling) binds the next capability
        authority = AuthorityServiceProcess(self.rig.home / "authority", url, approval_ttl_s=self.approval_ttl_s)
        self.rig.cleanup.callback(authority.stop)
        authority.start()
        trust = self.rig.home / "authority" / JWKS_FILE
        options = dataclasses.replace(
            options, guard=DEPLOY_POLICY.arguments(trust), corpus_guard=PUBLISH_POLICY.arguments(trust),
            agent_trust=str(trust))
        self.rig.start_targets(options)
        self._supervisor = Supervisor(
            home=self.rig.home, log_dir=self.rig.root / "logs", database_url=self.database_url,
            history_path=self.history_path,
            options={"lease-ttl-s": str(self.lease_ttl_s), "boundary-pause-s": "0.05", "target-timeout-s": "1.0",
                     "poll-s": "0.1", "authority-url": authority.url},
            provision=authority.provision,
        )
        self.rig.cleanup.callback(self._supervisor.stop_all, 3.0)

    def worker(self, placement: str, *, point: str | None = None) -> WorkerSlot:
        """Start a worker process for `placement` (holding at `point` the first time it gets there)."""
        assert self._supervisor is not None
        slot = self._supervisor.add(f"w{len(self.slots) + 1}-{placement}", placement)
        with self.rig.process_env(point):
            self._supervisor.start(slot)
        self.slots[placement] = slot
        return slot

    def launch(self) -> None:
        launch_run(self.store, self.blobs, self.run_spec(), reservation_ttl_s=10.0)

    def run_spec(self) -> RunSpec:
        """The run this case launches (its task, release, source placement and limits); writes the records an
        oracle reads of it (the agent's intent, the build registry) as a launch does."""
        placement = self.hosting[source_placement(self.kind, SOURCE)]
        release = RELEASES["model-v7"]
        limits = default_limits(self.store.db_now()).model_copy(update=self.limits)
        if self.kind in AGENT_KINDS:
            task = agent_task(self.kind, self.task_extra)
            write_intent(self.rig.root, self.kind, task)
            return agent_spec(self.kind, self.run_id, placement, limits, task, self.constraints)
        if self.kind == "deploy":
            self.rig.write_registry("checkout")
            return RunSpec(self.run_id, RunKind.DEPLOY, release, placement, "deploy checkout", {"service": "checkout"},
                           AuthorityLevel.EXTERNAL_MUTATE, limits=limits, constraints=self.constraints)
        return RunSpec(self.run_id, RunKind.RESEARCH, release, placement, "research fencing",
                       {"topic": "fencing", "documents": sorted(INITIAL_DOCUMENTS)[:3]} | self.task_extra,
                       AuthorityLevel.SANDBOX_MUTATE, limits=limits)

    # -- verbs of a case ------------------------------------------------------------------------

    def pid(self, placement: str) -> int:
        process = self.slots[placement].process
        assert process is not None
        return process.pid

    def freeze(self, placement: str) -> int:
        """SIGSTOP the worker process of `placement`: its heartbeat stops with it."""
        pid = self.pid(placement)
        self.rig.cleanup.callback(sigcont, pid)  # never leave a stopped process behind
        return stop_outside_store_transactions(pid, self.store)

    def thaw(self, pid: int) -> None:
        sigcont(pid)

    def wait_lease_lapsed(self) -> None:
        """Until the store's clock says the run's lease expired (its holder is frozen or dead)."""
        wait_until(lambda: not self.store.get_lease(self.run_id).held_at(self.store.db_now()),
                   timeout_s=60.0, what="the lease to lapse")

    def hand_off(self, to: str, reason: str = "lease_expired", *, start_worker: bool = True,
                 source_alive: bool = False) -> str:
        """Move the run to `to` through the coordinator every trigger uses; the outcome's summary.

        Without `start_worker` the run waits, reserved for `to`, until `worker(to)` starts one there.
        With `source_alive` the move is planned: the coordinator first asks the source to quiesce.
        """
        self.hosting = hosted_placements(self.store, DEFAULT_PLACEMENTS, list(self.hosting))  # the catalog now
        if start_worker and to not in self.slots:
            self.worker(to)
        deploy, corpus = connect_targets(self.rig.home, timeout_s=2.0)
        agents = agent_clients(self.rig.home)
        try:
            coordinator = build_coordinator(self.store, self.blobs, self.hosting, (deploy, corpus, *agents),
                                            DispatchSettings(reservation_ttl_s=10.0, quiesce_timeout_s=2.0))
            if self.handoff_policy:  # the case's change to the fleet policy (FaultCase.handoff_policy)
                coordinator.policy = coordinator.policy.model_copy(update=self.handoff_policy)
            outcome = coordinator.handoff(HandoffRequest(self.run_id, reason, preferred_targets=(to,),
                                                         source_alive=source_alive, allow_same_placement=True))
        finally:
            for client in (deploy, corpus, *agents):
                client.close()
        if not outcome.committed:
            return f"handoff to {to}: aborted"
        chosen = outcome.target_placement or to
        if chosen != to and start_worker and not self._alive(chosen):
            self.worker(chosen)  # the coordinator picked another placement: give it a worker too
        return f"handoff to {to}: committed" + ("" if chosen == to else f" to {chosen} instead")

    def change_releases(self, withdraw: list[str], publish: dict[str, tuple[BehavioralRelease, list[str]]]) -> str:
        """The provider changes its releases: withdraw these (catalog names), publish these (name -> manifest,
        placements), through the catalog calls `baton release ...` makes; the provider's record is written first."""
        self.rig.record_release_change(withdrawn=[RELEASES[name].release_id for name in withdraw],
                                       published={name: manifest.release_id for name, (manifest, _) in publish.items()})
        for name in withdraw:
            withdraw_release(self.store, RELEASES[name].release_id, actor="provider", reason="withdrawn mid-run")
        for name, (manifest, placements) in publish.items():
            publish_release(self.store, manifest, name=name, placements=placements, actor="provider")
        return f"catalog: withdrew {withdraw}, published {sorted(publish)}"

    def change_placement(self, placement: str, **facts: str) -> str:
        """The operator changes a placement (region, provider, ceiling, ...) through the catalog call
        `baton placement update` makes; the operator's record is written first."""
        self.rig.record_placement_change(placement, **facts)
        update_placement(self.store, placement, actor="operator", reason="changed mid-run", **facts)  # type: ignore[arg-type]
        return f"catalog: placement {placement} now {facts}"

    def _alive(self, placement: str) -> bool:
        slot = self.slots.get(placement)
        process = None if slot is None else slot.process
        return process is not None and process.poll() is None

    def tamper_manifest(self) -> str:
        """Flip one byte of the latest checkpoint's candidate manifest blob where it is stored.

        A large blob is a file under `blobs/`; a small one (the default) is a row of the store's
        blob table, changed with plain SQL, as a disk or operator error would change it.
        """
        latest = self.store.latest_checkpoint(self.run_id)
        assert latest is not None
        digest = latest.candidate_manifest_ref.split(":", 1)[1]
        path = self.rig.home / "blobs" / digest[:2] / digest[2:]
        where = "file"
        if path.exists():
            data = bytearray(path.read_bytes())
            data[len(data) // 2] ^= 0x01
            path.write_bytes(bytes(data))
        else:
            key = bytes.fromhex(digest)
            rows = self.store.execute_raw("SELECT data FROM blobs WHERE digest = ?", (key,))
            assert rows, f"candidate manifest {digest[:12]} is neither a blob file nor a blob row"
            data = bytearray(bytes(rows[0][0]))
            data[len(data) // 2] ^= 0x01
            self._update_blob_row_bypassing_append_only(key, bytes(data))
            where = "blob table row"
        return (f"flipped a byte of candidate manifest {latest.candidate_manifest_ref[:19]} ({latest.boundary.value}, "
                f"{where})")

    def replan_unverified(self, content: bytes, summary: str) -> str:
        """A second writer at the run's epoch seals VERIFIED over a re-planned candidate (`baton.faults.replan_side`)."""
        return append_unverified_replan(self.store, self.blobs, self.run_id, content, summary)

    def _update_blob_row_bypassing_append_only(self, key: bytes, data: bytes) -> None:
        """Change one blob row as corruption would: the store's append-only triggers are lifted around it."""
        store = self.store
        if store.dialect.name == "sqlite":
            triggers = [str(sql) for (sql,) in store.execute_raw(
                "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'blobs'")]
            names = [str(name) for (name,) in store.execute_raw(
                "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'blobs'")]
            for name in names:
                store.execute_raw(f'DROP TRIGGER "{name}"')
            try:
                store.execute_raw("UPDATE blobs SET data = ? WHERE digest = ?", (data, key))
            finally:
                for sql in triggers:
                    store.execute_raw(sql)
        else:
            store.execute_raw("ALTER TABLE blobs DISABLE TRIGGER USER")
            try:
                store.execute_raw("UPDATE blobs SET data = ? WHERE digest = ?", (data, key))
            finally:
                store.execute_raw("ALTER TABLE blobs ENABLE TRIGGER USER")

    def wait_end(self, timeout_s: float = 240.0) -> str:
        wait_until(lambda: self.store.get_run(self.run_id).status in TERMINAL, timeout_s=timeout_s,
                   what=f"run {self.run_id} to end")
        return self.store.get_run(self.run_id).status

    def refused_at_adoption(self) -> str | None:
        """The reasons a worker gave for refusing to host the run when it adopted it (None: no refusal yet)."""
        for _, event in self.store.list_events(run_id=self.run_id, event_types=[EventType.COMPATIBILITY_FAILED]):
            if event.reason == ADOPTION_REFUSAL:
                return f"{event.target_placement}: {', '.join((event.compatibility_decision or {}).get('reasons') or [])}"
        return None

    def report(self) -> None:
        """What Baton says about the run: its status and the budget it accounted."""
        run = self.store.get_run(self.run_id)
        used = self._accounted()
        raised = sorted({str(reason) for _, event in self.store.list_events() if event.run_id == self.run_id
                         for reason in (event.compatibility_decision or {}).get("reasons") or []})
        self.rig.write_reported({"run_id": self.run_id, "status": run.status, "model_calls": used.model_calls,
                                 "model_spend_usd": str(used.model_spend_usd), "gate_reasons": raised,
                                 "limits": {"model_calls": self.limits.get("model_calls")}})

    def _accounted(self) -> BudgetUsage:
        """The budget the run carries: its latest checkpoint's ledger (what moves with it), else the store's sum."""
        latest = self.store.latest_checkpoint(self.run_id)
        try:
            assert latest is not None
            return BudgetLedger.model_validate_json(self.blobs.get(latest.budget_ledger_ref)).used
        except Exception:  # noqa: BLE001 - an unreadable ledger: fall back to the charges the store recorded
            return self.store.budget_used(self.run_id)

    def settle(self) -> None:
        """Give in-flight processes a moment to write what they were writing before the oracles read."""
        time.sleep(0.3)

