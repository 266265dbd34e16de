"""A fast MCP upstream over streamable HTTP, for the gateway benchmark and conformance runs.

    .venv/bin/python tests/servers/gateway_upstream.py --port PORT [--host 127.0.0.1]

The SDK's low-level ``Server`` (no MCPServer layer, no schema work) served by uvicorn at
``/mcp``, both protocol eras: 2025-11-25 sessions (``initialize``, ``Mcp-Session-Id``) and
the stateless 2026-07-28 requests (routed by their ``MCP-Protocol-Version`` header). The
same settings the SDK's ``streamable_http_app`` picks by default: SSE answers, DNS-rebinding
protection for loopback. One tool, ``echo``, returns its ``text`` argument as one text block;
one resource and one prompt, so that a proxy in front of it has something to list. ``--tools N``
adds N-1 more tools like it (``echo_1`` ...), for a larger catalog.

``--fixtures`` adds what the official conformance suite's server scenarios call by name
(``test_simple_text``, ``test_sampling``, ``test://static-text``, ``test_simple_prompt`` ...,
logging, subscriptions, completion, an in-memory event store for SSE resumption), so that the
suite can be run through a proxy in front of it (``scripts/conformance_server``).

Prints ``ready`` on stdout once uvicorn listens.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import anyio
import mcp_types as types
import uvicorn
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp_types import JSONRPCMessage

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string", "description": "What to send back."}},
    "required": ["text"],
}


def build(name: str, count: int = 1) -> Server[Any]:
    tools = types.ListToolsResult(
        tools=[types.Tool(name="echo", description="Returns its text argument.", input_schema=SCHEMA)]
        + [
            types.Tool(name=f"echo_{i}", description="Returns its text argument.", input_schema=SCHEMA)
            for i in range(1, count)
        ]
    )
    resources = types.ListResourcesResult(
        resources=[types.Resource(uri="bench://note", name="note", mime_type="text/plain")]
    )
    prompts = types.ListPromptsResult(prompts=[types.Prompt(name="greet", description="Says hello.")])

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return tools

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if not params.name.startswith("echo"):
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


# --- the conformance suite's fixtures ------------------------------------------------------------

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
"""A 1x1 PNG."""
WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
"""An empty WAV file."""
NO_ARGUMENTS: dict[str, Any] = {"type": "object", "properties": {}}


def _text(value: str) -> types.TextContent:
    return types.TextContent(type="text", text=value)


def _schema(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


FIXTURE_TOOLS = {
    "test_simple_text": NO_ARGUMENTS,
    "test_image_content": NO_ARGUMENTS,
    "test_audio_content": NO_ARGUMENTS,
    "test_embedded_resource": NO_ARGUMENTS,
    "test_multiple_content_types": NO_ARGUMENTS,
    "test_tool_with_logging": NO_ARGUMENTS,
    "test_tool_with_progress": NO_ARGUMENTS,
    "test_error_handling": NO_ARGUMENTS,
    "test_sampling": _schema(prompt={"type": "string"}),
    "test_elicitation": _schema(message={"type": "string"}),
    "test_elicitation_sep1034_defaults": NO_ARGUMENTS,
    "test_elicitation_sep1330_enums": NO_ARGUMENTS,
    "test_reconnection": NO_ARGUMENTS,
    "json_schema_2020_12_tool": {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "type": "object",
                "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
            }
        },
        "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
        "additionalProperties": False,
    },
}

SEP1034_SCHEMA = _schema(
    name={"type": "string", "description": "User name", "default": "John Doe"},
    age={"type": "integer", "description": "User age", "default": 30},
    score={"type": "number", "description": "User score", "default": 95.5},
    status={
        "type": "string",
        "description": "User status",
        "enum": ["active", "inactive", "pending"],
        "default": "active",
    },
    verified={"type": "boolean", "description": "Verification status", "default": True},
)
SEP1330_SCHEMA = _schema(
    untitledSingle={"type": "string", "enum": ["active", "inactive", "pending"]},
    titledSingle={
        "type": "string",
        "oneOf": [{"const": c, "title": f"{c.title()} Priority"} for c in ("low", "medium", "high")],
    },
    untitledMulti={"type": "array", "items": {"type": "string", "enum": ["read", "write", "execute"]}},
    titledMulti={
        "type": "array",
        "items": {"anyOf": [{"const": c, "title": t} for c, t in (("feature", "New Feature"), ("bug", "Bug Fix"))]},
    },
    legacyEnum={"type": "string", "enum": ["small", "medium", "large"], "enumNames": ["Small", "Medium", "Large"]},
)


async def fixture_tool(ctx: ServerRequestContext[Any], name: str, arguments: dict[str, Any]) -> types.CallToolResult:
    """The suite's tools; ``name`` is one of FIXTURE_TOOLS."""
    session = ctx.session
    if name == "test_simple_text":
        return types.CallToolResult(content=[_text("This is a simple text response for testing.")])
    if name == "test_image_content":
        return types.CallToolResult(content=[types.ImageContent(type="image", data=PNG, mime_type="image/png")])
    if name == "test_audio_content":
        return types.CallToolResult(content=[types.AudioContent(type="audio", data=WAV, mime_type="audio/wav")])
    embedded = types.EmbeddedResource(
        type="resource",
        resource=types.TextResourceContents(uri="test://embedded-resource", mime_type="text/plain", text="embedded"),
    )
    if name == "test_embedded_resource":
        return types.CallToolResult(content=[embedded])
    if name == "test_multiple_content_types":
        image = types.ImageContent(type="image", data=PNG, mime_type="image/png")
        return types.CallToolResult(content=[_text("Multiple content types:"), image, embedded])
    if name == "test_tool_with_logging":
        for step in ("started", "processing", "completed"):
            await session.send_log_message("info", f"Tool execution {step}", related_request_id=ctx.request_id)
            await anyio.sleep(0.05)
        return types.CallToolResult(content=[_text("Tool with logging executed successfully")])
    if name == "test_tool_with_progress":
        for progress in (0, 50, 100):
            await session.report_progress(progress, 100, f"Completed step {progress} of 100")
            await anyio.sleep(0.05)
        return types.CallToolResult(content=[_text("Tool with progress executed successfully")])
    if name == "test_error_handling":
        return types.CallToolResult(content=[_text("This tool intentionally returns an error")], is_error=True)
    if name == "test_sampling":
        answer = await session.create_message(
            messages=[types.SamplingMessage(role="user", content=_text(str(arguments.get("prompt", ""))))],
            max_tokens=100,
            related_request_id=ctx.request_id,
        )
        content = answer.content
        text = content.text if isinstance(content, types.TextContent) else "(not text)"
        return types.CallToolResult(content=[_text(f"LLM response: {text}")])
    if name.startswith("test_elicitation"):
        schema = {
            "test_elicitation": _schema(response={"type": "string", "description": "Your response"}),
            "test_elicitation_sep1034_defaults": SEP1034_SCHEMA,
            "test_elicitation_sep1330_enums": SEP1330_SCHEMA,
        }[name]
        message = str(arguments.get("message", "Please provide some information"))
        result = await session.elicit_form(message, schema, related_request_id=ctx.request_id)
        return types.CallToolResult(content=[_text(f"action={result.action}, content={json.dumps(result.content)}")])
    if name == "json_schema_2020_12_tool":
        return types.CallToolResult(content=[_text(json.dumps(arguments))])
    if name == "test_reconnection":
        await session.send_log_message("info", "Before disconnect", related_request_id=ctx.request_id)
        if ctx.close_sse_stream is not None:
            await ctx.close_sse_stream()
        await anyio.sleep(0.2)
        await session.send_log_message("info", "After reconnect", related_request_id=ctx.request_id)
        return types.CallToolResult(content=[_text("Reconnection test completed")])
    raise AssertionError(name)


