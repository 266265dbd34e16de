"""What every lane on the client's side does alike to a call's messages, once (pure).

``split_meta`` (the client's ``_meta``: its progress token, and the rest to pass on),
``progress_sender`` (the call's progress as ``notifications/progress``) and
``without_later_fields`` (the 2026-07-28 result fields dropped). The stdio lane, the gateway's
and tasks use them; the SDK's typed path (``calls.path``) splits ``_meta`` here too, and sends its
progress through the SDK's session, which routes it onto the request's own stream.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

from mcp_patchbay.calls.deadlines import ProgressFn
from mcp_patchbay.wire.jsonrpc import RequestId, is_request_id

Send = Callable[[dict[str, Any]], Awaitable[None]]
"""Hands one JSON-RPC message to the client (the stdio writer, an answer stream, a task's session)."""

_PROTOCOL_META_PREFIX = "io.modelcontextprotocol/"
LATER_CALL_FIELDS = frozenset({"resultType", "requestState", "inputRequests"})
"""What the 2026-07-28 revision adds to a ``tools/call`` result (``without_later_fields``)."""


def split_meta(meta: Any) -> tuple[RequestId | None, dict[str, Any] | None]:
    """A call's ``_meta`` as the client sent it: its progress token (the client's, answered by
    the proxy), and the rest (``traceparent``, vendor keys), which goes on to the upstream.
    The protocol's own keys (``io.modelcontextprotocol/...``: the 2026-07-28 client stamps)
    describe the client's connection to the proxy, not the proxy's to the upstream: kept back."""
    if not isinstance(meta, dict) or not meta:
        return None, None
    values = cast("dict[str, Any]", meta)
    token = values.get("progressToken")
    rest = {
        key: value
        for key, value in values.items()
        if key != "progressToken" and not key.startswith(_PROTOCOL_META_PREFIX)
    }
    return (token if is_request_id(token) else None), (rest or None)


def without_later_fields(result: dict[str, Any]) -> dict[str, Any]:
    """A ``tools/call`` result as a lane answers it: without the fields only the 2026-07-28 revision
    has (``LATER_CALL_FIELDS``, an upstream's passed through), which the lane's clients never get
    (the gateway stamps its own ``resultType`` on a stateless call's). ``result`` itself when it has
    none, as nearly every result."""
    if LATER_CALL_FIELDS.isdisjoint(result):
        return result
    return {key: value for key, value in result.items() if key not in LATER_CALL_FIELDS}


def progress_sender(token: RequestId, send: Send) -> ProgressFn:
    """A call's progress to the client that asked for it with ``token``: each report one
    ``notifications/progress`` message handed to ``send`` (the stdio lane's writer, the gateway's
    answer stream, a task's session)."""

    async def forward(progress: float, total: float | None, message: str | None) -> None:
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await send({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})

    return forward


__all__ = ["LATER_CALL_FIELDS", "Send", "progress_sender", "split_meta", "without_later_fields"]
