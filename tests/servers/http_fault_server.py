"""A streamable-HTTP MCP server that answers with HTTP errors on demand, for tests/test_http.py.

A real SDK server (``Server.streamable_http_app()``) behind a small ASGI middleware that
reads each request's JSON-RPC body and, by rule, answers with a status instead:

- ``statuses``: a ``tools/call`` of this tool name gets this status (and headers);
- ``all_posts``: every POST gets this status (a server refusing our credentials outright);
- ``get_status``: every GET (the optional SSE stream) gets this status (405: "not offered");
- ``notify_status``: every POSTed notification gets this status (a strict or broken server);
- ``expire``: a ``tools/call`` of one of these tools forgets the caller's session once: it and
  every later request with that session id get 404, as after a server restart.

Everything seen is kept in ``seen`` (HTTP method, JSON-RPC method, tool, session id, status).

In tests it runs in-process (``serve`` on a socket the test bound, so the port is known and
connections wait in the backlog: no start-up race). As a script:
``python tests/servers/http_fault_server.py --port 0 --status limited=429 --expire expire``; it writes
``PATCHBAY_TEST_LISTENING <port>`` to stderr once listening, and ``http_fault_server: call TOOL``
on each tool call.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, cast

import anyio
import mcp_types as types
import uvicorn
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError

Scope = dict[str, Any]
Message = dict[str, Any]

TOOLS = ("echo", "boom", "hang", "limited", "broken", "unauthorized", "forbidden", "expire")


@dataclass(frozen=True)
class Seen:
    http_method: str
    rpc_method: str | None
    tool: str | None
    session: str | None
    status: int | None
    """The status this middleware answered with; None when the real server answered."""


@dataclass
class HttpFaults:
    statuses: dict[str, tuple[int, dict[str, str]]] = field(default_factory=lambda: {})
    all_posts: int | None = None
    get_status: int | None = None
    notify_status: int | None = None
    expire: set[str] = field(default_factory=lambda: set[str]())
    seen: list[Seen] = field(default_factory=lambda: list[Seen]())
    expired: set[str] = field(default_factory=lambda: set[str]())
    session_error_body: bool = False
    """Answer a forgotten session's 404 with a JSON-RPC error body ("Session not found"), as SDK servers do."""
    calls: dict[str, int] = field(default_factory=lambda: dict[str, int]())
    announce: bool = False
    """Write "http_fault_server: call TOOL" to stderr on each tool call (script mode)."""

    sse: bool = False
    """Serve the old HTTP+SSE transport (GET /sse, POST /messages/) instead of streamable HTTP."""

    def __post_init__(self) -> None:
        self.server = _mcp_server(self)
        self.inner = _sse_app(self.server) if self.sse else self.server.streamable_http_app(host="127.0.0.1")
        self._changed = anyio.Event()

    def initializes(self) -> int:
        return sum(1 for s in self.seen if s.rpc_method == "initialize" and s.status is None)

    async def wait_seen(self, http_method: str, status: int | None, timeout: float = 10.0) -> Seen:
        """Until a request with this method was answered with this status (an event, not a poll)."""
        with anyio.fail_after(timeout):
            while True:
                for seen in self.seen:
                    if seen.http_method == http_method and seen.status == status:
                        return seen
                await self._changed.wait()

    def _record(self, seen: Seen) -> None:
        self.seen.append(seen)
        self._changed.set()
        self._changed = anyio.Event()

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.inner(scope, receive, send)
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        session = headers.get("mcp-session-id")
        body = b""
        if scope["method"] == "POST":
            more = True
            while more:
                message = await receive()
                body += message.get("body", b"")
                more = message.get("more_body", False)
        rpc_method, tool = _describe(body)
        status, extra = self._decide(scope["method"], rpc_method, tool, session)
        self._record(Seen(scope["method"], rpc_method, tool, session, status))
        if status is not None:
            await _respond(send, status, extra)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.inner(scope, replay if scope["method"] == "POST" else receive, send)

    def _decide(
        self, http_method: str, rpc_method: str | None, tool: str | None, session: str | None
    ) -> tuple[int | None, dict[str, str]]:
        if session is not None and session in self.expired:
            return 404, {"x-json-rpc-error": "Session not found"} if self.session_error_body else {}
        if http_method == "GET" and self.get_status is not None:
            return self.get_status, {}
        notification = rpc_method is not None and rpc_method.startswith("notifications/")
        if http_method == "POST" and notification and self.notify_status is not None:
            return self.notify_status, {}
        if http_method == "POST" and self.all_posts is not None:
            return self.all_posts, {"www-authenticate": 'Bearer error="invalid_token"'}
        if rpc_method == "tools/call" and tool is not None:
            if tool in self.expire and session is not None and not self.expired:
                self.expired.add(session)
                return 404, {"x-json-rpc-error": "Session not found"} if self.session_error_body else {}
            if tool in self.statuses:
                return self.statuses[tool]
        return None, {}