STATIC_TEXT = "This is the content of the static text resource."


async def fixture_resource(uri: str) -> types.ReadResourceResult | None:
    if uri == "test://static-text":
        contents: Any = types.TextResourceContents(uri=uri, mime_type="text/plain", text=STATIC_TEXT)
    elif uri == "test://static-binary":
        contents = types.BlobResourceContents(uri=uri, mime_type="image/png", blob=PNG)
    elif uri == "test://watched-resource":
        contents = types.TextResourceContents(uri=uri, mime_type="text/plain", text="Watched resource content")
    elif uri.startswith("test://template/") and uri.endswith("/data"):
        item = uri.removeprefix("test://template/").removesuffix("/data")
        text = json.dumps({"id": item, "templateTest": True, "data": f"Data for ID: {item}"})
        contents = types.TextResourceContents(uri=uri, mime_type="application/json", text=text)
    else:
        return None
    return types.ReadResourceResult(contents=[contents])


FIXTURE_RESOURCES = [
    types.Resource(uri="test://static-text", name="static-text", mime_type="text/plain"),
    types.Resource(uri="test://static-binary", name="static-binary", mime_type="image/png"),
    types.Resource(uri="test://watched-resource", name="watched-resource", mime_type="text/plain"),
]
FIXTURE_TEMPLATES = [
    types.ResourceTemplate(uri_template="test://template/{id}/data", name="template", mime_type="application/json")
]
FIXTURE_PROMPTS = [
    types.Prompt(name="test_simple_prompt", description="A simple prompt without arguments"),
    types.Prompt(
        name="test_prompt_with_arguments",
        description="A prompt with required arguments",
        arguments=[
            types.PromptArgument(name="arg1", required=True),
            types.PromptArgument(name="arg2", required=True),
        ],
    ),
    types.Prompt(
        name="test_prompt_with_embedded_resource",
        description="A prompt that includes an embedded resource",
        arguments=[types.PromptArgument(name="resourceUri", required=True)],
    ),
    types.Prompt(name="test_prompt_with_image", description="A prompt that includes image content"),
]


