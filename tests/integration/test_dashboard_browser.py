"""Every dashboard page served by a real Streamlit process and read in the system's Chromium, over real data:
a real `baton experiment --sweep`, a real store (scripted run plus a move), two metric exports and the
committed `baton faults --json` matrix."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

from baton.chromium import CHROMIUM_PATH, launch
from baton.experiment.results import experiment_path
from baton.platform_gql import http_ok
from baton.platform_up import dashboard_command, free_port
from tests.builders.live import wait_for
from tests.unit.dashboard_seed import seed_store, write_real_experiment

ROOT = Path(__file__).resolve().parents[2]
# Page path -> (a text it must show, the number of Plotly charts it draws on this data).
PAGES: dict[str, tuple[str, int]] = {
    "": ("handoff success rate", 1),
    "Verified_success": ("Simulated experiment", 2),
    "Strategies": ("Where each strategy wins", 4),
    "Run_timeline": ("partition of", 1),
    "Fault_matrix": ("Ablations", 1),
    "Live_fleet": ("Latest events", 1),
}


def _require_chromium() -> None:
    if CHROMIUM_PATH.exists():
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and {CHROMIUM_PATH} is missing: the browser test must run in CI (apt-get install chromium)")
    pytest.skip(f"{CHROMIUM_PATH} is missing (apt-get install chromium)")


def test_every_page_shows_its_charts_and_no_error_in_chromium(baton_home: Path, tmp_path: Path) -> None:
    _require_chromium()
    seed_store(baton_home)
    write_real_experiment(experiment_path(baton_home), runs=200, sweep=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "BATON_HOME": str(baton_home), "BATON_FAULT_MATRIX": str(ROOT / "docs" / "fault-matrix.json")}
    with (tmp_path / "streamlit.log").open("wb") as log:
        process = subprocess.Popen(dashboard_command(ROOT, port), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                   env=env, start_new_session=True)
    try:
        wait_for(lambda: http_ok(f"{url}/_stcore/health") or None, timeout_s=120, what="the dashboard", poll_s=0.5)
        seen: dict[str, tuple[int, str]] = {}
        with sync_playwright() as playwright:
            browser = launch(playwright)
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                for path, (must_show, charts) in PAGES.items():
                    page.goto(f"{url}/{path}")
                    page.get_by_text(must_show).first.wait_for(timeout=120_000)
                    page.locator(".js-plotly-plot").nth(charts - 1).wait_for(timeout=120_000)
                    page.wait_for_timeout(500)
                    errors = page.locator('[data-testid="stException"]').count()
                    seen[path] = (page.locator(".js-plotly-plot").count(), page.inner_text("body"))
                    assert errors == 0, f"page /{path} shows an exception: {seen[path][1][-2000:]}"
            finally:
                browser.close()
        for path, (must_show, charts) in PAGES.items():
            count, text = seen[path]
            assert count >= charts, f"/{path}: {count} charts, expected {charts}"
            assert must_show in text and "Traceback" not in text
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
