"""The upstream of scripts/replicas: a fast MCP server over stdio that says which replica runs it.

    .venv/bin/python -m benchmarks.replicas_upstream        (started by each gateway replica)

Built on the SDK's low-level ``Server`` and served with the SDK's ``stdio_server``. Every
answer starts with ``$PATCHBAY_REPLICA:`` (the gateway replica that started this process passes
its name through the config's ``env``), so the driver sees which replica served each call:

- ``echo {text}``: answers at once with ``REPLICA:text``;
- ``sleep {ms, text}``: answers ``REPLICA:text`` after ``ms`` milliseconds (calls in flight
  when a replica is killed); asked for progress, it first sends one notification, so that the
  gateway's answer is an SSE stream from the start (a plain JSON answer otherwise);
- ``ask {text}``: asks the client for a sampling answer (``sampling/createMessage``: a
  2025-era server request), then answers ``REPLICA:text:ANSWER``. A 2026-07-28 client gets it
  through the gateway as a multi-round-trip call (an input-required result, then its retry).

With ``$PATCHBAY_REPLICAS_LEDGER`` (a folder), each call's text is written to ``REPLICA.calls``
there, one line per call as it arrives, before it runs: the driver learns which replicas a
call reached (a failed call too, or one sent twice) even when the replica was killed.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any, TextIO

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPDeprecationWarning

# Sampling is deprecated in 2026-07-28; this server plays a 2025-era one on purpose.
warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

REPLICA = os.environ.get("PATCHBAY_REPLICA", "?")
LEDGER = os.environ.get("PATCHBAY_REPLICAS_LEDGER", "")

TEXT = {"type": "string", "description": "Sent back after the replica's name."}
TOOLS = [
    types.Tool(
        name="echo",
        description="Answers at once with REPLICA:text.",
        input_schema={"type": "object", "properties": {"text": TEXT}, "required": ["text"]},
    ),
    types.Tool(
        name="sleep",
        description="Answers REPLICA:text after ms milliseconds.",
        input_schema={
            "type": "object",
            "properties": {"ms": {"type": "integer", "minimum": 0, "maximum": 60000}, "text": TEXT},
            "required": ["ms", "text"],
        },
    ),
    types.Tool(
        name="ask",
        description="Asks the client for a sampling answer, then answers REPLICA:text:ANSWER.",
        input_schema={"type": "object", "properties": {"text": TEXT}, "required": ["text"]},
    ),
]


def _text(value: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=value)], is_error=error)


async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


def _ledger() -> TextIO | None:
    if not LEDGER:
        return None
    # Line-buffered: each line is written out as the call arrives; the replica may die any moment.
    return Path(LEDGER, f"{REPLICA}.calls").open("a", buffering=1, encoding="utf-8")


_LEDGER_FILE = _ledger()


async def call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> types.CallToolResult:
    arguments = params.arguments or {}
    text = str(arguments.get("text", ""))
    if _LEDGER_FILE is not None:
        _LEDGER_FILE.write(text.replace("\n", " ") + "\n")
    if params.name == "echo":
        return _text(f"{REPLICA}:{text}")
    if params.name == "sleep":
        await ctx.session.report_progress(0, 1)  # a no-op unless the call asked for progress
        await anyio.sleep(int(arguments.get("ms", 0)) / 1000)
        return _text(f"{REPLICA}:{text}")
    if params.name == "ask":
        sampled = await ctx.session.create_message(  # pyright: ignore[reportDeprecated]
            messages=[types.SamplingMessage(role="user", content=types.TextContent(type="text", text=text))],
            max_tokens=16,
        )
        answer = sampled.content.text if isinstance(sampled.content, types.TextContent) else "?"
        return _text(f"{REPLICA}:{text}:{answer}")
    return _text(f"unknown tool {params.name}", error=True)


async def serve() -> None:
    server = Server("replicas-upstream", version="1", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(serve)
