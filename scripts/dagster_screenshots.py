"""Screenshots of the Dagster UI for the README: a run's asset lineage, a STALE evidence partition, a failed check.

Run against a live webserver that already shows such a run (for example
`baton platform` after the fleet has run for a while):

    .venv/bin/python scripts/dagster_screenshots.py --url http://127.0.0.1:3000 --run RUN_ID \
        [--stale-run RUN_ID] [--failed-check-run RUN_ID] --out docs/img

Headless Chromium from the system (`apt-get install -y chromium`); Playwright's
own browsers are not downloaded. Each page is given time to settle by waiting
for the network to go idle and for a text the page must show, never a fixed sleep.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from urllib.parse import quote

from playwright.sync_api import Page, sync_playwright

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def shoot(page: Page, url: str, must_show: str, path: Path) -> None:
    """Open `url`, wait until `must_show` is on the page, save a full-page PNG at `path`."""
    page.goto(url, wait_until="networkidle", timeout=60_000)
    page.get_by_text(must_show, exact=False).first.wait_for(timeout=60_000)
    page.wait_for_load_state("networkidle", timeout=60_000)
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=False)
    print(f"wrote {path} ({url})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:3000")
    parser.add_argument("--run", required=True, help="the run partition whose lineage is shown")
    parser.add_argument("--stale-run", help="a run whose verifier_evidence partition is STALE (default: --run)")
    parser.add_argument("--failed-check-run", help="a run with a failed asset check (default: --run)")
    parser.add_argument("--out", type=Path, default=Path("docs/img"))
    args = parser.parse_args()
    base = args.url.rstrip("/")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        shoot(page, f"{base}/assets/checkpoints?view=lineage&lineageScope=upstream&partition={quote(args.run)}",
              "verifier_evidence", args.out / "dagster-run-lineage.png")
        shoot(page, f"{base}/assets/verifier_evidence?partition={quote(args.stale_run or args.run)}",
              "Stale", args.out / "dagster-stale-evidence.png")
        shoot(page, f"{base}/assets/verifier_evidence?view=checks&partition={quote(args.failed_check_run or args.run)}",
              "Failed", args.out / "dagster-failed-check.png")
        browser.close()


if __name__ == "__main__":
    main()
