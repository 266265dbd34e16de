"""The client's side of the wire: MCP over our own stdin and stdout.

The SDK's ``stdio_server`` reads stdin with a blocking ``readline`` in a worker thread.
That costs a thread hop per message and, worse, cannot be cancelled: on SIGTERM the
proxy stopped its upstreams but then sat on that read until the client closed stdin.
Here, on POSIX, stdin and stdout are event-loop pipes: reads are cancellable and need
no thread. Like the SDK, the descriptors are claimed first: fd 0 then reads
/dev/null and fd 1 writes to stderr, so nothing a library or child prints can reach
the wire. Where event-loop pipes cannot serve (Windows, stdin redirected from a regular
file), the SDK's transport is used unchanged.

Beside the SDK's message streams runs a ``Wire``: every message read is first offered,
as JSON values, to ``Wire.intercept`` (the proxy's ``fastpath.stdio_calls.CallLane``), and what it takes
never reaches the SDK; ``Wire.send`` writes JSON values back. Over our own pipes both are
plain ``json`` on the line; ``message_wire`` gives SessionMessage streams (memory
streams in tests, the SDK's threaded transport) the same face.

Every line read from our pipe is bounded before it is parsed (``wire.jsonrpc.Bounds``): a
line longer than ``patchbay.max_message_bytes`` is skipped as it streams in, one nested
deeper than ``max_json_depth`` is refused before ``json`` (or pydantic, the lane,
jsonschema) recurses on it, and both are answered with -32600 by the id read from the
line's ends (``wire.jsonrpc.peek_envelope``); the session goes on. A batch, or a request whose
id is not a string or an integer, is answered -32600 too (the SDK's models would take the
latter for a notification, leaving the client waiting), and so is a request before
``initialize`` (``HandshakeGate``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any, cast

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from mcp_patchbay.wire.early_handshake import EarlyHandshake, Handover
from mcp_patchbay.wire.jsonrpc import (
    NOT_JSON,
    Bounds,
    Envelope,
    LineSplitter,
    Overlong,
    answer_to_invalid,
    deeper_than,
    encode,
    envelope_of,
    error_line,
    is_request_id,
    loads,
    peek_envelope,
    refusal,
)

logger = logging.getLogger(__name__)

ReadStream = MemoryObjectReceiveStream[SessionMessage | Exception]
WriteStream = MemoryObjectSendStream[SessionMessage]
READ_CHUNK = 65536

Send = Callable[[dict[str, Any]], Awaitable[None]]


Intercept = Callable[[dict[str, Any]], bool]

_PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
"""In ``_meta`` only on 2026-07-28 requests: the SDK opens such a connection stateless."""
NOT_INITIALIZED = (
    "Invalid request: the session is not initialized. Send 'initialize', then "
    "'notifications/initialized', before any other request (only 'ping' may come first)."
)


class HandshakeGate:
    """Answers a request sent before ``initialize`` on a handshake-era connection.

    The SDK answers it -32602 "Invalid request parameters", which sends a developer looking
    at the params; here it is -32600 saying to initialize first. ``ping`` may come first (the
    lifecycle allows it), and what opens the SDK's own gate opens this one: ``initialize``,
    a bare ``notifications/initialized``, or a request carrying the 2026-07-28 envelope (a
    stateless connection, which has no handshake). Pure: values in, values out.
    """

    def __init__(self) -> None:
        self.open = False

    def check(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """The answer to ``message`` if it may not pass yet, else None."""
        if self.open:
            return None
        method, request_id = message.get("method"), message.get("id")
        if method in ("initialize", "notifications/initialized"):
            self.open = True
            return None
        if not isinstance(method, str) or method == "ping" or not is_request_id(request_id):
            return None
        params = message.get("params")
        meta = cast("dict[str, Any]", params).get("_meta") if isinstance(params, dict) else None
        if isinstance(meta, dict) and _PROTOCOL_VERSION_KEY in meta:
            self.open = True
            return None
        logger.info("client sent %r (id %r) before initialize: refused", method, request_id)
        error = {"code": types.INVALID_REQUEST, "message": NOT_INITIALIZED}
        return {"jsonrpc": "2.0", "id": request_id, "error": error}


class Wire:
    """Messages to and from the client as JSON values, past the SDK's session."""

    def __init__(self, send: Send, intercept: Intercept) -> None:
        self.send = send
        """Write one message (a JSON-RPC object) to the client."""
        self.intercept = intercept
        """Offered every message read, from the very first (the handshake matters to it);
        what it takes (returns True for) the SDK never sees."""


