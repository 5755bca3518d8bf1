"""The experiment's baselines run in the simulation: Baton's machinery under another recovery policy, on the same
seeds, workload, fault schedule and oracles as Baton and the transcript controls."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

from baton.cli import app
from baton.experiment.strategies import BY_ID
from baton.experiment.workload import Parameters
from baton.models import Boundary, ResumabilityClass, RunKind
from baton.sim import baseline_world, catalog_faults
from baton.sim.compare import compare
from baton.sim.faults import Fault, FaultPlan
from baton.sim.runner import config_for, run_seed
from baton.sim.world import ENDED, SimRecords, run_world

BOTH = (RunKind.DEPLOY, RunKind.RESEARCH)
RECLAIMED = FaultPlan((Fault("handoff", 3, "gpu_reclaimed"), Fault("hold", 3, "5.0")))
"""The GPU under seed 1's deploy run is reclaimed at the third worker write (the worker there is held 5 s before
that write, so the run is still on it when the coordinator acts): its placement is gone for `outage_s`."""


def _placements_owned(records: SimRecords, run_id: str, into: dict[str, set[str]]) -> None:
    """The placements whose workers (or reservations) held the run's lease, from the lease history the world saw."""
    into[run_id] = {name for _, run, owner, _ in records.lease_history if run == run_id and owner
                    for name in ("local-gpu-eu", "cloud-eu") if name in owner}


def test_the_baselines_are_the_experiments_strategies() -> None:
    """Every strategy of the experiment runs in the simulation, and nothing else does (an experiment strategy added
    without a simulated counterpart fails here)."""
    assert set(baseline_world.SIM_STRATEGIES) == set(BY_ID)


@pytest.mark.parametrize("strategy", baseline_world.BASELINES)
def test_a_baseline_faces_the_same_workload_and_schedule_and_ends_every_run(strategy: str) -> None:
    for seed in (3, 30):
        assert config_for(seed, 5, kinds=BOTH, strategy=strategy).plan == config_for(seed, 5, kinds=BOTH).plan
        outcome, baton = run_seed(seed, 5, kinds=BOTH, strategy=strategy), run_seed(seed, 5, kinds=BOTH)
        assert outcome.strategy == strategy and not outcome.errors
        assert set(outcome.statuses) == set(baton.statuses)
        assert all(status in ENDED for status in outcome.statuses.values()), outcome.statuses


def test_retry_on_the_same_placement_cannot_finish_while_its_placement_is_gone_but_baton_moves() -> None:
    baton, retry = (run_seed(1, 0, plan=RECLAIMED, kinds=BOTH, strategy=s, keep_trail=True)
                    for s in ("baton", baseline_world.RETRY_SAME_PLACEMENT))
    outage = config_for(1, 0).outage_s
    assert any("placement local-gpu-eu gone" in line for line in baton.trail or [])
    assert baton.ok and set(baton.statuses.values()) == {"verified"}
    assert baton.virtual_s < 30.0, "Baton moved the run to the other placement and finished there"
    assert retry.ok and set(retry.statuses.values()) == {"verified"}
    assert retry.virtual_s >= outage, "the run waited for its own placement to come back"
    assert any("retry_same_placement: sim1-deploy-0 waits for local-gpu-eu" in line for line in retry.trail or [])


def test_retry_on_the_same_placement_never_ends_if_its_placement_never_comes_back() -> None:
    config = dataclasses.replace(config_for(1, 0, plan=RECLAIMED, kinds=(RunKind.DEPLOY,),
                                            strategy=baseline_world.RETRY_SAME_PLACEMENT), outage_s=1e6, max_time_s=600.0)
    outcome = run_world(config)
    assert outcome.statuses == {"sim1-deploy-0": "active"}
    assert any(v.startswith("I10") for v in outcome.violations), outcome.violations
    moved = run_world(dataclasses.replace(config, strategy="baton"))
    assert moved.ok and moved.statuses == {"sim1-deploy-0": "verified"}


