"""End to end: ``mcp-patchbay ui`` in headless Chromium, through what a person comes to it for
(issue 35). The world (``ui_world``): a config with a working server, a broken one (a missing
command) and one whose tool changes after it was pinned, two stdio proxies serving two clients
(claude-code and cursor), and the page on the same data folder.

The person sees both proxies and who launched them, and why the broken server is down; reads the
held tool's diff and approves it from the page, and each running proxy lists it again; watches
calls made through each proxy arrive in the log without reloading; and a request without the
token, or a form posted from a page of another origin, is refused with nothing of the page.
Playwright drives Debian's /usr/bin/chromium (no browser download); every wait is bounded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest
from mcp import Client

from tests.e2e.chromium import PLAYWRIGHT_MISSING, launch_options, skip_without_chromium, static_site
from tests.e2e.ui_world import WITHIN, UiProcess, World

try:
    from playwright.async_api import Page, async_playwright, expect
except ImportError:
    pytest.skip(PLAYWRIGHT_MISSING, allow_module_level=True)
skip_without_chromium()

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

STEP_MS = 20_000


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@contextmanager
def another_site(folder: Path, target: str) -> Iterator[str]:
    """A page on another origin whose form POSTs to the page's ``/server`` (a cross-site request)."""
    (folder / "index.html").write_text(
        f'<form method="post" action="{target}/server"><input type="hidden" name="server" value="notes">'
        '<input type="hidden" name="on" value="0"><button>Win a prize</button></form>',
        encoding="utf-8",
    )
    with static_site(folder) as origin:
        yield f"{origin}/index.html"


async def until_presence(world: World) -> None:
    """Until both proxies' presence files name their client and hold the changed tool (another
    process writes them: looked at every 0.1 s, bounded)."""
    from mcp_patchbay.presence.folder import read_all

    folder = world.data / "mcp-patchbay" / "running"

    def ready() -> bool:
        snapshots = read_all(folder)
        named = {(s.get("client") or {}).get("name") for s in snapshots}
        held = all(any(server.get("held") for server in s["servers"]) for s in snapshots)
        return {"claude-code", "cursor"} <= named and held and len(snapshots) == 2

    with anyio.fail_after(WITHIN):
        while not ready():
            await anyio.sleep(0.1)


async def reload_until(page: Page, text: str) -> None:
    """The overview and tools pages show what the presence files said when they loaded: load again
    until ``text`` is there (bounded)."""
    with anyio.fail_after(WITHIN):
        while text not in await page.locator("main").inner_text():
            await anyio.sleep(0.2)
            await page.reload()


async def test_a_person_at_the_page(tmp_path: Path) -> None:
    world = World(tmp_path)
    with anyio.fail_after(300):
        async with world.proxies() as clients:
            await world.change_drift()
            await until_presence(world)
            ui = UiProcess(world)
            try:
                async with async_playwright() as playwright:
                    browser = await playwright.chromium.launch(**launch_options())
                    try:
                        await _refused(browser, ui, tmp_path, world)
                        context = await browser.new_context(viewport={"width": 1366, "height": 900})
                        page = await context.new_page()
                        await page.goto(ui.url)
                        assert page.url == ui.origin + "/"  # the token left the address for a cookie
                        await _why_a_server_is_down(page)
                        await _approve_the_held_tool(page, world)
                        await _watch_calls_arrive(page, world, clients)
                    finally:
                        await browser.close()
            finally:
                ui.stop()


async def _refused(browser: object, ui: UiProcess, tmp_path: Path, world: World) -> None:
    """No token: 401 and nothing of the page. A form from another origin: 403, nothing changed."""
    from playwright.async_api import Browser

    assert isinstance(browser, Browser)
    stranger = await browser.new_context()
    page = await stranger.new_page()
    answer = await page.goto(ui.origin + "/")
    assert answer is not None and answer.status == 401
    body = await page.content()
    assert "notes" not in body and "claude-code" not in body
    before = world.config.read_text()
    # The person's own browser (with the page's cookie) is lured to another site that posts a form.
    signed = await browser.new_context()
    victim = await signed.new_page()
    await victim.goto(ui.url)
    site = tmp_path / "elsewhere"
    site.mkdir()
    with another_site(site, ui.origin) as address:
        await victim.goto(address)
        async with victim.expect_navigation() as navigation:
            await victim.get_by_role("button", name="Win a prize").click()
        posted = await navigation.value
        assert posted is not None and posted.status in (401, 403)
        assert "notes" not in await victim.content()
    assert world.config.read_text() == before
    await stranger.close()
    await signed.close()


async def _why_a_server_is_down(page: Page) -> None:
    await reload_until(page, "cursor 1.7.0")
    proxies = page.locator("article.proxy")
    await expect(proxies).to_have_count(2)
    main = await page.locator("main").inner_text()
    assert "claude-code 2.1.0" in main and "cursor 1.7.0" in main
    broken = proxies.first.get_by_role("row").filter(has=page.get_by_role("rowheader", name="broken"))
    await expect(broken).to_contain_text("failed")
    await expect(broken).to_contain_text("mcp-server-weather-nope")
    await expect(broken).to_contain_text("not found")
    await expect(page.get_by_role("link", name=re.compile("held for your approval"))).to_be_visible()


async def _approve_the_held_tool(page: Page, world: World) -> None:
    await page.get_by_role("link", name="Held for approval", exact=True).click()
    await expect(page.get_by_role("heading", level=1)).to_have_text("Held for approval")
    diff = page.locator("pre.diff")
    await expect(diff.locator(".add")).to_contain_text("collector.example")
    await expect(diff).to_contain_text("Gets the weather forecast for a city.")  # the sentence kept
    await expect(page.locator(".findings li").first).to_be_visible()
    approve = page.get_by_role("button", name=re.compile(r"^Approve tool forecast \(fingerprint [0-9a-f]{8}\)$"))
    await approve.focus()
    await page.keyboard.press("Enter")  # by keyboard
    await expect(page.get_by_role("status")).to_contain_text("Approved tool 'forecast' of 'drift'", timeout=STEP_MS)
    for who in ("alpha", "beta"):  # each running proxy lists it again (within its trust_poll)
        await world.until_listed(who, "drift__forecast")
    pins = json.loads(world.config.read_text())
    assert "disabled" not in json.dumps(pins)
    await page.get_by_role("link", name="Tools", exact=True).click()
    await reload_until(page, "drift__forecast")
    await page.get_by_role("searchbox", name="Search").fill("weather forecast for a city")
    await expect(page.locator("#tool-results tbody tr").first).to_contain_text("drift__forecast", timeout=STEP_MS)


async def _watch_calls_arrive(page: Page, world: World, clients: dict[str, Client]) -> None:
    await page.get_by_role("link", name="Activity log", exact=True).click()
    await expect(page.get_by_role("heading", level=1)).to_have_text("Activity log")
    alpha, beta = clients["alpha"], clients["beta"]
    await alpha.call_tool("notes__fact", {})
    await beta.call_tool("notes__search_notes", {})
    rows = page.locator("#log-rows tr")
    await expect(rows.filter(has_text="notes__fact").filter(has_text="claude-code")).to_have_count(1, timeout=STEP_MS)
    await expect(rows.filter(has_text="notes__search_notes").filter(has_text="cursor")).to_have_count(
        1, timeout=STEP_MS
    )
    await expect(page.locator("#log-news")).to_contain_text("new")
