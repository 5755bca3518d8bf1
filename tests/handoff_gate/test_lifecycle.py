"""The semantic lifecycle: allowed moves, refused moves, sealable boundaries."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from baton.errors import InvalidTransitionError
from baton.lifecycle import (
    INITIAL,
    TERMINAL,
    TRANSITIONS,
    allowed_transitions,
    can_transition,
    is_sealable,
    is_terminal,
    quiesce_boundary,
    transition,
    walk,
)
from baton.models import Boundary

B = Boundary
HAPPY_PATH = [
    B.CANDIDATE_READY,
    B.VERIFYING,
    B.VERIFIED,
    B.AWAITING_AUTHORITY,
    B.AUTHORIZED,
    B.COMMITTING,
    B.COMMITTED,
    B.POSTCONDITION_VERIFIED,
]


def test_happy_path_reaches_postcondition_verified() -> None:
    assert walk(INITIAL, HAPPY_PATH) is B.POSTCONDITION_VERIFIED


@pytest.mark.parametrize(
    ("current", "target"),
    [
        (B.VERIFYING, B.GENERATING),  # failed verification
        (B.VERIFYING, B.CANDIDATE_READY),  # verification aborted while quiescing
        (B.VERIFIED, B.VERIFYING),  # re-verification after an environment change
        (B.AWAITING_AUTHORITY, B.VERIFYING),
        (B.AUTHORIZED, B.VERIFYING),
        (B.AUTHORIZED, B.AWAITING_AUTHORITY),  # approval expired
        (B.AUTHORIZED, B.CANDIDATE_READY),  # artifact replaced (rebase)
        (B.COMMITTING, B.AUTHORIZED),  # reconciled NOT_COMMITTED
        (B.COMMITTED, B.ESCALATED),  # postcondition failed
    ],
)
def test_recovery_and_reverification_paths_are_allowed(current: Boundary, target: Boundary) -> None:
    assert transition(current, target) is target


@pytest.mark.parametrize(
    ("current", "target"),
    [
        (B.GENERATING, B.VERIFIED),  # skipping verification
        (B.CANDIDATE_READY, B.AUTHORIZED),  # skipping verification and approval
        (B.VERIFIED, B.COMMITTING),  # skipping authority
        (B.AWAITING_AUTHORITY, B.COMMITTING),
        (B.COMMITTING, B.POSTCONDITION_VERIFIED),  # skipping the commit confirmation
        (B.COMMITTED, B.COMMITTING),  # committing twice
        (B.POSTCONDITION_VERIFIED, B.GENERATING),
        (B.FAILED, B.GENERATING),
        (B.ESCALATED, B.FAILED),
        (B.GENERATING, B.GENERATING),
    ],
)
def test_invalid_moves_raise(current: Boundary, target: Boundary) -> None:
    assert not can_transition(current, target)
    with pytest.raises(InvalidTransitionError, match=f"from {current} to {target}"):
        transition(current, target)


def test_every_non_terminal_boundary_may_fail_or_escalate() -> None:
    for boundary in Boundary:
        if is_terminal(boundary):
            assert allowed_transitions(boundary) == frozenset()
        else:
            assert {B.FAILED, B.ESCALATED} <= allowed_transitions(boundary)


def test_every_boundary_is_reachable_and_every_run_can_end() -> None:
    reachable = {INITIAL}
    frontier = [INITIAL]
    while frontier:
        for nxt in TRANSITIONS[frontier.pop()]:
            if nxt not in reachable:
                reachable.add(nxt)
                frontier.append(nxt)
    assert reachable == set(Boundary)
    for boundary in Boundary:
        seen, stack = {boundary}, [boundary]
        while stack:
            for nxt in TRANSITIONS[stack.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        assert seen & TERMINAL


def test_only_verifying_is_not_sealable_and_quiesces_to_the_candidate() -> None:
    assert [b for b in Boundary if not is_sealable(b)] == [B.VERIFYING]
    assert quiesce_boundary(B.VERIFYING) is B.CANDIDATE_READY
    assert can_transition(B.VERIFYING, quiesce_boundary(B.VERIFYING))
    for boundary in Boundary:
        assert is_sealable(quiesce_boundary(boundary))


@settings(max_examples=300)
@given(choices=st.lists(st.integers(min_value=0, max_value=1000), max_size=60))
def test_random_walks_only_reach_valid_states(choices: list[int]) -> None:
    current = INITIAL
    for choice in choices:
        options = sorted(allowed_transitions(current))
        if not options:
            assert current in TERMINAL
            break
        nxt = transition(current, options[choice % len(options)])
        assert nxt in TRANSITIONS and can_transition(current, nxt)
        current = nxt


@given(current=st.sampled_from(list(Boundary)), target=st.sampled_from(list(Boundary)))
def test_transition_agrees_with_the_table(current: Boundary, target: Boundary) -> None:
    if target in TRANSITIONS[current]:
        assert transition(current, target) is target
    else:
        with pytest.raises(InvalidTransitionError):
            transition(current, target)


@given(path=st.lists(st.sampled_from(list(Boundary)), max_size=20))
def test_arbitrary_sequences_are_accepted_only_when_every_step_is_allowed(path: list[Boundary]) -> None:
    valid = all(can_transition(a, b) for a, b in zip([INITIAL, *path], path))
    if valid:
        assert walk(INITIAL, path) is (path[-1] if path else INITIAL)
    else:
        with pytest.raises(InvalidTransitionError):
            walk(INITIAL, path)
