"""`baton sim`: replay by seed with an identical trail hash, batches, and clear refusals of bad input."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from baton.cli import app
from baton.models import RunKind
from baton.sim.scenarios import mixed

runner = CliRunner()


def test_replaying_a_seed_twice_prints_the_same_trail_hash() -> None:
    first = runner.invoke(app, ["sim", "--seed", "9", "--faults", "5", "--json"])
    second = runner.invoke(app, ["sim", "--seed", "9", "--faults", "5", "--json"])
    assert first.exit_code == 0, first.output
    a, b = json.loads(first.stdout), json.loads(second.stdout)
    assert a["trail_hash"] == b["trail_hash"] and a["trail_hash"].startswith("sha256:")
    assert len(a["fault_schedule"]) >= 5 and a["violations"] == []  # 5 random faults, maybe a named scenario


def test_a_given_schedule_replays_instead_of_the_seeds_own() -> None:
    plan = '[{"kind": "crash", "at": 10, "arg": "after"}]'
    result = runner.invoke(app, ["sim", "--seed", "3", "--plan", plan, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["fault_schedule"] == json.loads(plan)


def test_a_small_batch_reports_rate_and_fault_mix() -> None:
    result = runner.invoke(app, ["sim", "--seeds", "4", "--faults", "3", "--first", "20", "--json"])
    report = json.loads(result.stdout)
    assert report["seeds"] == 4 and report["seeds_per_s"] > 0
    drawn = sum(len(mixed(seed, 3, (RunKind.DEPLOY,)).faults) for seed in range(20, 24))  # 3 random, maybe a scenario
    assert sum(report["fault_kinds_scheduled"].values()) == drawn >= 12


def test_bad_input_is_refused_with_a_reason() -> None:
    unknown = runner.invoke(app, ["sim", "--seeds", "1", "--ablate", "no-such-protection"])
    assert unknown.exit_code == 2 and "unknown ablation" in unknown.output
    lonely = runner.invoke(app, ["sim", "--plan", "[]"])
    assert lonely.exit_code == 2 and "--seed" in lonely.output
    broken = runner.invoke(app, ["sim", "--seed", "1", "--plan", "{not json"])
    assert broken.exit_code == 2 and "not a fault schedule" in broken.output
    kinds = runner.invoke(app, ["sim", "--seed", "1", "--runs", "nonsense"])
    assert kinds.exit_code != 0
