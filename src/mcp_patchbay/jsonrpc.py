"""JSON-RPC 2.0 as JSON values: the framing and the id rules both lanes share.

The client-side lane (``lane``), the upstream raw lane (``rawcalls``), the client's stdio
wire (``client_wire``) and the HTTP links (``transports.http``) read and write messages as
plain dicts, past the SDK's models. What a message looks like on a line, what counts as a
request id, and how a line that is not a message is answered are decided here, once.
Pure: values in, values (or bytes) out.
"""

from __future__ import annotations

import json
from typing import Any, cast

import mcp_types as types

RequestId = str | int
"""JSON-RPC allows numbers and strings; booleans (a JSON number in Python's eyes) are not ids."""


def is_request_id(value: object) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)


def encode(message: dict[str, Any]) -> bytes:
    """One message as a line of compact UTF-8 JSON (the stdio framing)."""
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def request_id_in(body: bytes) -> RequestId | None:
    """The id of the request in a serialized message; None for a notification, an answer,
    or anything that is not a message."""
    try:
        message = json.loads(body)
    except ValueError:
        return None
    if not isinstance(message, dict) or "method" not in message:
        return None
    request_id = cast("dict[str, Any]", message).get("id")
    return cast("RequestId", request_id) if is_request_id(request_id) else None


NOT_JSON = object()
"""What a line that does not parse as JSON reads as (``answer_to_invalid``)."""


def answer_to_invalid(value: Any) -> bytes:
    """JSON-RPC's answer to a line that is not a message: a parse error (id null), or an
    invalid request naming the id when one can be read, so the sender's request never hangs."""
    if value is NOT_JSON:
        return error_line(None, types.PARSE_ERROR, "Parse error: the line is not valid JSON")
    request_id = cast("dict[str, Any]", value).get("id") if isinstance(value, dict) else None
    return error_line(
        cast("RequestId", request_id) if is_request_id(request_id) else None,
        types.INVALID_REQUEST,
        "Invalid request: not a valid JSON-RPC 2.0 message",
    )


def error_line(request_id: RequestId | None, code: int, message: str) -> bytes:
    return encode({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})


__all__ = ["NOT_JSON", "RequestId", "answer_to_invalid", "encode", "error_line", "is_request_id", "request_id_in"]
