"""The client's capabilities reach upstreams, and what an upstream asks comes back whole (issue 33).

Over stdio an upstream is offered what the client declared (extensions with their settings,
sampling's tools, elicitation's modes, tasks); on the gateway what some member may answer,
and a member that did not declare what is asked is answered for as the specification says.
A sampling answer with ``tool_use`` content reaches the upstream intact. In memory.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client import advertise
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

from mcp_patchbay.session.capabilities import APP_MIME_TYPE, APPS_EXTENSION, GATEWAY_OFFER, refusal
from mcp_patchbay.session.sdk import OfferingSession
from tests.harness import (
    FakeTool,
    MemoryUpstreams,
    config_from,
    connected,
    make_server,
    proxy_transport,
    result_text,
    running_proxy,
    text,
)
from tests.test_gateway import client, gateway_config, running, upstreams

pytestmark = pytest.mark.anyio

UI = {APPS_EXTENSION: {"mimeTypes": [APP_MIME_TYPE]}}
WEATHER = types.Tool(name="weather", input_schema={"type": "object", "properties": {"city": {"type": "string"}}})
FORM = types.ElicitRequestFormParams(message="Name?", requested_schema={"type": "object", "properties": {}})
URL = types.ElicitRequestURLParams(message="Sign in", url="https://example.com/connect", elicitation_id="e-1")


async def seen(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
    """What the upstream was offered, as JSON."""
    caps = ctx.session.client_capabilities
    return text(json.dumps(caps.model_dump(by_alias=True, mode="json", exclude_none=True) if caps else None))


async def sample_with_tools(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
    message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text="Weather in Oslo?"))
    try:
        answer = await ctx.session.create_message(  # pyright: ignore[reportDeprecated]
            messages=[message], max_tokens=50, tools=[WEATHER], tool_choice=types.ToolChoice(mode="auto")
        )
    except MCPError as exc:
        return text(f"refused {exc.code}: {exc.message}")
    return text(answer.model_dump_json(by_alias=True, exclude_none=True))


def asking_upstreams() -> MemoryUpstreams:
    tools = {"seen": FakeTool(seen), "sample": FakeTool(sample_with_tools)}
    return MemoryUpstreams({"asker": make_server("asker", tools)})


async def tool_use(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResultWithTools:
    assert params.tools == [WEATHER]
    use = types.ToolUseContent(type="tool_use", id="call-1", name="weather", input={"city": "Oslo"})
    return types.CreateMessageResultWithTools(role="assistant", content=[use], model="m", stop_reason="toolUse")


@asynccontextmanager
async def declaring(caps: types.ClientCapabilities, memory: MemoryUpstreams) -> AsyncIterator[OfferingSession]:
    """A stdio client (through ``Proxy.serve_client``) declaring exactly ``caps``."""
    config = config_from({"asker": {"command": "x"}}, {"watch": False})
    async with running_proxy(config, memory) as proxy, proxy_transport(proxy) as (read, write):
        async with OfferingSession(read, write, offered=caps, sampling_callback=tool_use) as session:
            await session.initialize()
            yield session


def _text(result: types.CallToolResult) -> Any:
    return json.loads(result_text(result))


async def test_a_stdio_upstream_is_offered_what_the_client_declared_extensions_tools_url_and_tasks() -> None:
    """Regression: the upstream saw ``{}`` of the client's extensions, and both elicitation
    modes whatever the client declared, and never its tasks."""
    declared = types.ClientCapabilities(
        sampling=types.SamplingCapability(tools=types.SamplingToolsCapability()),
        elicitation=types.ElicitationCapability(url=types.UrlElicitationCapability()),
        extensions={**UI, "com.example/other": {"level": 2}},
        tasks=types.ClientTasksCapability(list=types.TasksListCapability()),
        experimental={"private": {}},
    )
    async with declaring(declared, asking_upstreams()) as session:
        offered = _text(await session.call_tool("asker__seen", {}))
    assert offered == {
        "sampling": {"tools": {}},
        "elicitation": {"url": {}},
        "extensions": {APPS_EXTENSION: {"mimeTypes": [APP_MIME_TYPE]}, "com.example/other": {"level": 2}},
        "tasks": {"list": {}},
    }


async def test_an_sdk_client_s_apps_extension_and_elicitation_modes_reach_the_upstream() -> None:
    async def elicitation(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async with connected(
        config_from({"asker": {"command": "x"}}),
        asking_upstreams(),
        elicitation_callback=elicitation,
        extensions=[advertise(APPS_EXTENSION, UI[APPS_EXTENSION])],
    ) as (_, c):
        offered = _text(await c.call_tool("asker__seen", {}))
    assert offered["elicitation"] == {"form": {}, "url": {}}  # the SDK's client declares both
    assert offered["extensions"] == UI


async def test_a_sampling_answer_with_tool_use_reaches_the_upstream_intact() -> None:
    """Regression: the client's ``tool_use`` answer was validated as a plain CreateMessageResult
    and refused, so the upstream got -32603."""
    tools = types.SamplingCapability(tools=types.SamplingToolsCapability())
    config = config_from({"asker": {"command": "x"}})
    async with connected(config, asking_upstreams(), sampling_callback=tool_use, sampling_capabilities=tools) as (_, c):
        answer = _text(await c.call_tool("asker__sample", {}))
    assert answer == {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "call-1", "name": "weather", "input": {"city": "Oslo"}}],
        "model": "m",
        "stopReason": "toolUse",
    }


def test_what_a_client_did_not_declare_is_answered_for_it_as_the_spec_says() -> None:
    sampling = types.CreateMessageRequest(
        params=types.CreateMessageRequestParams(messages=[], max_tokens=1, tools=[WEATHER])
    )
    plain = types.ClientCapabilities(sampling=types.SamplingCapability(), elicitation=types.ElicitationCapability())
    no_tools, url = refusal(plain, sampling), refusal(plain, types.ElicitRequest(params=URL))
    assert no_tools is not None and no_tools.code == types.INVALID_PARAMS  # sampling.tools not declared
    assert url is not None and url.code == types.INVALID_PARAMS  # {} is form mode only: the spec's -32602
    assert refusal(plain, types.ElicitRequest(params=FORM)) is None
    nothing = refusal(types.ClientCapabilities(), types.ElicitRequest(params=FORM))
    assert nothing is not None and nothing.code == types.METHOD_NOT_FOUND
    url_only = types.ClientCapabilities(elicitation=types.ElicitationCapability(url=types.UrlElicitationCapability()))
    form = refusal(url_only, types.ElicitRequest(params=FORM))
    assert form is not None and form.code == types.INVALID_PARAMS
    assert refusal(GATEWAY_OFFER, sampling) is None and refusal(GATEWAY_OFFER, types.ElicitRequest(params=URL)) is None


async def test_the_gateway_offers_what_any_member_may_answer_and_answers_for_one_that_did_not_declare_it() -> None:
    """Regression: the gateway offered fixed capabilities without sampling.tools, elicitation.url
    or any extension; a member is now answered for what its client did not declare."""

    async def ask(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        try:
            if args.get("mode") == "url":
                answer = await ctx.session.elicit_url(URL.message, URL.url, "e-1")
            else:
                answer = await ctx.session.elicit_form(FORM.message, FORM.requested_schema)
        except MCPError as exc:
            return text(f"refused {exc.code}")
        return text(answer.action)

    async def elicitation(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept")

    async def plain(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        raise AssertionError("a member without sampling.tools is never asked to sample with tools")

    memory = upstreams({"seen": FakeTool(seen), "sample": FakeTool(sample_with_tools), "ask": FakeTool(ask)})
    async with running(gateway_config(), memory) as (_, base):
        async with (
            client(base, sampling_callback=plain) as bare,
            client(base, elicitation_callback=elicitation) as both,
        ):
            offered = _text(await bare.call_tool("notes__seen", {}))
            assert result_text(await bare.call_tool("notes__sample", {})) == f"refused {types.INVALID_PARAMS}: " + (
                "The client did not declare sampling.tools; it cannot sample with tools."
            )
            assert result_text(await bare.call_tool("notes__ask", {})) == f"refused {types.METHOD_NOT_FOUND}"
            assert result_text(await both.call_tool("notes__ask", {"mode": "url"})) == "accept"
            assert result_text(await both.call_tool("notes__ask", {})) == "accept"
    assert offered == GATEWAY_OFFER.model_dump(by_alias=True, mode="json", exclude_none=True)
    assert offered == {
        "sampling": {"tools": {}},
        "elicitation": {"form": {}, "url": {}},
        "extensions": {APPS_EXTENSION: {"mimeTypes": [APP_MIME_TYPE]}},
    }


async def test_a_gateway_member_that_declared_form_elicitation_only_is_answered_for_a_url_one() -> None:
    async def ask(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        try:
            await ctx.session.elicit_url(URL.message, URL.url, "e-1")
        except MCPError as exc:
            return text(f"refused {exc.code}")
        return text("asked")

    async with running(gateway_config(), upstreams({"ask": FakeTool(ask)})) as (_, base):
        with anyio.fail_after(10):
            async with _form_only_member(base) as form_only:  # the SDK's Client declares both modes
                result = await form_only.call_tool("notes__ask", {})
    assert result_text(result) == f"refused {types.INVALID_PARAMS}"


@asynccontextmanager
async def _form_only_member(base: str) -> AsyncIterator[OfferingSession]:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    async def elicitation(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        raise AssertionError("a form-only client is never asked a URL elicitation")

    form = types.ElicitationCapability(form=types.FormElicitationCapability())
    form_only = types.ClientCapabilities(elicitation=form)
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(10.0)) as http:
        async with streamable_http_client(f"{base}/mcp", http_client=http) as (read, write):
            async with OfferingSession(read, write, offered=form_only, elicitation_callback=elicitation) as session:
                await session.initialize()
                yield session