def fixture_prompt(name: str, arguments: dict[str, str]) -> types.GetPromptResult | None:
    def user(content: Any) -> types.PromptMessage:
        return types.PromptMessage(role="user", content=content)

    if name == "test_simple_prompt":
        messages = [user(_text("This is a simple prompt for testing."))]
    elif name == "test_prompt_with_arguments":
        messages = [user(_text(f"Prompt with arguments: arg1={arguments.get('arg1')}, arg2={arguments.get('arg2')}"))]
    elif name == "test_prompt_with_embedded_resource":
        resource = types.TextResourceContents(
            uri=arguments.get("resourceUri", "test://example-resource"), mime_type="text/plain", text="Embedded."
        )
        messages = [user(types.EmbeddedResource(type="resource", resource=resource)), user(_text("Process it."))]
    elif name == "test_prompt_with_image":
        image = types.ImageContent(type="image", data=PNG, mime_type="image/png")
        messages = [user(image), user(_text("Please analyze the image above."))]
    else:
        return None
    return types.GetPromptResult(messages=messages)


class MemoryEventStore(EventStore):
    """Every event kept in memory, ids counting up: enough for the suite's resumption scenario."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, JSONRPCMessage | None]] = []

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        event_id = str(len(self.events) + 1)
        self.events.append((stream_id, event_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
        stream = next((s for s, e, _ in self.events if e == last_event_id), None)
        if stream is None:
            return None
        for stream_id, event_id, message in self.events:
            if stream_id == stream and int(event_id) > int(last_event_id) and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream


def build_with_fixtures(name: str) -> Server[Any]:
    """The benchmark's server plus the conformance suite's fixtures."""
    echo = types.Tool(name="echo", description="Returns its text argument.", input_schema=SCHEMA)
    tools = types.ListToolsResult(
        tools=[echo]
        + [
            types.Tool(name=n, description=f"Conformance fixture {n}.", input_schema=s)
            for n, s in FIXTURE_TOOLS.items()
        ]
    )

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return tools

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name in FIXTURE_TOOLS:
            return await fixture_tool(ctx, params.name, dict(params.arguments or {}))
        return types.CallToolResult(content=[_text(str((params.arguments or {}).get("text", "")))])

    async def list_resources(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=FIXTURE_RESOURCES)

    async def list_templates(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=FIXTURE_TEMPLATES)

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        found = await fixture_resource(str(params.uri))
        if found is None:
            raise ValueError(f"no resource {params.uri}")
        return found

    async def list_prompts(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=FIXTURE_PROMPTS)

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        found = fixture_prompt(params.name, dict(params.arguments or {}))
        if found is None:
            raise ValueError(f"no prompt {params.name}")
        return found

    async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        return types.EmptyResult()

    async def unsubscribe(ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        return types.EmptyResult()

    async def set_level(ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
        return types.EmptyResult()

    async def complete(ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
        return types.CompleteResult(completion=types.Completion(values=[], total=0, has_more=False))

    return Server(
        name,
        version="1",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        on_subscribe_resource=subscribe,
        on_unsubscribe_resource=unsubscribe,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_completion=complete,
        on_set_logging_level=set_level,
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
    parser.add_argument("--tools", type=int, default=1, help="echo and N-1 more (echo_1 ...), a larger catalog")
    parser.add_argument("--fixtures", action="store_true", help="add the conformance suite's fixtures")
    args = parser.parse_args()
    if args.fixtures:
        app = build_with_fixtures(args.name).streamable_http_app(
            host=args.host, event_store=MemoryEventStore(), retry_interval=100
        )
    else:
        app = build(args.name, max(1, args.tools)).streamable_http_app(host=args.host)
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning", access_log=False)
    _Ready(config).run()
    sys.exit(0)


if __name__ == "__main__":
    main()
