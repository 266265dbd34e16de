"""End to end: real MCP Apps servers behind the proxy over stdio, for a host that renders apps.

``python -m mcp_patchbay --config FILE`` in search mode, driven by the SDK's ``Client`` declaring
the MCP Apps extension, in front of ext-apps' example servers pinned in tests/e2e/package.json:
server-basic-vanillajs twice (both publish ``ui://get-time/mcp-app.html``) and
server-system-monitor (a UI tool, and ``poll-system-stats`` for its app only). The host's side of
what tests/e2e/test_apps_host.py shows in Chromium, checked here field by field.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client import advertise

from mcp_patchbay.session.capabilities import APP_MIME_TYPE, APPS_EXTENSION
from tests.e2e_util import NODE_MODULES, ROOT, error_info

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

PACKAGES = NODE_MODULES / "@modelcontextprotocol"
BASIC = PACKAGES / "server-basic-vanillajs" / "dist"
MONITOR = PACKAGES / "server-system-monitor" / "dist"
NODE = shutil.which("node")

if NODE is None or not (BASIC / "index.js").exists() or not (MONITOR / "index.js").exists():
    pytest.skip("node or the ext-apps example servers missing: run scripts/install", allow_module_level=True)


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def _meta(value: types.Tool | types.Resource) -> dict[str, Any]:
    return value.model_dump(by_alias=True, exclude_none=True).get("_meta", {})


async def test_ext_apps_servers_behind_the_proxy_in_search_mode(tmp_path: Path) -> None:
    servers = {
        "basic": {"command": NODE, "args": [str(BASIC / "index.js"), "--stdio"]},
        "clock": {"command": NODE, "args": [str(BASIC / "index.js"), "--stdio"]},
        "monitor": {"command": NODE, "args": [str(MONITOR / "index.js"), "--stdio"]},
    }
    config = tmp_path / "patchbay.json"
    patchbay = {"expose": "search", "watch": False, "connect_timeout": 60}
    config.write_text(json.dumps({"mcpServers": servers, "patchbay": patchbay}))
    command = [sys.executable, "-m", "mcp_patchbay", "--config", str(config), "--log-file", str(tmp_path / "p.log")]
    params = StdioServerParameters(command=command[0], args=command[1:], cwd=str(ROOT))
    host = [advertise(APPS_EXTENSION, {"mimeTypes": [APP_MIME_TYPE]})]
    with anyio.fail_after(120):
        async with Client(params, cache=None, extensions=host) as client:
            found = await client.call_tool("patchbay__find_tools", {"query": "poll system stats cpu memory"})
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            resources = {resource.uri for resource in (await client.list_resources()).resources}
            pages = {
                name: await client.read_resource(str(_meta(tools[name])["ui"]["resourceUri"]))
                for name in ("basic__get-time", "clock__get-time", "monitor__get-system-info")
            }
            polled = await client.call_tool("poll-system-stats", {})  # as its app calls it
            routed = await client.call_tool("patchbay__call_tool", {"name": "poll-system-stats", "arguments": {}})
            shared = await client.call_tool("get-time", {})  # basic's and clock's

    assert found.structured_content is not None
    assert all("poll-system-stats" not in tool["name"] for tool in found.structured_content["tools"])
    # Listed in search mode: each UI tool (its resourceUri its server's own), the app-only tool
    # with its visibility, and the apps' names for the app; get-time is two servers' and is not.
    assert _meta(tools["basic__get-time"])["ui"] == {"resourceUri": "ui://basic/get-time/mcp-app.html"}
    assert _meta(tools["clock__get-time"])["ui"] == {"resourceUri": "ui://clock/get-time/mcp-app.html"}
    assert _meta(tools["clock__get-time"])["ui/resourceUri"] == "ui://clock/get-time/mcp-app.html"
    assert _meta(tools["monitor__poll-system-stats"])["ui"] == {"visibility": ["app"]}
    assert _meta(tools["poll-system-stats"])["ui"] == {"visibility": ["app"]}
    assert _meta(tools["get-system-info"])["ui"] == {
        "resourceUri": "ui://monitor/system-monitor/mcp-app.html",
        "visibility": ["app"],
    }
    assert "get-time" not in tools
    assert {"ui://basic/get-time/mcp-app.html", "ui://clock/get-time/mcp-app.html"} <= resources
    assert "ui://monitor/system-monitor/mcp-app.html" in resources
    # Each page byte for byte what its server sent, under the URI the host asked for.
    for name, folder in (("basic__get-time", BASIC), ("clock__get-time", BASIC), ("monitor__get-system-info", MONITOR)):
        (content,) = pages[name].contents
        assert isinstance(content, types.TextResourceContents)
        assert content.text == (folder / "mcp-app.html").read_text()
        assert content.uri == _meta(tools[name])["ui"]["resourceUri"]
        assert content.mime_type == APP_MIME_TYPE
    assert not polled.is_error and polled.structured_content is not None and "cpu" in polled.structured_content
    assert error_info(routed)["code"] == "TOOL_NOT_AVAILABLE"
    assert error_info(shared)["code"] == "TOOL_AMBIGUOUS"
