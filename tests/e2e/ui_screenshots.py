"""The docs' screenshots of ``mcp-patchbay ui`` (``scripts/ui-screenshots``): the world of its
end-to-end test (``ui_world``), a few calls through each proxy, then each main page in headless
Chromium at a laptop's 1366 px: ``docs/ui-overview.png`` (two proxies, a broken server, a held
tool), ``docs/ui-held.png`` (its diff and the scan's findings), ``docs/ui-tools.png`` (a search)
and ``docs/ui-log.png`` (the calls and the approval)."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import anyio

from tests.e2e.chromium import launch_options
from tests.e2e.test_ui_e2e import reload_until, until_presence
from tests.e2e.ui_world import ROOT, UiProcess, World

DOCS = ROOT / "docs"


async def main(out: Path = DOCS) -> None:
    from playwright.async_api import async_playwright

    with tempfile.TemporaryDirectory(prefix="patchbay-ui-") as folder:
        world = World(Path(folder))
        async with world.proxies() as clients:
            for _ in range(3):
                await clients["alpha"].call_tool("notes__fact", {"topic": "tides"})
                await clients["beta"].call_tool("notes__search_notes", {"query": "tides"})
            await clients["alpha"].call_tool("broken__get_weather", {})
            await world.change_drift()
            await until_presence(world)
            ui = UiProcess(world)
            try:
                async with async_playwright() as playwright:
                    browser = await playwright.chromium.launch(**launch_options())
                    page = await browser.new_page(viewport={"width": 1366, "height": 860})
                    await page.goto(ui.url)
                    await reload_until(page, "cursor 1.7.0")
                    await page.screenshot(path=str(out / "ui-overview.png"), full_page=True)
                    await page.goto(ui.origin + "/held")
                    await page.screenshot(path=str(out / "ui-held.png"), full_page=True)
                    await page.get_by_role("button", name="Approve tool forecast", exact=False).click()
                    await world.until_listed("alpha", "drift__forecast")
                    await page.goto(ui.origin + "/tools")
                    await reload_until(page, "drift__forecast")
                    await page.get_by_role("searchbox", name="Search").fill("weather forecast")
                    await page.locator("#tool-results").get_by_text("best matches").wait_for()
                    await page.screenshot(path=str(out / "ui-tools.png"), full_page=True)
                    await page.goto(ui.origin + "/log")
                    await page.screenshot(path=str(out / "ui-log.png"), full_page=True)
                    await browser.close()
            finally:
                ui.stop()
    print("wrote", *(str(out / f"ui-{name}.png") for name in ("overview", "held", "tools", "log")), file=sys.stderr)


if __name__ == "__main__":
    anyio.run(main)
