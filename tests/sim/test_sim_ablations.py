"""Ablations under the simulation: with one protection off, a seed fails, its shrunk schedule still fails,
and replaying it gives the same event trail twice; with the protection on, the same schedule passes.

The pinned schedules come from `baton sim --seeds 100 --faults 5 --runs deploy,research --ablate NAME --json`
(docs/simulation.md has the whole table).
"""

from __future__ import annotations

import pytest

from baton.models import RunKind
from baton.sim.faults import FaultPlan
from baton.sim.runner import invariants_of, run_many, run_seed

BOTH = (RunKind.DEPLOY, RunKind.RESEARCH)
PINNED = {
    "reconcile-before-retry": (3, BOTH, "I4", '[{"arg": "", "at": 4, "kind": "drop_request"}, {"arg": "after", "at": 5, '
                               '"kind": "crash"}, {"arg": "", "at": 5, "kind": "drop_response"}, {"arg": "", "at": 8, '
                               '"kind": "drop_request"}]'),
    "lease-cas": (20, BOTH, "I3", '[{"arg": "better_model_released", "at": 21, "kind": "handoff"}, '
                  '{"arg": "12.0", "at": 23, "kind": "stall"}]'),  # writes 20 and 22 before a model call's reservation
    "freshness": (8, (RunKind.RESEARCH,), "I9", '[{"arg": "idempotency", "at": 7, "kind": "doc_change"}, '
                  '{"arg": "400.0", "at": 11, "kind": "stall"}]'),
}


@pytest.mark.parametrize("name", sorted(PINNED))
def test_the_shrunk_schedule_fails_only_with_the_protection_off_and_replays_identically(name: str) -> None:
    seed, kinds, invariant, schedule = PINNED[name]
    plan = FaultPlan.from_json(schedule)
    first = run_seed(seed, 0, (name,), plan=plan, kinds=kinds)
    second = run_seed(seed, 0, (name,), plan=plan, kinds=kinds)
    assert invariant in invariants_of(first), first.violations
    assert first.trail_hash == second.trail_hash
    protected = run_seed(seed, 0, plan=plan, kinds=kinds)
    assert protected.ok, protected.violations


def test_reconcile_before_retry_is_caught_within_the_first_seeds() -> None:
    """Seed 12 of the swarm mix (`baton.sim.scenarios`; seed 2 before the mix drew named scenarios)."""
    summary = run_many(range(20), 5, ablate=("reconcile-before-retry",), kinds=BOTH, stop_at_first_failure=True)
    assert summary.failing, "no seed of the first 20 caught the ablation"
    assert "I4" in invariants_of(summary.failing[0])
