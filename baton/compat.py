"""The deterministic compatibility gate: may this checkpoint resume on that placement, and how.

`evaluate_handoff` is a pure function of its arguments (the time is passed
in, nothing is read from a clock, a store or the network). It checks, in a
fixed order, resumability, release pinning, schema readability, portability
constraints (region, provider, attestation, non-exportable state, data
scope), policy, verifier and tool-contract availability and authority; then
classifies the move (sec. 15 of the spec) and says what must be redone after
it (sec. 22). Every finding is a stable reason code; any blocking code
refuses the handoff.

Placement capabilities are read strictly: a placement that lists no
supported releases, readable schema versions, verifiers or tools supports
none, so a missing declaration refuses rather than permits.
"""

from __future__ import annotations

import datetime as dt
from enum import StrEnum

from pydantic import Field, model_validator

from baton.ablation import Ablation, gate_reason_ablated, is_ablated
from baton.checkpoints import RestoredRun
from baton.models import (
    AuthorityLevel,
    BehavioralRelease,
    ExecutionCheckpoint,
    Placement,
    PortabilityConstraints,
    Record,
    Ref,
    ResumabilityClass,
)
from baton.placements import tools_needed
from baton.portability import PortabilityReason, constraint_violations
from baton.schema_versions import AnyCheckpoint, transform_target


class GateReason(StrEnum):
    """Stable reason codes of the compatibility gate."""

    CHECKPOINT_NOT_RESUMABLE = "checkpoint_not_resumable"
    MIGRATION_UNSAFE = "migration_unsafe"
    RELEASE_INCOMPATIBLE = "release_incompatible"
    BEHAVIORAL_MIGRATION_APPROVED = "behavioral_migration_approved"
    BEHAVIORAL_MIGRATION_UNAPPROVED = "behavioral_migration_unapproved"
    STATE_SCHEMA_INCOMPATIBLE = "state_schema_incompatible"
    SCHEMA_TRANSFORM_REQUIRED = "schema_transform_required"
    SCHEMA_TRANSFORM_FORBIDDEN = "schema_transform_forbidden"
    REGION_NOT_ALLOWED = PortabilityReason.REGION_NOT_ALLOWED.value
    PROVIDER_NOT_ALLOWED = PortabilityReason.PROVIDER_NOT_ALLOWED.value
    HARDWARE_ATTESTATION_MISSING = PortabilityReason.HARDWARE_ATTESTATION_MISSING.value
    NON_EXPORTABLE_STATE = PortabilityReason.NON_EXPORTABLE_STATE.value
    DATA_SCOPE_UNAVAILABLE = PortabilityReason.DATA_SCOPE_UNAVAILABLE.value
    REGION_CHANGE_FORBIDDEN = "region_change_forbidden"
    PROVIDER_CHANGE_FORBIDDEN = "provider_change_forbidden"
    VERIFIER_UNAVAILABLE = "verifier_unavailable"
    TOOL_CONTRACT_UNAVAILABLE = "tool_contract_unavailable"
    AUTHORITY_DOWNGRADED = "authority_downgraded"
    AUTHORITY_DOWNGRADE_FORBIDDEN = "authority_downgrade_forbidden"
    ENVIRONMENT_CHANGED = "environment_changed"
    RUNTIME_CHANGED = "runtime_changed"
    UNRESOLVED_OPERATIONS = "unresolved_operations"


BLOCKING: frozenset[GateReason] = frozenset(
    {
        GateReason.CHECKPOINT_NOT_RESUMABLE,
        GateReason.MIGRATION_UNSAFE,
        GateReason.RELEASE_INCOMPATIBLE,
        GateReason.BEHAVIORAL_MIGRATION_UNAPPROVED,
        GateReason.STATE_SCHEMA_INCOMPATIBLE,
        GateReason.SCHEMA_TRANSFORM_FORBIDDEN,
        GateReason.REGION_NOT_ALLOWED,
        GateReason.PROVIDER_NOT_ALLOWED,
        GateReason.HARDWARE_ATTESTATION_MISSING,
        GateReason.NON_EXPORTABLE_STATE,
        GateReason.DATA_SCOPE_UNAVAILABLE,
        GateReason.REGION_CHANGE_FORBIDDEN,
        GateReason.PROVIDER_CHANGE_FORBIDDEN,
        GateReason.VERIFIER_UNAVAILABLE,
        GateReason.TOOL_CONTRACT_UNAVAILABLE,
        GateReason.AUTHORITY_DOWNGRADE_FORBIDDEN,
    }
)
"""Reason codes that refuse a handoff; the others only inform."""


