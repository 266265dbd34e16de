"""A minimal MCP upstream for the benchmarks: one tool that answers at once, over stdio.

    .venv/bin/python -m benchmarks.server [--name NAME] [--tools N]

Built on the SDK's low-level ``Server`` (no FastMCP layer, no schema work), so that
what the benchmarks measure is the transport and the proxy, not the upstream.
The tool ``echo`` returns its ``text`` argument as one text block. ``--tools N`` adds
N-1 more tools (``echo_1`` ...) to make a larger catalog for startup measurements.
``--spawn-log FILE`` appends the process id to FILE at start, so a benchmark can count
how often a proxy starts its upstreams. ``--fast-stdio`` serves stdio from the event loop
instead of the SDK's threaded ``stdio_server``: the memory benchmark uses it so that its
sixteen upstreams take less of the machine's two cores from the proxy under test.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string", "description": "What to send back."}},
    "required": ["text"],
}


def build(name: str, count: int) -> Server[Any]:
    tools = [types.Tool(name="echo", description="Returns its text argument.", input_schema=SCHEMA)]
    tools += [
        types.Tool(name=f"echo_{i}", description="Returns its text argument.", input_schema=SCHEMA)
        for i in range(1, count)
    ]
    listing = types.ListToolsResult(tools=tools)

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return listing

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        text = (params.arguments or {}).get("text", "")
        return types.CallToolResult(content=[types.TextContent(type="text", text=str(text))])

    return Server(name, version="1", on_list_tools=list_tools, on_call_tool=call_tool)


@asynccontextmanager
async def event_loop_stdio() -> AsyncIterator[tuple[Any, Any]]:
    """Newline-delimited JSON-RPC on fds 0/1, non-blocking, waited for on the event loop."""
    wire_in, wire_out = os.dup(0), os.dup(1)
    os.set_blocking(wire_in, False)
    os.set_blocking(wire_out, False)
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def reader() -> None:
        buffer = b""
        async with read_writer:
            while True:
                try:
                    chunk = os.read(wire_in, 1 << 16)
                except BlockingIOError:
                    await anyio.wait_readable(wire_in)
                    continue
                if not chunk:
                    return
                *lines, buffer = (buffer + chunk).split(b"\n")
                for line in lines:
                    if line.strip():
                        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                        await read_writer.send(SessionMessage(message))

    async def writer() -> None:
        async with write_reader:
            async for item in write_reader:
                view = memoryview(item.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n")
                while view:
                    try:
                        view = view[os.write(wire_out, view) :]
                    except BlockingIOError:
                        await anyio.wait_writable(wire_out)

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        yield read_stream, write_stream
        tg.cancel_scope.cancel()


async def serve(name: str, count: int, fast_stdio: bool = False) -> None:
    server = build(name, count)
    async with event_loop_stdio() if fast_stdio else stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--name", default="bench")
    parser.add_argument("--tools", type=int, default=1)
    parser.add_argument("--spawn-log", help="append this process's id to this file at start")
    parser.add_argument("--fast-stdio", action="store_true", help="serve stdio from the event loop, no threads")
    args = parser.parse_args()
    if args.spawn_log:
        with Path(args.spawn_log).open("a", encoding="utf-8") as log:
            log.write(f"{os.getpid()}\n")
    anyio.run(serve, args.name, max(1, args.tools), args.fast_stdio)


if __name__ == "__main__":
    main()
