"""The load generator of ``gateway.py``: MCP tools/call over HTTP, in its own process.

    .venv/bin/python -m benchmarks.gateway_load --url URL --era 2025|2026 --clients N \
        --tool NAME [--seconds 3] [--warmup 0.5] [--client raw|sdk]

Each client is one keep-alive HTTP/1.1 connection that calls ``--tool`` with ``{"text": "hi"}``
over and over, one call at a time. ``--era 2025``: each client first opens a 2025-11-25 session
(``initialize``, ``notifications/initialized``; no GET stream) and sends ``Mcp-Session-Id`` with
every call, then ends it with DELETE. ``--era 2026``: stateless 2026-07-28 requests (the
``_meta`` envelope and the ``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name`` headers).

``--era sse``: the older HTTP+SSE transport (2024-11-05), as peers such as mcp-hub serve it:
a GET stream per client that names the endpoint to POST to; the answers come on the stream.

``--client raw`` (the default) writes pre-built request bytes on asyncio protocols and reads
just enough of the answer to know it is complete (Content-Length or chunks) and not an error:
no HTTP library, no JSON parsing of answers, so that the client costs a small part of what the
server under test does. ``--client sdk`` uses the SDK's ``Client`` (``mode="legacy"`` or the
default) with ``session.send_request(CallToolRequest)``, to show what a real client costs.

Protocol with the parent: after connecting and warming up it prints ``ready``; it starts the
measured window when it reads a line on stdin, and at the end prints one JSON object (calls,
errors, seconds, latencies' median and p99, its own CPU seconds in the window). The parent
reads the servers' CPU time between those two moments.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import sys
import time
from typing import Any

HANDSHAKE = "2025-11-25"
MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "bench-gateway", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


class HTTPError(Exception):
    pass


def header_value(head: bytes, name: bytes) -> bytes | None:
    """The value of header ``name`` in a lower-cased header block, or None."""
    marker = head.find(b"\r\n" + name + b":")
    if marker < 0:
        return None
    start = marker + len(name) + 3
    end = head.find(b"\r\n", start)
    return head[start : end if end >= 0 else len(head)].strip()


class Connection(asyncio.Protocol):
    """One HTTP/1.1 keep-alive connection, one request at a time; answers as raw bytes."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.waiter: asyncio.Future[tuple[int, bytes, bytes]] | None = None
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(HTTPError(f"connection lost: {exc}"))
        if not self.closed.done():
            self.closed.set_result(None)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if self.waiter is not None and not self.waiter.done():
            parsed = self._parse()
            if parsed is not None:
                self.waiter.set_result(parsed)

    def _parse(self) -> tuple[int, bytes, bytes] | None:
        """(status, header block, body) once a whole answer is in the buffer, else None."""
        buffer = self.buffer
        end = buffer.find(b"\r\n\r\n")
        if end < 0:
            return None
        head = bytes(buffer[:end]).lower()
        status = int(head[9:12])
        start = end + 4
        length_value = header_value(head, b"content-length")
        if length_value is not None:
            length = int(length_value)
            if len(buffer) < start + length:
                return None
            body = bytes(buffer[start : start + length])
            del buffer[: start + length]
            return status, head, body
        if b"transfer-encoding: chunked" in head:
            body = bytearray()
            position = start
            while True:
                line_end = buffer.find(b"\r\n", position)
                if line_end < 0:
                    return None
                size = int(buffer[position:line_end].split(b";")[0], 16)
                if len(buffer) < line_end + 2 + size + 2:
                    return None
                if size == 0:
                    del buffer[: line_end + 4]
                    return status, head, bytes(body)
                body += buffer[line_end + 2 : line_end + 2 + size]
                position = line_end + 2 + size + 2
        # No length, not chunked (a 202 with none would still carry content-length: 0 from uvicorn).
        del buffer[:start]
        return status, head, b""

    async def send(self, request: bytes) -> tuple[int, bytes, bytes]:
        assert self.transport is not None
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return await self.waiter

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


def http_request(method: str, path: str, host: str, headers: dict[str, str], body: bytes = b"") -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"host: {host}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    lines.append(f"content-length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


