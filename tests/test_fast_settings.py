"""The fast path's two settings (issue 26): ``gateway.fast_path`` and ``patchbay.http_lane``.

Each is on by default and, set to ``false``, sends the call through the SDK's path on its side:
the gateway's server for ``fast_path``, the SDK's client for ``http_lane``. The call's answer is
the same either way. The gateway and its HTTP upstream run in process, as in
tests/test_gateway_fastpath.py.
"""

from __future__ import annotations

import pytest

from mcp_patchbay.config import Settings
from mcp_patchbay.config.gateway import GatewaySettings
from mcp_patchbay.wire.jsonrpc import Bounds
from tests.harness import result_text
from tests.test_gateway_fastpath import Remote, client, gateway_before, lane_of

pytestmark = pytest.mark.anyio


def test_both_are_on_by_default() -> None:
    assert GatewaySettings().fast_path is True
    assert Settings().http_lane is True
    assert Bounds.of(Settings()).http_lane is True
    assert Bounds.of(Settings(http_lane=False)).http_lane is False


async def test_fast_path_false_answers_through_the_sdks_server() -> None:
    async with gateway_before(Remote(), gateway_settings={"fast_path": False}) as (gateway, base):
        async with client(base) as c:
            assert result_text(await c.call_tool("remote__echo", {"text": "hi"})) == "hi"
        assert gateway.fast.served == 0
        lane = lane_of(gateway)
        assert lane is not None and lane.served == 1  # the upstream side keeps its lane


async def test_fast_path_on_by_default_answers_past_the_sdks_server() -> None:
    async with gateway_before(Remote(), gateway_settings={}) as (gateway, base), client(base) as c:
        assert result_text(await c.call_tool("remote__echo", {"text": "hi"})) == "hi"
        assert gateway.fast.served == 1


async def test_http_lane_false_sends_calls_through_the_sdks_client() -> None:
    async with gateway_before(Remote(), patchbay={"http_lane": False}) as (gateway, base), client(base) as c:
        for n in range(3):
            assert result_text(await c.call_tool("remote__echo", {"text": f"hi {n}"})) == f"hi {n}"
        assert lane_of(gateway) is None  # the link gets no lane: every call through the SDK's client
        assert gateway.fast.served == 3  # the client side keeps its fast path
