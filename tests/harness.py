"""In-memory test rig: real SDK upstream ``Server``s, the real proxy, a real ``Client``.

No subprocess, no network: the proxy's ``Connector`` seam opens memory streams to
upstream servers running in this process (the shape of httpx's MockTransport).
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import mcp_types as types
from mcp import Client
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.memory import create_client_server_memory_streams

from mcp_patchbay.config import Config, RemoteSpec, StdioSpec, parse_config
from mcp_patchbay.session.http_sessions import SessionManager
from mcp_patchbay.session.proxy import Proxy
from mcp_patchbay.upstreams.transports import Link

ToolFn = Callable[[ServerRequestContext[Any, Any], dict[str, Any]], Awaitable[types.CallToolResult]]


def text(value: str, *, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=value)], is_error=is_error)


def result_text(result: types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))


def error_info(result: types.CallToolResult) -> dict[str, Any]:
    assert result.is_error, result
    assert result.structured_content is not None, result
    return result.structured_content["error"]


async def until(condition: Callable[[], object], *, within: float = 5.0) -> None:
    """Return once ``condition()`` holds, checked at each pass of the event loop (not on a timer:
    for what other tasks are about to do; a wait on a clock waits on an event); TimeoutError
    after ``within`` seconds. A condition that returns an awaitable (a question asked over HTTP)
    is awaited: the asking itself is the pass."""
    with anyio.fail_after(within):
        while True:
            held = condition()
            if inspect.isawaitable(held):
                held = await held
            if held:
                return
            await anyio.lowlevel.checkpoint()


@dataclass
class FakeTool:
    fn: ToolFn
    schema: dict[str, Any] = field(default_factory=lambda: {"type": "object"})
    annotations: types.ToolAnnotations | None = None
    description: str | None = None


def make_server(
    name: str,
    tools: dict[str, FakeTool],
    *,
    resources: list[types.Resource] | None = None,
    prompts: list[types.Prompt] | None = None,
) -> Server[Any]:
    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=n,
                    description=t.description or f"{n} on {name}",
                    input_schema=t.schema,
                    annotations=t.annotations,
                )
                for n, t in tools.items()
            ]
        )

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> Any:
        tool = tools.get(params.name)
        if tool is None:
            return text(f"Unknown tool: {params.name}", is_error=True)
        return await tool.fn(ctx, params.arguments or {})

    kwargs: dict[str, Any] = {}
    if resources is not None:

        async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
            return types.ListResourcesResult(resources=resources)

        async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
            return types.ReadResourceResult(
                contents=[types.TextResourceContents(uri=params.uri, text=f"{name} says {params.uri}")]
            )

        kwargs.update(on_list_resources=list_resources, on_read_resource=read_resource)
    if prompts is not None:

        async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
            return types.ListPromptsResult(prompts=prompts)

        async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
            return types.GetPromptResult(
                messages=[
                    types.PromptMessage(
                        role="user",
                        content=types.TextContent(type="text", text=f"{name}:{params.name}:{params.arguments}"),
                    )
                ]
            )

        kwargs.update(on_list_prompts=list_prompts, on_get_prompt=get_prompt)
    return Server(name, on_list_tools=list_tools, on_call_tool=call_tool, **kwargs)


def config_from(servers: dict[str, Any], patchbay: dict[str, Any] | None = None, **top: Any) -> Config:
    document: dict[str, Any] = {"mcpServers": servers, **top}
    if patchbay:
        document["patchbay"] = patchbay
    return parse_config(json.dumps(document), Path("/virtual/patchbay.json").resolve(), environ={})


class MemoryUpstreams:
    """A ``Connector`` serving config entries from in-process servers, by server name.

    ``crash(name)`` ends a server's connection as a dying process would; the next
    connect gets the server again (a restart).
    """

    def __init__(self, servers: dict[str, Server[Any]]) -> None:
        self.servers = servers
        self.connects: dict[str, int] = {}
        self._scopes: dict[str, anyio.CancelScope] = {}
        self.refuse: set[str] = set()

    def crash(self, name: str) -> None:
        self._scopes[name].cancel()

    @asynccontextmanager
    async def __call__(self, name: str, spec: StdioSpec | RemoteSpec) -> AsyncIterator[Link]:
        self.connects[name] = self.connects.get(name, 0) + 1
        if name in self.refuse or name not in self.servers:
            raise ConnectionRefusedError(f"no server {name}")
        server = self.servers[name]
        closed = anyio.Event()
        async with create_client_server_memory_streams() as (client_streams, server_streams):
            async with anyio.create_task_group() as tg:
                scope = anyio.CancelScope()
                self._scopes[name] = scope

                async def serve() -> None:
                    with scope:
                        await server.run(server_streams[0], server_streams[1], server.create_initialization_options())
                    closed.set()
                    await client_streams[1].aclose()

                tg.start_soon(serve)
                try:
                    yield Link(client_streams[0], client_streams[1], closed=closed)
                finally:
                    tg.cancel_scope.cancel()


class GatedUpstreams(MemoryUpstreams):
    """Upstreams whose connection waits for ``gates[name]``: a server still starting."""

    def __init__(self, servers: dict[str, Server[Any]], gates: dict[str, anyio.Event]) -> None:
        super().__init__(servers)
        self.gates = gates

    def __call__(self, name: str, spec: StdioSpec | RemoteSpec) -> Any:
        inner = super().__call__(name, spec)
        gate = self.gates.get(name)
        if gate is None:
            return inner

        @asynccontextmanager
        async def delayed() -> AsyncIterator[Link]:
            await gate.wait()
            async with inner as link:
                yield link

        return delayed()


@asynccontextmanager
async def running_proxy(config: Config, upstreams: MemoryUpstreams, **proxy_options: Any) -> AsyncIterator[Proxy]:
    proxy = Proxy(config, connector=upstreams, **proxy_options)
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            await tg.start(proxy.run)
            try:
                yield proxy
            finally:
                tg.cancel_scope.cancel()


@asynccontextmanager
async def proxy_transport(proxy: Proxy) -> AsyncIterator[Any]:
    """A client ``Transport`` to a running proxy over memory streams, through the same
    ``Proxy.serve_client`` (tool-call lane included) that stdio clients get."""
    async with create_client_server_memory_streams() as (client_streams, server_streams):
        async with anyio.create_task_group() as tg:
            tg.start_soon(proxy.serve_client, *server_streams)
            try:
                yield client_streams
            finally:
                tg.cancel_scope.cancel()


@asynccontextmanager
async def connected(
    config: Config, upstreams: MemoryUpstreams, *, mode: str = "legacy", **client_kwargs: Any
) -> AsyncIterator[tuple[Proxy, Client]]:
    async with running_proxy(config, upstreams) as proxy:
        async with Client(proxy_transport(proxy), mode=mode, cache=None, **client_kwargs) as client:  # pyright: ignore[reportArgumentType]
            yield proxy, client


class _Said(logging.Handler):
    """Sets ``event`` once a record whose message holds ``text`` is logged."""

    def __init__(self, text: str) -> None:
        super().__init__(logging.DEBUG)
        self.text = text
        self.event = anyio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.event.set()


@contextmanager
def logged(logger: str, text: str) -> Iterator[anyio.Event]:
    """An event set when ``logger`` logs a message holding ``text`` (DEBUG included, meanwhile):
    a test waits on what the code says it did, never on time."""
    handler, log = _Said(text), logging.getLogger(logger)
    level = log.level
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    try:
        yield handler.event
    finally:
        log.removeHandler(handler)
        log.setLevel(level)


def sessions_of(manager: SessionManager, member: str) -> int:
    """The 2025-era sessions ``member`` holds on the gateway."""
    return manager._held[member]  # pyright: ignore[reportPrivateUsage]
