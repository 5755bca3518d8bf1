"""The experiment's Baton model against the real protocol in the simulation (`baton experiment-check`)."""

from __future__ import annotations

import json
import random

import pytest
from typer.testing import CliRunner

from baton.ablation import ablation_env
from baton.cli import app
from baton.experiment.sim_check import Baseline, baseline, check, check_sim, faults_for
from baton.experiment.workload import FAULT_KINDS
from baton.models import RunKind


def test_every_kind_lands_and_both_sides_are_clean() -> None:
    rows = check(2, model_runs=4000)
    assert [row.kind for row in rows] == list(FAULT_KINDS)
    for row in rows:
        assert row.sim.fired == row.sim.worlds == 2, row.kind  # each planned fault really struck
        assert row.model.runs > 0, row.kind
        assert row.safety_agrees, row.as_dict()


def test_the_mutation_faults_strike_the_mutation_itself() -> None:
    base = baseline(0, RunKind.DEPLOY)
    assert base.mutation_seq is not None and base.claim_write is not None
    assert 0 < base.claim_write <= base.writes
    (lost,) = faults_for("reply_lost", base, random.Random(0))
    assert (lost.kind, lost.at) == ("drop_response", base.mutation_seq)
    (stall,) = faults_for("stale_wakes", base, random.Random(0))
    assert (stall.kind, stall.at) == ("stall", base.claim_write) and float(stall.arg) > 6.0


def test_a_world_without_a_mutation_gets_no_mutation_fault() -> None:
    assert faults_for("reply_lost", Baseline(writes=10, mutation_seq=None, claim_write=None), random.Random(0)) == ()


def test_the_check_fails_when_reconciliation_and_idempotency_are_switched_off() -> None:
    with ablation_env("reconcile-before-retry", "idempotency"):
        side = check_sim("reply_lost", 2)
    assert side.fired == 2
    assert side.runs_over_one_effect > 0 and side.violating_worlds > 0  # the deploy service's own file holds two


def test_an_unknown_kind_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown fault kind"):
        check(1, kinds=("meteor",))
    result = CliRunner().invoke(app, ["experiment-check", "--worlds", "1", "--kinds", "meteor"])
    assert result.exit_code == 2 and "meteor" in result.output


def test_the_command_prints_json_and_exits_zero_when_clean() -> None:
    result = CliRunner().invoke(app, ["experiment-check", "--worlds", "1", "--kinds", "crash,reply_lost",
                                      "--model-runs", "3000", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)["rows"]
    assert [row["kind"] for row in rows] == ["crash", "reply_lost"] and all(row["safety_agrees"] for row in rows)


@pytest.mark.parametrize("strategy", ["restart", "retry_same_placement"])
def test_a_baseline_s_model_is_checked_against_its_real_code(strategy: str) -> None:
    """The baselines run in the simulation as Baton's world under their recovery policy; each fault lands there too."""
    rows = check(2, model_runs=3000, kinds=("crash", "placement_lost"), strategy=strategy)
    for row in rows:
        assert row.strategy == strategy and row.sim.fired == row.sim.worlds == 2, row.as_dict()
        assert row.model.runs > 0 and row.safety_agrees, row.as_dict()
    with pytest.raises(ValueError, match="not 'meteor-shower'"):
        check(1, strategy="meteor-shower")


@pytest.mark.parametrize("strategy", ["restart_last_step", "retry_same_placement"])
def test_the_model_and_the_real_code_agree_on_evidence_that_changed_during_an_outage(strategy: str) -> None:
    """Both baselines are defined as the simulation runs them: retry on the same placement keeps Baton's
    revalidation (it only never moves), and a restart from a deterministic step gathers its evidence again. Before
    the model said so, it had both resume on recorded evidence: stale in most of its runs, in none of the worlds."""
    [row] = check(2, model_runs=3000, kinds=("evidence_changed",), strategy=strategy)
    assert row.sim.fired == row.sim.worlds == 2 and row.model.runs > 0, row.as_dict()
    assert row.safety_agrees and row.model.stale == 0, row.as_dict()
