"""The new owner's side of a handoff: restore, apply the reverification rules, resume, confirm.

Rules applied on restore:
* open operations      -> the store's operation ledger is authoritative: an
                          operation the owner sent but never sealed into a
                          checkpoint is still listed for reconciliation;
* budget               -> usage is the larger of the checkpoint's ledger and
                          the charges recorded in the store, so work done
                          after the last seal is never forgotten; exhausted
                          limits are reported, not reset;
* environment changed  -> observations are revalidated against live state (when the gate's decision
                          requires it, or the environment ids differ: a restart has no decision);
* observation too old  -> it must be refreshed before use;
* artifact changed     -> evidence that does not bind to the current
                          candidate hash is dropped, the run goes back to
                          verification;
* authority changed    -> the context is reduced to the placement ceiling and
                          approvals are re-requested;
* release changed      -> already decided by the gate (behavioral migration
                          means revalidate, reverify and reauthorize).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from baton.ablation import Ablation, is_ablated
from baton.approval_signing import verify_approval
from baton.authority_keys import TrustedKeys
from baton.authority import authority_after_handoff, capped_authority
from baton.checkpoints import RestoredRun, restore
from baton.compat import HandoffDecision
from baton.errors import ApprovalError, CheckpointIntegrityError, StaleEpochError
from baton import fault_points
from baton.fault_points import KillPoint
from baton.models import (
    AuthorityContext,
    Boundary,
    BudgetLedger,
    BudgetUsage,
    Event,
    EventType,
    ExecutionCheckpoint,
    Observation,
    OperationEntry,
    Placement,
    UseMode,
    VerifierEvidence,
)
from baton.store.base import SqlStore
from baton.store.blobs import Blobs

_NEEDS_EVIDENCE = {Boundary.VERIFIED, Boundary.AWAITING_AUTHORITY, Boundary.AUTHORIZED}


@dataclass(frozen=True)
class ObservationUse:
    """An observation and the mode the resumed run must use it in."""

    observation: Observation
    mode: UseMode


@dataclass(frozen=True)
class ResumePlan:
    """What the new owner resumes from, and what it must redo first."""

    run_id: str
    epoch: int
    placement: Placement
    restored: RestoredRun
    boundary: Boundary
    authority: AuthorityContext
    observation_uses: tuple[ObservationUse, ...]
    valid_evidence: tuple[VerifierEvidence, ...]
    dropped_evidence: tuple[VerifierEvidence, ...]
    unresolved_operations: tuple[OperationEntry, ...]
    environment_changed: bool
    requires_reverification: bool
    requires_reauthorization: bool
    decision: HandoffDecision | None = None  # the gate's decision for the move to this epoch, if it was a handoff
    resume_release_id: str = ""  # the release to continue under (the gate's target release for a behavioral move)
    budget: BudgetLedger | None = None  # the checkpoint's ledger, usage raised to every charge the store recorded
    budget_exhausted: tuple[str, ...] = ()  # limits already reached: the new owner must end the run, not continue
    refused_approvals: tuple[tuple[str, str], ...] = ()  # (approval id, reason) of approvals that did not verify

    @property
    def checkpoint(self) -> ExecutionCheckpoint:
        return self.restored.checkpoint

    @property
    def observations_to_revalidate(self) -> tuple[ObservationUse, ...]:
        return tuple(use for use in self.observation_uses if use.mode is not UseMode.USE_RECORDED_OBSERVATION)


def latest_transfer_decision(store: SqlStore, run_id: str, epoch: int) -> HandoffDecision | None:
    """The gate decision recorded when ownership moved to `epoch`, if the run got there by a handoff."""
    for _, event in reversed(store.list_events(run_id=run_id, event_types=[EventType.OWNERSHIP_TRANSFERRED])):
        if event.target_epoch is not None and event.target_epoch <= epoch and event.compatibility_decision:
            return HandoffDecision.model_validate(event.compatibility_decision)
    return None


def _at_least(first: BudgetUsage, second: BudgetUsage) -> BudgetUsage:
    """Field by field, the larger usage of the two."""
    if is_ablated(Ablation.BUDGET_CARRY_OVER):  # the plan, like the new owner (baton.runtime.budget), starts afresh
        return BudgetUsage()
    return BudgetUsage(**{name: max(getattr(first, name), getattr(second, name)) for name in BudgetUsage.model_fields})


def ledger_with_store_charges(store: SqlStore, run_id: str, budget: BudgetLedger) -> BudgetLedger:
    """`budget` with every use the store's charges record and it misses (a charge made after its checkpoint)."""
    return budget.model_copy(update={"used": _at_least(budget.used, store.budget_used(run_id))})


def _open_operations(store: SqlStore, run_id: str, sealed: tuple[OperationEntry, ...]) -> tuple[OperationEntry, ...]:
    """Operations not yet final, judged by the store's latest state where it knows the operation."""
    latest = {entry.operation_id: entry for entry in sealed}
    latest.update({entry.operation_id: entry for entry in store.list_operations(run_id)})
    return tuple(sorted((e for e in latest.values() if not e.state.is_final), key=lambda e: e.recorded_at))


