"""The fast path's HTTP answer to one call: one ``application/json`` body, or an SSE stream once
the call's progress comes before its result.

What the SDK's transports do for a call that asked for progress (its notices ride the call's
own answer stream), chosen late: a call that reports no progress, most of them, is answered
with one JSON body; the first progress notice commits ``text/event-stream`` and the answer
follows as its last event. Progress reaches ``progress`` through the gateway's outboxes
(``outbox.Outboxes.progress``: posted, never awaited by the call), so a client that does not
read stalls no one; a notice that comes once the answer is written is dropped.
"""

from __future__ import annotations

from typing import Any

import pydantic_core
from starlette.types import Send

_SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"connection", b"keep-alive"),
    (b"x-accel-buffering", b"no"),
]


def _event(message: dict[str, Any]) -> bytes:
    return b"event: message\r\ndata: " + pydantic_core.to_json(message) + b"\r\n\r\n"


class Answer:
    """One call's answer on its POST, JSON unless progress streams first."""

    __slots__ = ("_headers", "_send", "done", "streaming")

    def __init__(self, send: Send, headers: list[tuple[bytes, bytes]]) -> None:
        """``headers``: what every answer carries besides its content type (``Mcp-Session-Id``)."""
        self._send = send
        self._headers = headers
        self.streaming = False
        self.done = False

    async def progress(self, notice: dict[str, Any]) -> None:
        """One ``notifications/progress`` of the call (``messages.progress_sender`` makes it); the
        first one commits the SSE stream."""
        if self.done:
            return
        if not self.streaming:
            self.streaming = True
            await self._send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS + self._headers})
        await self._send({"type": "http.response.body", "body": _event(notice), "more_body": True})

    async def finish(self, message: dict[str, Any], status: int = 200) -> None:
        """The call's JSON-RPC answer: the stream's last event, or the whole body."""
        self.done = True
        if self.streaming:
            await self._send({"type": "http.response.body", "body": _event(message), "more_body": False})
            return
        out = pydantic_core.to_json(message)
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(out)).encode()), *self._headers]
        await self._send({"type": "http.response.start", "status": status, "headers": headers})
        await self._send({"type": "http.response.body", "body": out})

    async def cancelled(self) -> None:
        """The call was cancelled: no JSON-RPC answer (202 to a client still there, or the stream's end)."""
        self.done = True
        if self.streaming:
            await self._send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        await self._send({"type": "http.response.start", "status": 202, "headers": self._headers})
        await self._send({"type": "http.response.body", "body": b""})


__all__ = ["Answer"]
