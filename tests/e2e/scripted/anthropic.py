"""The Anthropic Messages API with SSE, as Claude Code speaks it (``ANTHROPIC_BASE_URL``).

A conversation request is a ``POST /v1/messages`` that offers tools; its tool results are the
``tool_result`` blocks of its user messages. Side requests (token counts, a title, a quota probe)
get a short text answer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

from tests.e2e.scripted.model import JSON, Answer, Provider, ToolResult, json_answer, sse


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    parts: list[str] = []
    if isinstance(content, list):
        for block in cast("list[Any]", content):
            if isinstance(block, dict):
                typed = cast("JSON", block)
                parts.append(str(typed.get("text", "")) if typed.get("type") == "text" else json.dumps(typed))
    return "\n".join(parts)


class Anthropic(Provider):
    name = "anthropic"

    def is_conversation(self, path: str, body: JSON) -> bool:
        return path.startswith("/v1/messages") and "count_tokens" not in path and bool(self.tool_names(body))

    def tool_names(self, body: JSON) -> list[str]:
        tools = cast("list[Any]", body.get("tools") or [])
        return [str(cast("JSON", t).get("name")) for t in tools if isinstance(t, dict) and "name" in t]

    def tool_results(self, body: JSON) -> list[ToolResult]:
        names: dict[str, str] = {}
        found: list[ToolResult] = []
        for message in cast("list[JSON]", body.get("messages") or []):
            content = message.get("content")
            if not isinstance(content, list):
                continue
            for block in cast("list[JSON]", content):
                if block.get("type") == "tool_use":
                    names[str(block.get("id"))] = str(block.get("name"))
                elif block.get("type") == "tool_result":
                    call_id = str(block.get("tool_use_id"))
                    found.append(
                        ToolResult(
                            call_id,
                            names.get(call_id, ""),
                            _text_of(block.get("content")),
                            bool(block.get("is_error", False)),
                        )
                    )
        return found

    def _message(self, body: JSON, step: int, block: JSON, delta: JSON, stop: str) -> Answer:
        model = str(body.get("model") or "claude-sonnet-4-5")
        start = {
            "type": "message",
            "id": f"msg_scripted_{step}",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 1},
        }
        events: list[tuple[str | None, JSON]] = [
            ("message_start", {"type": "message_start", "message": start}),
            ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 5},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
        return Answer(200, "text/event-stream", sse(events))

    def call(self, body: JSON, step: int, call_id: str, name: str, arguments: Mapping[str, Any]) -> Answer:
        block = {"type": "tool_use", "id": f"toolu_{call_id}", "name": name, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(dict(arguments))}
        return self._message(body, step, block, delta, "tool_use")

    def end(self, body: JSON, step: int, text: str) -> Answer:
        block = {"type": "text", "text": ""}
        return self._message(body, step, block, {"type": "text_delta", "text": text}, "end_turn")

    def side_answer(self, path: str, body: JSON) -> Answer:
        if "count_tokens" in path:
            return json_answer({"input_tokens": 10})
        if body.get("stream"):
            return self.end(body, -1, "ok")
        return json_answer(
            {
                "id": "msg_scripted_side",
                "type": "message",
                "role": "assistant",
                "model": str(body.get("model") or "claude-haiku-4-5"),
                "content": [{"type": "text", "text": "ok"}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 10, "output_tokens": 1},
            }
        )
