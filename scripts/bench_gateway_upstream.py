"""A fast MCP upstream over streamable HTTP, for the gateway benchmark and conformance runs.

    .venv/bin/python scripts/bench_gateway_upstream.py --port PORT [--host 127.0.0.1]

The SDK's low-level ``Server`` (no MCPServer layer, no schema work) served by uvicorn at
``/mcp``, both protocol eras: 2025-11-25 sessions (``initialize``, ``Mcp-Session-Id``) and
the stateless 2026-07-28 requests (routed by their ``MCP-Protocol-Version`` header). The
same settings the SDK's ``streamable_http_app`` picks by default: SSE answers, DNS-rebinding
protection for loopback. One tool, ``echo``, returns its ``text`` argument as one text block;
one resource and one prompt, so that a proxy in front of it has something to list.

Prints ``ready`` on stdout once uvicorn listens.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import mcp_types as types
import uvicorn
from mcp.server.lowlevel.server import Server

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string", "description": "What to send back."}},
    "required": ["text"],
}


def build(name: str) -> Server[Any]:
    tools = types.ListToolsResult(
        tools=[types.Tool(name="echo", description="Returns its text argument.", input_schema=SCHEMA)]
    )
    resources = types.ListResourcesResult(
        resources=[types.Resource(uri="bench://note", name="note", mime_type="text/plain")]
    )
    prompts = types.ListPromptsResult(prompts=[types.Prompt(name="greet", description="Says hello.")])

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return tools

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name != "echo":
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=f"no tool {params.name!r}")], is_error=True
            )
        text = (params.arguments or {}).get("text", "")
        return types.CallToolResult(content=[types.TextContent(type="text", text=str(text))])

    async def list_resources(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        return resources

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=params.uri, mime_type="text/plain", text="a note")]
        )

    async def list_prompts(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        return prompts

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        return types.GetPromptResult(
            messages=[types.PromptMessage(role="user", content=types.TextContent(type="text", text="hello"))]
        )

    return Server(
        name,
        version="1",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )


class _Ready(uvicorn.Server):
    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        print("ready", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--name", default="bench")
    args = parser.parse_args()
    app = build(args.name).streamable_http_app(host=args.host)
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning", access_log=False)
    _Ready(config).run()
    sys.exit(0)


if __name__ == "__main__":
    main()
