"""Resumability classes (R0-R5, MIGRATION_UNSAFE) derived from what a run is and holds.

The class is never a guess or a flag an agent sets: it follows from the
boundary, the run kind, the operation ledger, the recorded observations, the
workspace and the portability constraints. Every rule that applies adds a
stable reason code; the strictest class among them wins, in this order:

    R0 (finished) > MIGRATION_UNSAFE > R5 > R0 > R1 > R4 > R3 > R2

so an unresolved side effect always forces reconciliation (R5), and a
deterministic planning step with nothing else attached is R2.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import NamedTuple

from baton.checkpoints import RestoredRun
from baton.lifecycle import TERMINAL, is_sealable
from baton.models import (
    Boundary,
    OperationLedger,
    OperationState,
    Placement,
    PortabilityConstraints,
    ResumabilityClass,
    RunKind,
    WorkspaceIdentity,
)
from baton.portability import constraint_violations


class BrowserResumeClass(StrEnum):
    """How a browser workflow can be picked up again (sec. 13 of the spec)."""

    REOPEN_DURABLE_URL = "REOPEN_DURABLE_URL"
    RECONSTRUCT_SESSION = "RECONSTRUCT_SESSION"
    RESTART_FROM_SERVER_STATE = "RESTART_FROM_SERVER_STATE"
    NOT_RESUMABLE = "NOT_RESUMABLE"


class ResumeReason(StrEnum):
    """Stable codes explaining a resumability class."""

    RUN_FINISHED = "run_finished"
    RUN_STOPPED = "run_stopped"
    NON_EXPORTABLE_WITHOUT_TARGET = "non_exportable_state_without_allowed_target"
    OPERATION_OUTCOME_UNKNOWN = "operation_outcome_unknown"
    OPERATION_PREPARED_UNCONFIRMED = "operation_prepared_unconfirmed"
    BROWSER_NOT_RESUMABLE = "browser_workflow_not_resumable"
    BROWSER_RESUME_CLASS_MISSING = "browser_resume_class_missing"
    BOUNDARY_NOT_SEALABLE = "boundary_not_sealable"
    BROWSER_RESTART_FROM_SERVER_STATE = "browser_restart_from_server_state"
    WORKSPACE_IDENTITY_MISSING = "workspace_identity_missing"
    ISOLATED_WORKSPACE = "isolated_workspace"
    BROWSER_SESSION_FROM_SCOPED_CREDENTIALS = "browser_session_from_scoped_credentials"
    MUTATION_AUTHORITY_NEEDS_NEW_EPOCH = "mutation_authority_needs_new_epoch"
    RECORDED_OBSERVATIONS = "recorded_observations"
    BROWSER_REOPEN_DURABLE_URL = "browser_reopen_durable_url"
    DETERMINISTIC_STATE = "deterministic_state"


BROWSER_RESUMABILITY: dict[BrowserResumeClass, ResumabilityClass] = {
    BrowserResumeClass.REOPEN_DURABLE_URL: ResumabilityClass.R3,
    BrowserResumeClass.RECONSTRUCT_SESSION: ResumabilityClass.R4,
    BrowserResumeClass.RESTART_FROM_SERVER_STATE: ResumabilityClass.R1,
    BrowserResumeClass.NOT_RESUMABLE: ResumabilityClass.R0,
}
"""Each browser resume class as the resumability class it implies."""

SEALED_BROWSER_RESUME = BrowserResumeClass.RECONSTRUCT_SESSION
"""The class a browser run's checkpoints declare: no session or CSRF token is ever sealed, so
whoever resumes rebuilds the session from scoped credentials (the agent picks the class that
actually holds when it resumes, from the server's state, and records it)."""


def sealed_browser_class(run_kind: RunKind) -> BrowserResumeClass | None:
    """`SEALED_BROWSER_RESUME` for browser runs, None for every other kind."""
    return SEALED_BROWSER_RESUME if run_kind is RunKind.BROWSER else None


_BROWSER_REASON: dict[BrowserResumeClass, ResumeReason] = {
    BrowserResumeClass.REOPEN_DURABLE_URL: ResumeReason.BROWSER_REOPEN_DURABLE_URL,
    BrowserResumeClass.RECONSTRUCT_SESSION: ResumeReason.BROWSER_SESSION_FROM_SCOPED_CREDENTIALS,
    BrowserResumeClass.RESTART_FROM_SERVER_STATE: ResumeReason.BROWSER_RESTART_FROM_SERVER_STATE,
    BrowserResumeClass.NOT_RESUMABLE: ResumeReason.BROWSER_NOT_RESUMABLE,
}

_PRECEDENCE: tuple[ResumabilityClass, ...] = (
    ResumabilityClass.MIGRATION_UNSAFE,
    ResumabilityClass.R5,
    ResumabilityClass.R0,
    ResumabilityClass.R1,
    ResumabilityClass.R4,
    ResumabilityClass.R3,
    ResumabilityClass.R2,
)

_AUTHORITY_BOUND: frozenset[Boundary] = frozenset(
    {Boundary.AUTHORIZED, Boundary.COMMITTING, Boundary.COMMITTED}
)


class Resumability(NamedTuple):
    """A resumability class with the reason codes that led to it."""

    resumability: ResumabilityClass
    reasons: tuple[str, ...]


def _ledger_findings(ledger: OperationLedger) -> list[tuple[ResumabilityClass, ResumeReason]]:
    states = {entry.state for entry in ledger.unresolved()}
    found: list[tuple[ResumabilityClass, ResumeReason]] = []
    if OperationState.UNKNOWN in states:
        found.append((ResumabilityClass.R5, ResumeReason.OPERATION_OUTCOME_UNKNOWN))
    if OperationState.PREPARED in states:
        found.append((ResumabilityClass.R5, ResumeReason.OPERATION_PREPARED_UNCONFIRMED))
    return found


def _kind_findings(
    run_kind: RunKind,
    *,
    workspace: WorkspaceIdentity | None,
    browser: BrowserResumeClass | None,
) -> list[tuple[ResumabilityClass, ResumeReason]]:
    if run_kind is RunKind.BROWSER:
        if browser is None:
            return [(ResumabilityClass.R0, ResumeReason.BROWSER_RESUME_CLASS_MISSING)]
        return [(BROWSER_RESUMABILITY[browser], _BROWSER_REASON[browser])]
    if browser is not None:
        raise ValueError(f"a browser resume class was given for a {run_kind} run")
    if run_kind is RunKind.CODING:
        if workspace is None:
            return [(ResumabilityClass.R1, ResumeReason.WORKSPACE_IDENTITY_MISSING)]
        return [(ResumabilityClass.R4, ResumeReason.ISOLATED_WORKSPACE)]
    return []


def _unsafe_findings(
    constraints: PortabilityConstraints | None,
    source: Placement | None,
    targets: Sequence[Placement] | None,
) -> list[tuple[ResumabilityClass, ResumeReason]]:
    if constraints is None or not constraints.contains_non_exportable_state:
        return []
    # Without a source placement no target can be shown to stay in the trust domain.
    candidates: Sequence[Placement] = () if source is None else (targets if targets is not None else (source,))
    if any(not constraint_violations(constraints, target, source=source) for target in candidates):
        return []
    return [(ResumabilityClass.MIGRATION_UNSAFE, ResumeReason.NON_EXPORTABLE_WITHOUT_TARGET)]


def classify_resumability(
    boundary: Boundary,
    run_kind: RunKind,
    ledger: OperationLedger,
    *,
    has_recorded_observations: bool = False,
    workspace: WorkspaceIdentity | None = None,
    browser: BrowserResumeClass | None = None,
    constraints: PortabilityConstraints | None = None,
    source: Placement | None = None,
    targets: Sequence[Placement] | None = None,
) -> Resumability:
    """Derive the resumability class of a run at `boundary`, with its reasons.

    Pure and deterministic. `browser` is required for browser runs (missing
    means R0) and refused for others. `targets` are the placements a move
    could go to; when given, non-exportable state with no acceptable target
    among them is MIGRATION_UNSAFE. When omitted, only the source itself is
    considered, so non-exportable state without a known source is unsafe.
    """
    if boundary in TERMINAL:
        reason = ResumeReason.RUN_FINISHED if boundary is Boundary.POSTCONDITION_VERIFIED else ResumeReason.RUN_STOPPED
        return Resumability(ResumabilityClass.R0, (reason.value,))

    findings: list[tuple[ResumabilityClass, ResumeReason]] = []
    findings += _unsafe_findings(constraints, source, targets)
    findings += _ledger_findings(ledger)
    if not is_sealable(boundary):
        findings.append((ResumabilityClass.R1, ResumeReason.BOUNDARY_NOT_SEALABLE))
    findings += _kind_findings(run_kind, workspace=workspace, browser=browser)
    if boundary in _AUTHORITY_BOUND:
        findings.append((ResumabilityClass.R4, ResumeReason.MUTATION_AUTHORITY_NEEDS_NEW_EPOCH))
    if has_recorded_observations:
        findings.append((ResumabilityClass.R3, ResumeReason.RECORDED_OBSERVATIONS))
    if not findings:
        findings.append((ResumabilityClass.R2, ResumeReason.DETERMINISTIC_STATE))

    rank = {cls: index for index, cls in enumerate(_PRECEDENCE)}
    ordered = sorted(findings, key=lambda item: rank[item[0]])  # stable: rule order within a class
    reasons = tuple(dict.fromkeys(reason.value for _, reason in ordered))
    return Resumability(ordered[0][0], reasons)


def classify_restored(
    restored: RestoredRun,
    *,
    browser: BrowserResumeClass | None = None,
    targets: Sequence[Placement] | None = None,
) -> Resumability:
    """Classify a restored run from its own checkpoint, parts and observations."""
    parts = restored.parts
    return classify_resumability(
        restored.checkpoint.boundary,
        parts.run_kind,
        parts.operations,
        has_recorded_observations=bool(restored.observations),
        workspace=parts.workspace,
        browser=browser,
        constraints=parts.constraints,
        source=parts.placement,
        targets=targets,
    )
