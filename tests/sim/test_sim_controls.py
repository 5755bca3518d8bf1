"""The transcript-only controls run in the simulation: same workload, same faults, same oracles as Baton."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from baton.cli import app
from baton.faults import transcript_agent, transcript_side
from baton.models import RunKind
from baton.sim import control_world
from baton.sim.faults import Fault, FaultPlan
from baton.sim.runner import config_for, invariants_of, run_seed
from baton.sim.world import ENDED, run_world

BOTH = (RunKind.DEPLOY, RunKind.RESEARCH)
NAIVE_DUPLICATES = (18, 37, 52, 54)
"""Seeds (5 faults, deploy and research runs) whose own schedules make the naive control commit twice."""


def _run(seed: int, strategy: str, *, plan: FaultPlan | None = None, keep_trail: bool = False) -> Any:
    return run_seed(seed, 5, plan=plan, kinds=BOTH, strategy=strategy, keep_trail=keep_trail)


@pytest.mark.parametrize("strategy", control_world.CONTROLS)
def test_a_control_runs_every_run_to_an_end_on_the_simulated_network(strategy: str) -> None:
    for seed in range(4):
        outcome = _run(seed, strategy, keep_trail=True)
        assert outcome.strategy == strategy and not outcome.errors
        assert set(outcome.statuses) == {f"sim{seed}-deploy-0", f"sim{seed}-research-1"}
        assert all(status in ENDED for status in outcome.statuses.values()), outcome.statuses
        assert outcome.trail is not None
        sends = [line for line in outcome.trail
                 if " send " in line and ("POST deploy/deployments" in line or "POST corpus/publications" in line)]
        assert sends, "the control's mutations went over the simulated network"
        keys = {line.split("key=")[1].split()[0] for line in sends}
        if strategy == "competent":  # derived from run and step; the naive control makes a fresh one per attempt
            assert keys <= {f"sim{seed}-deploy-0:deploy", f"sim{seed}-research-1:research"}
        else:
            assert all(len(key) == 32 and ":" not in key for key in keys)


def test_every_strategy_faces_the_same_workload_and_schedule() -> None:
    for seed in (3, 30):
        plans = {s: config_for(seed, 5, kinds=BOTH, strategy=s).plan for s in control_world.STRATEGIES}
        assert len(set(plans.values())) == 1
        outcomes = {s: _run(seed, s) for s in control_world.STRATEGIES}
        assert len({tuple(sorted(o.statuses)) for o in outcomes.values()}) == 1  # the same runs
        for strategy in control_world.CONTROLS:  # message faults strike the n-th message, whoever sends it
            fired = {f for f in outcomes[strategy].fired if f.kind in ("drop_request", "drop_response", "duplicate",
                                                                        "delay")}
            assert fired <= set(plans["baton"].faults)


@pytest.mark.parametrize("strategy", control_world.CONTROLS)
def test_the_same_seed_and_strategy_replay_byte_for_byte(strategy: str) -> None:
    first, second = (_run(30, strategy, keep_trail=True) for _ in range(2))
    assert first.trail_hash == second.trail_hash and first.trail == second.trail
    assert (first.statuses, first.violations, first.fired) == (second.statuses, second.violations, second.fired)
    other = _run(30, "naive" if strategy == "competent" else "competent")
    assert other.trail_hash != first.trail_hash


def test_the_naive_control_commits_twice_where_baton_does_not_on_the_same_seeds() -> None:
    for seed in NAIVE_DUPLICATES:
        naive, baton = _run(seed, "naive"), _run(seed, "baton")
        assert baton.ok, (seed, baton.violations)
        assert "I1" in invariants_of(naive), (seed, naive.violations)
        duplicates = [v for v in naive.violations if v.startswith("I1")]
        assert any("under 2 keys" in v for v in duplicates), duplicates


def test_a_worker_lost_between_commit_and_transcript_write_shows_each_design_for_what_it_is() -> None:
    """One stall on seed 2 (at the 13th worker write, the research worker's transcript write after its publication):
    the worker freezes after the corpus committed its publication, before its transcript says so; past the visibility timeout another worker resumes a tool call without a result.
    The naive control sends it again under a fresh key (a second publication); the competent control's derived key
    makes the corpus replay the first; Baton reconciles the operation."""
    plan = FaultPlan((Fault("stall", 13, "12.0"),))
    naive, competent, baton = (run_seed(2, 0, plan=plan, kinds=BOTH, strategy=s, keep_trail=True)
                               for s in ("naive", "competent", "baton"))
    assert [f.describe() for f in naive.fired] == ["stall@13(12.0)"] == [f.describe() for f in competent.fired]
    assert any("visibility timeout sim2-research-1" in line for line in naive.trail or [])
    assert "I1: corpus recorded side effects for sim2-research-1 under 2 keys" in " ".join(naive.violations)
    assert "I4: sim2-research-1 reported verified but corpus recorded 2" in " ".join(naive.violations)
    assert not [v for v in competent.violations if v.startswith(("I1", "I4"))], competent.violations
    assert baton.ok, baton.violations


def test_a_zombie_back_from_a_long_stall_publishes_stale_evidence_under_the_naive_control() -> None:
    """Seed 54's schedule shrunk: a crash, then a document change and a 400 s stall of the worker that took the run
    over. Its job goes to another worker meanwhile; when the stalled one wakes it carries on from what it holds.
    The naive zombie publishes again, quoting the superseded version read 400 s before (past its 300 s budget),
    and deploys again; the competent zombie is refused by the target (its resume counter is below the one the
    target saw); Baton shows nothing."""
    plan = FaultPlan((Fault("crash", 9, "before"), Fault("doc_change", 10, "idempotency"), Fault("stall", 10, "400.0")))
    naive, competent, baton = (run_seed(54, 0, plan=plan, kinds=BOTH, strategy=s) for s in ("naive", "competent",
                                                                                             "baton"))
    assert {f.describe() for f in naive.fired} == {f.describe() for f in plan.faults}
    assert {"I1", "I9"} <= invariants_of(naive), naive.violations
    assert "I9: sim54-research-1 published v[1] of idempotency" in " ".join(naive.violations)
    assert not {"I1", "I9"} & invariants_of(competent), competent.violations
    assert baton.ok, baton.violations


def test_faults_without_a_counterpart_never_fire_for_a_control() -> None:
    plan = FaultPlan((Fault("catalog_change", 1, "release_withdrawn"), Fault("crash", 1, "before", on="claim_operation"),
                      Fault("crash", 1, "after", on=control_world.TRANSCRIPT_CALL)))
    outcome = run_seed(4, 0, plan=plan, kinds=(RunKind.DEPLOY,), strategy="naive", keep_trail=True)
    assert [f.describe() for f in outcome.skipped] == ["catalog_change@1(release_withdrawn)"]
    assert [f.describe() for f in outcome.fired] == ["crash@1[save_transcript](after)"]
    assert any("crash after a transcript write" in line for line in outcome.trail or [])
    assert outcome.statuses == {"sim4-deploy-0": "verified"}
    # the naive transcript resumes without the model call it paid before the crash; the provider's bill counts it
    assert outcome.violations == ["bill: the provider billed sim4-deploy-0 for 1 model call(s); the run accounted 0.0"]


def test_the_simulated_control_is_the_class_the_live_cli_runs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert control_world.TranscriptAgent is transcript_agent.TranscriptAgent
    assert transcript_side.AGENT_MODULE == transcript_agent.__name__  # what the live fault matrix starts
    made: list[transcript_agent.TranscriptAgent] = []
    monkeypatch.setattr(transcript_agent.TranscriptAgent, "run", lambda self: made.append(self))
    path = tmp_path / "transcript.json"
    transcript_agent.save(path, transcript_agent.new_transcript("r1", {"kind": "deploy", "service": "checkout"},
                                                                {}, "competent"), "competent")
    assert transcript_agent.main(["--transcript", str(path), "--mode", "competent", "--release", "model-v7",
                                  "--home", str(tmp_path)]) == 0
    assert isinstance(made[0].storage, transcript_agent.TranscriptFile) and made[0].storage.path == path
    assert isinstance(made[0].services, transcript_agent.LiveServices)


def test_a_simulated_transcript_is_one_the_live_control_can_resume(tmp_path: Path) -> None:
    """The world keeps the transcript in the live format: written to a file, the live loader (with the competent
    checksum) reads it back."""
    kept: dict[str, list[str]] = {}
    original = control_world.ControlWorld.records

    def spy(self: control_world.ControlWorld, settled: bool) -> Any:
        kept.update(self.transcripts)
        return original(self, settled)

    control_world.ControlWorld.records = spy  # type: ignore[method-assign]
    try:
        run_world(config_for(1, 5, kinds=BOTH, strategy="competent"))
    finally:
        control_world.ControlWorld.records = original  # type: ignore[method-assign]
    for run_id, versions in kept.items():
        path = tmp_path / f"{run_id}.json"
        path.write_text(versions[-1], encoding="utf-8")
        body = transcript_agent.load(path, "competent")
        assert body["run_id"] == run_id and body["status"] in ENDED and body["messages"]
        path.write_text(versions[-1].replace('"step"', '"stpe"', 1), encoding="utf-8")
        with pytest.raises(transcript_agent.TranscriptCorrupt):
            transcript_agent.load(path, "competent")


def test_controls_are_refused_what_they_cannot_run() -> None:
    with pytest.raises(ValueError, match="no protection|none to switch off"):
        config_for(1, 5, ablate=("idempotency",), strategy="naive")
    with pytest.raises(ValueError, match="deploy, research"):
        run_world(config_for(1, 0, kinds=(RunKind.BROWSER,), strategy="naive"))


def test_the_cli_runs_a_control_and_replays_its_seed() -> None:
    runner = CliRunner()
    args = ["sim", "--seed", "18", "--runs", "deploy,research", "--strategy", "naive", "--json"]
    first, second = runner.invoke(app, args), runner.invoke(app, args)
    assert first.exit_code == 1, first.output  # the naive control violates on this seed
    report = json.loads(first.stdout)
    assert report["strategy"] == "naive" and any(v.startswith("I1") for v in report["violations"])
    assert report["trail_hash"] == json.loads(second.stdout)["trail_hash"]
    batch = runner.invoke(app, ["sim", "--seeds", "3", "--runs", "deploy,research", "--strategy", "competent", "--json"])
    summary = json.loads(batch.stdout)
    assert summary["seeds"] == 3 and "violations_by_invariant" in summary
    assert runner.invoke(app, ["sim", "--seeds", "1", "--strategy", "bogus"]).exit_code == 2
    assert runner.invoke(app, ["sim", "--seeds", "1", "--strategy", "naive", "--runs", "coding"]).exit_code == 2


BILL_AND_HIDDEN = (
    (48, {"bill", "hidden"}, '[{"kind": "drop_request", "at": 1}, {"kind": "hold", "at": 1, "arg": "8.0", '
     '"on": "claim_operation"}, {"kind": "drop_response", "at": 2}, {"kind": "handoff", "at": 5, '
     '"arg": "better_model_released"}, {"kind": "delay", "at": 6, "arg": "0.5"}, {"kind": "drop_response", "at": 8}]'),
    (3, {"bill"}, '[{"kind": "handoff", "at": 1, "arg": "scheduler_rebalance", "on": "claim_operation"}, '
     '{"kind": "stall", "at": 1, "arg": "5.0", "on": "claim_operation"}, {"kind": "skew", "at": 3, "arg": "-5.0"}, '
     '{"kind": "skew", "at": 3, "arg": "90.0"}, {"kind": "crash", "at": 5, "arg": "after"}, '
     '{"kind": "drop_request", "at": 5}, {"kind": "doc_change", "at": 22, "arg": "leases"}]'),
    (4, {"hidden"}, '[{"kind": "owner_rule", "at": 0, "arg": "unsafe"}, {"kind": "delay", "at": 1, "arg": "40.0"}, '
     '{"kind": "delay", "at": 9, "arg": "2.0"}, {"kind": "crash", "at": 18, "arg": "before"}, '
     '{"kind": "crash", "at": 21, "arg": "before"}, {"kind": "crash", "at": 82, "arg": "after"}]'),
)
"""Seeds 48, 3 and 4 of the stop-30 mix, their schedules pinned (a random seed's plan moves with every new draw)."""


def test_the_bill_and_the_targets_catch_what_the_naive_transcript_loses() -> None:
    """A naive resume forgets what an earlier worker spent (the provider's bill shows more calls than the run
    accounted for), and a lost answer ends the naive run failed while its target holds the effect. The competent
    control carries its budget and retries; Baton accounts both, on the same seeds."""
    for seed, expected, schedule in BILL_AND_HIDDEN:
        plan = FaultPlan.from_json(schedule)
        naive, competent, baton = (_run(seed, s, plan=plan) for s in ("naive", "competent", "baton"))
        seen = {v.split(":", 1)[0] for v in naive.violations} & {"bill", "hidden"}
        assert seen == expected, naive.violations
        assert not any(v.startswith(("bill", "hidden")) for v in [*competent.violations, *baton.violations])


def test_the_bill_oracle_reads_the_bill_not_the_runs_word() -> None:
    """Tampering with the provider's bill (one more call for the run) is what makes the bill oracle speak, and it
    counts: the seed is no longer ok."""
    from baton.sim.catalog_faults import BILL_FILE

    def overbill(records: Any) -> None:
        bill = records.root / BILL_FILE
        bill.write_text(bill.read_text() + json.dumps({"account": "sim0-deploy-0", "at": "2026-01-01T00:00:01+00:00"})
                        + "\n")

    clean = run_world(config_for(0, 5, kinds=BOTH, strategy="competent"))
    tampered = run_world(config_for(0, 5, kinds=BOTH, strategy="competent"), before_check=overbill)
    assert not [v for v in clean.violations if v.startswith("bill")]
    assert [v for v in tampered.violations if v.startswith("bill: the provider billed sim0-deploy-0")]
    assert not tampered.ok


def test_awaiting_stalled_workers_lets_a_naive_zombie_act_and_baton_fence_its_own() -> None:
    """Seed 24: a worker stalled past the visibility timeout wakes after every run ended. Ending the world then hides
    what it does next; awaiting it shows the naive zombie committing again. Baton's zombie is fenced either way."""
    ended = _run(24, "naive")
    awaited = run_seed(24, 5, kinds=BOTH, strategy="naive", await_stalled=True)
    assert "I1" not in invariants_of(ended) and "I1" in invariants_of(awaited), (ended.violations, awaited.violations)
    assert awaited.virtual_s > ended.virtual_s
    baton = run_seed(24, 5, kinds=BOTH, strategy="baton", await_stalled=True)
    assert baton.ok, baton.violations


def test_the_experiment_check_compares_a_controls_model_with_its_live_code() -> None:
    from baton.experiment.sim_check import check

    rows = check(2, model_runs=4000, kinds=("crash", "reply_lost"), strategy="competent")
    assert [row.strategy for row in rows] == ["competent", "competent"]
    for row in rows:
        assert row.sim.fired == 2 and sum(row.sim.statuses.values()) == 2
        assert row.sim.runs_over_one_effect == 0 and row.model.duplicates == 0 and row.safety_agrees
    with pytest.raises(ValueError, match="not 'transcript-v0'"):
        check(1, model_runs=100, kinds=("crash",), strategy="transcript-v0")


def test_a_world_starts_from_empty_target_records_after_another_strategy_s_world() -> None:
    """The first guarded (Baton) world of a process used to build its targets over the records a control's world
    left in the same directory: Baton's runs then 'held' the control's effects (I1, hidden) on seed 25. Each order
    runs in a fresh process, as `baton sim` and `baton.sim.compare` do."""
    script = ("import sys\nfrom baton.models import RunKind\nfrom baton.sim.runner import run_seed\n"
              "for strategy in sys.argv[1:]:\n"
              "    o = run_seed(25, 5, kinds=(RunKind.DEPLOY, RunKind.RESEARCH), strategy=strategy)\n"
              "print(o.trail_hash, o.ok)\n")

    def last_world(*strategies: str) -> str:
        done = subprocess.run([sys.executable, "-c", script, *strategies], capture_output=True, text=True, check=True)
        return done.stdout.strip()

    alone = last_world("baton")
    assert alone.endswith("True")
    assert last_world("naive", "baton") == alone
