"""MCP Apps (``io.modelcontextprotocol/ui``) behind the proxy: user interfaces, app-only tools, app
calls by the server's own names. In memory, with upstreams shaped as ext-apps' example servers."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client import advertise
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError

from mcp_patchbay.session.capabilities import APP_MIME_TYPE, APPS_EXTENSION
from tests.harness import MemoryUpstreams, config_from, connected, error_info, result_text, text

pytestmark = pytest.mark.anyio

APP_URI = "ui://get-time/mcp-app.html"
"""What ext-apps' basic example names its user interface; two servers here both do."""
MIME = "text/html;profile=mcp-app"


def _app_server(
    name: str, *, tools: dict[str, dict[str, Any]] | None = None, csp: str = "", drawn: bool = True
) -> Server[Any]:
    """An MCP Apps server: ``get-time`` linked to ``APP_URI`` (nested and flat, as ext-apps'
    ``registerAppTool`` sends it), the resource with a csp of its own, its HTML naming the server;
    ``tools``: more tools, name to ``_meta``. A subscription is answered with an update at once.
    Not ``drawn``: ``tools`` alone, no user interface."""
    html = f"<!DOCTYPE html><html><body>{name}'s clock</body></html>"
    meta = {"ui": {"csp": {"connectDomains": [f"https://{csp or name}.example"]}, "prefersBorder": True}}
    linked = {"ui": {"resourceUri": APP_URI}, "ui/resourceUri": APP_URI}
    defined = {**({"get-time": linked} if drawn else {}), **(tools or {})}

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(name=n, description=f"{n} of {name}", input_schema={"type": "object"}, _meta=m)
                for n, m in defined.items()
            ]
        )

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return text(f"{name}:{params.name}")

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[types.Resource(uri=APP_URI, name=APP_URI, mime_type=MIME, _meta=meta)]
        )

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        if params.uri != APP_URI:
            raise MCPError(-32002, f"unknown resource {params.uri}")
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=APP_URI, mime_type=MIME, text=html, _meta=meta)]
        )

    async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        subscribed.append((name, params.uri))
        await ctx.session.send_resource_updated(params.uri)
        return types.EmptyResult()

    return Server(
        name,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
        on_subscribe_resource=subscribe,
    )


subscribed: list[tuple[str, str]] = []


def _meta_of(value: Any) -> dict[str, Any]:
    return value.model_dump(by_alias=True, exclude_none=True)["_meta"]


async def test_two_servers_with_the_same_ui_uri_each_get_their_own_interface() -> None:
    """Issue 33: the first server published ui://get-time/mcp-app.html for both, so the second's tool
    rendered the first's HTML under the first's CSP, the listing held one entry and the second's
    subscription went to the first. Now each is exposed as its own, and everything agrees."""
    subscribed.clear()
    updates: list[str] = []
    both = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updates.append(message.params.uri)
            if len(updates) == 2:
                both.set()

    config = config_from({"clock": {"command": "x"}, "timer": {"command": "x"}})
    upstreams = MemoryUpstreams({"clock": _app_server("clock"), "timer": _app_server("timer")})
    async with connected(config, upstreams, message_handler=on_message) as (_, client):
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        resources = {resource.uri: resource for resource in (await client.list_resources()).resources}
        read: dict[str, types.ReadResourceResult] = {}
        for server in ("clock", "timer"):
            tool = tools[f"{server}__get-time"]
            uri = _meta_of(tool)["ui"]["resourceUri"]
            assert uri == f"ui://{server}/get-time/mcp-app.html"
            assert _meta_of(tool)["ui/resourceUri"] == uri  # the deprecated flat form agrees
            assert uri in resources
            assert _meta_of(resources[uri])["ui"]["csp"] == {"connectDomains": [f"https://{server}.example"]}
            read[server] = await client.read_resource(uri)
            await client.subscribe_resource(uri)
        with anyio.fail_after(5):
            await both.wait()
        with pytest.raises(MCPError) as unexposed:
            await client.read_resource(APP_URI)

    for server in ("clock", "timer"):
        (content,) = read[server].contents
        assert isinstance(content, types.TextResourceContents)
        assert content.uri == f"ui://{server}/get-time/mcp-app.html"
        assert content.text == f"<!DOCTYPE html><html><body>{server}'s clock</body></html>"
        assert content.mime_type == MIME
        assert _meta_of(content) == {
            "ui": {"csp": {"connectDomains": [f"https://{server}.example"]}, "prefersBorder": True}
        }
    assert APP_URI not in resources
    assert sorted(subscribed) == [("clock", APP_URI), ("timer", APP_URI)]  # each at its own server, its own URI
    assert sorted(updates) == ["ui://clock/get-time/mcp-app.html", "ui://timer/get-time/mcp-app.html"]
    assert "ui://clock/get-time/mcp-app.html" in unexposed.value.error.message
    assert "ui://timer/get-time/mcp-app.html" in unexposed.value.error.message


APP_ONLY = {"ui": {"visibility": ["app"]}}
"""What ext-apps' system-monitor example says of ``poll-system-stats``: its app polls it, the model never."""


def _monitor(name: str = "monitor") -> Server[Any]:
    return _app_server(name, tools={"poll-system-stats": APP_ONLY, "get-system-info": {}})


def _filler(count: int) -> Server[Any]:
    """A server of ``count`` plain tools: enough to put ``"auto"`` in search mode."""
    return _app_server("filler", tools={f"lookup-record-{n}": {} for n in range(count)})


