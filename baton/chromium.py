"""The system's Chromium for Playwright: where it is and the flags this closed machine needs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

CHROMIUM_PATH = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run")


class ChromiumMissing(RuntimeError):
    """Debian's chromium is not installed (apt-get install chromium); Playwright never downloads one here."""


def launch(playwright: Any) -> Any:
    """A headless Chromium browser from `sync_playwright()`, refusing to run without the system binary."""
    if not CHROMIUM_PATH.exists():
        raise ChromiumMissing(f"{CHROMIUM_PATH} is missing: apt-get install chromium")
    return playwright.chromium.launch(executable_path=str(CHROMIUM_PATH), args=list(CHROMIUM_ARGS))
