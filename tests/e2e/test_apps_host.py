"""End to end: a real MCP Apps host, in Chromium, in front of the HTTP gateway and real MCP Apps servers.

The gateway is ``mcp-patchbay serve --http 127.0.0.1:PORT --config FILE`` in front of two ext-apps
example servers over stdio (server-system-monitor: a UI tool and an app-only tool it polls;
server-basic-vanillajs: a UI tool and a button that calls it) and server-everything, all pinned in
tests/e2e/package.json; once with ``patchbay.expose: "all"``, once with ``"search"``.

The host is tests/e2e/apps_host/host.ts, the TS SDK client and ext-apps' AppBridge bundled by
esbuild at setup, served from another origin than the gateway's (so the gateway must answer CORS:
``gateway.cors_origins``), in Debian's Chromium driven by Playwright. As a host does, it lists the
tools (in search mode: asks ``find_tools`` and lists again), picks the tool that has
``_meta.ui.resourceUri``, calls it, reads the ``ui://`` resource, renders the app in a sandboxed
iframe and passes the app's own ``tools/call`` back through its client. The page records each step
in ``window.host``; the test waits on that with Playwright's bounded waits, never a sleep.

No Chromium, no Playwright or no npm packages is a skip naming what installs them.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from tests.e2e.chromium import PLAYWRIGHT_MISSING, skip_without_chromium, static_site
from tests.e2e_util import NODE_MODULES, ROOT, StderrTee, stop
from tests.processes import free_port

try:
    from playwright.sync_api import Browser, Page, expect
    from playwright.sync_api import TimeoutError as PageTimeout
except ImportError:
    pytest.skip(PLAYWRIGHT_MISSING, allow_module_level=True)
skip_without_chromium()

pytestmark = [pytest.mark.e2e]

PACKAGES = NODE_MODULES / "@modelcontextprotocol"
MONITOR = PACKAGES / "server-system-monitor" / "dist" / "index.js"
BASIC = PACKAGES / "server-basic-vanillajs" / "dist" / "index.js"
EVERYTHING = PACKAGES / "server-everything" / "dist" / "index.js"
ESBUILD = NODE_MODULES / ".bin" / "esbuild"
HOST_SOURCE = Path(__file__).parent / "apps_host"
PATCHBAY = Path(sys.executable).parent / "mcp-patchbay"
NODE = shutil.which("node")
START_WITHIN = 60.0
"""Seconds for the gateway to say it is ready (three node servers starting on two cores)."""
STOP_WITHIN = 15.0
STEP_WITHIN_MS = 30_000
"""Milliseconds for the page to get from loading to the app's own call answered."""
APP_MIME_TYPE = "text/html;profile=mcp-app"
SEARCH_TOOLS = ["patchbay__find_tools", "patchbay__call_read", "patchbay__call_tool"]

READY = "mcp_patchbay.gateway.app: ready: "
"""What the gateway logs once ``/readyz`` says 200."""

if NODE is None or not all(path.exists() for path in (MONITOR, BASIC, EVERYTHING, ESBUILD)):
    pytest.skip("node or tests/e2e/node_modules missing: run scripts/install", allow_module_level=True)


@dataclass
class Gateway:
    mode: str
    url: str
    log: Path
    """The gateway's stderr."""


@pytest.fixture(scope="module")
def page_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """host.html and host.js, bundled now."""
    folder = tmp_path_factory.mktemp("apps_host")
    built = subprocess.run(
        [str(HOST_SOURCE / "build"), str(folder)], capture_output=True, text=True, timeout=60, check=False
    )
    assert built.returncode == 0, f"esbuild could not bundle the host page:\n{built.stdout}{built.stderr}"
    return folder


@pytest.fixture(scope="module")
def page_origin(page_folder: Path) -> Iterator[str]:
    """The host page's origin, the one the gateway's ``cors_origins`` names."""
    with static_site(page_folder) as origin:
        yield origin


@pytest.fixture(scope="module")
def other_origin(page_folder: Path) -> Iterator[str]:
    """The same page from an origin the gateway does not name."""
    with static_site(page_folder) as origin:
        yield origin


