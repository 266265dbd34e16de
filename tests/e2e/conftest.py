"""Fixtures the end-to-end tests share. ``chromium``: Debian's Chromium driven by Playwright's
sync API, one browser for a whole module, skipped naming what installs what is missing
(``chromium``, the module, holds the rest)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from tests.e2e.chromium import chromium_missing, launch_options

if TYPE_CHECKING:
    from playwright.sync_api import Browser


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    if (why := chromium_missing()) is not None:
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(**launch_options())
        try:
            yield browser
        finally:
            browser.close()