class MigrationClass(StrEnum):
    """What kind of move a handoff is (sec. 15 of the spec)."""

    PHYSICAL = "PHYSICAL"
    LOGICAL = "LOGICAL"
    BEHAVIORAL = "BEHAVIORAL"


class ResumeMode(StrEnum):
    """How the target picks the run up, from the checkpoint's resumability class."""

    NONE = "NONE"
    RESTART_FROM_PREVIOUS_BOUNDARY = "RESTART_FROM_PREVIOUS_BOUNDARY"
    RESUME_DETERMINISTIC = "RESUME_DETERMINISTIC"
    RESUME_WITH_RECORDED_OBSERVATIONS = "RESUME_WITH_RECORDED_OBSERVATIONS"
    RESUME_AFTER_OWNERSHIP_TRANSFER = "RESUME_AFTER_OWNERSHIP_TRANSFER"
    RECONCILE_THEN_RESUME = "RECONCILE_THEN_RESUME"


_RESUME_MODES: dict[ResumabilityClass, ResumeMode] = {
    ResumabilityClass.R1: ResumeMode.RESTART_FROM_PREVIOUS_BOUNDARY,
    ResumabilityClass.R2: ResumeMode.RESUME_DETERMINISTIC,
    ResumabilityClass.R3: ResumeMode.RESUME_WITH_RECORDED_OBSERVATIONS,
    ResumabilityClass.R4: ResumeMode.RESUME_AFTER_OWNERSHIP_TRANSFER,
    ResumabilityClass.R5: ResumeMode.RECONCILE_THEN_RESUME,
}


class BehavioralMigration(Record):
    """Policy permission to move runs pinned to one release onto another."""

    from_release_id: Ref
    to_release: BehavioralRelease


class MigrationApproval(Record):
    """An explicit approval of one behavioral migration, until it expires."""

    approval_id: str = Field(min_length=1)
    from_release_id: Ref
    to_release_id: Ref
    approved_by: str = Field(min_length=1)
    expires_at: dt.datetime

    def covers(self, from_release_id: str, to_release_id: str, now: dt.datetime) -> bool:
        return (self.from_release_id, self.to_release_id) == (from_release_id, to_release_id) and now < self.expires_at


class HandoffPolicy(Record):
    """The rules of a deployment for moving runs; the defaults pin runs to their release."""

    allowed_behavioral_migrations: tuple[BehavioralMigration, ...] = ()
    approvals: tuple[MigrationApproval, ...] = ()
    require_same_region: bool = False
    require_same_provider: bool = False
    allow_schema_transform: bool = True
    allow_authority_downgrade: bool = True


class HandoffDecision(Record):
    """The gate's answer: whether the handoff may happen, how, and what must be redone."""

    allowed: bool
    resume_mode: ResumeMode
    migration_class: MigrationClass | None
    authority_ceiling: AuthorityLevel
    target_release_id: Ref | None
    target_schema_version: str | None
    requires_revalidation: bool
    requires_reverification: bool
    requires_reauthorization: bool
    reasons: tuple[GateReason, ...]

    @model_validator(mode="after")
    def _consistent(self) -> HandoffDecision:
        if self.allowed == any(reason in BLOCKING for reason in self.reasons):
            raise ValueError("a decision is allowed exactly when it has no blocking reason")
        if not self.allowed and (self.migration_class is not None or self.resume_mode is not ResumeMode.NONE):
            raise ValueError("a refused decision has no migration class and resume mode NONE")
        return self

    @property
    def blocking_reasons(self) -> tuple[GateReason, ...]:
        return tuple(reason for reason in self.reasons if reason in BLOCKING)


def _checkpoint_constraints(checkpoint: AnyCheckpoint) -> PortabilityConstraints:
    return checkpoint.constraints if isinstance(checkpoint, ExecutionCheckpoint) else PortabilityConstraints()


