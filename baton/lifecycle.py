"""The semantic lifecycle of a run: which boundary may follow which.

A run moves through boundaries (generating, candidate ready, verifying,
verified, awaiting authority, authorized, committing, committed, postcondition
verified) and may always stop as FAILED or ESCALATED while it is not finished.
Backward edges exist where the meaning requires them: a failed verification
returns to generation, a changed artifact or environment sends a verified
candidate back through verification, an expired approval goes back to waiting
for authority, and a reconciled NOT_COMMITTED operation returns to AUTHORIZED.
Every other move is an error, so no code path can skip verification or
authority by accident.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from baton.errors import InvalidTransitionError
from baton.models import Boundary

TERMINAL: frozenset[Boundary] = frozenset(
    {Boundary.POSTCONDITION_VERIFIED, Boundary.FAILED, Boundary.ESCALATED}
)
"""Boundaries a run never leaves."""

INITIAL: Boundary = Boundary.GENERATING
"""Where every run starts."""

_STOPS: frozenset[Boundary] = frozenset({Boundary.FAILED, Boundary.ESCALATED})

_FORWARD: Mapping[Boundary, frozenset[Boundary]] = {
    Boundary.GENERATING: frozenset({Boundary.CANDIDATE_READY}),
    # A candidate may be withdrawn and regenerated before it is verified.
    Boundary.CANDIDATE_READY: frozenset({Boundary.VERIFYING, Boundary.GENERATING}),
    # Pass, fail (back to generation), or aborted while quiescing (back to the candidate).
    Boundary.VERIFYING: frozenset({Boundary.VERIFIED, Boundary.GENERATING, Boundary.CANDIDATE_READY}),
    # Re-verification (environment changed) or a replaced artifact (rebase).
    Boundary.VERIFIED: frozenset({Boundary.AWAITING_AUTHORITY, Boundary.VERIFYING, Boundary.CANDIDATE_READY}),
    # Approval granted, evidence gone stale, artifact replaced, or approval denied.
    Boundary.AWAITING_AUTHORITY: frozenset(
        {Boundary.AUTHORIZED, Boundary.VERIFYING, Boundary.CANDIDATE_READY, Boundary.GENERATING}
    ),
    # Commit begins, the approval lapsed, evidence must be redone, or the artifact changed.
    Boundary.AUTHORIZED: frozenset(
        {Boundary.COMMITTING, Boundary.AWAITING_AUTHORITY, Boundary.VERIFYING, Boundary.CANDIDATE_READY}
    ),
    # Confirmed, or reconciled as NOT_COMMITTED and allowed to try again.
    Boundary.COMMITTING: frozenset({Boundary.COMMITTED, Boundary.AUTHORIZED}),
    Boundary.COMMITTED: frozenset({Boundary.POSTCONDITION_VERIFIED}),
    Boundary.POSTCONDITION_VERIFIED: frozenset(),
    Boundary.FAILED: frozenset(),
    Boundary.ESCALATED: frozenset(),
}

TRANSITIONS: Mapping[Boundary, frozenset[Boundary]] = {
    boundary: targets if boundary in TERMINAL else targets | _STOPS
    for boundary, targets in _FORWARD.items()
}
"""Every allowed move, including the failure exits of each non-terminal boundary."""

_NOT_SEALABLE: frozenset[Boundary] = frozenset({Boundary.VERIFYING})

_QUIESCE_TO: Mapping[Boundary, Boundary] = {Boundary.VERIFYING: Boundary.CANDIDATE_READY}


def is_terminal(boundary: Boundary) -> bool:
    """True when a run at `boundary` has finished (verified, failed or escalated)."""
    return boundary in TERMINAL


def allowed_transitions(boundary: Boundary) -> frozenset[Boundary]:
    """The boundaries a run at `boundary` may move to next."""
    return TRANSITIONS[boundary]


def can_transition(current: Boundary, target: Boundary) -> bool:
    """True when `current -> target` is an allowed move."""
    return target in TRANSITIONS[current]


def transition(current: Boundary, target: Boundary) -> Boundary:
    """Return `target` if the move is allowed; raise InvalidTransitionError otherwise."""
    if target not in TRANSITIONS[current]:
        allowed = ", ".join(sorted(TRANSITIONS[current])) or "none (terminal)"
        raise InvalidTransitionError(f"cannot move from {current} to {target}; allowed: {allowed}")
    return target


def walk(start: Boundary, targets: Iterable[Boundary]) -> Boundary:
    """Apply a sequence of transitions from `start`; the first invalid one raises."""
    current = start
    for target in targets:
        current = transition(current, target)
    return current


def is_sealable(boundary: Boundary) -> bool:
    """True when a checkpoint may be sealed at `boundary`.

    VERIFYING is not sealable: a verifier run in flight is worker-local work
    whose result is not yet evidence. A run quiesced there falls back to
    CANDIDATE_READY (see `quiesce_boundary`) and verifies again after resume.
    """
    return boundary not in _NOT_SEALABLE


def quiesce_boundary(boundary: Boundary) -> Boundary:
    """The sealable boundary a run falls back to when it must stop at `boundary`."""
    return _QUIESCE_TO.get(boundary, boundary)
