"""A small live fleet with chaos ends on its own, with no duplicate side effect and no violation."""

from __future__ import annotations

from pathlib import Path

import pytest

from baton.fleet import FleetConfig, run_fleet
from baton.targets.deploy_service import count_side_effects
from baton.targets.service_process import target_data_dir

pytestmark = pytest.mark.integration


def test_a_small_chaotic_fleet_ends_with_every_run_terminal_and_nothing_done_twice(tmp_path: Path) -> None:
    home = tmp_path / "home"
    summary = run_fleet(FleetConfig(runs=6, workers=3, chaos=True, seed=1, home=home, timeout_s=120.0,
                                    boundary_pause_s=0.25, chaos_window_s=6.0, launch_interval_s=0.5))
    assert summary.runs == 6 and summary.active == 0 and summary.timed_out == []
    assert summary.verified + summary.failed + summary.escalated == 6
    assert summary.duplicate_side_effects == 0 and summary.runs_with_several_effects == 0
    assert summary.checker_violations == []
    assert sum(summary.handoffs_by_reason.values()) >= 1 and summary.chaos_events
    assert summary.resume_failures == 0
    # The targets' own files agree: one deployment per deploy run that verified, no key twice.
    counts = count_side_effects(target_data_dir("deploy", home))
    assert counts["duplicates"] == {}


def test_runs_left_at_the_timeout_are_fenced_failed_and_named(tmp_path: Path) -> None:
    # A run pauses 5 s at every boundary, so neither can finish in 15 s; 15 s leaves a loaded
    # machine time to start the services and the worker and launch both runs.
    summary = run_fleet(FleetConfig(runs=2, workers=1, chaos=False, home=tmp_path / "home", timeout_s=15.0,
                                    boundary_pause_s=5.0, launch_interval_s=0.1))
    assert summary.planned == 2 and summary.runs == 2  # both were launched before the timeout
    assert summary.active == 0 and summary.failed == 2
    assert sorted(summary.timed_out) == sorted(summary.run_status)
    assert summary.duplicate_side_effects == 0 and summary.checker_violations == []


def test_the_fleet_command_prints_a_json_summary(tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from baton.cli import app

    result = CliRunner().invoke(app, ["fleet", "--runs", "2", "--workers", "1", "--json", "--home",
                                      str(tmp_path / "home"), "--timeout", "90"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout[result.stdout.index("{"):])
    assert summary["runs"] == 2 and summary["active"] == 0 and summary["duplicate_side_effects"] == 0
