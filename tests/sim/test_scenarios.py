"""The swarm-style mix: a seed's random faults plus, sometimes, a named sec.-27 scenario, drawn from the seed."""

from __future__ import annotations

import pytest

from baton.models import RunKind
from baton.sim.faults import DOC_SECRET, DRAWN_KINDS, KINDS, OWNER_RULE, OWNER_RULES, Fault, FaultPlan, generate
from baton.sim.runner import config_for, run_seed
from baton.sim.scenarios import (APART_DRAWS, draw_apart, draw_downgrade_allowed, draw_lapsed_approval,
                                  draw_legacy_import, draw_owner_rule, draw_retirement, draw_scenario, mixed,
                                  scenarios_for)
from baton.sim.sec27_plans import APART, PLANS

BOTH = (RunKind.DEPLOY, RunKind.RESEARCH)


def test_the_draw_is_the_same_for_the_same_seed_and_keeps_the_random_faults() -> None:
    for seed in range(60):
        plan = mixed(seed, 5, BOTH)
        assert plan == mixed(seed, 5, BOTH) == config_for(seed, 5, kinds=BOTH).plan
        assert set(generate(seed, 5).faults) <= set(plan.faults)
        scenario = draw_scenario(seed, BOTH)
        added = len(scenario[1]) if scenario else 0
        rule, retired, lapsed = draw_owner_rule(seed), draw_retirement(seed), draw_lapsed_approval(seed)
        downgrade, apart = draw_downgrade_allowed(seed), draw_apart(seed, BOTH)
        legacy = draw_legacy_import(seed, BOTH)
        assert len(plan.faults) == 5 + added + (rule is not None) + (retired is not None) + (lapsed is not None) \
            + (downgrade is not None) + len(apart) + (legacy is not None)
        assert legacy is None or legacy in plan.faults
        assert rule is None or rule in plan.faults
        assert retired is None or retired in plan.faults
        assert downgrade is None or downgrade in plan.faults
        assert set(apart) <= set(plan.faults)


def test_the_plans_apart_are_drawn_on_their_own_streams_only_where_their_runs_are() -> None:
    """Stop 32's draws (the allowed downgrade, the plans apart from `PLANS`) leave every other draw of a seed as it
    was."""
    assert set(APART_DRAWS) == set(APART)
    for case_id in APART:
        seeds = [seed for seed in range(300) if set(APART[case_id].plan.faults) <= set(draw_apart(seed, BOTH))]
        assert 10 <= len(seeds) <= 50, (case_id, len(seeds))
    assert all(draw_apart(seed, (RunKind.RESEARCH,)) == () for seed in range(100))
    downgrades = [seed for seed in range(300) if draw_downgrade_allowed(seed) is not None]
    assert 40 <= len(downgrades) <= 110


def test_owner_rules_are_drawn_for_some_seeds_and_each_rule_is_drawn() -> None:
    drawn = [rule for seed in range(300) if (rule := draw_owner_rule(seed)) is not None]
    assert 30 <= len(drawn) <= 120
    assert {rule.arg for rule in drawn} == set(OWNER_RULES)
    assert all(rule.kind == OWNER_RULE and rule.kind not in DRAWN_KINDS for rule in drawn)


def test_only_scenarios_of_the_worlds_runs_are_drawn_and_each_is_drawn() -> None:
    drawn = {s[0] for seed in range(300) if (s := draw_scenario(seed, BOTH)) is not None}
    assert drawn == {p.case_id for p in scenarios_for(BOTH)}
    assert "coding-killed-after-push" not in drawn and "corpus-changed" in drawn
    assert {p.case_id for p in scenarios_for((RunKind.DEPLOY,))} == {
        case for case, p in PLANS.items() if p.kinds == (RunKind.DEPLOY,)}


def test_a_fault_free_world_stays_fault_free() -> None:
    assert all(mixed(seed, 0, BOTH).faults == () for seed in range(40))


def test_a_seed_with_a_scenario_replays_to_the_same_trail() -> None:
    seed = next(seed for seed in range(100) if draw_scenario(seed, BOTH) is not None)
    first, second = run_seed(seed, 5, kinds=BOTH), run_seed(seed, 5, kinds=BOTH)
    assert first.trail_hash == second.trail_hash and first.plan == second.plan


def test_a_fault_on_a_store_call_counts_only_that_calls_writes() -> None:
    plan = FaultPlan.from_json('[{"kind": "stall", "at": 1, "arg": "5.0", "on": "claim_operation"}]')
    assert plan.faults[0].on == "claim_operation" and FaultPlan.from_json(plan.to_json()) == plan
    assert plan.write_faults(14, "claim_operation", 1) == list(plan.faults)
    assert plan.write_faults(1, "atomic", 1) == [] and plan.write_faults(1, "", 0) == []
    outcome = run_seed(0, 0, plan=plan)
    assert outcome.fired == list(plan.faults) and outcome.ok


def test_only_a_write_fault_names_a_store_call() -> None:
    with pytest.raises(ValueError, match="only a write fault"):
        FaultPlan((Fault("delay", 1, "2.0", on="claim_operation"),))


def test_a_planted_credential_is_only_ever_named_by_a_scenario() -> None:
    """`doc_secret` joined the kinds without moving any seed's random draws (`generate` draws from DRAWN_KINDS)."""
    assert DOC_SECRET in KINDS and DOC_SECRET not in DRAWN_KINDS
    assert all(f.kind != DOC_SECRET for seed in range(500) for f in generate(seed, 5).faults)
    assert any(DOC_SECRET in {f.kind for f in mixed(seed, 5, BOTH).faults} for seed in range(100))
