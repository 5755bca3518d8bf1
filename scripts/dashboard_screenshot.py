"""Screenshot the ops dashboard over a real fleet run: docs/img/dashboard.png.

    .venv/bin/python scripts/dashboard_screenshot.py [--runs 10] [--seed 1] [--out docs/img/dashboard.png]

A fleet with chaos runs into a temporary BATON_HOME, the metrics are exported exactly as Dagster's
handoff_metrics asset does, Streamlit serves dashboard/app.py on loopback, and the system's Chromium
(Playwright, never a downloaded browser) takes a full-page screenshot.
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "dashboard.png")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="baton-dash-") as scratch:
        home = Path(scratch) / "home"
        baton = [sys.executable, "-c", "from baton.cli import app; app()"]
        subprocess.run([*baton, "fleet", "--runs", str(args.runs), "--workers", "3", "--chaos", "--seed",
                        str(args.seed), "--home", str(home)], check=False, cwd=ROOT)
        store = open_store(None, home)
        try:
            export_metrics(store, target_effects(home), analytics_path(home))
        finally:
            store.close()
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        process = subprocess.Popen(dashboard_command(ROOT, port), cwd=ROOT, env={**os.environ, "BATON_HOME": str(home)},
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            deadline = time.monotonic() + 120
            while not http_ok(f"{url}/_stcore/health"):
                if time.monotonic() > deadline:
                    raise SystemExit("the dashboard did not come up within 120 s")
                time.sleep(0.5)
            with sync_playwright() as playwright:
                browser = launch(playwright)
                page = browser.new_page(viewport={"width": 1400, "height": 1100})
                page.goto(url)
                page.locator(".js-plotly-plot").first.wait_for(timeout=90_000)
                page.wait_for_timeout(1500)  # let Plotly finish its transition before the picture
                args.out.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(args.out), full_page=True)
                browser.close()
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
