"""The analyst's pages of the Dagster UI, driven in headless Chromium (Playwright, the system's browser).

Used by `scripts/dagster_screenshots.py` (the README's images) and by
`tests/dagster_platform/test_ui_browser.py`. Each page is opened and held
until the text it must show is on screen: never a fixed sleep. Playwright's
own browsers are never downloaded: `/usr/bin/chromium` (`apt-get install
chromium`) is launched with the flags below. Only the script and the test
import this module (Playwright is a dev dependency).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from playwright.sync_api import Page, sync_playwright
from playwright.sync_api import TimeoutError as PlaywrightTimeout

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
VIEWPORT = {"width": 1400, "height": 900}
WAIT_MS = 90_000
COMMUNITY_DIALOG = "Join the Dagster community"


@contextmanager
def browser_page() -> Iterator[Page]:
    """A page in headless system Chromium, closed on exit."""
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            yield browser.new_page(viewport=VIEWPORT)  # type: ignore[arg-type]
        finally:
            browser.close()


def dismiss_welcome(page: Page, base: str) -> None:
    """Open the UI once and skip Dagster's newsletter dialog if it shows (it would cover the screenshots)."""
    page.goto(f"{base}/assets", wait_until="networkidle", timeout=WAIT_MS)
    try:
        page.get_by_text(COMMUNITY_DIALOG).first.wait_for(timeout=15_000)
    except PlaywrightTimeout:
        return
    page.get_by_role("button", name="Skip").first.click()
    page.get_by_text(COMMUNITY_DIALOG).first.wait_for(state="hidden", timeout=WAIT_MS)


def _open(page: Page, url: str, *must_show: str) -> None:
    page.goto(url, wait_until="networkidle", timeout=WAIT_MS)
    for text in must_show:
        page.get_by_text(text, exact=False).first.wait_for(timeout=WAIT_MS)
    page.wait_for_load_state("networkidle", timeout=WAIT_MS)


@dataclass(frozen=True)
class View:
    """One analyst view: where it is, what it must show, and the image it becomes."""

    name: str
    image: str
    must_show: tuple[str, ...]


LINEAGE = View("lineage", "dagster-run-lineage.png",
               ("observations", "candidates", "verifier_evidence", "checkpoints", "3 partitions"))
RUN_VERSIONS = View("run versions", "dagster-run-versions.png",
                    ("parent_checkpoint_hash", "reverification_job", "baton inspect"))
STALE = View("stale evidence", "dagster-stale-evidence.png", ("Unsynced", "has a new data version"))
FAILED_CHECK = View("failed check", "dagster-failed-check.png",
                    ("evidence_bound_to_candidate", "Failed", "not the current candidate"))


def open_lineage(page: Page, base: str) -> None:
    """The lineage graph upstream of `checkpoints`: the four per-run assets in order."""
    _open(page, f"{base}/assets/checkpoints?view=lineage&lineageScope=upstream&lineageDepth=3", *LINEAGE.must_show)


def open_run_versions(page: Page, base: str, run_id: str) -> None:
    """The `checkpoints` partition of one run: its version, parent version and the job that made it."""
    _open(page, f"{base}/assets/checkpoints?view=partitions&partition={quote(run_id)}", run_id,
          *RUN_VERSIONS.must_show)


def open_stale(page: Page, base: str, run_id: str) -> None:
    """The `verifier_evidence` partition of `run_id`, its Unsynced (STALE) badge opened to show the cause."""
    _open(page, f"{base}/assets/verifier_evidence?view=partitions&partition={quote(run_id)}", run_id, "Unsynced")
    page.get_by_text("Unsynced").first.click()
    page.get_by_text("has a new data version").first.wait_for(timeout=WAIT_MS)


def open_failed_check(page: Page, base: str) -> None:
    """The checks of `verifier_evidence`: `evidence_bound_to_candidate` failed, with its description."""
    _open(page, f"{base}/assets/verifier_evidence?view=checks", *FAILED_CHECK.must_show)


def shoot(page: Page, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path))
    return path
