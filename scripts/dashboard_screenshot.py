"""Screenshot every ops dashboard page over real data: docs/img/dashboard-<page>.png.

    .venv/bin/python scripts/dashboard_screenshot.py [--runs 10] [--seed 1] [--experiment-runs 2000] [--out docs/img]

A fleet with chaos runs into a temporary BATON_HOME while the metrics are exported every few seconds,
exactly as Dagster's handoff_metrics asset does (so the trend has points measured as the fleet ran);
`baton experiment --runs N --seed 7 --sweep` writes the strategy comparison; the fault matrix page reads
the committed docs/fault-matrix.json (`baton faults --json --seed 0`). Streamlit serves dashboard/app.py
on loopback and the system's Chromium (Playwright, never a downloaded browser) takes one full-page
screenshot per page.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

from baton.chromium import launch
from baton.metrics.export import analytics_path, export_metrics
from baton.metrics.target_effects import target_effects
from baton.platform_gql import http_ok
from baton.platform_up import dashboard_command, free_port
from baton.store.factory import open_store

ROOT = Path(__file__).resolve().parents[1]
PAGES = {"headline": "", "verified-success": "Verified_success", "strategies": "Strategies",
         "run-timeline": "Run_timeline", "fault-matrix": "Fault_matrix", "live-fleet": "Live_fleet", "claims": "Claims"}
EXPORT_EVERY_S = 5.0


def _export(home: Path) -> None:
    store = open_store(None, home)
    try:
        export_metrics(store, target_effects(home), analytics_path(home))
    finally:
        store.close()


def _fleet_with_exports(baton: list[str], home: Path, runs: int, seed: int) -> None:
    fleet = subprocess.Popen([*baton, "fleet", "--runs", str(runs), "--workers", "3", "--chaos", "--seed", str(seed),
                              "--home", str(home)], cwd=ROOT)
    while fleet.poll() is None:
        time.sleep(EXPORT_EVERY_S)
        if (home / "baton.db").exists():
            _export(home)
    _export(home)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--experiment-runs", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="baton-dash-") as scratch:
        home = Path(scratch) / "home"
        baton = [sys.executable, "-c", "from baton.cli import app; app()"]
        _fleet_with_exports(baton, home, args.runs, args.seed)
        subprocess.run([*baton, "experiment", "--runs", str(args.experiment_runs), "--seed", "7", "--sweep"],
                       check=True, cwd=ROOT, env={**os.environ, "BATON_HOME": str(home)})
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        env = {**os.environ, "BATON_HOME": str(home), "BATON_FAULT_MATRIX": str(ROOT / "docs" / "fault-matrix.json")}
        process = subprocess.Popen(dashboard_command(ROOT, port), cwd=ROOT, env=env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            deadline = time.monotonic() + 120
            while not http_ok(f"{url}/_stcore/health"):
                if time.monotonic() > deadline:
                    raise SystemExit("the dashboard did not come up within 120 s")
                time.sleep(0.5)
            args.out.mkdir(parents=True, exist_ok=True)
            with sync_playwright() as playwright:
                browser = launch(playwright)
                page = browser.new_page(viewport={"width": 1400, "height": 2200})
                for name, path in PAGES.items():
                    page.goto(f"{url}/{path}")
                    page.locator('[data-testid="stMainBlockContainer"]').first.wait_for(timeout=90_000)
                    if name != "claims":
                        page.locator(".js-plotly-plot").first.wait_for(timeout=90_000)
                    page.wait_for_timeout(2500)  # let Plotly finish its transition before the picture
                    target = args.out / f"dashboard-{name}.png"
                    page.screenshot(path=str(target), full_page=True)
                    print(f"wrote {target}")
                browser.close()
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)


if __name__ == "__main__":
    main()
