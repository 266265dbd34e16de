"""What upstreams say of themselves reaches the client: their ``title``, ``websiteUrl``, ``icons``
and the extensions they declare in ``patchbay://status``, and their icons on the tools that have
none of their own. In memory."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.server.lowlevel.server import Server
from mcp.shared.message import SessionMessage

from mcp_patchbay.config import RemoteSpec, StdioSpec
from mcp_patchbay.upstreams.transports import Link
from tests.harness import MemoryUpstreams, config_from, connected, text

pytestmark = pytest.mark.anyio

LOGO = types.Icon(src="https://example.com/logo.png", mime_type="image/png", sizes=["48x48"])
OWN = types.Icon(src="https://example.com/own.svg", mime_type="image/svg+xml")


def _named_server() -> Server[Any]:
    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(name="plain", input_schema={"type": "object"}),
                types.Tool(name="drawn", input_schema={"type": "object"}, icons=[OWN]),
            ]
        )

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return text("ok")

    server: Server[Any] = Server(
        "named",
        title="The Named Server",
        version="3.1.4",
        website_url="https://example.com/named",
        icons=[LOGO],
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    return server


class Declaring(MemoryUpstreams):
    """Upstreams whose ``initialize`` answer declares ``extensions`` in its capabilities, as a
    TypeScript server may (the SDK's Python server leaves them out of a 2025-era answer)."""

    def __init__(self, servers: dict[str, Server[Any]], extensions: dict[str, Any]) -> None:
        super().__init__(servers)
        self.extensions = extensions

    @asynccontextmanager
    async def __call__(self, name: str, spec: StdioSpec | RemoteSpec) -> AsyncIterator[Link]:
        async with super().__call__(name, spec) as link:
            send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](16)

            async def declare() -> None:
                async with send:
                    async for item in link.read:
                        result = getattr(getattr(item, "message", None), "result", None)
                        if isinstance(result, dict) and "serverInfo" in result:
                            result["capabilities"]["extensions"] = self.extensions
                        await send.send(item)

            async with anyio.create_task_group() as tg:
                tg.start_soon(declare)
                yield Link(receive, link.write, closed=link.closed)
                tg.cancel_scope.cancel()


async def test_an_upstream_s_title_website_and_icons_are_in_the_status_and_on_its_tools() -> None:
    config = config_from({"named": {"command": "x"}})
    upstreams = Declaring({"named": _named_server()}, {"io.modelcontextprotocol/ui": {}})
    async with connected(config, upstreams) as (_, client):
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        status = await client.read_resource("patchbay://status")
    content = status.contents[0]
    assert isinstance(content, types.TextResourceContents)
    named = json.loads(content.text)["servers"]["named"]
    assert named["title"] == "The Named Server" and named["version"] == "3.1.4"
    assert named["website_url"] == "https://example.com/named"
    assert named["icons"] == [{"src": "https://example.com/logo.png", "mimeType": "image/png", "sizes": ["48x48"]}]
    assert named["extensions"] == {"io.modelcontextprotocol/ui": {}}
    assert tools["named__plain"].icons == [LOGO]  # the server's, where the tool has none
    assert tools["named__drawn"].icons == [OWN]  # its own


async def test_find_tools_describes_a_server_by_its_title_and_website() -> None:
    """Issue 33: an upstream's title and website appeared nowhere the model could see them; in
    search mode ``find_tools`` describes each server by them, before its instructions."""
    config = config_from({"named": {"command": "x"}}, patchbay={"expose": "search"})
    async with connected(config, MemoryUpstreams({"named": _named_server()})) as (proxy, client):
        await proxy.supervisor.wait_startup()
        listed = (await client.list_tools()).tools
    find_tools = next(tool for tool in listed if tool.name.endswith("find_tools"))
    assert "- named (2): The Named Server, https://example.com/named" in (find_tools.description or "")