@pytest.mark.parametrize("strategy", (baseline_world.RETRY_SAME_PLACEMENT, baseline_world.WAIT_SAME_POOL))
def test_a_baseline_never_leaves_its_pool(strategy: str) -> None:
    """Seed 1's deploy run starts on local-gpu-eu: Baton moves it to cloud-eu when the GPU is reclaimed (and on a
    planned move); the baselines own it only on local-gpu-eu."""
    for reason in ("gpu_reclaimed", "provider_unhealthy"):
        plan = FaultPlan((Fault("handoff", 3, reason), Fault("hold", 3, "5.0")))
        owned: dict[str, dict[str, set[str]]] = {}
        for who in ("baton", strategy):
            owned[who] = {}
            run_world(config_for(1, 0, plan=plan, kinds=BOTH, strategy=who),
                      before_check=lambda r, o=owned[who]: _placements_owned(r, "sim1-deploy-0", o))
        assert "cloud-eu" in owned["baton"]["sim1-deploy-0"], (reason, owned)
        assert owned[strategy]["sim1-deploy-0"] <= {"local-gpu-eu"}, (reason, owned)


def test_on_a_planned_move_retry_stays_put_and_wait_for_the_pool_restarts_in_place() -> None:
    plan = FaultPlan((Fault("handoff", 3, "provider_unhealthy"), Fault("hold", 3, "5.0")))
    retry, pool = (run_seed(1, 0, plan=plan, kinds=BOTH, strategy=s, keep_trail=True) for s in (baseline_world.RETRY_SAME_PLACEMENT, baseline_world.WAIT_SAME_POOL))
    assert any("retry_same_placement: sim1-deploy-0 stays (chaos provider_unhealthy)" in line
               for line in retry.trail or [])
    assert any("handoff sim1-deploy-0 provider_unhealthy: committed local-gpu-eu" in line for line in pool.trail or [])
    assert retry.ok and pool.ok


def test_compare_and_the_cli_run_the_baselines() -> None:
    report = compare(1, 0, strategies=baseline_world.BASELINES)
    for strategy in baseline_world.BASELINES:
        assert report["strategies"][strategy]["run_statuses"] == {"verified": 2}
    result = CliRunner().invoke(app, ["sim", "--seeds", "1", "--runs", "deploy", "--strategy",
                                      baseline_world.WAIT_SAME_POOL, "--json"])
    assert result.exit_code == 0, result.output
    assert CliRunner().invoke(app, ["sim", "--seeds", "1", "--strategy", "nonsense"]).exit_code == 2


def _bill_of(records: SimRecords, run_id: str, into: list[int]) -> None:
    """Model calls the provider billed the run, from the provider's own bill file (outside the code under test)."""
    path = records.root / catalog_faults.BILL_FILE
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    into.append(sum(1 for line in lines if line.get("account") == run_id))


def test_restart_from_the_beginning_pays_the_provider_for_more_model_calls_than_baton_on_the_same_seed() -> None:
    """Seed 1's deploy worker crashes before its 16th write, after the model planned the deploy: Baton resumes from
    the checkpoint sealed after the plan; restart rewinds to the first checkpoint and plans again."""
    plan = FaultPlan((Fault("crash", 16, "before"),))
    bills: dict[str, list[int]] = {}
    outcomes = {}
    for who in ("baton", baseline_world.RESTART):
        bills[who] = []
        outcomes[who] = run_world(config_for(1, 0, plan=plan, kinds=BOTH, strategy=who, keep_trail=True),
                                  before_check=lambda r, b=bills[who]: _bill_of(r, "sim1-deploy-0", b))
    restart, baton = outcomes[baseline_world.RESTART], outcomes["baton"]
    assert any("restart: sim1-deploy-0 rewound to GENERATING (seq" in line for line in restart.trail or [])
    assert bills[baseline_world.RESTART][0] > bills["baton"][0] >= 1, bills
    for outcome in (baton, restart):  # the rewound run accounts for what it re-paid: the bill agrees with it
        assert outcome.ok, outcome.violations
        assert set(outcome.statuses.values()) == {"verified"}


