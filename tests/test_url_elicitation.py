"""URL elicitation through the proxy (2025-11-25): an upstream's ``-32042`` reaches the client as the
JSON-RPC error it is, ``data.elicitations`` and all, and ``notifications/elicitation/complete``
reaches the session that saw the elicitation. In memory, over stdio and through the gateway."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

from tests.harness import FakeTool, MemoryUpstreams, config_from, connected, error_info, make_server, result_text, text
from tests.test_gateway import client, gateway_config, running, upstreams

pytestmark = pytest.mark.anyio

PAGE = {
    "mode": "url",
    "elicitationId": "e-1",
    "url": "https://example.com/connect?elicitationId=e-1",
    "message": "Authorize access to your Example Co files.",
}


async def needs_url(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
    raise MCPError(types.URL_ELICITATION_REQUIRED, "This request requires more information.", {"elicitations": [PAGE]})


async def complete(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
    await ctx.session.send_elicit_complete("e-unknown")
    await ctx.session.send_elicit_complete("e-1")
    return text("told")


async def url_flow(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
    answer = await ctx.session.elicit_url("Sign in", "https://example.com/sign-in", "e-2")
    await ctx.session.send_elicit_complete("e-2")
    return text(answer.action)


TOOLS = {"needs_url": FakeTool(needs_url), "complete": FakeTool(complete), "url_flow": FakeTool(url_flow)}


async def accept(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept")


class Heard:
    """The elicitation completions a client was told of."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.changed = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ElicitCompleteNotification):
            self.ids.append(message.params.elicitation_id)
            self.changed.set()
            self.changed = anyio.Event()

    async def until(self, elicitation_id: str) -> None:
        with anyio.fail_after(5):
            while elicitation_id not in self.ids:
                await self.changed.wait()


def _memory() -> MemoryUpstreams:
    return MemoryUpstreams({"asker": make_server("asker", TOOLS)})


@pytest.mark.parametrize("expose", ["all", "search"])
async def test_a_url_elicitation_required_error_reaches_the_client_as_that_error(expose: str) -> None:
    """Regression: -32042 became an isError text telling the model to "Retry once", and the URL
    the person must open was lost. Through ``call_tool`` (search mode) the same."""
    config = config_from({"asker": {"command": "x"}}, {"expose": expose})
    async with connected(config, _memory(), elicitation_callback=accept) as (_, c):
        with pytest.raises(MCPError) as raised:
            if expose == "search":
                await c.call_tool("patchbay__call_tool", {"name": "asker__needs_url", "arguments": {}})
            else:
                await c.call_tool("asker__needs_url", {})
    assert raised.value.code == types.URL_ELICITATION_REQUIRED
    assert raised.value.message == "This request requires more information."
    assert raised.value.data == {"elicitations": [PAGE]}


async def test_a_2026_client_gets_the_url_elicitation_required_error_too() -> None:
    config = config_from({"asker": {"command": "x"}})
    async with connected(config, _memory(), mode="auto", elicitation_callback=accept) as (_, c):
        with pytest.raises(MCPError) as raised:
            await c.call_tool("asker__needs_url", {})
    assert raised.value.code == types.URL_ELICITATION_REQUIRED and raised.value.data == {"elicitations": [PAGE]}


async def test_a_client_without_url_elicitation_is_told_the_url_in_the_result() -> None:
    async with connected(config_from({"asker": {"command": "x"}}), _memory()) as (_, c):
        result = await c.call_tool("asker__needs_url", {})
    assert error_info(result)["code"] == "URL_ELICITATION_REQUIRED"
    assert PAGE["url"] in result_text(result) and "Retry once" not in result_text(result)


async def test_the_completion_of_a_url_elicitation_reaches_the_stdio_client() -> None:
    """Regression: ``notifications/elicitation/complete`` was dropped."""
    heard = Heard()
    config = config_from({"asker": {"command": "x"}})
    async with connected(config, _memory(), elicitation_callback=accept, message_handler=heard) as (_, c):
        assert result_text(await c.call_tool("asker__url_flow", {})) == "accept"
        await heard.until("e-2")


async def test_on_the_gateway_a_completion_reaches_the_session_that_saw_the_elicitation_and_no_other() -> None:
    alice, bob = Heard(), Heard()
    memory = upstreams(TOOLS)
    async with running(gateway_config(), memory) as (_, base):
        async with (
            client(base, elicitation_callback=accept, message_handler=alice) as a,
            client(base, elicitation_callback=accept, message_handler=bob) as b,
        ):
            with pytest.raises(MCPError) as raised:
                await a.call_tool("notes__needs_url", {})
            assert raised.value.code == types.URL_ELICITATION_REQUIRED and raised.value.data == {"elicitations": [PAGE]}
            assert result_text(await b.call_tool("notes__complete", {})) == "told"  # the server completes it later
            await alice.until("e-1")
            assert result_text(await b.call_tool("notes__url_flow", {})) == "accept"  # asked through bob's session
            await bob.until("e-2")
    assert alice.ids == ["e-1"] and bob.ids == ["e-2"]
