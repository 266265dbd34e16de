"""The raw lanes on their own: ``rawcalls.RawCalls`` (upstream side) and ``lane.CallLane``
(client side), driven with JSON values, no process and no SDK session.

The in-memory suite runs every tool call through both lanes' callers; these pin the
edges that only show under a fault: cancellation, a connection ending, late answers.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from mcp_patchbay.fastpath.pipe_calls import RawCalls
from mcp_patchbay.fastpath.stdio_calls import CallLane

pytestmark = pytest.mark.anyio  # on asyncio (conftest): RawCalls waits on asyncio futures, as the proxy does


class Pipe:
    """The upstream's stdin as RawCalls sees it: records every line."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []
        self.written = anyio.Event()

    def write(self, data: bytes) -> None:
        assert data.endswith(b"\n") and data.count(b"\n") == 1
        self.lines.append(json.loads(data))
        self.written.set()

    async def drain(self) -> None:
        return None

    async def next_line(self) -> dict[str, Any]:
        with anyio.fail_after(5):
            while not self.lines:
                self.written = anyio.Event()
                await self.written.wait()
        return self.lines.pop(0)


async def test_answer_and_error_reach_the_caller_by_id() -> None:
    pipe = Pipe()
    raw = RawCalls(pipe)
    results: dict[str, Any] = {}

    async def call(key: str) -> None:
        try:
            results[key] = await raw.request("tools/call", {"name": key})
        except MCPError as exc:
            results[key] = exc

    async with anyio.create_task_group() as tg:
        tg.start_soon(call, "a")
        first = await pipe.next_line()
        tg.start_soon(call, "b")
        second = await pipe.next_line()
        assert first["id"] != second["id"] and str(first["id"]).startswith("pb-")
        # Answers in the other order; each reaches its own caller.
        assert await raw.take({"jsonrpc": "2.0", "id": second["id"], "error": {"code": -32602, "message": "bad"}})
        assert await raw.take({"jsonrpc": "2.0", "id": first["id"], "result": {"content": []}})
    assert results["a"] == {"content": []}
    assert isinstance(results["b"], MCPError) and results["b"].code == -32602
    assert raw.pending == 0


async def test_messages_that_are_not_ours_go_on_to_the_sdk() -> None:
    raw = RawCalls(Pipe())
    assert not await raw.take({"jsonrpc": "2.0", "id": 3, "result": {}})  # the SDK's integer ids
    assert not await raw.take({"jsonrpc": "2.0", "id": "other-1", "result": {}})
    assert not await raw.take({"jsonrpc": "2.0", "id": "pb-1", "method": "sampling/createMessage", "params": {}})
    assert not await raw.take({"jsonrpc": "2.0", "method": "notifications/message", "params": {}})
    assert not await raw.take({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1}})
    # An answer to one of our ids that nobody waits for any more is ours, and dropped.
    assert await raw.take({"jsonrpc": "2.0", "id": "pb-99", "result": {}})


async def test_cancelled_call_tells_the_upstream() -> None:
    """Regression: awaiting the answer from a cancelled task cancels the future too, which
    read as "already answered", so the upstream was never told to stop."""
    pipe = Pipe()
    raw = RawCalls(pipe)
    with anyio.move_on_after(5) as scope:
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                await raw.request("tools/call", {"name": "hang"})

            tg.start_soon(call)
            request = await pipe.next_line()
            tg.cancel_scope.cancel()
    assert not scope.cancelled_caught
    cancel = await pipe.next_line()
    assert cancel["method"] == "notifications/cancelled" and cancel["params"]["requestId"] == request["id"]
    assert raw.pending == 0


async def test_connection_end_fails_every_pending_call_at_once() -> None:
    pipe = Pipe()
    raw = RawCalls(pipe)
    failures: list[MCPError] = []

    async def call() -> None:
        with pytest.raises(MCPError) as caught:
            await raw.request("tools/call", {"name": "x"})
        failures.append(caught.value)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(call)
            for _ in range(3):
                await pipe.next_line()
            raw.close()
    assert [(f.code, f.message) for f in failures] == [(-32000, "Connection closed")] * 3
    with pytest.raises(MCPError):  # and any later call fails at once, without writing
        await raw.request("tools/call", {"name": "x"})
    assert pipe.lines == []