def _release_findings(
    checkpoint: AnyCheckpoint,
    target: Placement,
    release: BehavioralRelease,
    policy: HandoffPolicy,
    now: dt.datetime,
) -> tuple[list[GateReason], BehavioralRelease | None]:
    """Release pinning; returns the reasons and the release the run would resume under."""
    if checkpoint.release_id in target.supported_release_ids:
        return [], release
    options = sorted(
        (m.to_release for m in policy.allowed_behavioral_migrations
         if m.from_release_id == checkpoint.release_id and m.to_release.release_id in target.supported_release_ids),
        key=lambda candidate: candidate.release_id,
    )
    if not options:
        return [GateReason.RELEASE_INCOMPATIBLE], None
    for option in options:
        if any(a.covers(checkpoint.release_id, option.release_id, now) for a in policy.approvals):
            return [GateReason.BEHAVIORAL_MIGRATION_APPROVED], option
    return [GateReason.BEHAVIORAL_MIGRATION_UNAPPROVED], None


def _schema_findings(
    checkpoint: AnyCheckpoint, target: Placement, policy: HandoffPolicy
) -> tuple[list[GateReason], str | None]:
    if checkpoint.schema_version in target.readable_schema_versions or is_ablated(Ablation.SCHEMA_GATE):
        return [], checkpoint.schema_version
    reachable = transform_target(checkpoint.schema_version, target.readable_schema_versions)
    if reachable is None:
        return [GateReason.STATE_SCHEMA_INCOMPATIBLE], None
    if not policy.allow_schema_transform:
        return [GateReason.SCHEMA_TRANSFORM_FORBIDDEN], None
    return [GateReason.SCHEMA_TRANSFORM_REQUIRED], reachable


def _refused(reasons: list[GateReason]) -> HandoffDecision:
    return HandoffDecision(
        allowed=False,
        resume_mode=ResumeMode.NONE,
        migration_class=None,
        authority_ceiling=AuthorityLevel.NONE,
        target_release_id=None,
        target_schema_version=None,
        requires_revalidation=False,
        requires_reverification=False,
        requires_reauthorization=False,
        reasons=tuple(reasons),
    )