@asynccontextmanager
# Long on purpose: our stdin and stdout's whole life in one scope, so no path leaks them.
async def stdio_streams(  # noqa: PLR0915
    intercept: Intercept, bounds: Bounds | None = None, early: EarlyHandshake | None = None
) -> AsyncGenerator[tuple[ReadStream, WriteStream, Wire], None]:
    """Yield (read, write) message streams over this process's stdin and stdout, and the
    ``Wire`` beside them, whose ``intercept`` is offered every message first; ``bounds``
    (the settings' ``max_message_bytes`` and ``max_json_depth``) limit every line read.
    ``early``: the reader that may have answered ``initialize`` already; what it read is
    read first, and the SDK's answer to a request it answered is not sent again."""
    bounds = bounds or Bounds()
    handed = early.handover() if early is not None else Handover()
    pipes = await _open_pipes() if sys.platform != "win32" else None
    if pipes is None:
        if handed.buffered:
            logger.error("stdin is no pipe after all: %d bytes read early are lost", len(handed.buffered))
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read, write), message_wire(read, write, intercept) as (rest, wire):  # pyright: ignore[reportUnknownArgumentType]
            yield rest, write, wire  # pyright: ignore[reportReturnType]
        return
    reader, writer, restore = pipes
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def send(message: dict[str, Any]) -> None:
        writer.write(encode(message))
        await writer.drain()

    wire = Wire(send, intercept)
    gate = HandshakeGate()

    async def refuse(envelope: Envelope, why: str) -> None:
        text = f"Invalid request: the message was refused: {why}."
        logger.warning("client sent a message the proxy refuses (id %r): %s", envelope.request_id, why)
        if envelope.is_answer and envelope.request_id is not None:
            # The client's answer to a request of ours (sampling, elicitation, roots): that
            # request fails with the reason, instead of waiting for its timeout.
            error = types.ErrorData(code=types.INVALID_REQUEST, message=text)
            await read_writer.send(
                SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=envelope.request_id, error=error))
            )
        else:
            writer.write(error_line(envelope.request_id, types.INVALID_REQUEST, text))

    async def take_line(line: bytes | Overlong) -> None:
        if isinstance(line, Overlong):
            await refuse(peek_envelope(line.head, line.tail), bounds.too_long(line.size))
            return
        if not line.strip():
            return
        if deeper_than(line, bounds.max_depth):
            await refuse(envelope_of(line), bounds.too_deep())
            return
        try:
            value = loads(line)
        except (ValueError, RecursionError):  # RecursionError: the last line of defence
            value = NOT_JSON
        refused = None if value is NOT_JSON else refusal(value)
        if refused is not None:
            logger.warning("client sent a batch or a request with a malformed id: %.200r", line)
            writer.write(refused)
            return
        if isinstance(value, dict):
            early = gate.check(cast("dict[str, Any]", value))
            if early is not None:
                await send(early)
                return
            if wire.intercept(cast("dict[str, Any]", value)):
                return
        try:
            message = types.jsonrpc_message_adapter.validate_python(value, by_name=False)
        except (ValueError, RecursionError):
            logger.warning("client sent a line that is not a JSON-RPC message: %.200r", line)
            writer.write(answer_to_invalid(value))
            return
        await read_writer.send(SessionMessage(message))

    async def read_stdin() -> None:
        splitter = LineSplitter(bounds.max_bytes)
        async with read_writer:
            for line in splitter.feed(handed.buffered):
                await take_line(line)
            if handed.eof:
                return
            while True:
                chunk = await reader.read(READ_CHUNK)
                if not chunk:
                    return  # EOF: the client went away
                for line in splitter.feed(chunk):
                    await take_line(line)

    async def write_stdout() -> None:
        async with write_reader:
            async for session_message in write_reader:
                data = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                instead = handed.take_answer(json.loads(data)) if handed.answered else None
                if instead is not None:
                    for message in instead:
                        writer.write(encode(message))
                    await writer.drain()
                    continue
                writer.write(data.encode() + b"\n")
                await writer.drain()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(read_stdin)
            tg.start_soon(write_stdout)
            try:
                yield read_stream, write_stream, wire
            finally:
                tg.cancel_scope.cancel()
    finally:
        with suppress(Exception):
            writer.close()
        restore()


