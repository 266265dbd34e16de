"""The HTTP lane and its HTTP/1.1 client against misbehaving peers: requests it cannot write,
connections that die, answers that never end (``transports.http_lane``, ``transports.http1``).

Each upstream here is a raw asyncio server on loopback, so the test controls every byte.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from mcp_patchbay.errors.foreign import http_status_of
from mcp_patchbay.errors.tree import ClientError, Code
from mcp_patchbay.fastpath import http1
from mcp_patchbay.fastpath import http_calls as http_lane
from mcp_patchbay.fastpath.http_calls import HttpLane
from mcp_patchbay.wire.jsonrpc import Bounds

pytestmark = pytest.mark.anyio

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def lane_to(server: asyncio.Server) -> HttpLane:
    """A lane to ``server``'s ``/mcp``, its protocol version as if learnt from the SDK, that hands
    nothing to a session."""
    port = server.sockets[0].getsockname()[1]

    async def nowhere(message: Any) -> None:
        raise AssertionError("nothing is handed to the SDK's session here")

    lane = HttpLane(f"http://127.0.0.1:{port}/mcp", {}, Bounds(), 5, send=nowhere, inject=nowhere, spawn=print)
    lane._learnt = {"mcp-protocol-version": "2025-11-25"}  # pyright: ignore[reportPrivateUsage] - as learnt from the SDK
    return lane


@asynccontextmanager
async def lane_against(handle: Handler) -> AsyncGenerator[HttpLane]:
    """A lane to a raw server running ``handle`` per connection."""
    writers: list[asyncio.StreamWriter] = []

    async def tracked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        try:
            await handle(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(tracked, "127.0.0.1", 0)
    lane = lane_to(server)
    try:
        yield lane
    finally:
        lane.close()
        server.close()
        for writer in writers:
            writer.close()
        await server.wait_closed()


async def never_called(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    raise AssertionError("the request was not to be sent")


async def test_a_request_that_cannot_be_written_is_the_client_s_error(opened_connections: list[object]) -> None:
    async with lane_against(never_called) as lane:
        with anyio.fail_after(10), pytest.raises(ClientError) as caught:
            await lane.request("tools/call", {"name": "a", "arguments": {"text": "\ud800"}})
        assert caught.value.code is Code.INVALID_ARGUMENTS
        assert len(opened_connections) == 0


def answering(head: bytes, then: bytes = b"", *, trickle: int = 0) -> Handler:
    """A server that reads one request and writes ``head`` (then ``then`` ``trickle`` times,
    until the client hangs up)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        await reader.readexactly(int(request.lower().split(b"content-length: ")[1].split(b"\r\n")[0]))
        writer.write(head)
        await writer.drain()
        for _ in range(trickle):
            writer.write(then)
            await writer.drain()

    return handle


async def test_an_endless_answer_head_is_refused() -> None:
    """One header that never ends: refused past MAX_HEAD_BYTES, not read for ever."""
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nx-endless: "
    async with lane_against(answering(head, b"a" * 16_384, trickle=10_000)) as lane:
        with anyio.fail_after(10), pytest.raises(ConnectionError, match="head is over"):
            await lane.request("tools/call", {"name": "a"})


async def test_an_answer_with_too_many_headers_is_refused() -> None:
    fields = b"".join(b"x-h%d: v\r\n" % n for n in range(http1.MAX_HEADERS + 1))
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n" + fields
    async with lane_against(answering(head, b"x-more: v\r\n", trickle=10_000)) as lane:
        with anyio.fail_after(10), pytest.raises(ConnectionError, match="header fields"):
            await lane.request("tools/call", {"name": "a"})


async def _parts(chunks: list[bytes]) -> AsyncGenerator[bytes]:
    for chunk in chunks:
        yield chunk


async def _events(chunks: list[bytes], limit: int = 1 << 24) -> list[tuple[str, str | None, int | None]]:
    return [(event.data, event.id, event.retry) async for event in http1.events(_parts(chunks), limit)]


