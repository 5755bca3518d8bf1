"""The simulation: real protocol, virtual clock, seeded faults, replayable trails, independent oracles."""

from __future__ import annotations

import json
import os

import pytest

from baton.sim.faults import Fault, FaultPlan, generate
from baton.sim.runner import invariants_of, run_many, run_seed, shrink

CI_SEEDS = int(os.environ.get("BATON_SIM_CI_SEEDS", "300"))  # issue 13: CI runs a few hundred seeds
TERMINAL_SEAL_CRASH = FaultPlan((Fault("drop_response", 3), Fault("crash", 21, "after")))
"""Write 21 of seed 79: the worker dies right after sealing the terminal checkpoint, before recording the status."""


def test_a_fault_free_world_verifies_its_run() -> None:
    outcome = run_seed(1, 0)
    assert outcome.ok, outcome.violations
    assert set(outcome.statuses.values()) == {"verified"}, outcome.statuses
    assert not outcome.errors, outcome.errors
    assert outcome.steps > 50  # the protocol really ran, step by step


def test_the_same_seed_replays_the_same_trail_byte_for_byte() -> None:
    first = run_seed(7, 5, keep_trail=True)
    second = run_seed(7, 5, keep_trail=True)
    assert first.trail == second.trail
    assert first.trail_hash == second.trail_hash
    assert first.plan == second.plan
    assert set(generate(7, 5).faults) <= set(first.plan.faults)  # the random faults, and the owner's rule it draws
    other = run_seed(8, 5)
    assert other.trail_hash != first.trail_hash


def test_a_crash_mid_run_is_handed_off_and_the_run_still_ends() -> None:
    plan = FaultPlan((Fault("crash", 12, "after"),))
    outcome = run_seed(3, 0, plan=plan, keep_trail=True)
    assert outcome.ok, outcome.violations
    assert [f.kind for f in outcome.fired] == ["crash"]
    assert outcome.trail is not None and any(" kill w:" in line for line in outcome.trail)
    assert set(outcome.statuses.values()) <= {"verified", "failed", "escalated"}


def test_an_ambiguous_answer_is_reconciled_not_repeated() -> None:
    """The deploy service commits, the answer is lost: one deployment, and the target was asked first."""
    for at in range(1, 8):
        outcome = run_seed(5, 0, plan=FaultPlan((Fault("drop_response", at),)), keep_trail=True)
        assert outcome.ok, (at, outcome.violations)


def test_a_stall_longer_than_the_lease_is_fenced() -> None:
    outcome = run_seed(11, 0, plan=FaultPlan((Fault("stall", 15, "400.0"),)), keep_trail=True)
    assert outcome.ok, outcome.violations
    assert outcome.fired and outcome.fired[0].kind == "stall"


def test_ci_batch_of_seeds_has_no_violation() -> None:
    summary = run_many(range(CI_SEEDS), 5)
    bad = {o.seed: o.violations[:2] for o in summary.failing}
    assert not bad, bad
    assert summary.seeds == CI_SEEDS
    assert sum(summary.fault_counts.values()) > CI_SEEDS  # faults really fired, not just scheduled
    assert summary.statuses.get("verified", 0) > 0


def test_the_terminal_seal_crash_really_fires_after_the_terminal_seal() -> None:
    """Guards the regression test below: the crash must land between the terminal seal and the status."""
    outcome = run_seed(79, 0, plan=TERMINAL_SEAL_CRASH, keep_trail=True)
    assert [f.kind for f in outcome.fired] == ["crash", "drop_response"]
    assert outcome.last_boundaries == {"sim79-deploy-0": "POSTCONDITION_VERIFIED"}
    assert outcome.trail is not None
    assert any("kill w:" in line and "crash after append_checkpoint" in line for line in outcome.trail)


def test_a_crash_after_the_terminal_checkpoint_still_ends_the_run() -> None:
    """Was a liveness gap: the expiry handoff refused the terminal (R0) checkpoint and nobody recorded the end.
    Now the coordinator reserves the ended run again for its placement, and a worker there records its end."""
    outcome = run_seed(79, 0, plan=TERMINAL_SEAL_CRASH, keep_trail=True)
    assert outcome.ok, outcome.violations
    assert outcome.statuses == {"sim79-deploy-0": "verified"}
    assert outcome.trail is not None
    assert any("lease_expired: aborted" in line and "already ended at POSTCONDITION_VERIFIED" in line
               for line in outcome.trail)


def test_shrinking_keeps_only_the_faults_that_matter() -> None:
    """Shrink against an oracle that fails whenever a delayed message is scheduled (a stand-in failure)."""
    plan = FaultPlan((Fault("skew", 1, "5.0"), Fault("delay", 2, "8.0"), Fault("stall", 9, "2.0"),
                      Fault("duplicate", 4)))
    from baton.sim import runner

    original = runner.invariants_of

    def fake(outcome):  # noqa: ANN001, ANN202 - test stand-in
        return frozenset({"I9"}) if any(f.kind == "delay" for f in outcome.plan.faults) else frozenset()

    runner.invariants_of = fake
    try:
        shrunk, tries = shrink(2, plan)
    finally:
        runner.invariants_of = original
    assert shrunk.faults == (Fault("delay", 2, "8.0"),)
    assert 0 < tries <= 64


def test_fault_schedules_round_trip_and_refuse_nonsense() -> None:
    plan = generate(42, 6)
    assert FaultPlan.from_json(plan.to_json()) == plan
    assert len(plan.faults) == 6
    with pytest.raises(ValueError, match="unknown fault kind"):
        FaultPlan((Fault("meteor", 1),))
    with pytest.raises(ValueError, match="not a fault schedule"):
        FaultPlan.from_json(json.dumps({"kind": "crash"}))


