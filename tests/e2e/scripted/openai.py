"""The OpenAI Responses API with SSE, as Codex speaks it (a custom provider, ``wire_api = "responses"``).

A conversation request is a ``POST .../responses`` that offers tools; its tool results are the
``function_call_output`` items of its ``input``. Codex offers an MCP server's tools in a
namespace (``{"type": "namespace", "name": "mcp__NAME", "tools": [...]}``) or as plain functions;
a tool is named here as ``NAMESPACE.NAME`` when namespaced, and a call to it names both.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

from tests.e2e.scripted.model import JSON, Answer, Provider, ToolResult, json_answer, sse


def _output_text(output: object) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        parts: list[str] = []
        for item in cast("list[Any]", output):
            if isinstance(item, dict):
                typed = cast("JSON", item)
                parts.append(str(typed.get("text", "")) if "text" in typed else json.dumps(typed))
        return "\n".join(parts)
    if isinstance(output, dict):
        typed = cast("JSON", output)
        return _output_text(typed.get("content", typed.get("output", json.dumps(typed))))
    return json.dumps(output)


def _tool_names(tools: list[JSON], namespace: str | None = None) -> list[str]:
    names: list[str] = []
    for tool in tools:
        if tool.get("type") == "namespace" or isinstance(tool.get("tools"), list):
            names.extend(_tool_names(cast("list[JSON]", tool.get("tools") or []), str(tool.get("name"))))
        elif "name" in tool:
            names.append(f"{namespace}.{tool['name']}" if namespace else str(tool["name"]))
    return names


class OpenAI(Provider):
    name = "openai"

    def is_conversation(self, path: str, body: JSON) -> bool:
        return path.rstrip("/").endswith("/responses") and bool(self.tool_names(body))

    def tool_names(self, body: JSON) -> list[str]:
        return _tool_names(cast("list[JSON]", body.get("tools") or []))

    def tool_results(self, body: JSON) -> list[ToolResult]:
        names: dict[str, str] = {}
        found: list[ToolResult] = []
        for item in cast("list[JSON]", body.get("input") or []):
            kind = item.get("type")
            if kind in ("function_call", "custom_tool_call"):
                namespace = item.get("namespace")
                name = str(item.get("name"))
                names[str(item.get("call_id"))] = f"{namespace}.{name}" if namespace else name
            elif kind in ("function_call_output", "custom_tool_call_output", "mcp_tool_call_output"):
                call_id = str(item.get("call_id"))
                found.append(ToolResult(call_id, names.get(call_id, ""), _output_text(item.get("output"))))
        return found

    def _stream(self, step: int, item: JSON) -> Answer:
        response_id = f"resp_scripted_{step}"
        usage = {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15,
        }
        created = {"id": response_id, "object": "response", "status": "in_progress", "output": []}
        completed = {"id": response_id, "object": "response", "status": "completed", "output": [item], "usage": usage}
        events: list[tuple[str | None, JSON]] = [
            ("response.created", {"type": "response.created", "response": created}),
            ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": item}),
            ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
            ("response.completed", {"type": "response.completed", "response": completed}),
        ]
        return Answer(200, "text/event-stream", sse(events))

    def call(self, body: JSON, step: int, call_id: str, name: str, arguments: Mapping[str, Any]) -> Answer:
        namespace, _, bare = name.rpartition(".")
        item: JSON = {
            "type": "function_call",
            "id": f"fc_{call_id}",
            "call_id": call_id,
            "name": bare,
            "arguments": json.dumps(dict(arguments)),
            "status": "completed",
        }
        if namespace:
            item["namespace"] = namespace
        return self._stream(step, item)

    def end(self, body: JSON, step: int, text: str) -> Answer:
        item: JSON = {
            "type": "message",
            "id": f"msg_scripted_{step}",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }
        return self._stream(step, item)

    def side_answer(self, path: str, body: JSON) -> Answer:
        if path.rstrip("/").endswith("/responses"):
            return self.end(body, -1, "ok")
        if "/models" in path:
            return json_answer({"object": "list", "data": []})
        return json_answer({})