@asynccontextmanager
async def message_wire(read: Any, write: Any, intercept: Intercept) -> AsyncGenerator[tuple[ReadStream, Wire], None]:
    """A ``Wire`` over SessionMessage streams: yields the read stream of what ``intercept``
    did not take, and the wire. (Memory streams in tests; the SDK's threaded stdio
    transport where event-loop pipes cannot serve.)"""
    forward, rest = anyio.create_memory_object_stream[SessionMessage | Exception](0)

    async def send(message: dict[str, Any]) -> None:
        await write.send(SessionMessage(types.jsonrpc_message_adapter.validate_python(message, by_name=False)))

    wire = Wire(send, intercept)

    async def pump() -> None:
        async with forward:
            async for item in read:
                if isinstance(item, SessionMessage):
                    value = item.message.model_dump(by_alias=True, mode="json", exclude_unset=True)
                    if wire.intercept(value):
                        continue
                await forward.send(item)

    async with anyio.create_task_group() as tg, rest:
        tg.start_soon(pump)
        try:
            yield rest, wire
        finally:
            tg.cancel_scope.cancel()


async def _open_pipes() -> tuple[asyncio.StreamReader, asyncio.StreamWriter, Any] | None:
    """Claim fds 0 and 1 and open them as event-loop pipes; None where that is not possible."""
    import fcntl

    try:
        wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
        wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    except OSError:
        return None
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()  # read in chunks (READ_CHUNK): its limit only paces the pipe
    stdin_file = os.fdopen(wire_in, "rb", buffering=0)
    stdout_file = os.fdopen(wire_out, "wb", buffering=0)
    opened: list[asyncio.BaseTransport] = []
    try:
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, stdout_file)
        opened.append(transport)
        read_transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin_file)
        opened.append(read_transport)
    except (ValueError, OSError) as exc:  # a regular file, say: not a pipe, socket or terminal
        logger.debug("stdin/stdout are not pipes (%s); using the SDK's threaded stdio transport", exc)
        for opened_transport in opened:
            opened_transport.close()
        for file in (stdin_file, stdout_file):
            with suppress(Exception):
                file.close()
        # The pipe that did connect was made non-blocking, and fds 0 and 1 share that flag with
        # their duplicates: the SDK's threaded reads and writes need them blocking again.
        for fd in (0, 1):
            with suppress(OSError):
                os.set_blocking(fd, True)
        return None
    writer = asyncio.StreamWriter(transport, protocol, reader, loop)
    saved_in, saved_out = os.dup(0), os.dup(1)
    _divert()

    def restore() -> None:
        for saved, fd in ((saved_in, 0), (saved_out, 1)):
            with suppress(OSError):
                os.dup2(saved, fd)
                os.close(saved)

    return reader, writer, restore


def _divert() -> None:
    """fd 0 reads nothing and fd 1 goes to stderr: stray output can never corrupt the wire."""
    with suppress(OSError):
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
    with suppress(OSError):
        os.dup2(2, 1)
