"""The SDK internals ``sdk.send_raw`` relies on: this fails loudly when an SDK upgrade moves them."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest
from mcp.client.session import ClientSession

from mcp_patchbay.session.sdk import sdk_internals_problem, send_raw
from tests.harness import FakeTool, MemoryUpstreams, config_from, connected, make_server, text

pytestmark = pytest.mark.anyio


async def test_sdk_internals_used_by_send_raw_are_present() -> None:
    async def ok(ctx: Any, args: dict[str, Any]) -> types.CallToolResult:
        return text(f"got {args}")

    config = config_from({"svc": {"command": "x"}})
    async with connected(config, MemoryUpstreams({"svc": make_server("svc", {"ok": FakeTool(ok)})})) as (proxy, _):
        upstream = proxy.supervisor.upstreams["svc"]
        assert await upstream.wait_ready(10)
        session = upstream._session  # pyright: ignore[reportPrivateUsage]
        assert isinstance(session, ClientSession)
        assert sdk_internals_problem(session) is None, "the MCP SDK changed shape: update mcp_patchbay.session.sdk"
        result = await send_raw(session, "tools/call", {"name": "ok", "arguments": {"a": 1}})
    assert result["content"] == [{"type": "text", "text": "got {'a': 1}"}]


def test_sdk_internals_problem_names_what_is_missing() -> None:
    class Bare:
        pass

    assert sdk_internals_problem(Bare()) == "ClientSession has no _dispatcher"  # type: ignore[arg-type]
