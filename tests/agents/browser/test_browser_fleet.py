"""Browser runs in a live chaotic fleet: worker processes drive /usr/bin/chromium, every run ends,
and the web application's own records hold at most one submission per run."""

from __future__ import annotations

from pathlib import Path

import pytest

from baton.fleet import FleetConfig, run_fleet
from baton.models import EventType
from baton.store.factory import open_store
from baton.targets.service_process import target_data_dir
from baton.targets.webapp_service import count_side_effects, read_submissions

pytestmark = pytest.mark.integration


def test_a_chaotic_fleet_with_browser_runs_submits_each_form_at_most_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    summary = run_fleet(FleetConfig(runs=6, workers=3, chaos=True, seed=3, home=home, timeout_s=240.0, browser=True,
                                    boundary_pause_s=0.25, chaos_window_s=20.0, launch_interval_s=0.5))
    assert summary.runs == 6 and summary.active == 0 and summary.timed_out == []
    assert summary.duplicate_side_effects == 0 and summary.runs_with_several_effects == 0
    assert summary.checker_violations == []
    browser_runs = [run for run in summary.run_status if run.endswith(("-03", "-06"))]
    assert all(summary.run_status[run] == "verified" for run in browser_runs), summary.run_status
    # The application's own file: one submission per browser run, no key twice, no draft twice.
    submissions = read_submissions(target_data_dir("webapp", home))
    assert sorted(s["run_id"] for s in submissions) == sorted(browser_runs)
    assert count_side_effects(target_data_dir("webapp", home))["duplicates"] == {}
    assert len({s["draft_id"] for s in submissions}) == len(submissions)
    store = open_store(None, home)
    try:
        chosen = [e for _, e in store.list_events(event_types=[EventType.BROWSER_RESUME_CHOSEN])]
        assert {e.run_id for e in chosen} == set(browser_runs)  # each browser start recorded its class
    finally:
        store.close()