async def test_sse_events_split_anywhere_read_the_same() -> None:
    stream = b"id: 1\r\ndata: a\r\ndata: b\r\n\r\n: note\n\nevent: other\ndata: x\n\nretry: 7\rdata: c\r\r\n"
    whole = await _events([stream])
    assert whole == [("a\nb", "1", None), ("c", None, 7)]
    assert await _events([stream[i : i + 1] for i in range(len(stream))]) == whole
    for cut in range(len(stream)):
        assert await _events([stream[:cut], stream[cut:]]) == whole


async def test_an_sse_event_trickled_byte_by_byte_is_read_in_linear_time() -> None:
    """A 300 KB event in one-byte parts: joining and searching the whole of it again for every
    part was quadratic (tens of GB copied and scanned); now each byte is handled about once."""
    size = 300_000
    chunks = [b"data: "] + [b"x"] * size + [b"\n", b"\n"]
    started = time.perf_counter()
    assert await _events(chunks) == [("x" * size, None, None)]
    assert time.perf_counter() - started < 5


async def test_a_resumed_sse_stream_is_closed_once_its_answer_is_in(
    monkeypatch: pytest.MonkeyPatch, opened_connections: list[object]
) -> None:
    """The call's stream ends early; the lane resumes it (a GET with Last-Event-ID), reads the
    answer there, and drops that connection when its stream does not end."""
    monkeypatch.setattr(http_lane, "DRAIN_SECONDS", 0.01)
    resumed_closed = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        if request.startswith(b"POST"):
            await reader.readexactly(int(request.lower().split(b"content-length: ")[1].split(b"\r\n")[0]))
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
            event = b"id: e1\nretry: 0\ndata: \n\n"
            writer.write(b"%x\r\n%s\r\n" % (len(event), event))
            await writer.drain()
            return  # closed mid-stream, before the answer
        assert b"last-event-id: e1" in request.lower()
        answer = b'data: {"jsonrpc":"2.0","id":"x","result":{"content":[]}}\n\n'
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        writer.write(b"%x\r\n%s\r\n" % (len(answer), answer))
        await writer.drain()
        await reader.read()  # the stream stays open until the lane hangs up
        resumed_closed.set()

    async with lane_against(handle) as lane:
        with anyio.fail_after(10):
            assert await lane.request("tools/call", {"name": "a"}) == {"content": []}
            await resumed_closed.wait()
        assert len(opened_connections) == 2


async def test_an_sse_retry_that_is_not_plain_digits_is_ignored() -> None:
    stream = "retry: ²\ndata: a\n\nretry: ١٢\ndata: b\n\nretry: 9999999999\ndata: c\n\nretry: 25\ndata: d\n\n"
    assert await _events([stream.encode()]) == [
        ("a", None, None),
        ("b", None, None),
        ("c", None, None),
        ("d", None, 25),
    ]


@pytest.mark.parametrize("status", [301, 302, 303])
async def test_a_redirect_that_may_follow_the_call_is_an_error_not_a_second_post(status: int) -> None:
    """A 301, 302 or 303 to the POST may come after the server ran the call: it is the call's
    error; the SDK's client is not handed the call to send again."""
    seen: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            request = await reader.readuntil(b"\r\n\r\n")
            seen.append(request.split(b" ")[0])
            await reader.readexactly(int(request.lower().split(b"content-length: ")[1].split(b"\r\n")[0]))
            writer.write(b"HTTP/1.1 %d Moved\r\nlocation: /done\r\ncontent-length: 0\r\n\r\n" % status)
            await writer.drain()

    async with lane_against(handle) as lane:
        with anyio.fail_after(10), pytest.raises(MCPError) as caught:
            await lane.request("tools/call", {"name": "a"})
        assert http_status_of(caught.value) == (status, None)
        assert seen == [b"POST"] and lane.fell_back == 0