def test_invariants_of_names_the_numbers() -> None:
    outcome = run_seed(1, 0)
    outcome.violations = ["I1: x", "I4: y", "I4: z"]
    assert invariants_of(outcome) == frozenset({"I1", "I4"})


def test_research_and_deploy_runs_share_one_world_under_faults() -> None:
    from baton.models import RunKind

    clean = run_seed(1, 0, kinds=(RunKind.RESEARCH,))
    assert clean.ok and clean.statuses == {"sim1-research-0": "verified"}, (clean.statuses, clean.violations)
    summary = run_many(range(8), 5, kinds=(RunKind.DEPLOY, RunKind.RESEARCH))
    bad = {o.seed: o.violations[:2] for o in summary.failing}
    assert not bad, bad
    assert sum(summary.statuses.values()) == 16


def test_a_run_whose_side_effect_committed_escalates_rather_than_fails() -> None:
    """Seed 1544: the deployment commits (201), then every read of the postcondition is lost (two dropped, one
    delayed 40 s). "Failed" would hide what the deploy service holds (oracle `hidden`, found at this seed by the
    10,000-seed run of stop 29); the executor escalates instead."""
    plan = FaultPlan.from_json('[{"kind": "catalog_change", "at": 10, "arg": "placement_left_region"}, '
                               '{"kind": "duplicate", "at": 2}, {"kind": "drop_request", "at": 4}, '
                               '{"kind": "drop_request", "at": 5}, {"kind": "delay", "at": 6, "arg": "40.0"}]')
    outcome = run_seed(1544, 0, plan=plan)  # pinned: a random seed's schedule moves whenever a write is added
    assert sorted(outcome.fired) == sorted(plan.faults)
    assert outcome.statuses == {"sim1544-deploy-0": "escalated"}, outcome.statuses
    assert outcome.ok, outcome.violations


def test_the_simulated_targets_check_capabilities_themselves_as_the_fleets_do() -> None:
    """Seed 849, shrunk: the deployment's request is delayed 40 s, past its capability's expiry (6 s). The deploy
    service refuses it on arrival, as the fleet's guarded service does (`--trust`); with `capability-check` (and the
    store claim's expiry check) off, it applies it and the `expired_capability` oracle says so."""
    plan = FaultPlan.from_json('[{"kind": "drop_request", "at": 3}, {"kind": "delay", "at": 5, "arg": "40.0"}, '
                               '{"kind": "catalog_change", "at": 20, "arg": "release_withdrawn"}, '
                               '{"kind": "crash", "at": 20, "arg": "after"}]')
    assert run_seed(849, 0, plan=plan).ok
    ablated = run_seed(849, 0, ("capability-check", "store-claim-expiry"), plan=plan)
    assert invariants_of(ablated) == {"expired_capability"}, ablated.violations


def test_a_target_reads_its_own_clock_not_the_skewed_sender_s() -> None:
    """Seed 3: the worker that deploys reads a clock 85 s ahead (two skews). The guarded deploy service is another
    machine: it judges the capability's expiry on the unskewed clock and admits it (it refused it, 403, and the run
    failed, while the service ran on the sender's skewed clock)."""
    outcome = run_seed(3, 5, keep_trail=True)
    assert outcome.statuses == {"sim3-deploy-0": "verified"}, outcome.statuses
    assert outcome.trail is not None and not any("-> 403" in line for line in outcome.trail)


def test_a_provider_withdrawal_racing_a_retirement_still_withdraws_what_its_record_says() -> None:
    """Seed 547 of the 10,000-seed run of stop 30: model-v7's retirement and the provider's withdrawal of v7 and v8
    ran at once; the withdrawal's catalog call was refused (v7 withdrawn meanwhile), so v8 stayed offered while the
    provider's record said withdrawn, and the run migrated to v8 (oracle `withdrawn_release`). The simulated
    provider now goes on past a release withdrawn meanwhile: nothing may host the run, and it is escalated."""
    plan = FaultPlan.from_json('[{"arg": "older_release_retired", "at": 10, "kind": "catalog_change"}, '
                               '{"arg": "release_withdrawn", "at": 13, "kind": "catalog_change"}, '
                               '{"arg": "after", "at": 13, "kind": "crash"}]')
    outcome = run_seed(547, 0, plan=plan)
    assert sorted(outcome.fired) == sorted(plan.faults)
    assert outcome.ok, outcome.violations
    assert outcome.statuses == {"sim547-deploy-0": "escalated"}


# -- the world's horizon ----------------------------------------------------------------------------------------------

_LONG_PAUSES = '[{"arg": "after", "at": 1, "kind": "crash", "on": "sealed:deploy:VERIFIED"}, {"arg": "1000.0", "at": 1, "kind": "hold", "on": "sealed:deploy:COMMITTING"}, {"arg": "", "at": 1, "kind": "replan", "on": "sealed:deploy:VERIFIED"}, {"arg": "400.0", "at": 22, "kind": "stall"}, {"arg": "400.0", "at": 56, "kind": "stall"}, {"arg": "400.0", "at": 63, "kind": "stall"}]'
"""Seed 6347's shrunk schedule from the 10,000-seed run of stop 32: 2,200 virtual seconds of holds and stalls."""


def test_the_horizon_leaves_room_for_the_schedules_pauses() -> None:
    """A schedule that keeps workers still for longer than the world's 1,800 s ran out of time before its faults
    stopped: the deploy run, about to end, was reported as never ending (I10). The horizon now adds the pauses."""
    plan = FaultPlan.from_json(_LONG_PAUSES)
    assert plan.paused_s() == 2200.0
    outcome = run_seed(6347, 0, plan=plan)
    assert outcome.ok, outcome.violations