class RawClient:
    """One connection, one session (2025 era) or none (2026), calls from pre-built bytes."""

    def __init__(self, url: str, era: str, tool: str) -> None:
        rest = url.split("://", 1)[1]
        self.host, _, path = rest.partition("/")
        self.path = "/" + path
        self.era = era
        self.tool = tool
        self.session_id: str | None = None
        self.connection: Connection | None = None
        self.next_id = 1

    def headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        if self.session_id is not None:
            headers["mcp-session-id"] = self.session_id
            headers["mcp-protocol-version"] = HANDSHAKE
        headers.update(extra or {})
        return headers

    async def connect(self) -> None:
        hostname, _, port = self.host.rpartition(":")
        loop = asyncio.get_running_loop()
        _, self.connection = await loop.create_connection(Connection, hostname, int(port))
        if self.era == "2025":
            await self.open_session()
        self._prepare_call()

    async def open_session(self) -> None:
        assert self.connection is not None
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": HANDSHAKE,
                    "capabilities": {},
                    "clientInfo": {"name": "bench-gateway", "version": "1"},
                },
            }
        ).encode()
        status, head, answer = await self.connection.send(
            http_request("POST", self.path, self.host, self.headers(), body)
        )
        if status != 200 or b'"result"' not in answer:
            raise HTTPError(f"initialize: HTTP {status}: {answer[:300]!r}")
        session_id = header_value(head, b"mcp-session-id")
        if session_id is None:
            raise HTTPError("initialize: no mcp-session-id header")
        self.session_id = session_id.decode()
        initialized = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
        status, _, answer = await self.connection.send(
            http_request("POST", self.path, self.host, self.headers(), initialized)
        )
        if status != 202:
            raise HTTPError(f"notifications/initialized: HTTP {status}: {answer[:300]!r}")

    def _prepare_call(self) -> None:
        """The call's bytes, split around the JSON-RPC id (the only part that changes)."""
        params: dict[str, Any] = {"name": self.tool, "arguments": {"text": "hi"}}
        extra: dict[str, str] = {}
        if self.era == "2026":
            params["_meta"] = META
            extra = {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": self.tool}
        body = json.dumps({"jsonrpc": "2.0", "id": 123456789, "method": "tools/call", "params": params})
        before, after = body.split("123456789")
        self._body_parts = (before.encode(), after.encode())
        headers = self.headers(extra)
        self._head = (
            "\r\n".join(
                [f"POST {self.path} HTTP/1.1", f"host: {self.host}"] + [f"{k}: {v}" for k, v in headers.items()]
            )
            + "\r\ncontent-length: "
        ).encode()

    async def call(self) -> None:
        assert self.connection is not None
        self.next_id += 1
        before, after = self._body_parts
        body = before + str(self.next_id).encode() + after
        request = self._head + str(len(body)).encode() + b"\r\n\r\n" + body
        status, _, answer = await self.connection.send(request)
        if status != 200 or b'"result"' not in answer or b'"isError":true' in answer:
            raise HTTPError(f"tools/call: HTTP {status}: {answer[:300]!r}")

    async def close(self) -> None:
        if self.connection is None:
            return
        if self.session_id is not None:
            with contextlib.suppress(HTTPError, TimeoutError):
                await asyncio.wait_for(
                    self.connection.send(http_request("DELETE", self.path, self.host, self.headers())), 10
                )
        self.connection.close()


class _Stream(asyncio.Protocol):
    """An HTTP+SSE GET stream: its ``data:`` lines, de-chunked, handed out as they complete."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.raw = bytearray()
        self.body = bytearray()
        self.head_done = False
        self.lines: asyncio.Queue[bytes] = asyncio.Queue()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.raw += data
        if not self.head_done:
            end = self.raw.find(b"\r\n\r\n")
            if end < 0:
                return
            del self.raw[: end + 4]
            self.head_done = True
        while True:  # chunked transfer encoding
            line_end = self.raw.find(b"\r\n")
            if line_end < 0:
                break
            size = int(self.raw[:line_end].split(b";")[0] or b"0", 16)
            if len(self.raw) < line_end + 2 + size + 2:
                break
            self.body += self.raw[line_end + 2 : line_end + 2 + size]
            del self.raw[: line_end + 2 + size + 2]
        while True:
            end = self.body.find(b"\n")
            if end < 0:
                break
            line = bytes(self.body[:end]).rstrip(b"\r")
            del self.body[: end + 1]
            if line.startswith(b"data:"):
                self.lines.put_nowait(line[5:].strip())


class SseClient:
    """One client of the HTTP+SSE transport: a GET stream for answers, a keep-alive connection for POSTs."""

    def __init__(self, url: str, era: str, tool: str) -> None:
        rest = url.split("://", 1)[1]
        self.host, _, path = rest.partition("/")
        self.path = "/" + path
        self.tool = tool
        self.next_id = 1
        self.endpoint = ""
        self.stream: _Stream | None = None
        self.connection: Connection | None = None

    async def connect(self) -> None:
        hostname, _, port = self.host.rpartition(":")
        loop = asyncio.get_running_loop()
        _, self.stream = await loop.create_connection(_Stream, hostname, int(port))
        assert self.stream.transport is not None
        self.stream.transport.write(http_request("GET", self.path, self.host, {"accept": "text/event-stream"}))
        self.endpoint = (await asyncio.wait_for(self.stream.lines.get(), 30)).decode()
        _, self.connection = await loop.create_connection(Connection, hostname, int(port))
        init = {"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
        await self._ask({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
        await self._post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def _post(self, message: dict[str, Any]) -> None:
        assert self.connection is not None
        headers = {"content-type": "application/json"}
        status, _, answer = await self.connection.send(
            http_request("POST", self.endpoint, self.host, headers, json.dumps(message).encode())
        )
        if status >= 300:
            raise HTTPError(f"POST: HTTP {status}: {answer[:300]!r}")

    async def _ask(self, message: dict[str, Any]) -> bytes:
        assert self.stream is not None
        await self._post(message)
        marker = f'"id":{message["id"]}'.encode()
        while True:
            line = await self.stream.lines.get()
            if marker in line.replace(b" ", b""):
                return line

    async def call(self) -> None:
        self.next_id += 1
        params = {"name": self.tool, "arguments": {"text": "hi"}}
        answer = await self._ask({"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call", "params": params})
        if b'"result"' not in answer or b'"isError":true' in answer:
            raise HTTPError(f"tools/call: {answer[:300]!r}")

    async def close(self) -> None:
        for part in (self.connection, self.stream):
            if part is not None and part.transport is not None:
                part.transport.close()


class SDKClient:
    """The SDK's ``Client`` over its streamable HTTP transport (httpx2), one per caller."""

    def __init__(self, url: str, era: str, tool: str) -> None:
        from contextlib import AsyncExitStack

        import mcp_types as types
        from mcp import Client

        self.stack = AsyncExitStack()
        self.client = Client(url, mode="legacy" if era == "2025" else "auto", cache=None)
        self.request = types.CallToolRequest(params=types.CallToolRequestParams(name=tool, arguments={"text": "hi"}))
        self.result_type = types.CallToolResult

    async def connect(self) -> None:
        await self.stack.enter_async_context(self.client)

    async def call(self) -> None:
        result = await self.client.session.send_request(self.request, self.result_type)
        if result.is_error:
            raise HTTPError(f"tools/call: isError: {result.content}")

    async def close(self) -> None:
        await self.stack.aclose()


def percentile(values: list[float], q: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1]


async def read_line() -> str:
    return await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    kind = SseClient if args.era == "sse" else RawClient if args.client == "raw" else SDKClient
    clients = [kind(args.url, args.era, args.tool) for _ in range(args.clients)]
    # Connect in waves, so that a hundred sessions opening at once do not look like an attack.
    for start in range(0, len(clients), 20):
        await asyncio.gather(*(c.connect() for c in clients[start : start + 20]))
    errors: list[str] = []
    latencies: list[float] = []
    stop_at = 0.0
    recording = False

    async def caller(c: RawClient | SseClient | SDKClient) -> None:
        clock = time.perf_counter
        while True:
            started = clock()
            if started >= stop_at:
                return
            try:
                await c.call()
            except Exception as exc:  # counted and shown; a benchmark with errors is not reported as one
                errors.append(f"{type(exc).__name__}: {exc}"[:300])
                if len(errors) > 50:
                    return
                continue
            if recording:
                latencies.append(clock() - started)

    stop_at = time.perf_counter() + args.warmup
    await asyncio.gather(*(caller(c) for c in clients))
    warmup_errors = list(errors)
    errors.clear()
    print("ready", flush=True)
    await read_line()
    recording = True
    cpu_before = time.process_time()
    started = time.perf_counter()
    stop_at = started + args.seconds
    await asyncio.gather(*(caller(c) for c in clients))
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_before
    await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)
    calls = len(latencies)
    return {
        "calls": calls,
        "errors": len(errors) + len(warmup_errors),
        "error_samples": (warmup_errors + errors)[:3],
        "seconds": elapsed,
        "throughput": calls / elapsed if elapsed else math.nan,
        "median_ms": percentile(latencies, 50) * 1000,
        "p99_ms": percentile(latencies, 99) * 1000,
        "client_cpu_s": cpu,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True)
    parser.add_argument("--era", choices=["2025", "2026", "sse"], required=True)
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--tool", default="echo")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--warmup", type=float, default=0.5)
    parser.add_argument("--client", choices=["raw", "sdk"], default="raw")
    args = parser.parse_args()
    result = asyncio.run(run(args))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
