"""The fleet's final account, from the store, the targets' own files and the shared history.

Nothing here trusts a worker's memory: run outcomes and handoffs come from the
store's runs and event log, side effects from the targets' JSON Lines files
(counted per idempotency key, the way `jq` would), invariants 1-5 are checked
over the history every worker appended to and invariants 6-8 over each run's
checkpoint chain.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from baton.checker import TargetEffect, check
from baton.history import read_history
from baton.models import Event, EventType
from baton.runtime.chain_checks import chain_violations
from baton.store.base import SqlStore
from baton.store.blobs import Blobs
from baton.targets import corpus_service, deploy_service, git_remote_service, webapp_service

_TARGET_SEQ_OFFSET = 1_000_000  # keeps each target's own order when both are checked together


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
        failures += [f"checker: {line}" for line in self.checker_violations]
        failures += [f"timed out: {run}" for run in self.timed_out]
        return failures


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

    violations = [line for run_id in run_ids for line in chain_violations(store, blobs, run_id)]
    if history_path is not None and history_path.exists():
        history = [op for op in read_history(history_path) if op.run_id in wanted]
        ledger = [entry for run_id in run_ids for entry in store.list_operations(run_id)]
        effects = deploy_effects + [
            e.model_copy(update={"seq": e.seq + _TARGET_SEQ_OFFSET}) for e in corpus_effects
        ] + [e.model_copy(update={"seq": e.seq + 2 * _TARGET_SEQ_OFFSET}) for e in webapp_effects] + [
            e.model_copy(update={"seq": e.seq + 3 * _TARGET_SEQ_OFFSET}) for e in git_effects]
        violations += [v.explain() for v in check(history, ledger, effects, by_type.get(EventType.LEASE_ACQUIRED, []))]

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
        stale_worker_rejections=len(by_type.get(EventType.STALE_WORKER_REJECTED, [])),
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
