"""The named sec.-27 plans: each fires its faults and Baton ends clean; live and sim agree on a few cases;
an ablation flips the sim's verdict, so the comparison can fail."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from baton.cli import app
from baton.faults.matrix import companions_of
from baton.sim_agreement import compare, sim_verdict
from baton.models import RunKind
from baton.sim.faults import FaultPlan
from baton.sim.runner import config_for
from baton.sim.seal_writes import seal_writes
from baton.sim.sec27_plans import DEPLOY_VERIFIED, PLANS, RESEARCH_VERIFIED
from baton.sim.world import run_world


@pytest.mark.parametrize("case_id", sorted(PLANS))
def test_each_named_plan_fires_every_fault_and_baton_ends_clean(case_id: str) -> None:
    named = PLANS[case_id]
    outcome = run_world(config_for(named.seed, 0, plan=named.plan, kinds=named.kinds))
    assert sorted(outcome.fired) == sorted(named.plan.faults)
    assert outcome.violations == [] and outcome.errors == []
    assert set(outcome.statuses.values()) <= {"verified", "failed", "escalated"}


def test_the_pinned_write_counts_are_where_the_boundaries_are_sealed() -> None:
    deploy = {boundary: count for count, _, boundary in reversed(seal_writes(0, (RunKind.DEPLOY,)))}
    research = {boundary: count for count, _, boundary in reversed(seal_writes(0, (RunKind.RESEARCH,)))}
    assert deploy["VERIFIED"] == DEPLOY_VERIFIED
    assert research["VERIFIED"] == RESEARCH_VERIFIED


def test_a_plan_whose_fault_never_fires_is_refused() -> None:
    named = PLANS["killed-after-seal"]
    never = FaultPlan.from_json('[{"kind": "crash", "at": 900, "arg": "after"}]')
    late = type(named)(named.case_id, named.kinds, never)
    with pytest.raises(RuntimeError, match="never fired"):
        sim_verdict(late)


def test_live_and_sim_agree_after_an_unanswered_deployment(tmp_path: Path) -> None:
    row = compare("killed-awaiting-reply", tmp_path)
    assert row["live"]["status"] == "verified" and row["live"]["effects"] == {"deploy": 1}
    assert row["agree"], row


def test_baton_sim_agree_runs_the_case_live_and_simulated() -> None:
    result = CliRunner().invoke(app, ["sim", "--agree", "placement-lost-schema"])
    assert result.exit_code == 0, result.output
    assert "| `placement-lost-schema` | - | verified; deploy=1; stale=no; violations=no | verified; deploy=1" \
        in result.output


@pytest.mark.parametrize("case_id", ["killed-awaiting-reply", "placement-lost-schema", "corpus-changed-while-paused",
                                     "secret-in-tool-result", "capability-expired-in-hand",
                                     "stale-capability-after-move", "stale-claim-after-move"])
def test_the_named_ablation_flips_the_sim_verdict(case_id: str) -> None:
    named = PLANS[case_id]
    protected, ablated = sim_verdict(named), sim_verdict(named, named.ablation)
    assert not protected.violated
    assert ablated.violated
    assert not all(protected.same(ablated).values())


@pytest.mark.parametrize(("case_id", "switch"), [("stale-capability-after-move", "store-claim-epoch"),
                                                ("stale-claim-after-move", "lease-cas")])
def test_an_epoch_plan_catches_its_switch_and_holds_with_only_the_companions_off(case_id: str, switch: str) -> None:
    """With the switch and the layers the live matrix stacks with it off, the plan violates; with only those other
    layers off it holds, so the switch is what the oracle caught. (For `stale-capability-after-move` the sim
    isolates the store claim's epoch check, not the gateway's: invariant 2 reads the operation rows, where the
    store claim's refusal shows before the gateway's does.)"""
    named = PLANS[case_id]
    others = companions_of(switch)
    ablated = run_world(config_for(named.seed, 0, plan=named.plan, kinds=named.kinds, ablate=(switch, *others)))
    held = run_world(config_for(named.seed, 0, plan=named.plan, kinds=named.kinds, ablate=others))
    assert others and ablated.violations and held.violations == [], (ablated.violations, held.violations)


def test_an_unsettled_operation_is_caught_by_the_hidden_effect_oracle_only_with_both_layers_off() -> None:
    """`resume-open-operations` and `gate:unresolved_operations` stand against the same fault: with both off the run
    resumes at COMMITTING without settling its deployment and ends failed while the deploy service holds it."""
    named = PLANS["killed-awaiting-reply"]

    def violations(*off: str) -> list[str]:
        return run_world(config_for(named.seed, 0, plan=named.plan, kinds=named.kinds, ablate=off)).violations

    both = violations("resume-open-operations", "gate:unresolved_operations")
    assert both and all(v.startswith("hidden:") for v in both), both
    assert violations("resume-open-operations") == [] and violations("gate:unresolved_operations") == []
