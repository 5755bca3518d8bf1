"""The fleet's final account, from the store, the targets' own files and the shared history.

Nothing here trusts a worker's memory: run outcomes and handoffs come from the
store's runs and event log, side effects from the targets' JSON Lines files
(counted per idempotency key, the way `jq` would, per run at each target, and
per run over every target against what its kind may do: one effect, at its own
target), stale-worker rejections from the targets' request logs
(`baton.runtime.fleet_stale`), invariants 1-5 are checked over the history
every worker appended to and invariants 6-8 over each run's checkpoint chain.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from baton.checker import TargetEffect, check
from baton.history import read_history
from baton.models import Event, EventType, RunKind
from baton.runtime.chain_checks import chain_violations
from baton.runtime.fleet_stale import fenced_by_target, granted_epochs, stale_findings, target_requests
from baton.store.base import SqlStore
from baton.store.blobs import Blobs
from baton.store.records import RunRecord
from baton.targets import corpus_service, deploy_service, git_remote_service, webapp_service

_TARGET_SEQ_OFFSET = 1_000_000  # keeps each target's own order when both are checked together
EFFECT_TARGET: dict[RunKind, str] = {RunKind.DEPLOY: "deploy", RunKind.RESEARCH: "corpus", RunKind.CODING: "git",
                                     RunKind.BROWSER: "webapp"}
"""The one target where a run of each kind performs its one logical operation."""


class SideEffects(BaseModel):
    """What one target recorded for the fleet's runs."""

    model_config = ConfigDict(frozen=True)

    target: str
    file: str
    total: int
    duplicate_keys: dict[str, int]
    runs_with_several: dict[str, int]


class FleetSummary(BaseModel):
    """Outcome of one fleet."""

    model_config = ConfigDict(frozen=True)

    fleet_id: str
    store: str
    duration_s: float
    planned: int
    runs: int
    verified: int
    failed: int
    escalated: int
    active: int
    timed_out: list[str] = Field(default_factory=list)
    handoffs_by_reason: dict[str, int] = Field(default_factory=dict)
    handoffs_by_class: dict[str, int] = Field(default_factory=dict)
    handoffs_aborted: dict[str, int] = Field(default_factory=dict)
    chaos_events: dict[str, int] = Field(default_factory=dict)
    chaos_reasons_without_handoff: list[str] = Field(default_factory=list)
    stale_worker_rejections: int = 0
    """Requests the targets' own fences refused (their request logs), not Baton's events."""
    stale_rejections_by_target: dict[str, int] = Field(default_factory=dict)
    stale_rejection_events: int = 0
    """Baton's own STALE_WORKER_REJECTED events (gateway, store and target refusals together)."""
    stale_findings: list[str] = Field(default_factory=list)
    """The targets' request logs against the store's grants: refused current epochs, stale requests applied."""
    excess_effects: dict[str, str] = Field(default_factory=dict)
    """Run -> what it did beyond one effect at its own target, over every target's file."""
    pause: dict[str, object] | None = None
    """The SIGSTOP demonstration (`--pause-worker`): which worker, what it held, whether its runs moved first."""
    resumes_verified: int = 0
    resume_failures: int = 0
    operations_reconciled: int = 0
    observations_changed: int = 0
    authority_downgrades: int = 0
    side_effects: list[SideEffects] = Field(default_factory=list)
    duplicate_side_effects: int = 0
    runs_with_several_effects: int = 0
    checker_violations: list[str] = Field(default_factory=list)
    workers: dict[str, int] = Field(default_factory=dict)
    run_status: dict[str, str] = Field(default_factory=dict)

    @property
    def all_terminal(self) -> bool:
        return self.active == 0

    @property
    def oracle_failures(self) -> list[str]:
        """What the outside records say went wrong; the fleet's exit status is non-zero unless this is empty.

        Side effects are counted per run and per logical operation (run and target), from the
        targets' own files: a run performs one operation per target, so a second line is a
        duplicate whatever key it came under.
        """
        failures = [f"{s.target}: run {run} has {n} side effects" for s in self.side_effects
                    for run, n in s.runs_with_several.items()]
        failures += [f"{s.target}: key {key} recorded {n} times" for s in self.side_effects
                     for key, n in s.duplicate_keys.items()]
        failures += [f"run {run}: {what}" for run, what in self.excess_effects.items()]
        failures += [f"checker: {line}" for line in self.checker_violations]
        failures += [f"target fence: {line}" for line in self.stale_findings]
        failures += [f"timed out: {run}" for run in self.timed_out]
        failures += self.pause_failures
        return failures

    @property
    def pause_failures(self) -> list[str]:
        """The SIGSTOP demonstration failed unless the frozen worker woke after its runs moved and a target's
        fence refused one of its requests."""
        if self.pause is None:
            return []
        if self.pause.get("phase") != "woken":
            return [f"pause: the frozen worker never completed the demonstration (phase {self.pause.get('phase')})"]
        if not self.pause.get("runs_moved_before_wake"):
            return ["pause: the frozen worker was woken before its runs moved"]
        if self.stale_worker_rejections == 0:
            return ["pause: no target's own records show the woken worker's stale request refused"]
        return []


