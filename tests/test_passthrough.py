"""Everything besides tools passes through: resources, prompts, completion, logging,
sampling, elicitation, roots, list changes, and config reload. In memory."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError
from pydantic import FileUrl

from mcp_patchbay.config import load_config
from mcp_patchbay.config.watch import watch_config
from tests.harness import FakeTool, MemoryUpstreams, config_from, connected, logged, make_server, result_text, text

pytestmark = pytest.mark.anyio


def _docs(name: str, uri_prefix: str) -> Server[Any]:
    """A server with resources, a template, prompts, completion and logging."""

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[
                types.Resource(uri=f"{uri_prefix}://readme", name="readme"),
                types.Resource(uri="shared://same", name=f"same-from-{name}"),
            ]
        )

    async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=[types.ResourceTemplate(uri_template=f"{uri_prefix}://items/{{id}}", name="item")]
        )

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        if not str(params.uri).startswith((f"{uri_prefix}://", "shared://")):
            raise MCPError(-32002, f"unknown resource {params.uri}")
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=params.uri, text=f"{name}:{params.uri}")]
        )

    async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        await ctx.session.send_resource_updated(params.uri)
        return types.EmptyResult()

    async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(
            prompts=[
                types.Prompt(
                    name="summarize",
                    description=f"summarize on {name}",
                    arguments=[types.PromptArgument(name="topic", required=True)],
                )
            ]
        )

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        topic = (params.arguments or {}).get("topic")
        return types.GetPromptResult(
            messages=[types.PromptMessage(role="user", content=types.TextContent(type="text", text=f"{name}:{topic}"))]
        )

    async def complete(ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
        ref = params.ref
        label = ref.name if isinstance(ref, types.PromptReference) else ref.uri
        return types.CompleteResult(completion=types.Completion(values=[f"{name}:{label}:{params.argument.value}"]))

    async def set_level(ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
        levels.append((name, params.level))
        return types.EmptyResult()

    async def chatty(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        await ctx.session.send_log_message("warning", {"said": "hello"}, logger="core")
        return text("logged")

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="chatty", input_schema={"type": "object"})])

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> Any:
        return await chatty(ctx, params.arguments or {})

    server: Server[Any] = Server(
        name,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        on_subscribe_resource=subscribe,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_completion=complete,
    )
    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_level)
    return server


levels: list[tuple[str, str]] = []


def _pair() -> tuple[Any, MemoryUpstreams]:
    config = config_from({"alpha": {"command": "x"}, "beta": {"command": "x"}})
    return config, MemoryUpstreams({"alpha": _docs("alpha", "a"), "beta": _docs("beta", "b")})


async def test_capabilities_advertise_everything() -> None:
    config, upstreams = _pair()
    async with connected(config, upstreams) as (_, client):
        caps = client.server_capabilities
    assert caps.tools is not None and caps.tools.list_changed
    assert caps.resources is not None and caps.resources.subscribe and caps.resources.list_changed
    assert caps.prompts is not None and caps.prompts.list_changed
    assert caps.completions is not None and caps.logging is not None


async def test_resources_of_all_upstreams_are_listed_and_read_by_uri() -> None:
    config, upstreams = _pair()
    async with connected(config, upstreams) as (_, client):
        resources = (await client.list_resources()).resources
        uris = [str(r.uri) for r in resources]
        assert {"a://readme", "b://readme", "shared://same", "patchbay://status"} <= set(uris)
        assert uris.count("shared://same") == 1
        same = next(r for r in resources if str(r.uri) == "shared://same")
        assert same.name == "same-from-alpha"  # the server listed first in the config wins
        assert (await client.read_resource("b://readme")).contents[0].text == "beta:b://readme"  # type: ignore[union-attr]
        assert (await client.read_resource("shared://same")).contents[0].text == "alpha:shared://same"  # type: ignore[union-attr]
        templates = (await client.list_resource_templates()).resource_templates
        assert {t.uri_template for t in templates} == {"a://items/{id}", "b://items/{id}"}
        # A URI no listing names, but a template does (what a resource link in a tool result looks like).
        assert (await client.read_resource("b://items/7")).contents[0].text == "beta:b://items/7"  # type: ignore[union-attr]
        with pytest.raises(MCPError):
            await client.read_resource("nowhere://x")


async def test_prompts_are_namespaced_and_mistaken_names_resolve() -> None:
    config, upstreams = _pair()
    async with connected(config, upstreams) as (_, client):
        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
        assert set(prompts) == {"alpha__summarize", "beta__summarize"}
        assert prompts["beta__summarize"].arguments[0].name == "topic"  # type: ignore[index]
        got = await client.get_prompt("beta__summarize", {"topic": "x"})
        assert got.messages[0].content.text == "beta:x"  # type: ignore[union-attr]
        got = await client.get_prompt("Beta.Summarize", {"topic": "y"})
        assert got.messages[0].content.text == "beta:y"  # type: ignore[union-attr]
        with pytest.raises(MCPError) as caught:
            await client.get_prompt("beta__sumarize", {})
        assert "beta__summarize" in caught.value.message


async def test_completion_is_routed_to_the_right_upstream() -> None:
    config, upstreams = _pair()
    async with connected(config, upstreams) as (_, client):
        prompt = await client.complete(
            types.PromptReference(type="ref/prompt", name="beta__summarize"), {"name": "topic", "value": "ab"}
        )
        assert prompt.completion.values == ["beta:summarize:ab"]
        template = await client.complete(
            types.ResourceTemplateReference(type="ref/resource", uri="a://items/{id}"), {"name": "id", "value": "1"}
        )
        assert template.completion.values == ["alpha:a://items/{id}:1"]


async def test_logging_messages_carry_the_server_name_and_set_level_reaches_every_upstream() -> None:
    config, upstreams = _pair()
    got: list[types.LoggingMessageNotificationParams] = []
    logged = anyio.Event()

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        got.append(params)
        logged.set()

    levels.clear()
    async with connected(config, upstreams, logging_callback=on_log) as (_, client):
        await client.set_logging_level("debug")
        assert set(levels) == {("alpha", "debug"), ("beta", "debug")}
        assert result_text(await client.call_tool("beta__chatty", {})) == "logged"
        with anyio.fail_after(5):
            await logged.wait()
    assert got[0].logger == "beta/core" and got[0].data == {"said": "hello"}


async def test_resource_updated_reaches_the_client() -> None:
    config, upstreams = _pair()
    updated = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification) and str(message.params.uri) == "b://readme":
            updated.set()

    async with connected(config, upstreams, message_handler=on_message) as (_, client):
        await client.list_resources()
        await client.subscribe_resource("b://readme")
        with anyio.fail_after(5):
            await updated.wait()


async def test_sampling_elicitation_and_roots_are_forwarded_to_the_client() -> None:
    async def ask(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        sampled = await ctx.session.create_message(
            messages=[types.SamplingMessage(role="user", content=types.TextContent(type="text", text="2+2?"))],
            max_tokens=5,
        )
        answer = await ctx.session.elicit_form("Name?", {"type": "object", "properties": {"n": {"type": "string"}}})
        roots = await ctx.session.list_roots()
        return text(f"{sampled.content.text}|{answer.action}:{answer.content}|{roots.roots[0].uri}")  # type: ignore[union-attr]

    async def sampling(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="4"), model="m")

    async def elicitation(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"n": "Ada"})

    async def roots(ctx: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=FileUrl("file:///work"))])

    config = config_from({"asker": {"command": "x"}})
    upstreams = MemoryUpstreams({"asker": make_server("asker", {"ask": FakeTool(ask)})})
    async with connected(
        config, upstreams, sampling_callback=sampling, elicitation_callback=elicitation, list_roots_callback=roots
    ) as (_, client):
        result = await client.call_tool("asker__ask", {})
    assert result_text(result) == "4|accept:{'n': 'Ada'}|file:///work"


async def test_without_client_sampling_the_upstream_is_told_clearly() -> None:
    async def ask(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        try:
            await ctx.session.create_message(
                messages=[types.SamplingMessage(role="user", content=types.TextContent(type="text", text="hi"))],
                max_tokens=5,
            )
        except MCPError as exc:
            return text(f"refused: {exc.message}")
        return text("sampled")

    config = config_from({"asker": {"command": "x"}})
    upstreams = MemoryUpstreams({"asker": make_server("asker", {"ask": FakeTool(ask)})})
    async with connected(config, upstreams) as (proxy, client):
        result = await client.call_tool("asker__ask", {})
        caps = proxy.supervisor.upstreams["asker"].client
        assert caps is not None and caps.client_capabilities() is not None
    assert result_text(result).startswith("refused")


async def test_upstream_tool_list_change_reaches_the_client() -> None:
    tools: dict[str, FakeTool] = {"one": FakeTool(lambda ctx, args: _async_text("1"))}
    changed = anyio.Event()

    async def add_tool(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        tools["two"] = FakeTool(lambda ctx, args: _async_text("2"))
        await ctx.session.send_tool_list_changed()
        return text("added")

    tools["grow"] = FakeTool(add_tool)

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    config = config_from({"dyn": {"command": "x"}})
    upstreams = MemoryUpstreams({"dyn": make_server("dyn", tools)})
    async with connected(config, upstreams, message_handler=on_message) as (_, client):
        assert "dyn__two" not in {t.name for t in (await client.list_tools()).tools}
        await client.call_tool("dyn__grow", {})
        with anyio.fail_after(5):
            await changed.wait()
        assert "dyn__two" in {t.name for t in (await client.list_tools()).tools}
        assert result_text(await client.call_tool("dyn__two", {})) == "2"


async def _async_text(value: str) -> types.CallToolResult:
    return text(value)


async def test_config_reload_adds_removes_and_keeps_servers(tmp_path: Path) -> None:
    path = tmp_path / "patchbay.json"

    def write(servers: dict[str, Any]) -> None:
        # Written to a new file and renamed over the old one, as many editors save.
        staging = tmp_path / "patchbay.json.tmp"
        staging.write_text(json.dumps({"mcpServers": servers}))
        staging.replace(path)

    write({"alpha": {"command": "x"}, "beta": {"command": "x"}})
    config = load_config(path, environ={})
    upstreams = MemoryUpstreams({n: _docs(n, n[0]) for n in ("alpha", "beta", "gamma")})
    changed = anyio.Event()
    notices, heard = anyio.create_memory_object_stream[None](100)

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()
            notices.send_nowait(None)

    async with notices, heard, connected(config, upstreams, message_handler=on_message) as (proxy, client):
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch_config, path, proxy.supervisor.apply, 0.05)
            assert {t.name for t in (await client.list_tools()).tools} == {"alpha__chatty", "beta__chatty"}
            alpha_before = proxy.supervisor.upstreams["alpha"]

            write({"alpha": {"command": "x"}, "gamma": {"command": "x"}})
            with anyio.fail_after(5):
                await changed.wait()
                # beta's going and gamma's coming may be told apart: each change is announced.
                while {t.name for t in (await client.list_tools()).tools} != {"alpha__chatty", "gamma__chatty"}:
                    await heard.receive()
            assert proxy.supervisor.upstreams["alpha"] is alpha_before  # unchanged: not touched
            assert upstreams.connects["alpha"] == 1

            rejected = anyio.Event()
            watch_log = logging.getLogger("mcp_patchbay.config.watch")
            handler = _OnRecord("config change ignored", rejected.set)
            watch_log.addHandler(handler)
            try:
                path.write_text("{ not json")  # a broken edit keeps the last good config
                with anyio.fail_after(5):
                    await rejected.wait()
            finally:
                watch_log.removeHandler(handler)
            assert result_text(await client.call_tool("gamma__chatty", {})) == "logged"
            tg.cancel_scope.cancel()


async def test_modern_clients_hear_list_changes_on_their_listen_stream() -> None:
    tools: dict[str, FakeTool] = {}

    async def add_tool(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        tools["two"] = FakeTool(lambda ctx, args: _async_text("2"))
        await ctx.session.send_tool_list_changed()
        return text("added")

    tools["grow"] = FakeTool(add_tool)
    config = config_from({"dyn": {"command": "x"}})
    upstreams = MemoryUpstreams({"dyn": make_server("dyn", tools)})
    async with connected(config, upstreams, mode="auto") as (_, client):
        assert client.protocol_version == "2026-07-28"
        await client.list_tools()
        async with client.listen(tools_list_changed=True) as subscription:
            await client.call_tool("dyn__grow", {})
            with anyio.fail_after(5):
                event = await subscription.__anext__()
        assert type(event).__name__ == "ToolsListChanged"
        assert "dyn__two" in {t.name for t in (await client.list_tools()).tools}


class _OnRecord(logging.Handler):
    """Calls ``then`` when a log record's message contains ``text``: a test waits on what the code logs."""

    def __init__(self, text: str, then: Any) -> None:
        super().__init__()
        self.text, self.then = text, then

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.then()


