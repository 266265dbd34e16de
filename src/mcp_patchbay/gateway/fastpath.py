"""The client half of the gateway's fast path: a ``tools/call`` POST answered past the SDK's server.

``FastPath`` is offered every POST's read body by ``sdk.SessionManager`` (after the sign-in
middleware, before anything else reads it). It takes a well-formed ``tools/call`` of a live
2025-era session whose connection it knows, and runs it through ``Proxy.run_tool`` (the same
tool path as every call: access rules, names, arguments, the upstream's policies, the error
edge, metrics and logs) on the parsed JSON, answering with one ``application/json`` body. No
SDK transport, dispatcher task or pydantic model on the way.

It keeps what the SDK's path gives that call:

- the session: the same checks as the SDK's manager and transport (Host and Origin, the
  credential and member that opened it, not terminated nor expiring: ``SessionManager.usable_session``),
  its recency for the per-member quota, and its idle timer held while the call is in flight
  (``sdk.holding``);
- who is calling: the call's ``ServerRequestContext`` carries the session's own connection
  (``SessionManager.connections``), so what the upstream asks mid-call (sampling, elicitation)
  goes to this session's stream (``client_channel``), and errors, status and identity read it
  as on the SDK's path;
- cancellation: the client hanging up, or its ``notifications/cancelled`` for the call,
  cancels it (the upstream is told by the cancelled call);
- bounds: the body was read within ``max_request_body_size``; one nested past
  ``max_json_depth`` is not taken (the SDK's path refuses it).

Everything else goes on to the SDK's path untouched: other methods, a session it does not know
yet (its first requests went there), a call that asks for progress (its notices ride an SSE
answer), malformed calls, 2026-07-28 requests (their envelope, headers and ``requestState``
checks are the SDK's). ``PATCHBAY_FAST_PATH=0`` turns it off.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any, cast

import anyio
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from mcp_patchbay.jsonrpc import deeper_than, is_request_id
from mcp_patchbay.lane import LATER_CALL_FIELDS, split_meta
from mcp_patchbay.sdk import SessionManager, holding
from mcp_patchbay.server import Proxy

logger = logging.getLogger("mcp_patchbay.gateway")

ENABLED = os.environ.get("PATCHBAY_FAST_PATH", "1") != "0"
"""On unless ``$PATCHBAY_FAST_PATH`` is ``0``; tests turn it off to run the SDK's path."""
_SESSION = b"mcp-session-id"
_VERSION = b"mcp-protocol-version"


class _NoRequestStream:
    """The call's own answer stream, which the fast path does not have: what would ride it
    (progress; requests tied to the call) is refused, as on a channel without one."""

    can_send_request = False

    async def send_raw_request(self, method: str, params: Any, opts: Any = None) -> dict[str, Any]:
        raise NoBackChannelError(method)

    async def notify(self, method: str, params: Any, opts: Any = None) -> None:
        logger.debug("fast path: dropped %s on a call's answer stream", method)


_NO_STREAM = _NoRequestStream()