def _side_effects(name: str, directory: Path, effects: Sequence[TargetEffect], file: str) -> SideEffects:
    per_key = Counter(effect.idempotency_key for effect in effects)
    per_run = Counter(effect.run_id for effect in effects)
    return SideEffects(
        target=name,
        file=str(directory / file),
        total=len(effects),
        duplicate_keys={key: n for key, n in sorted(per_key.items()) if n > 1},
        runs_with_several={run: n for run, n in sorted(per_run.items()) if n > 1},
    )


def fleet_events(store: SqlStore, run_ids: Iterable[str]) -> list[Event]:
    """Every event of the fleet's runs, in commit order."""
    wanted = set(run_ids)
    return [event for _, event in store.list_events() if event.run_id in wanted]


def summarize(
    store: SqlStore,
    blobs: Blobs,
    *,
    fleet_id: str,
    run_ids: Sequence[str],
    home: Path,
    history_path: Path | None,
    duration_s: float,
    planned: int,
    chaos_fired: dict[str, int],
    timed_out: Sequence[str],
    workers: dict[str, int],
    pause: dict[str, object] | None = None,
) -> FleetSummary:
    """Count everything the fleet did, from durable records only."""
    wanted = set(run_ids)
    runs = [store.get_run(run_id) for run_id in run_ids]
    status = Counter(run.status for run in runs)
    events = fleet_events(store, run_ids)
    by_type: dict[EventType, list[Event]] = {}
    for event in events:
        by_type.setdefault(event.event_type, []).append(event)
    transfers = by_type.get(EventType.OWNERSHIP_TRANSFERRED, [])
    by_reason = Counter(event.reason or "" for event in transfers)
    by_class = Counter(
        str((event.compatibility_decision or {}).get("migration_class") or "UNKNOWN") for event in transfers
    )
    aborted = Counter(str(event.detail.get("requested_for", "")) for event in by_type.get(EventType.HANDOFF_ABORTED, []))

    deploy_dir = home / "targets" / "deploy"
    corpus_dir = home / "targets" / "corpus"
    deploy_effects = [e for e in deploy_service.read_effects(deploy_dir) if e.run_id in wanted]
    corpus_effects = [e for e in corpus_service.read_effects(corpus_dir) if e.run_id in wanted]
    git_dir = home / "targets" / "git"
    git_effects = [e for e in git_remote_service.read_effects(git_dir) if e.run_id in wanted]
    side_effects = [
        _side_effects("deploy", deploy_dir, deploy_effects, deploy_service.DEPLOYMENTS_FILE),
        _side_effects("corpus", corpus_dir, corpus_effects, corpus_service.PUBLICATIONS_FILE),
        _side_effects("git", git_dir, git_effects, git_remote_service.PUSHES_FILE),
    ]
    webapp_dir = home / "targets" / "webapp"
    webapp_effects = [e for e in webapp_service.read_effects(webapp_dir) if e.run_id in wanted]
    if webapp_effects or (webapp_dir / webapp_service.SUBMISSIONS_FILE).exists():
        side_effects.append(_side_effects("webapp", webapp_dir, webapp_effects, webapp_service.SUBMISSIONS_FILE))

    requests = target_requests(home, run_ids)
    fenced = fenced_by_target(requests)
    leases = by_type.get(EventType.LEASE_ACQUIRED, [])
    all_effects = {"deploy": deploy_effects, "corpus": corpus_effects, "git": git_effects, "webapp": webapp_effects}
    violations = [line for run_id in run_ids for line in chain_violations(store, blobs, run_id)]
    if history_path is not None and history_path.exists():
        history = [op for op in read_history(history_path) if op.run_id in wanted]
        ledger = [entry for run_id in run_ids for entry in store.list_operations(run_id)]
        effects = deploy_effects + [
            e.model_copy(update={"seq": e.seq + _TARGET_SEQ_OFFSET}) for e in corpus_effects
        ] + [e.model_copy(update={"seq": e.seq + 2 * _TARGET_SEQ_OFFSET}) for e in webapp_effects] + [
            e.model_copy(update={"seq": e.seq + 3 * _TARGET_SEQ_OFFSET}) for e in git_effects]
        violations += [v.explain() for v in check(history, ledger, effects, leases)]

    chaos_moved = {reason for reason in chaos_fired if by_reason.get(reason)}
    return FleetSummary(
        fleet_id=fleet_id,
        store=store.backend,
        duration_s=round(duration_s, 1),
        planned=planned,
        runs=len(runs),
        verified=status.get("verified", 0),
        failed=status.get("failed", 0),
        escalated=status.get("escalated", 0),
        active=status.get("active", 0),
        timed_out=list(timed_out),
        handoffs_by_reason=dict(sorted(by_reason.items())),
        handoffs_by_class=dict(sorted(by_class.items())),
        handoffs_aborted=dict(sorted(aborted.items())),
        chaos_events=dict(sorted(chaos_fired.items())),
        chaos_reasons_without_handoff=sorted(set(chaos_fired) - chaos_moved),
        stale_worker_rejections=sum(fenced.values()),
        stale_rejections_by_target=fenced,
        stale_rejection_events=len(by_type.get(EventType.STALE_WORKER_REJECTED, [])),
        stale_findings=stale_findings(requests, granted_epochs(leases)),
        excess_effects=excess_effects(runs, all_effects),
        pause=pause,
        resumes_verified=len(by_type.get(EventType.RESUME_VERIFIED, [])),
        resume_failures=len(by_type.get(EventType.REVALIDATION_FAILED, [])),
        operations_reconciled=len(by_type.get(EventType.OPERATION_RECONCILED, [])),
        observations_changed=sum(
            1 for e in by_type.get(EventType.REVERIFICATION_REQUIRED, []) if "changed on revalidation" in (e.reason or "")
        ),
        authority_downgrades=len(by_type.get(EventType.AUTHORITY_DOWNGRADED, [])),
        side_effects=side_effects,
        duplicate_side_effects=sum(n - 1 for s in side_effects for n in s.duplicate_keys.values()),
        runs_with_several_effects=sum(len(s.runs_with_several) for s in side_effects),
        checker_violations=violations,
        workers=workers,
        run_status={run.run_id: run.status for run in runs},
    )


def excess_effects(runs: Sequence[RunRecord], effects: dict[str, Sequence[TargetEffect]]) -> dict[str, str]:
    """Runs whose effects, over every target's own file, exceed one at the target of their kind."""
    excess = {}
    for run in runs:
        counts = {target: sum(1 for e in found if e.run_id == run.run_id) for target, found in effects.items()}
        own = EFFECT_TARGET.get(run.kind)
        beyond = {target: n - (1 if target == own else 0) for target, n in counts.items()}
        extra = {target: n for target, n in beyond.items() if n > 0}
        if extra:
            excess[run.run_id] = (f"{sum(counts.values())} side effects ({', '.join(f'{t} {n}' for t, n in counts.items() if n)}); "
                                  f"a {run.kind.value} run may cause one, at {own}")
    return dict(sorted(excess.items()))
