"""The coding agent in the simulation: its runs end under seeded faults, replay identically, and are judged from
the git remote's own records (a tampered record is caught).

Each coding run clones a real git repository and runs real pytest subprocesses (a few seconds a seed).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from baton.models import RunKind
from baton.sim.faults import FaultPlan
from baton.sim.oracles_coding import no_push_at_a_stale_epoch, one_push_per_coding_run
from baton.sim.runner import config_for, invariants_of, run_seed
from baton.sim.world import ENDED, SimOutcome, SimRecords, run_world
from baton.targets.git_remote_repo import commit_file

CODING = (RunKind.CODING,)
FAULTED_SEEDS = (1, 3, 5)
"""Seeds whose coding runs end with five faults scheduled (at least one of them verified)."""


def _ended_cleanly(outcome: SimOutcome) -> None:
    assert outcome.ok, outcome.violations
    assert not outcome.errors, outcome.errors
    assert outcome.statuses and all(status in ENDED for status in outcome.statuses.values()), outcome.statuses


def test_coding_runs_end_under_faults_with_no_violation() -> None:
    outcomes = [run_seed(seed, 5, kinds=CODING) for seed in FAULTED_SEEDS]
    for outcome in outcomes:
        _ended_cleanly(outcome)
    assert any(outcome.fired for outcome in outcomes), "no fault fired: the seeds test nothing"
    assert "verified" in [s for outcome in outcomes for s in outcome.statuses.values()]


def test_a_world_mixing_deploy_and_coding_runs_ends_with_no_violation() -> None:
    outcome = run_seed(1, 5, kinds=(RunKind.DEPLOY, RunKind.CODING))
    _ended_cleanly(outcome)
    assert {run_id.split("-")[1] for run_id in outcome.statuses} == {"deploy", "coding"}


def test_a_coding_seed_replays_to_the_same_trail() -> None:
    first, second = (run_seed(3, 5, kinds=CODING, keep_trail=True) for _ in range(2))
    assert first.statuses == {"sim3-coding-0": "verified"}
    assert first.trail_hash == second.trail_hash, next(
        (a, b) for a, b in zip(first.trail or [], second.trail or [], strict=False) if a != b)


def _remote(records: SimRecords) -> Path:
    return records.root / "git"


def _seen_by(tamper: Callable[[SimRecords], None]) -> list[str]:
    """Violations of a verified coding world (seed 1, no faults) whose git remote records `tamper` changed."""
    return run_world(config_for(1, 0, kinds=CODING), before_check=tamper).violations


def test_the_remote_records_of_a_clean_world_hold() -> None:
    seen: list[list[str]] = []
    outcome = run_world(config_for(1, 0, kinds=CODING), before_check=lambda records: seen.append(
        one_push_per_coding_run(records) + no_push_at_a_stale_epoch(records)))
    assert outcome.statuses == {"sim1-coding-0": "verified"} and outcome.ok, outcome.violations
    assert seen == [[]]


def test_a_branch_moved_after_the_push_is_caught_from_the_bare_repository() -> None:
    def move(records: SimRecords) -> None:
        bare = next((_remote(records) / "repos").iterdir())
        commit_file(bare, "main", "calc/stats.py", "def mean(values):\n    return 0\n", "someone else's change")

    violations = _seen_by(move)
    assert any("is at" in v and "not at its push" in v for v in violations), violations


def test_a_second_push_and_a_stale_epoch_in_the_remote_records_are_caught() -> None:
    def replay(records: SimRecords) -> None:
        pushes = _remote(records) / "pushes.jsonl"
        first = json.loads(pushes.read_text().splitlines()[0])
        again = first | {"seq": first["seq"] + 1, "idempotency_key": first["idempotency_key"] + "-again",
                         "epoch": 0}
        with pushes.open("a") as out:
            out.write(json.dumps(again) + "\n")

    violations = _seen_by(replay)
    assert any("applied 2 pushes" in v for v in violations), violations
    assert any("at epoch 0 while the run's lease was at epoch" in v for v in violations), violations


def test_a_pushed_patch_other_than_the_granted_one_is_caught() -> None:
    def swap(records: SimRecords) -> None:
        pushes = _remote(records) / "pushes.jsonl"
        first = json.loads(pushes.read_text().splitlines()[0])
        pushes.write_text(json.dumps(first | {"patch": first["patch"] + "\n"}) + "\n")

    violations = _seen_by(swap)
    assert any("not to the granted" in v for v in violations), violations


PUSH_ANSWER_LOST = FaultPlan.from_json('[{"arg": "", "at": 24, "kind": "drop_response"}]')
"""Seed 1's push is message 24; its answer is lost. (20 random seeds with five faults did not catch this
ablation on coding runs: the faults rarely land on the one push among the remote's many reads.)"""


def test_retrying_a_lost_push_without_reconciling_is_caught_on_the_remote_s_traffic() -> None:
    ablated = run_seed(1, 0, ("reconcile-before-retry",), plan=PUSH_ANSWER_LOST, kinds=CODING)
    replayed = run_seed(1, 0, ("reconcile-before-retry",), plan=PUSH_ANSWER_LOST, kinds=CODING)
    assert "I4" in invariants_of(ablated), ablated.violations
    assert any("without asking git" in v for v in ablated.violations), ablated.violations
    assert ablated.trail_hash == replayed.trail_hash
    protected = run_seed(1, 0, plan=PUSH_ANSWER_LOST, kinds=CODING)
    assert protected.ok and protected.statuses == {"sim1-coding-0": "verified"}, protected.violations


def test_the_cli_runs_a_coding_seed() -> None:
    from typer.testing import CliRunner

    from baton.cli import app

    result = CliRunner().invoke(app, ["sim", "--seed", "1", "--runs", "coding", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["statuses"] == {"sim1-coding-0": "verified"}
