"""Google's Gemini API, ``streamGenerateContent`` with SSE, as Gemini CLI speaks it
(``GOOGLE_GEMINI_BASE_URL``).

A conversation request is a ``streamGenerateContent`` that offers function declarations; its
tool results are the ``functionResponse`` parts of its contents, shown to the model as the JSON of
their ``response``. Side requests (the next-speaker check, the model router, token counts) get
an answer that satisfies each: JSON text naming the user as next speaker and the flash model.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

from tests.e2e.scripted.model import JSON, Answer, Provider, ToolResult, json_answer, sse

SIDE_TEXT = json.dumps(
    {
        "reasoning": "scripted",
        "next_speaker": "user",
        "model_choice": "flash",
        "complexity_reasoning": "scripted",
        "complexity_score": 10,
    }
)
"""Satisfies every side request's schema seen in Gemini CLI 0.61: the next-speaker check and the
model router's classifiers."""


def _usage() -> JSON:
    return {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}


def _chunk(body: JSON, parts: list[JSON]) -> JSON:
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": _usage(),
        "modelVersion": "gemini-2.5-pro",
    }


class Gemini(Provider):
    name = "gemini"

    def is_conversation(self, path: str, body: JSON) -> bool:
        return ":streamGenerateContent" in path and bool(self.tool_names(body))

    def tool_names(self, body: JSON) -> list[str]:
        names: list[str] = []
        for group in cast("list[JSON]", body.get("tools") or []):
            for declaration in cast("list[JSON]", group.get("functionDeclarations") or []):
                names.append(str(declaration.get("name")))
        return names

    def tool_results(self, body: JSON) -> list[ToolResult]:
        found: list[ToolResult] = []
        for content in cast("list[JSON]", body.get("contents") or []):
            for part in cast("list[JSON]", content.get("parts") or []):
                response = part.get("functionResponse")
                if isinstance(response, dict):
                    typed = cast("JSON", response)
                    shown = typed.get("response")
                    text = json.dumps(shown, ensure_ascii=False) if not isinstance(shown, str) else shown
                    found.append(ToolResult(str(typed.get("id", "")), str(typed.get("name", "")), text))
        return found

    def call(self, body: JSON, step: int, call_id: str, name: str, arguments: Mapping[str, Any]) -> Answer:
        part = {"functionCall": {"id": call_id, "name": name, "args": dict(arguments)}}
        return Answer(200, "text/event-stream", sse([(None, _chunk(body, [part]))]))

    def end(self, body: JSON, step: int, text: str) -> Answer:
        return Answer(200, "text/event-stream", sse([(None, _chunk(body, [{"text": text}]))]))

    def side_answer(self, path: str, body: JSON) -> Answer:
        if ":countTokens" in path:
            return json_answer({"totalTokens": 10})
        chunk = _chunk(body, [{"text": SIDE_TEXT}])
        if ":streamGenerateContent" in path:
            return Answer(200, "text/event-stream", sse([(None, chunk)]))
        return json_answer(chunk)
