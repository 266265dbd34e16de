"""A minimal MCP upstream for the benchmarks: one tool that answers at once, over stdio.

    .venv/bin/python scripts/bench_server.py [--name NAME] [--tools N]

Built on the SDK's low-level ``Server`` (no FastMCP layer, no schema work), so that
what the benchmarks measure is the transport and the proxy, not the upstream.
The tool ``echo`` returns its ``text`` argument as one text block. ``--tools N`` adds
N-1 more tools (``echo_1`` ...) to make a larger catalog for startup measurements.
``--spawn-log FILE`` appends the process id to FILE at start, so a benchmark can count
how often a proxy starts its upstreams.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

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


async def serve(name: str, count: int) -> None:
    server = build(name, count)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--name", default="bench")
    parser.add_argument("--tools", type=int, default=1)
    parser.add_argument("--spawn-log", help="append this process's id to this file at start")
    args = parser.parse_args()
    if args.spawn_log:
        with Path(args.spawn_log).open("a", encoding="utf-8") as log:
            log.write(f"{os.getpid()}\n")
    anyio.run(serve, args.name, max(1, args.tools))


if __name__ == "__main__":
    main()
