"""``lane.CallLane`` runs each call in a plain asyncio task: what the task group gave stays.

Leaving ``serving`` cancels the calls still in flight (no answer) and waits for them to end;
a call that raises what ``run_tool`` never should is logged, and the next call is served.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from mcp_patchbay.fastpath.stdio_calls import CallLane
from tests.test_lanes import Client, call, handshake

pytestmark = pytest.mark.anyio


async def test_leaving_serving_cancels_calls_in_flight_and_waits_for_them() -> None:
    started = anyio.Event()
    ended: list[str] = []

    async def run_tool(
        name: str, arguments: dict[str, Any] | None, on_progress: Any, meta: dict[str, Any] | None
    ) -> dict[str, Any]:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.lowlevel.checkpoint()  # its cleanup awaits: serving waits for it
            ended.append(name)
        raise AssertionError("unreachable")

    lane = CallLane(run_tool)
    client = Client()
    with anyio.fail_after(5):
        async with lane.serving(client.send):
            handshake(lane)
            assert lane.offer(call(1))
            await started.wait()
        assert ended == ["s__t"]  # ended before serving was left
    assert lane.in_flight == 0
    assert client.sent == []
    assert not lane.offer(call(2))  # closed: no call is taken


async def test_a_call_that_raises_is_logged_and_the_next_is_served(caplog: pytest.LogCaptureFixture) -> None:
    async def run_tool(
        name: str, arguments: dict[str, Any] | None, on_progress: Any, meta: dict[str, Any] | None
    ) -> dict[str, Any]:
        if name == "bad":
            raise RuntimeError("a bug")
        return {"content": []}

    lane = CallLane(run_tool)
    client = Client()
    with anyio.fail_after(5), caplog.at_level(logging.ERROR, logger="mcp_patchbay.fastpath.stdio_calls"):
        async with lane.serving(client.send):
            handshake(lane)
            assert lane.offer(call(1, name="bad"))
            await anyio.wait_all_tasks_blocked()
            assert lane.offer(call(2))
            await client.wait_sent()
    assert client.sent == [{"jsonrpc": "2.0", "id": 2, "result": {"content": []}}]
    assert "tools/call failed unexpectedly" in caplog.text
