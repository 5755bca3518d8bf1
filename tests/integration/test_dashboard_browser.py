"""The ops dashboard served by a real Streamlit process and read in the system's Chromium."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from playwright.sync_api import sync_playwright

from baton.chromium import launch
from baton.metrics.export import analytics_path, export_metrics
from baton.metrics.target_effects import target_effects
from baton.platform_gql import http_ok
from baton.platform_up import dashboard_command, free_port
from baton.scripted_run import run_scripted_research
from baton.store.factory import open_blobs, open_store
from tests.builders.live import wait_for

ROOT = Path(__file__).resolve().parents[2]


def test_the_dashboard_shows_the_metrics_and_the_chart_in_chromium(baton_home: Path, tmp_path: Path) -> None:
    store = open_store(None, baton_home)
    try:
        run_scripted_research(store, open_blobs(baton_home, store))
        export_metrics(store, target_effects(baton_home), analytics_path(baton_home))
    finally:
        store.close()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with (tmp_path / "streamlit.log").open("wb") as log:
        process = subprocess.Popen(dashboard_command(ROOT, port), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                   env={**os.environ, "BATON_HOME": str(baton_home)}, start_new_session=True)
    try:
        wait_for(lambda: http_ok(f"{url}/_stcore/health") or None, timeout_s=120, what="the dashboard", poll_s=0.5)
        with sync_playwright() as playwright:
            browser = launch(playwright)
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.goto(url)
                page.get_by_text("handoff success rate").first.wait_for(timeout=90_000)
                page.locator(".js-plotly-plot").first.wait_for(timeout=90_000)
                text = page.inner_text("body")
            finally:
                browser.close()
        for name in ("checkpoint latency", "duplicate-side-effect incidents", "Verified success with and without"):
            assert name in text
        assert "Traceback" not in text
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
