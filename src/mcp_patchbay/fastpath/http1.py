"""A small HTTP/1.1 client for the upstream HTTP lane: keep-alive connections on asyncio streams.

The lane (``fastpath.http_calls``) POSTs one JSON body and reads one answer, JSON or SSE, as
it comes. httpx2 did the same for 0.9 to 1.1 ms of CPU a call on this machine, most of it its
own machinery (auth and hook flows, header models, the byte-stream wrappers); this is a
request head written as bytes and httptools' response parser (the one uvicorn uses), for
about a quarter of that (``docs/PERFORMANCE.md``, "The fast path").

- ``Pool``: the idle connections to one origin (``http``, or ``https`` with httpx2's own SSL
  context: the same certificates are trusted), at most ``MAX_IDLE`` kept.
- ``Connection``: one TCP (or TLS) connection, one request at a time; ``request`` writes the
  head and body and reads up to the end of the answer's head; ``body`` yields the body's parts
  as they arrive (chunked or sized: httptools decodes both); ``reusable`` says whether it may
  go back to the pool.
- ``events``: the ``text/event-stream`` events in a body's parts (``id``, ``retry`` and the
  joined ``data`` lines), each bounded in size.

No redirects, no proxies, no cookies, no auth flows: the lane falls back to the SDK's client
for whatever needs those. No I/O outside ``Connection``.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import httptools  # pyright: ignore[reportMissingTypeStubs]

MAX_IDLE = 64
"""Idle keep-alive connections kept per upstream (the bulkhead bounds those in use)."""
IDLE_SECONDS = 1.5
"""A kept connection idle longer than this is closed rather than reused: a server closes idle
ones on its own timer (gunicorn 2 s, uvicorn and Node 5 s), and a request written as it does
is lost with no way to know whether it ran (so it is not sent again: ``NotSent``)."""
READ_SIZE = 65_536
MAX_HEAD_BYTES = 65_536
"""An answer's status line and headers past this many bytes: ``ProtocolError`` (the server is
not answering HTTP we can use; without a bound one header could grow for ever)."""
MAX_HEADERS = 100
"""Header fields an answer may carry (as many servers bound a request's)."""


class ProtocolError(ConnectionError):
    """The server's answer was not HTTP/1.1 the parser could read, or it closed mid-answer."""


class NotSent(ProtocolError):
    """The request never left: the connection was closed before it was written, or writing it
    failed. Sending it again on another connection cannot run it twice."""


class EventTooLarge(Exception):
    """One SSE event (or a JSON body) grew past the bound; the connection cannot be reused."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


class _Parse:
    """httptools' callbacks: the answer's head, then its body's parts."""

    __slots__ = ("body", "complete", "count", "head_done", "headers", "keep_alive", "parser")

    def __init__(self) -> None:
        self.headers: dict[bytes, bytes] = {}
        self.count = 0
        self.body: list[bytes] = []
        self.head_done = False
        self.complete = False
        self.keep_alive = False
        self.parser: Any = None

    def on_header(self, name: bytes, value: bytes) -> None:
        self.count += 1
        self.headers[name.lower()] = value

    def on_headers_complete(self) -> None:
        self.head_done = True
        self.keep_alive = bool(self.parser.should_keep_alive())  # known here, not once the message is done

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.complete = True


class Connection:
    """One keep-alive connection, one request at a time."""

    __slots__ = ("_parse", "_parser", "_reader", "_writer", "idle_since", "used")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._parse = _Parse()
        self._parser: Any = None
        self.used = False
        """Whether a request was sent on it before (a reused connection the server may have closed)."""
        self.idle_since = 0.0
        """The loop's time when it last went back to the pool."""

    async def request(self, head: bytes, body: bytes) -> tuple[int, dict[bytes, bytes]]:
        """Send one request; the answer's status and headers (names in lower case).

        Raises ``NotSent`` when the connection was closed before the request was written or
        writing it failed; ``ProtocolError`` (a ``ConnectionError``) when the server closed the
        connection once it was written (it may have run it), or answered with something other
        than HTTP/1.1."""
        self.used = True
        parse = self._parse = _Parse()
        parser = self._parser = parse.parser = httptools.HttpResponseParser(parse)
        writer = self._writer
        if self._reader.at_eof() or writer.is_closing():
            raise NotSent("the server had closed the connection")
        try:
            writer.write(head + body)
            await writer.drain()
        except ConnectionError as exc:
            raise NotSent(f"writing the request failed: {exc}") from exc
        fed = 0
        while not parse.head_done:
            data = await self._reader.read(READ_SIZE)
            if not data:
                raise ProtocolError("the server closed the connection before answering")
            try:
                parser.feed_data(data)
            except httptools.HttpParserError as exc:  # pyright: ignore[reportUnknownMemberType]
                raise ProtocolError(f"unreadable HTTP answer: {exc}") from exc
            fed += len(data)
            if parse.count > MAX_HEADERS:
                raise ProtocolError(f"the answer carries over {MAX_HEADERS} header fields")
            if not parse.head_done and fed > MAX_HEAD_BYTES:
                raise ProtocolError(f"the answer's head is over {MAX_HEAD_BYTES} bytes")
        return int(parser.get_status_code()), parse.headers

    async def body(self) -> AsyncGenerator[bytes]:
        """The answer's body, part by part, to its end."""
        parse, parser = self._parse, self._parser
        while True:
            if parse.body:
                parts, parse.body = parse.body, []
                for part in parts:
                    yield part
            if parse.complete:
                return
            data = await self._reader.read(READ_SIZE)
            if not data:
                raise ProtocolError("the server closed the connection mid-answer")
            try:
                parser.feed_data(data)
            except httptools.HttpParserError as exc:  # pyright: ignore[reportUnknownMemberType]
                raise ProtocolError(f"unreadable HTTP answer: {exc}") from exc

    async def read_body(self, limit: int) -> bytes:
        """The whole body; ``EventTooLarge`` past ``limit`` bytes."""
        parts: list[bytes] = []
        size = 0
        async for part in self.body():
            size += len(part)
            if size > limit:
                raise EventTooLarge(size)
            parts.append(part)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    @property
    def reusable(self) -> bool:
        """The answer was read to its end and the server keeps the connection open."""
        return (
            self._parse.complete
            and self._parse.keep_alive
            and not self._reader.at_eof()
            and not self._writer.is_closing()
        )

    def close(self) -> None:
        """Drop the connection now (its transport's buffers and all)."""
        transport = self._writer.transport
        if not transport.is_closing():
            transport.abort()


class Pool:
    """Keep-alive connections to one origin."""

    def __init__(self, scheme: str, host: str, port: int, connect_timeout: float) -> None:
        self.host = host
        self.port = port
        self._ssl: ssl.SSLContext | None = None
        if scheme == "https":
            import httpx2

            self._ssl = httpx2.create_ssl_context()  # what the SDK's client trusts
        self._connect_timeout = connect_timeout
        self._idle: list[Connection] = []
        self._closed = False

    async def acquire(self) -> Connection:
        """An idle connection still open, else a new one."""
        idle = self._idle
        if idle:
            oldest = asyncio.get_running_loop().time() - IDLE_SECONDS
            while idle:
                connection = idle.pop()
                if connection.reusable and connection.idle_since >= oldest:
                    return connection
                connection.close()
        async with asyncio.timeout(self._connect_timeout):
            reader, writer = await asyncio.open_connection(
                self.host, self.port, ssl=self._ssl, server_hostname=self.host if self._ssl else None, limit=READ_SIZE
            )
        return Connection(reader, writer)

    def release(self, connection: Connection) -> None:
        """Back to the pool when its answer was read whole and it is kept alive; else closed."""
        if connection.reusable and len(self._idle) < MAX_IDLE and not self._closed:
            connection.idle_since = asyncio.get_running_loop().time()
            self._idle.append(connection)
        else:
            connection.close()

    def close(self) -> None:
        """Close the idle connections now, and those in use as they are released."""
        self._closed = True
        for connection in self._idle:
            connection.close()
        self._idle.clear()


class Event:
    """One server-sent event."""

    __slots__ = ("data", "id", "retry")

    def __init__(self, data: str, event_id: str | None, retry: int | None) -> None:
        self.data = data
        self.id = event_id
        self.retry = retry


async def events(parts: AsyncIterator[bytes], limit: int) -> AsyncGenerator[Event]:
    """The events of an SSE body (only ``message`` events carry MCP; others are skipped);
    ``EventTooLarge`` when one grows past ``limit`` bytes."""
    pending = bytearray()  # the events not yet complete
    held = b""  # a part's last "\r", whose "\n" may be in the next part
    async for read in parts:
        part = held + read if held else read
        held = b""
        if b"\r" in part:
            if part.endswith(b"\r"):
                part, held = part[:-1], b"\r"
            part = part.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        scan = max(len(pending) - 1, 0)  # an end not found before may straddle the new part
        pending += part
        begin = 0
        while (end := pending.find(b"\n\n", scan)) >= 0:
            event = _event(bytes(pending[begin:end]))
            begin = scan = end + 2
            if event is not None:
                yield event
        if begin:
            del pending[:begin]
        if len(pending) > limit:
            raise EventTooLarge(len(pending))


def _event(block: bytes) -> Event | None:
    data: list[str] = []
    event_id: str | None = None
    retry: int | None = None
    kind = "message"
    for raw in block.decode("utf-8", "replace").split("\n"):
        if not raw or raw.startswith(":"):
            continue
        name, _, value = raw.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            data.append(value)
        elif name == "id":
            event_id = value
        elif name == "retry" and value.isascii() and value.isdigit() and len(value) <= 9:  # not "²"
            retry = int(value)
        elif name == "event":
            kind = value
    if kind != "message" or (not data and event_id is None and retry is None):
        return None
    return Event("\n".join(data), event_id, retry)


__all__ = [
    "IDLE_SECONDS",
    "MAX_IDLE",
    "Connection",
    "Event",
    "EventTooLarge",
    "NotSent",
    "Pool",
    "ProtocolError",
    "events",
]