@pytest.mark.parametrize("expose", ["search", "auto"])
async def test_app_tools_are_listed_in_search_mode_with_their_meta(expose: str) -> None:
    """Issue 33: in search mode (and "auto" above 40 tools) no tool with _meta.ui.resourceUri was
    listed, so a host never rendered an app; an app-only tool was not listed for the host either."""
    config = config_from({"monitor": {"command": "x"}, "filler": {"command": "x"}}, {"expose": expose})
    upstreams = MemoryUpstreams({"monitor": _monitor(), "filler": _filler(45)})
    async with connected(config, upstreams) as (proxy, client):
        await proxy.supervisor.wait_startup()
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert "patchbay__find_tools" in listed
    assert _meta_of(listed["monitor__get-time"]) == {
        "ui": {"resourceUri": "ui://monitor/get-time/mcp-app.html"},
        "ui/resourceUri": "ui://monitor/get-time/mcp-app.html",
    }
    assert _meta_of(listed["monitor__poll-system-stats"]) == APP_ONLY  # the host enforces it from here
    assert "monitor__get-system-info" not in listed  # a plain tool stays behind the search
    assert not any(name.startswith("filler__lookup-record") for name in listed)


async def test_app_only_tools_are_never_offered_to_the_model() -> None:
    """An app-only tool is listed for the host, but find_tools, suggestions and the call routes
    never offer it to the model; its app still calls it, by the exposed name or the server's own."""
    config = config_from({"monitor": {"command": "x"}}, {"expose": "search"})
    async with connected(config, MemoryUpstreams({"monitor": _monitor()})) as (_, client):
        found = await client.call_tool("patchbay__find_tools", {"query": "poll system stats"})
        routed = await client.call_tool("patchbay__call_tool", {"name": "monitor__poll-system-stats", "arguments": {}})
        read_route = await client.call_tool("patchbay__call_read", {"name": "poll-system-stats", "arguments": {}})
        typo = await client.call_tool("monitor__poll-system-stat", {})
        by_exposed = await client.call_tool("monitor__poll-system-stats", {})
        by_own_name = await client.call_tool("poll-system-stats", {})
    assert found.structured_content is not None
    assert "monitor__poll-system-stats" not in [tool["name"] for tool in found.structured_content["tools"]]
    assert "monitor__get-system-info" in [tool["name"] for tool in found.structured_content["tools"]]
    assert error_info(routed)["code"] == "TOOL_NOT_AVAILABLE"
    assert error_info(read_route)["code"] == "TOOL_NOT_AVAILABLE"
    assert "monitor__poll-system-stats" not in error_info(typo).get("suggestions", [])
    assert "poll-system-stats" not in result_text(typo)
    assert result_text(by_exposed) == result_text(by_own_name) == "monitor:poll-system-stats"


def _apps_host() -> list[Any]:
    """What a host that renders MCP Apps declares (ext-apps' AppBridge hosts do)."""
    return [advertise(APPS_EXTENSION, {"mimeTypes": [APP_MIME_TYPE]})]


async def test_a_host_that_renders_apps_lists_their_tools_by_their_servers_own_names() -> None:
    """Issue 33: an app calls its server's tools by the server's own names from inside its frame;
    a host that checks a called name against the listing refused them (only clock__... was listed).
    Such a host now lists each app's tools under those names too, for the app only; where two
    servers share a name neither is listed so, and a call by it runs nothing."""
    tools = {"poll-system-stats": APP_ONLY, "get-system-info": {}, "ask-model": {"ui": {"visibility": ["model"]}}}
    config = config_from({"clock": {"command": "x"}, "timer": {"command": "x"}, "files": {"command": "x"}})

    def upstreams() -> MemoryUpstreams:
        files = _app_server("files", tools={"read": {}}, drawn=False)
        return MemoryUpstreams(
            {"clock": _app_server("clock", tools=tools), "timer": _app_server("timer"), "files": files}
        )

    async with connected(config, upstreams(), extensions=_apps_host()) as (_, host):
        listed = {tool.name: tool for tool in (await host.list_tools()).tools}
        polled = await host.call_tool("poll-system-stats", {})
        shared = await host.call_tool("get-time", {})
    async with connected(config, upstreams()) as (_, other):
        not_a_host = {tool.name for tool in (await other.list_tools()).tools}

    assert _meta_of(listed["poll-system-stats"]) == APP_ONLY
    assert _meta_of(listed["get-system-info"]) == APP_ONLY
    assert listed["get-system-info"].description == listed["clock__get-system-info"].description
    assert "ask-model" not in listed  # the model's only: an app may not call it
    assert "get-time" not in listed and "read" not in listed  # two servers' name; a server without apps
    assert _meta_of(listed["clock__get-system-info"]) == {}  # the model's entry is as the server sent it
    assert result_text(polled) == "clock:poll-system-stats"
    assert error_info(shared)["code"] == "TOOL_AMBIGUOUS"
    assert not {"poll-system-stats", "get-system-info"} & not_a_host
    assert "files__read" in listed and "files__read" in not_a_host


async def test_an_apps_call_by_its_servers_own_name_is_not_logged_as_a_mistake(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The system monitor's app polls poll-system-stats every few seconds by its own name: each call
    wrote an INFO line to the log file as if the model had got a name wrong. Now DEBUG; a mistaken
    name is still told at INFO."""
    config = config_from({"monitor": {"command": "x"}})
    async with connected(config, MemoryUpstreams({"monitor": _monitor()})) as (_, client):
        with caplog.at_level(logging.INFO, logger="mcp_patchbay.calls.resolve"):
            await client.call_tool("poll-system-stats", {})
            await client.call_tool("monitor.get-system-info", {})
    told = [record.getMessage() for record in caplog.records if "resolved tool name" in record.getMessage()]
    assert told == ["resolved tool name 'monitor.get-system-info' to 'monitor__get-system-info' (rule: normalized)"]
