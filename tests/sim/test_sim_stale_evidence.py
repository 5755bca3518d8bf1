"""Issue 17: the controls can accept stale evidence in the simulation, as they do in the live matrix.

The live `corpus-changed` cases rewrite a cited document once the research run's report is verified
(`sealed:VERIFIED`), for Baton and both transcript controls alike. The sim's plans strike at the same point for
every strategy: the research run's VERIFIED seal. With the worker paused past its observations' freshness budget
(lease or job kept), a control publishes from its transcript the version it read, and the I9 oracle (the corpus's
document history, the network's log of reads and publications, the budgets the stored observations carry) catches
it; Baton, on the same seed and schedule, reads the documents again and is not caught.
"""

from __future__ import annotations

import pytest

from baton.models import RunKind
from baton.sim.control_world import CONTROLS
from baton.sim.runner import config_for
from baton.sim.sec27_plans import PLANS
from baton.sim.world import run_world

STRATEGIES = ("baton", *CONTROLS)
BOTH = (RunKind.DEPLOY, RunKind.RESEARCH)


def _run(case_id: str, strategy: str, kinds: tuple[RunKind, ...]) -> object:
    named = PLANS[case_id]
    return run_world(config_for(named.seed, 0, plan=named.plan, kinds=kinds, strategy=strategy))


@pytest.mark.parametrize("kinds", [(RunKind.RESEARCH,), BOTH], ids=["research", "deploy+research"])
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("case_id", ["corpus-changed", "corpus-changed-while-paused"])
def test_a_corpus_case_strikes_every_strategy(case_id: str, strategy: str, kinds: tuple[RunKind, ...]) -> None:
    outcome = _run(case_id, strategy, kinds)
    assert sorted(outcome.fired) == sorted(PLANS[case_id].plan.faults), (outcome.fired, outcome.skipped)
    assert not outcome.errors


@pytest.mark.parametrize("kinds", [(RunKind.RESEARCH,), BOTH], ids=["research", "deploy+research"])
def test_a_control_paused_past_freshness_publishes_a_superseded_version_and_baton_does_not(
        kinds: tuple[RunKind, ...]) -> None:
    research = f"sim{PLANS['corpus-changed-while-paused'].seed}-research-{len(kinds) - 1}"
    for strategy in CONTROLS:
        outcome = _run("corpus-changed-while-paused", strategy, kinds)
        stale = [v for v in outcome.violations if v.startswith("I9:")]
        assert stale and all(v.startswith(f"I9: {research} published v[1] of idempotency") for v in stale), \
            (strategy, outcome.violations)
        assert outcome.statuses[research] == "verified", (strategy, outcome.statuses)
    baton = _run("corpus-changed-while-paused", "baton", kinds)
    assert baton.violations == [] and baton.statuses[research] == "verified", (baton.violations, baton.statuses)
