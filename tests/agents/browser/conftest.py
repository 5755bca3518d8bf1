"""One headless Chromium per test module (the machine is shared: launches are kept few)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from baton.chromium import launch as launch_chromium


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """The system's Chromium (/usr/bin/chromium) through Playwright; never a downloaded browser."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        yield browser
        browser.close()