def config_for(mode: str, page_origin: str) -> dict[str, Any]:
    node = str(NODE)
    servers = {
        "monitor": {"command": node, "args": [str(MONITOR), "--stdio"]},
        "basic": {"command": node, "args": [str(BASIC), "--stdio"]},
        "everything": {"command": node, "args": [str(EVERYTHING)]},
    }
    return {
        "mcpServers": servers,
        "patchbay": {"expose": mode, "startup_wait": 30, "connect_timeout": 30, "watch": False},
        "gateway": {"cors_origins": [page_origin], "drain_grace": 2},
    }


@pytest.fixture(scope="module", params=["all", "search"])
def gateway(
    request: pytest.FixtureRequest, page_origin: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    """``serve --http`` on a free port in the mode of the parameter, ready; SIGTERM on the way out."""
    mode: str = request.param
    folder = tmp_path_factory.mktemp(f"gateway_{mode}")
    config = folder / "config.json"
    config.write_text(json.dumps(config_for(mode, page_origin), indent=1))
    port = free_port()
    command = [str(PATCHBAY)] if PATCHBAY.exists() else [sys.executable, "-m", "mcp_patchbay"]
    command += ["serve", "--http", f"127.0.0.1:{port}", "--config", str(config), "--log-level", "INFO"]
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    assert process.stderr is not None
    tee = StderrTee(process.stderr, folder / "gateway.stderr")
    try:
        if not tee.said(READY, START_WITHIN):
            pytest.fail(f"the gateway was not ready within {START_WITHIN:.0f}s\n{tee.text()[-4000:]}")
        yield Gateway(mode, f"http://127.0.0.1:{port}/mcp", tee.path)
    finally:
        stop(process, STOP_WITHIN)
        tee.join(STOP_WITHIN)


@pytest.fixture
def page(chromium: Browser) -> Iterator[Page]:
    context = chromium.new_context()
    try:
        yield context.new_page()
    finally:
        context.close()


def open_host(page: Page, page_origin: str, gateway: Gateway, tool: str, query: str) -> None:
    page.goto(f"{page_origin}/host.html?{urlencode({'gateway': gateway.url, 'tool': tool, 'query': query})}")


def host_state(page: Page) -> dict[str, Any]:
    return page.evaluate("window.host")


def wait_for_host(page: Page, gateway: Gateway, condition: str, what: str) -> dict[str, Any]:
    """Wait (bounded) until the page's state meets ``condition`` (a JS expression on ``host``) or
    records an error; fail with what the page and the gateway said."""
    try:
        page.wait_for_function(f"() => window.host && (window.host.error || ({condition}))", timeout=STEP_WITHIN_MS)
    except PageTimeout as error:  # say what the page had got to
        pytest.fail(f"{what}: {error}\n{describe(page, gateway)}")
    state = host_state(page)
    assert state["error"] is None, f"{what}: the host failed\n{describe(page, gateway)}"
    return state


def describe(page: Page, gateway: Gateway) -> str:
    state = json.dumps(host_state(page), indent=1)[-6000:]
    return f"--- window.host ---\n{state}\n--- gateway stderr ---\n{gateway.log.read_text(errors='replace')[-3000:]}"


def step(state: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in state["steps"] if s["step"] == name)


def assert_found_as_a_host_would(state: dict[str, Any], gateway: Gateway, exposed: str) -> None:
    """All mode lists the UI tool; search mode lists the search tools first and the UI tool with
    them, and find_tools finds it too."""
    names = [s["step"] for s in state["steps"]]
    listed = step(state, "listed")
    if gateway.mode == "all":
        assert names[:3] == ["connected", "listed", "picked"], names
        assert exposed in listed["ui"], listed
    else:
        assert names[:5] == ["connected", "listed", "searched", "relisted", "picked"], names
        # A tool with a user interface is listed in search mode too, before any search (issue 33).
        assert listed["tools"][:3] == SEARCH_TOOLS and exposed in listed["ui"], listed
        searched = step(state, "searched")
        assert not searched["isError"] and exposed in searched["found"], searched
        assert exposed in step(state, "relisted")["ui"], step(state, "relisted")
    assert names[-5:] == ["called", "read", "rendered", "initialized", "result-sent"], names
    read = step(state, "read")
    assert read["uri"] == step(state, "picked")["resourceUri"] and read["mimeType"] == APP_MIME_TYPE, read
    assert step(state, "connected")["server"] == "mcp-patchbay"


def test_the_host_renders_the_system_monitor_and_its_polls_reach_the_server(
    page: Page, page_origin: str, gateway: Gateway
) -> None:
    open_host(page, page_origin, gateway, "get-system-info", "system monitor: CPU and memory use")
    state = wait_for_host(
        page, gateway, "window.host.appCalls.some(call => call.answeredMs)", "the app's first poll answered"
    )
    assert_found_as_a_host_would(state, gateway, "monitor__get-system-info")
    # The server's ui://system-monitor/mcp-app.html, exposed under the server's name.
    assert step(state, "picked")["resourceUri"] == "ui://monitor/system-monitor/mcp-app.html"
    called = step(state, "called")
    assert not called["isError"] and {"hostname", "cpu", "memory"} <= set(called["structured"]), called
    assert step(state, "read")["chars"] > 100_000, step(state, "read")
    assert step(state, "initialized")["app"]["name"] == "System Monitor"
    # The app, on the tool's result, polls its app-only tool by the server's own name; the
    # gateway resolves it to monitor__poll-system-stats and the server answers.
    poll = state["appCalls"][0]
    assert poll["name"] == "poll-system-stats" and not poll["isError"], poll
    assert {"cpu", "memory", "uptime", "timestamp"} <= set(poll["structured"]), poll
    # Rendered: the app shows the tool's result (this machine's name) in its frame.
    frame = page.frame_locator("#app")
    expect(frame.get_by_role("heading", name="System Monitor")).to_be_visible()
    expect(frame.locator("body")).to_contain_text(socket.gethostname())


def test_the_basic_apps_button_calls_its_tool_through_the_gateway(
    page: Page, page_origin: str, gateway: Gateway
) -> None:
    open_host(page, page_origin, gateway, "get-time", "what time is it on the server")
    state = wait_for_host(
        page, gateway, "window.host.steps.some(s => s.step === 'result-sent')", "the app given the tool's result"
    )
    assert_found_as_a_host_would(state, gateway, "basic__get-time")
    assert step(state, "picked")["resourceUri"] == "ui://basic/get-time/mcp-app.html"
    first = step(state, "called")
    assert not first["isError"] and first["structured"] == ["time"], first
    assert step(state, "initialized")["app"]["name"] == "Get Time App"
    frame = page.frame_locator("#app")
    expect(frame.locator("body")).to_contain_text(first["text"])
    assert state["appCalls"] == []

    frame.get_by_role("button", name="Get Server Time").click()
    state = wait_for_host(
        page, gateway, "window.host.appCalls.some(call => call.answeredMs)", "the app's get-time answered"
    )
    call = state["appCalls"][0]
    assert call["name"] == "get-time" and not call["isError"] and call["structured"] == ["time"], call
    assert call["text"] > first["text"], (first, call)  # ISO times: a later answer from the server
    expect(frame.locator("body")).to_contain_text(call["text"])


def test_a_host_page_from_an_origin_the_gateway_does_not_name_cannot_connect(
    page: Page, other_origin: str, gateway: Gateway
) -> None:
    """The same page from another port is another origin: no CORS answer, so the browser keeps
    the gateway's answers from it (the test above passes through cors_origins, not around it)."""
    with page.expect_console_message(lambda message: "blocked by CORS policy" in message.text, timeout=STEP_WITHIN_MS):
        open_host(page, other_origin, gateway, "get-time", "what time is it on the server")
    page.wait_for_function("() => window.host && window.host.error", timeout=STEP_WITHIN_MS)
    state = host_state(page)
    assert state["steps"] == [] and "Failed to fetch" in state["error"], state