class FastPath:
    """``tools/call`` of known 2025-era sessions, answered past the SDK's server."""

    def __init__(self, proxy: Proxy, manager: SessionManager, max_depth: int | None) -> None:
        self.proxy = proxy
        self.manager = manager
        self.max_depth = max_depth
        self.served = 0
        """Calls answered here (tests read it: the path was taken)."""
        self._calls: dict[tuple[str, Any], anyio.CancelScope] = {}
        """(session id, request id) -> the call in flight, for the client's notifications/cancelled."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send, body: bytes) -> bool:
        if not ENABLED or (b'"tools/call"' not in body and b'"notifications/cancelled"' not in body):
            return False
        headers = dict(scope["headers"])
        session_id = headers.get(_SESSION)
        version = headers.get(_VERSION)
        if session_id is None or (version is not None and version.decode("latin-1") not in HANDSHAKE_PROTOCOL_VERSIONS):
            return False
        if self.max_depth is not None and deeper_than(body, self.max_depth):
            return False
        try:
            message = json.loads(body)
        except (ValueError, RecursionError):
            return False
        if not isinstance(message, dict):
            return False
        values = cast("dict[str, Any]", message)
        sid = session_id.decode("latin-1")
        if values.get("method") == "notifications/cancelled":
            return await self._cancelled(scope, receive, send, sid, values)
        call = _call_of(values)
        if call is None:
            return False
        connection = self.manager.connections.get(sid)
        if connection is None or not _accepts_json(headers):
            return False
        request = Request(scope, receive)
        transport = await self.manager.usable_session(request, sid)
        if transport is None:
            return False
        request_id = call[0]
        ctx: ServerRequestContext[Any, Any] = ServerRequestContext(
            session=ServerSession(cast(Any, _NO_STREAM), connection),
            lifespan_context={},
            protocol_version=connection.protocol_version,
            method="tools/call",
            params=values.get("params"),
            request_id=request_id,
            request=request,
        )
        key = (sid, request_id)
        with holding(transport):
            answer = await self._run(ctx, key, receive, call)
        if answer is None:
            return True  # cancelled: a cancelled request gets no answer
        self.served += 1
        out = json.dumps(answer, separators=(",", ":"), ensure_ascii=False).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(out)).encode()),
                    (_SESSION, session_id),
                ],
            }
        )
        await send({"type": "http.response.body", "body": out})
        return True

    async def _run(
        self,
        ctx: ServerRequestContext[Any, Any],
        key: tuple[str, Any],
        receive: Receive,
        call_of: tuple[Any, str, dict[str, Any] | None, dict[str, Any] | None],
    ) -> dict[str, Any] | None:
        """The call's JSON-RPC answer; None when it was cancelled (the client hung up or said so)."""
        answer: dict[str, Any] | None = None
        request_id, name, arguments, meta = call_of

        async def call(scope: anyio.CancelScope) -> None:
            nonlocal answer
            try:
                result = await self.proxy.run_tool(name, arguments, None, meta, request=ctx)
            except MCPError as exc:  # unknown_tool: "error"
                error = exc.error.model_dump(by_alias=True, mode="json", exclude_none=True)
                answer = {"jsonrpc": "2.0", "id": request_id, "error": error}
            else:
                for later in LATER_CALL_FIELDS.intersection(result):
                    del result[later]
                answer = {"jsonrpc": "2.0", "id": request_id, "result": result}
            scope.cancel()

        async def hang_up(scope: anyio.CancelScope) -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            logger.debug("fast path: the client of call %r hung up", request_id)
            scope.cancel()

        if key in self._calls:
            return {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32600, "message": "Duplicate request id"}}
        try:
            async with anyio.create_task_group() as tg:
                self._calls[key] = tg.cancel_scope
                tg.start_soon(call, tg.cancel_scope)
                tg.start_soon(hang_up, tg.cancel_scope)
        finally:
            self._calls.pop(key, None)
        return answer

    async def _cancelled(self, scope: Scope, receive: Receive, send: Send, sid: str, values: dict[str, Any]) -> bool:
        """The client's ``notifications/cancelled`` for a call of its session in flight here."""
        params = values.get("params")
        request_id = cast("dict[str, Any]", params).get("requestId") if isinstance(params, dict) else None
        if not is_request_id(request_id):
            return False
        call = self._calls.get((sid, request_id))
        if call is None:
            return False  # not ours: the SDK's session may know it
        if await self.manager.usable_session(Request(scope, receive), sid) is None:
            return False
        call.cancel()
        await send({"type": "http.response.start", "status": 202, "headers": [(_SESSION, sid.encode("latin-1"))]})
        await send({"type": "http.response.body", "body": b""})
        return True


def _call_of(message: dict[str, Any]) -> tuple[Any, str, dict[str, Any] | None, dict[str, Any] | None] | None:
    """(id, name, arguments, meta to pass on) of a ``tools/call`` the fast path serves, else None."""
    if message.get("method") != "tools/call" or message.get("jsonrpc") != "2.0":
        return None
    request_id = message.get("id")
    params = message.get("params")
    if not is_request_id(request_id) or not isinstance(params, dict):
        return None
    values = cast("dict[str, Any]", params)
    name, arguments, wire_meta = values.get("name"), values.get("arguments"), values.get("_meta")
    if not isinstance(name, str) or not (arguments is None or isinstance(arguments, dict)):
        return None
    if "requestState" in values or "inputResponses" in values:
        return None
    token, meta = split_meta(wire_meta)
    if token is not None or (isinstance(wire_meta, dict) and "progressToken" in wire_meta):
        return None  # progress rides an SSE answer: the SDK's path
    return request_id, name, cast("dict[str, Any] | None", arguments), meta


def _accepts_json(headers: dict[bytes, bytes]) -> bool:
    """What the SDK's transport asks of a POST: JSON in, and an Accept it may answer JSON to."""
    content_type = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
    if content_type != b"application/json":
        return False
    accept = [part.split(b";")[0].strip().lower() for part in headers.get(b"accept", b"").split(b",")]
    has_json = any(t in (b"application/json", b"application/*", b"*/*") for t in accept)
    has_sse = any(t in (b"text/event-stream", b"text/*", b"*/*") for t in accept)
    return has_json and has_sse


__all__ = ["ENABLED", "FastPath"]