async def test_progress_for_our_token_reaches_the_caller_only() -> None:
    pipe = Pipe()
    raw = RawCalls(pipe)
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with anyio.create_task_group() as tg:

        async def call() -> None:
            await raw.request("tools/call", {"name": "long", "_meta": {"keep": 1}}, on_progress)

        tg.start_soon(call)
        request = await pipe.next_line()
        token = request["params"]["_meta"]["progressToken"]
        assert request["params"]["_meta"]["keep"] == 1
        progress = {"progressToken": token, "progress": 1, "total": 2, "message": "half"}
        assert await raw.take({"jsonrpc": "2.0", "method": "notifications/progress", "params": progress})
        malformed = {"progressToken": token, "progress": "lots"}
        assert not await raw.take({"jsonrpc": "2.0", "method": "notifications/progress", "params": malformed})
        assert await raw.take({"jsonrpc": "2.0", "id": request["id"], "result": {"content": []}})
    assert seen == [(1, 2, "half")]


# --- the client's side ------------------------------------------------------------------------


class Client:
    """What the lane writes to the client."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self._first = anyio.Event()

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)
        self._first.set()

    async def wait_sent(self) -> None:
        with anyio.fail_after(5):
            await self._first.wait()


HANDSHAKE = [
    {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
]


def handshake(lane: CallLane) -> None:
    for message in HANDSHAKE:
        assert not lane.offer(message)  # the handshake itself is the SDK's


def call(request_id: Any, name: Any = "s__t", **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": name, **params}}


async def test_lane_takes_calls_only_after_the_handshake_and_only_well_formed_ones() -> None:
    async def run_tool(
        name: str, arguments: dict[str, Any] | None, on_progress: Any, meta: dict[str, Any] | None
    ) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": f"{name} {arguments}"}]}

    lane = CallLane(run_tool)
    client = Client()
    async with lane.serving(client.send):
        assert not lane.offer(call(1))  # before the handshake: the SDK's
        handshake(lane)
        assert lane.open
        assert lane.offer(call(2, arguments={"a": 1}))
        assert not lane.offer(call(3, name=7))  # malformed: the SDK answers it
        assert not lane.offer(call(4, arguments=[1]))
        assert not lane.offer(call(True))  # a bool is no request id
        assert not lane.offer({"jsonrpc": "2.0", "id": 5, "method": "tools/list"})
        await client.wait_sent()
    result = {"content": [{"type": "text", "text": "s__t {'a': 1}"}]}
    assert client.sent == [{"jsonrpc": "2.0", "id": 2, "result": result}]


async def test_lane_cancelled_call_gets_no_answer_and_progress_uses_the_clients_token() -> None:
    started = anyio.Event()
    cancelled = anyio.Event()

    async def run_tool(
        name: str, arguments: dict[str, Any] | None, on_progress: Any, meta: dict[str, Any] | None
    ) -> dict[str, Any]:
        await on_progress(0.5, None, "working")
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()
        raise AssertionError("unreachable")

    lane = CallLane(run_tool)
    client = Client()
    with anyio.fail_after(5):
        async with lane.serving(client.send):
            handshake(lane)
            assert lane.offer(call("c1", _meta={"progressToken": "tok"}))
            await started.wait()
            assert lane.in_flight == 1
            assert not lane.offer({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}})
            assert lane.offer({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "c1"}})
            await cancelled.wait()
            await anyio.wait_all_tasks_blocked()  # a (wrong) answer to the cancelled call would be sent by now
    assert lane.in_flight == 0
    progress = {"progressToken": "tok", "progress": 0.5, "message": "working"}
    assert client.sent == [{"jsonrpc": "2.0", "method": "notifications/progress", "params": progress}]


async def test_lane_answers_an_mcp_error_in_json_rpc_form() -> None:
    async def run_tool(
        name: str, arguments: dict[str, Any] | None, on_progress: Any, meta: dict[str, Any] | None
    ) -> dict[str, Any]:
        raise MCPError(-32602, "Unknown tool 'x'", {"suggestions": ["s__x"]})

    lane = CallLane(run_tool)
    client = Client()
    async with lane.serving(client.send):
        handshake(lane)
        assert lane.offer(call(1, name="x"))
        await client.wait_sent()
    error = {"code": -32602, "message": "Unknown tool 'x'", "data": {"suggestions": ["s__x"]}}
    assert client.sent == [{"jsonrpc": "2.0", "id": 1, "error": error}]
