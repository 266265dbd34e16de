"""The HTTP lane and its HTTP/1.1 client against misbehaving peers: requests it cannot write,
connections that die, answers that never end (``transports.http_lane``, ``transports.http1``).

Each upstream here is a raw asyncio server on loopback, so the test controls every byte.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from mcp_patchbay.errors import ClientError, Code
from mcp_patchbay.jsonrpc import Bounds
from mcp_patchbay.transports.http_lane import HttpLane

pytestmark = pytest.mark.anyio

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


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
    port = server.sockets[0].getsockname()[1]

    async def nowhere(message: Any) -> None:
        raise AssertionError("nothing is handed to the SDK's session here")

    lane = HttpLane(f"http://127.0.0.1:{port}/mcp", {}, Bounds(), 5, send=nowhere, inject=nowhere, spawn=print)
    lane._learnt = {"mcp-protocol-version": "2025-11-25"}  # pyright: ignore[reportPrivateUsage] - as learnt from the SDK
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


async def test_a_request_that_cannot_be_written_is_the_client_s_error() -> None:
    async with lane_against(never_called) as lane:
        with anyio.fail_after(10), pytest.raises(ClientError) as caught:
            await lane.request("tools/call", {"name": "a", "arguments": {"text": "\ud800"}})
        assert caught.value.code is Code.INVALID_ARGUMENTS
        assert lane._pool.opened == 0  # pyright: ignore[reportPrivateUsage]