def prepare_resume(
    store: SqlStore,
    blobs: Blobs,
    run_id: str,
    *,
    placement: Placement,
    epoch: int,
    now: dt.datetime | None = None,
    approvers: TrustedKeys | None = None,
) -> ResumePlan:
    """Restore the run's latest checkpoint for the owner of `epoch` on `placement`.

    With `approvers`, an approval carries over only if an approver key signed
    it, for the current candidate, and it is unexpired; the others are listed
    in `refused_approvals` with their reason (`baton.approval_signing`).

    Raises StaleEpochError if `epoch` is not the run's current epoch, and
    CheckpointIntegrityError if any part fails verification.
    """
    fault_points.reached(KillPoint.ADOPT_CLAIMED)  # the caller won `epoch`; nothing is restored yet
    current = store.current_epoch(run_id)
    if epoch != current:
        raise StaleEpochError(f"run {run_id!r}: cannot resume at epoch {epoch}, the current epoch is {current}")
    checkpoint = store.latest_checkpoint(run_id)
    if checkpoint is None:
        raise CheckpointIntegrityError(f"run {run_id!r} has no sealed checkpoint to resume from")
    restored = restore(blobs, checkpoint)
    ckpt_release = checkpoint.release_id
    now = now or store.db_now()
    decision = latest_transfer_decision(store, run_id, epoch)
    parts = restored.parts
    moved_environment = parts.placement.environment.environment_id != placement.environment.environment_id
    # the gate's demand and the resume's own comparison, each enough alone (a restart with no handoff has no decision)
    environment_changed = (bool(decision and decision.requires_revalidation)
                           or (moved_environment and not is_ablated(Ablation.RESUME_ENVIRONMENT_CHECK)))
    uses = tuple(
        ObservationUse(observation=o, mode=o.required_use_mode(now, environment_changed=environment_changed))
        for o in restored.observations
    )

    candidate = parts.current_candidate
    reverify = bool(decision and decision.requires_reverification)
    valid: list[VerifierEvidence] = []
    dropped: list[VerifierEvidence] = []
    for evidence in parts.evidence:
        binds = candidate is not None and evidence.applies_to(candidate.artifact_hash)
        (valid if binds and not reverify else dropped).append(evidence)

    refused_approvals: tuple[tuple[str, str], ...] = ()
    recorded = _EventBatch()  # a downgrade is recorded with the restore, in its transaction and before it
    authority = authority_after_handoff(
        parts.authority, placement.authority_ceiling, run_id=run_id, events=recorded,
        source_placement=parts.placement.name, target_placement=placement.name, at=now,
    )
    if decision is not None:
        # The gate's ceiling binds too, each enough alone: a move judged at a lower ceiling never resumes above it,
        # whatever the placement's ceiling reads now (raising it again takes a new decision).
        authority = capped_authority(
            authority, decision.authority_ceiling,
            f"the handoff gate moved the run at ceiling {decision.authority_ceiling.value}, below {authority.level.value}",
            run_id=run_id, events=recorded, source_placement=parts.placement.name, target_placement=placement.name,
            at=now,
        )
    reauthorize = authority.level != parts.authority.level or bool(decision and decision.requires_reauthorization)
    if reauthorize:
        authority = authority.model_copy(update={"approvals": ()})
    else:
        live = tuple(
            a for a in authority.approvals
            if candidate is not None and a.artifact_hash == candidate.artifact_hash and now < a.expires_at
        )
        if approvers is not None:
            refused = []
            kept = []
            for approval in live:
                try:
                    kept.append(verify_approval(approval, approvers, now=now, artifacts=(candidate.artifact_hash,)))
                except ApprovalError as exc:
                    refused.append((approval.approval_id, exc.reason))
            live, refused_approvals = tuple(kept), tuple(refused)
        authority = authority.model_copy(update={"approvals": live})

    boundary = checkpoint.boundary
    if boundary in _NEEDS_EVIDENCE and not any(e.passed for e in valid):
        boundary = Boundary.CANDIDATE_READY
    elif boundary is Boundary.AUTHORIZED and not authority.approvals:
        boundary = Boundary.AWAITING_AUTHORITY

    budget = ledger_with_store_charges(store, run_id, parts.budget)
    plan = ResumePlan(
        run_id=run_id,
        epoch=epoch,
        placement=placement,
        restored=restored,
        boundary=boundary,
        authority=authority,
        observation_uses=uses,
        valid_evidence=tuple(valid),
        dropped_evidence=tuple(dropped),
        unresolved_operations=_open_operations(store, run_id, parts.operations.entries),
        environment_changed=environment_changed,
        requires_reverification=bool(dropped),
        requires_reauthorization=reauthorize,
        decision=decision,
        resume_release_id=decision.target_release_id if decision and decision.target_release_id else ckpt_release,
        budget=budget,
        budget_exhausted=budget.exhausted(now),
        refused_approvals=refused_approvals,
    )
    store.append_events([*recorded.events, *_restore_events(plan, now)])  # one transaction, in this order
    fault_points.reached(KillPoint.RESTORE_STARTED)
    return plan


