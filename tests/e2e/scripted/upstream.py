"""A small MCP upstream for the scripted-client runs: one read-only tool and one destructive one.

Run as ``python tests/e2e/scripted/upstream.py --record FILE`` (standalone: the proxy runs it by
path). Every call that runs appends a JSON line ``{"tool", "arguments"}`` to FILE, so a test can
tell from outside every client whether a tool ran, whatever the client showed its model.

- ``read_note`` (``readOnlyHint``): a note's text, with ``NOTE_MARK`` in it.
- ``delete_notes`` (``destructiveHint``): says it deleted every note of a folder (it only records).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

NOTE_MARK = "note-text-7f3a91"
"""In ``read_note``'s answer: the model saw the read-only tool's output when this is in a tool result."""
DELETED_MARK = "deleted-5c02be"
"""In ``delete_notes``' answer."""


def _record(path: Path, tool: str, arguments: dict[str, Any]) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps({"tool": tool, "arguments": arguments}) + "\n")


async def _serve(record: Path) -> None:
    import mcp_types as types
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel.server import Server
    from mcp.server.stdio import stdio_server
    from mcp.shared.exceptions import MCPError

    tools = [
        types.Tool(
            name="read_note",
            description="Read one note of the user's notebook by its title and return its text.",
            input_schema={
                "type": "object",
                "properties": {"title": {"type": "string", "description": "The note's title."}},
                "required": ["title"],
            },
            annotations=types.ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
        ),
        types.Tool(
            name="delete_notes",
            description="Delete every note in a folder of the user's notebook, for good.",
            input_schema={
                "type": "object",
                "properties": {"folder": {"type": "string", "description": "The folder to empty."}},
                "required": ["folder"],
            },
            annotations=types.ToolAnnotations(
                read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
            ),
        ),
    ]

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = dict(params.arguments or {})
        if params.name == "read_note":
            _record(record, params.name, arguments)
            text = f"Note {arguments.get('title', '')!r}: buy eggs and milk ({NOTE_MARK})."
        elif params.name == "delete_notes":
            _record(record, params.name, arguments)
            text = f"Deleted every note in {arguments.get('folder', '')!r} ({DELETED_MARK})."
        else:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    server = Server("notes", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--record", type=Path, required=True)
    args = parser.parse_args()
    import anyio

    anyio.run(_serve, args.record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