def test_a_rewind_keeps_the_budget_used_and_the_operation_ledger() -> None:
    """What a restart discards is progress, not facts: the rewound checkpoint carries the latest budget used and
    operation ledger (the oracles' budget and exactly-once checks would catch a rewind that dropped them)."""
    plan = FaultPlan((Fault("crash", 14, "before"),))
    seen: list[tuple[str, int]] = []

    def boundaries(records: SimRecords) -> None:
        seen.extend((str(row[0]), int(row[1])) for row in records.store.raw(
            "SELECT boundary, seq FROM checkpoints WHERE run_id = ? ORDER BY seq", ("sim1-deploy-0",)))

    outcome = run_world(config_for(1, 0, plan=plan, kinds=BOTH, strategy=baseline_world.RESTART),
                        before_check=boundaries)
    assert outcome.ok, outcome.violations
    first = seen[0][0]
    assert [b for b, _ in seen].count(first) >= 2, seen  # the first boundary sealed again, later in the chain


def test_coarse_checkpoints_resume_from_the_phase_end_and_pay_between_baton_and_restart() -> None:
    """Seed 1's deploy worker crashes before its 23rd write, past VERIFIED: restart plans again from the first
    checkpoint (a second model call billed), coarse checkpoints resume from VERIFIED (the plan kept), Baton from
    the latest checkpoint."""
    plan = FaultPlan((Fault("crash", 23, "before"),))
    bills: dict[str, list[int]] = {}
    trails: dict[str, list[str]] = {}
    for who in ("baton", baseline_world.COARSE, baseline_world.RESTART):
        bills[who] = []
        outcome = run_world(config_for(1, 0, plan=plan, kinds=BOTH, strategy=who, keep_trail=True),
                            before_check=lambda r, b=bills[who]: _bill_of(r, "sim1-deploy-0", b))
        assert outcome.ok, (who, outcome.violations)
        trails[who] = outcome.trail or []
    assert any("coarse_checkpoints: sim1-deploy-0 rewound to VERIFIED" in line for line in trails[baseline_world.COARSE])
    assert any("restart: sim1-deploy-0 rewound to GENERATING" in line for line in trails[baseline_world.RESTART])
    assert bills[baseline_world.RESTART][0] > bills[baseline_world.COARSE][0] >= bills["baton"][0], bills


def test_human_assisted_recovery_waits_for_a_human_and_counts_each_intervention() -> None:
    """A reclaimed GPU: Baton moves the run at once; under human-assisted recovery a human moves it
    `human_delay_s` later (the experiment's defaults), one intervention."""
    assert (config_for(1, 0).human_delay_s, config_for(1, 0).human_cost_usd) == (
        Parameters().human_delay_s, Parameters().human_cost_usd)
    baton, human = (run_seed(1, 0, plan=RECLAIMED, kinds=BOTH, strategy=s, keep_trail=True)
                    for s in ("baton", baseline_world.HUMAN))
    assert baton.interventions == 0 and baton.virtual_s < 30.0
    assert human.ok and set(human.statuses.values()) == {"verified"}, human.violations
    assert human.interventions == 1
    assert human.virtual_s >= config_for(1, 0).human_delay_s
    assert any("human_assisted: intervention 1 on sim1-deploy-0" in line for line in human.trail or [])
    unfaulted = run_seed(1, 0, plan=FaultPlan(), kinds=BOTH, strategy=baseline_world.HUMAN)
    assert unfaulted.interventions == 0 and unfaulted.virtual_s < 30.0


def test_restart_from_the_last_deterministic_step_resumes_from_the_newest_r1_or_r2_checkpoint() -> None:
    def points(*classes: str) -> list[Any]:
        return [SimpleNamespace(resumability=ResumabilityClass(c), boundary=Boundary.GENERATING) for c in classes]

    assert baseline_world.deterministic_point(points("R2", "R3", "R2", "R3", "R5")) == 2
    assert baseline_world.deterministic_point(points("R2", "R3", "R4")) == 0
    assert baseline_world.deterministic_point(points("R3", "R1", "R4")) == 1
    plan = FaultPlan((Fault("crash", 20, "before"),))  # in a deploy run only the first checkpoint is R2
    last_step = run_seed(1, 0, plan=plan, kinds=BOTH, strategy=baseline_world.RESTART_LAST_STEP, keep_trail=True)
    assert last_step.ok and set(last_step.statuses.values()) == {"verified"}
    assert any("restart_last_step: sim1-deploy-0 rewound to GENERATING" in line for line in last_step.trail or [])