class _EventBatch:
    """Collects events (an `EventSink`) to append later, together with others, in one transaction."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def append_event(self, event: Event) -> int:
        self.events.append(event)
        return 0  # no seq until the batch is appended


def _restore_events(plan: ResumePlan, now: dt.datetime) -> list[Event]:
    """STATE_RESTORED, what must be redone (revalidation, reverification), RESUME_STARTED."""
    ckpt = plan.checkpoint
    common = dict(
        run_id=plan.run_id, at=now, checkpoint_id=ckpt.checkpoint_id, source_placement=plan.restored.parts.placement.name,
        target_placement=plan.placement.name, target_epoch=plan.epoch, release_id=ckpt.release_id,
        state_schema=ckpt.schema_version,
    )
    events = [Event(event_type=EventType.STATE_RESTORED, resume_boundary=ckpt.boundary.value,
                    detail={"checkpoint_hash": ckpt.checkpoint_hash,
                            "observations": len(plan.observation_uses)}, **common)]  # type: ignore[arg-type]
    if plan.observations_to_revalidate:
        events.append(Event(
            event_type=EventType.REVALIDATION_STARTED, reason="environment changed or observations stale",
            detail={"modes": {u.observation.source: u.mode.value for u in plan.observations_to_revalidate}},
            **common,  # type: ignore[arg-type]
        ))
    if plan.dropped_evidence:
        events.append(Event(
            event_type=EventType.REVERIFICATION_REQUIRED, reason="evidence does not bind to the resumed artifact",
            detail={"dropped": [e.candidate_hash for e in plan.dropped_evidence]}, **common,  # type: ignore[arg-type]
        ))
    events.append(Event(event_type=EventType.RESUME_STARTED, resume_boundary=plan.boundary.value,
                        authority_before=plan.restored.parts.authority.level.value,
                        authority_after=plan.authority.level.value,
                        detail={"unresolved_operations": [o.operation_id for o in plan.unresolved_operations],
                                "resume_release_id": plan.resume_release_id,
                                "budget_exhausted": list(plan.budget_exhausted)},
                        **common))  # type: ignore[arg-type]
    return events


def confirm_resume(store: SqlStore, plan: ResumePlan, first: ExecutionCheckpoint, restored_first: RestoredRun) -> list[str]:
    """Check the first checkpoint sealed after resuming; record RESUME_VERIFIED or REVALIDATION_FAILED.

    Returns the problems found (empty when the resumed transition keeps every invariant).
    """
    problems: list[str] = []
    before, after = plan.restored.parts, restored_first.parts
    if first.owner_epoch != plan.epoch:
        problems.append(f"sealed at epoch {first.owner_epoch}, resumed at {plan.epoch}")
    if first.parent_checkpoint_hash != plan.checkpoint.checkpoint_hash and first.seq > plan.checkpoint.seq:
        problems.append("first checkpoint does not descend from the restored one")
    allowed_releases = {plan.checkpoint.release_id, plan.resume_release_id} - {""}
    if first.release_id not in allowed_releases:
        problems.append(f"release {first.release_id} is neither the checkpoint's nor the one the gate allowed")
    floor = plan.budget.used if plan.budget is not None else before.budget.used
    if not after.budget.used.covers(floor):
        problems.append("budget usage decreased across the handoff")
    if plan.budget is not None and after.budget.limits != plan.budget.limits:
        problems.append("budget limits were replaced across the handoff")
    if not plan.authority.level.allows(after.authority.level):
        problems.append(f"authority {after.authority.level.value} exceeds the resumed ceiling {plan.authority.level.value}")
    candidate = after.current_candidate
    if first.boundary in _NEEDS_EVIDENCE and not any(
        e.passed and candidate is not None and e.applies_to(candidate.artifact_hash) for e in after.evidence
    ):
        problems.append(f"boundary {first.boundary.value} without passing evidence for the current candidate hash")
    fault_points.reached(KillPoint.CONFIRM_SEALED)
    store.append_events([Event(
        event_type=EventType.REVALIDATION_FAILED if problems else EventType.RESUME_VERIFIED,
        run_id=plan.run_id, at=first.sealed_at, checkpoint_id=first.checkpoint_id, target_placement=plan.placement.name,
        target_epoch=plan.epoch, release_id=first.release_id, state_schema=first.schema_version,
        resume_boundary=first.boundary.value, authority_after=after.authority.level.value,
        reason="; ".join(problems) or "first resumed transition keeps every invariant",
    )], stamp=True)  # `at` becomes the database clock's time of the append (no separate clock read)
    return problems