def _describe(body: bytes) -> tuple[str | None, str | None]:
    """(JSON-RPC method, tool name) of a POST body."""
    try:
        data: Any = json.loads(body) if body else None
    except ValueError:
        return None, None
    if not isinstance(data, dict):
        return None, None
    message = cast("dict[str, Any]", data)
    method = message.get("method")
    params = message.get("params")
    tool = cast("dict[str, Any]", params).get("name") if method == "tools/call" and isinstance(params, dict) else None
    return (method if isinstance(method, str) else None), (tool if isinstance(tool, str) else None)


async def _respond(send: Any, status: int, headers: dict[str, str]) -> None:
    body = json.dumps({"error": f"injected HTTP {status}"}).encode()
    kind = b"text/plain"
    if (rpc_error := headers.pop("x-json-rpc-error", None)) is not None:
        body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": rpc_error}}).encode()
        kind = b"application/json"
    raw = [(b"content-type", kind), *((k.encode(), v.encode()) for k, v in headers.items())]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


def _mcp_server(faults: HttpFaults) -> Server[Any]:
    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(name=name, description=f"{name} (http fault server)", input_schema={"type": "object"})
                for name in TOOLS
            ]
        )

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        faults.calls[params.name] = faults.calls.get(params.name, 0) + 1
        if faults.announce:
            print(f"http_fault_server: call {params.name}", file=sys.stderr, flush=True)
        if params.name == "boom":
            raise MCPError(types.INTERNAL_ERROR, "database on fire")
        if params.name == "hang":
            await anyio.sleep_forever()
        text = json.dumps({"tool": params.name, "arguments": params.arguments or {}})
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    return Server("http-fault", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)


def _sse_app(server: Server[Any]) -> Any:
    from mcp.server.sse import SseServerTransport
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Mount, Route

    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*"],
        allowed_origins=["http://127.0.0.1:*"],
    )
    sse = SseServerTransport("/messages/", security_settings=security)

    async def handle_sse(scope: Scope, receive: Any, send: Any) -> Response:
        async with sse.connect_sse(scope, receive, send) as streams:
            await server.run(streams[0], streams[1], server.create_initialization_options())
        return Response()

    class SseEndpoint:
        async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
            await handle_sse(scope, receive, send)

    return Starlette(routes=[Route("/sse", endpoint=SseEndpoint()), Mount("/messages/", app=sse.handle_post_message)])


def bound_socket(port: int = 0) -> socket.socket:
    """A listening loopback socket on ``port`` (0: one the system picks)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(64)
    return sock


@asynccontextmanager
async def serving(app: Any, *, within: float = 10.0) -> AsyncGenerator[str]:
    """Serve ``app`` on loopback in this event loop; yields the base URL. Stops within ``within``."""
    sock = bound_socket()
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            try:
                yield f"http://127.0.0.1:{port}"
            finally:
                server.should_exit = True  # seen by uvicorn's main loop within 0.1 s
                tg.cancel_scope.deadline = anyio.current_time() + within
    finally:
        sock.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="http_fault_server")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--status", action="append", default=[], metavar="TOOL=STATUS")
    parser.add_argument("--all-posts", type=int)
    parser.add_argument("--get-status", type=int)
    parser.add_argument("--expire", action="append", default=[], metavar="TOOL")
    args = parser.parse_args(argv)
    statuses: dict[str, tuple[int, dict[str, str]]] = {}
    for rule in args.status:
        tool, status = rule.split("=", 1)
        statuses[tool] = (int(status), {})
    faults = HttpFaults(
        statuses=statuses,
        all_posts=args.all_posts,
        get_status=args.get_status,
        expire=set(args.expire),
        announce=True,
    )
    sock = bound_socket(args.port)
    print(f"PATCHBAY_TEST_LISTENING {sock.getsockname()[1]}", file=sys.stderr, flush=True)
    uvicorn.Server(uvicorn.Config(faults, log_level="warning")).run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main())