def evaluate_handoff(
    checkpoint: AnyCheckpoint,
    source_placement: Placement,
    target_placement: Placement,
    policy: HandoffPolicy,
    *,
    now: dt.datetime,
    release: BehavioralRelease,
    authority: AuthorityLevel,
    has_unresolved_operations: bool = False,
) -> HandoffDecision:
    """Decide whether `checkpoint` may resume on `target_placement`.

    `release` is the checkpoint's behavioral release record (its id must equal
    `checkpoint.release_id`); `authority` is the level of the checkpoint's
    authority context; `now` judges approval expiry. The same arguments always
    give the same decision.
    """
    if release.release_id != checkpoint.release_id:
        raise ValueError(f"release record {release.release_id} is not the checkpoint's release {checkpoint.release_id}")
    reasons: list[GateReason] = []

    if checkpoint.resumability is ResumabilityClass.R0:
        reasons.append(GateReason.CHECKPOINT_NOT_RESUMABLE)
    elif checkpoint.resumability is ResumabilityClass.MIGRATION_UNSAFE:
        reasons.append(GateReason.MIGRATION_UNSAFE)

    release_reasons, resume_release = _release_findings(checkpoint, target_placement, release, policy, now)
    reasons += release_reasons
    schema_reasons, schema_version = _schema_findings(checkpoint, target_placement, policy)
    reasons += schema_reasons

    constraints = _checkpoint_constraints(checkpoint)
    reasons += [GateReason(r.value) for r in constraint_violations(constraints, target_placement, source=source_placement)]
    if policy.require_same_region and source_placement.region != target_placement.region:
        reasons.append(GateReason.REGION_CHANGE_FORBIDDEN)
    if policy.require_same_provider and source_placement.provider != target_placement.provider:
        reasons.append(GateReason.PROVIDER_CHANGE_FORBIDDEN)

    needed = resume_release or release
    if needed.verifier_bundle not in target_placement.verifiers and not is_ablated(Ablation.VERIFIER_GATE):
        reasons.append(GateReason.VERIFIER_UNAVAILABLE)
    # The run's tool needs: its release's tool contract and what its kind drives (a browser run, a browser).
    wanted = (needed.tool_contract, *tools_needed(getattr(checkpoint, "run_kind", None)))
    if any(tool not in target_placement.tools for tool in wanted):
        reasons.append(GateReason.TOOL_CONTRACT_UNAVAILABLE)

    ceiling = AuthorityLevel.lesser(authority, target_placement.authority_ceiling)
    downgraded = ceiling != authority
    if downgraded:
        reasons.append(
            GateReason.AUTHORITY_DOWNGRADED if policy.allow_authority_downgrade else GateReason.AUTHORITY_DOWNGRADE_FORBIDDEN
        )

    source_env, target_env = source_placement.environment, target_placement.environment
    environment_changed = source_env.environment_id != target_env.environment_id
    runtime_changed = (source_env.runtime_image, source_env.tool_versions) != (
        target_env.runtime_image,
        target_env.tool_versions,
    )
    if environment_changed:
        reasons.append(GateReason.ENVIRONMENT_CHANGED)
    if runtime_changed:
        reasons.append(GateReason.RUNTIME_CHANGED)
    reconcile = has_unresolved_operations or checkpoint.resumability is ResumabilityClass.R5
    if has_unresolved_operations:
        reasons.append(GateReason.UNRESOLVED_OPERATIONS)
    kept = [reason for reason in reasons if not gate_reason_ablated(reason.value)]
    if kept != reasons:  # test-only ablations (baton.ablation): the gate decides as if they were never found
        reasons, resume_release, schema_version = kept, resume_release or release, schema_version or checkpoint.schema_version
        if GateReason.AUTHORITY_DOWNGRADED not in kept and GateReason.AUTHORITY_DOWNGRADE_FORBIDDEN not in kept:
            ceiling, downgraded = authority, False
        environment_changed &= GateReason.ENVIRONMENT_CHANGED in kept
        runtime_changed &= GateReason.RUNTIME_CHANGED in kept
        # R5 is the checkpoint's own ledger of the same unresolved operations (rank_targets adds that ledger to the
        # reason), so the reason switched off takes R5's reconcile-first with it, as R0's and MIGRATION_UNSAFE's do
        reconcile &= GateReason.UNRESOLVED_OPERATIONS in kept

    if any(reason in BLOCKING for reason in reasons) or resume_release is None or schema_version is None:
        return _refused(reasons)

    behavioral = GateReason.BEHAVIORAL_MIGRATION_APPROVED in reasons
    if behavioral:
        migration_class = MigrationClass.BEHAVIORAL
    elif GateReason.SCHEMA_TRANSFORM_REQUIRED in reasons:
        migration_class = MigrationClass.LOGICAL
    else:
        migration_class = MigrationClass.PHYSICAL
    # R0 and MIGRATION_UNSAFE reach this line only with their reason ablated: resumed as if recorded state sufficed.
    resumable = _RESUME_MODES.get(checkpoint.resumability, ResumeMode.RESUME_WITH_RECORDED_OBSERVATIONS)
    if resumable is ResumeMode.RECONCILE_THEN_RESUME and not reconcile:  # R5 with unresolved_operations ablated
        resumable = ResumeMode.RESUME_WITH_RECORDED_OBSERVATIONS
    resume_mode = ResumeMode.RECONCILE_THEN_RESUME if reconcile else resumable
    return HandoffDecision(
        allowed=True,
        resume_mode=resume_mode,
        migration_class=migration_class,
        authority_ceiling=ceiling,
        target_release_id=resume_release.release_id,
        target_schema_version=schema_version,
        requires_revalidation=environment_changed or behavioral,
        requires_reverification=runtime_changed or behavioral,
        requires_reauthorization=downgraded or behavioral,
        reasons=tuple(reasons),
    )


def evaluate_restored(
    restored: RestoredRun,
    target_placement: Placement,
    policy: HandoffPolicy,
    *,
    now: dt.datetime,
) -> HandoffDecision:
    """`evaluate_handoff` for a restored run: source, release, authority and ledger come from it."""
    parts = restored.parts
    return evaluate_handoff(
        restored.checkpoint,
        parts.placement,
        target_placement,
        policy,
        now=now,
        release=parts.release,
        authority=parts.authority.level,
        has_unresolved_operations=bool(parts.operations.unresolved()),
    )