def _hearing_roots(name: str, heard: list[str], event: anyio.Event) -> Any:
    """An upstream that records each notifications/roots/list_changed it hears."""
    server = make_server(name, {})

    async def on_roots_changed(ctx: Any, params: Any) -> None:
        heard.append(name)
        event.set()

    server.add_notification_handler("notifications/roots/list_changed", types.NotificationParams, on_roots_changed)
    return server


async def test_a_roots_change_reaches_the_upstreams_offered_roots_and_none_when_the_client_has_none() -> None:
    config = config_from({"alpha": {"command": "x"}, "beta": {"command": "x"}})
    heard: list[str] = []
    both = anyio.Event()

    async def roots(ctx: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=FileUrl("file:///work"))])

    def servers() -> MemoryUpstreams:
        return MemoryUpstreams({n: _hearing_roots(n, heard, both) for n in ("alpha", "beta")})

    async with connected(config, servers(), list_roots_callback=roots) as (_, client):
        await client.list_tools()  # both upstreams ready: one still starting asks for the roots itself
        await client.send_roots_list_changed()  # pyright: ignore[reportDeprecated]
        with anyio.fail_after(5):
            while len(heard) < 2:
                await both.wait()
                both = anyio.Event()
    assert sorted(heard) == ["alpha", "beta"]

    heard.clear()
    with logged("mcp_patchbay.session.passthrough", "passed to no server") as handled:
        async with connected(config, servers()) as (_, client):  # no roots declared: none offered upstream
            await client.list_tools()
            await client.send_roots_list_changed()  # pyright: ignore[reportDeprecated]
            with anyio.fail_after(5):
                await handled.wait()
    assert heard == []
