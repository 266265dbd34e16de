"""The client half of the gateway's fast path: a ``tools/call`` POST answered past the SDK's server.

``FastPath`` is offered every POST's read body by ``http_sessions.SessionManager`` (after the sign-in
middleware, before anything else reads it). It takes a well-formed ``tools/call`` of a live
2025-era session whose connection it knows, or a stateless 2026-07-28 one that passes the
SDK entry's checks (``modern_route``) and whose client cannot be asked for input, and runs it
through ``Proxy.run_tool`` (the same tool path as every call: access rules, names, arguments,
the upstream's policies, the error edge, metrics and logs) on the parsed JSON, answering with
one ``application/json`` body. No SDK transport, dispatcher task or pydantic model on the way.

It keeps what the SDK's path gives that call:

- the session: the same checks as the SDK's manager and transport (Host and Origin, the
  credential and member that opened it, not terminated nor expiring: ``SessionManager.usable_session``),
  its recency for the per-member quota, and its idle timer held while the call is in flight
  (``http_sessions.holding``);
- who is calling: the call's ``ServerRequestContext`` carries the session's own connection
  (``SessionManager.connections``), so what the upstream asks mid-call (sampling, elicitation)
  goes to this session's stream (``session.requests_back``), and errors, status and identity read it
  as on the SDK's path;
- cancellation: the client hanging up, or its ``notifications/cancelled`` for the call,
  cancels it (the upstream is told by the cancelled call);
- bounds: the body was read within ``max_request_body_size``; one nested past
  ``max_json_depth`` is not taken (the SDK's path refuses it);
- progress: a call that asks for it has its notices streamed on its answer, which turns SSE
  when the first one comes (``gateway_answer``).

Everything else goes on to the SDK's path untouched: other methods, a session it does not know
yet, a call with progress when the gateway answers JSON only (``gateway.json_response``),
malformed calls, calls asking for a task (``tasks``), and 2026-07-28 calls that carry ``requestState``
or whose client declared sampling, elicitation, roots (``rounds`` may suspend them) or the tasks
extension. ``patchbay.fast_path: false`` (or ``$PATCHBAY_FAST_PATH=0``) turns it off, read at start.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any, NamedTuple, cast

import anyio
import pydantic_core
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.streamable_http import check_accept_headers
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    MCP_PARAM_HEADER_PREFIX,
    X_MCP_HEADER_KEY,
    InboundLadderRejection,
    classify_inbound_request,
    find_duplicated_routing_header,
    validate_mcp_param_headers,
)
from mcp_types import SERVER_INFO_META_KEY
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from mcp_patchbay.calls.deadlines import ProgressFn
from mcp_patchbay.fastpath.gateway_answer import Answer
from mcp_patchbay.fastpath.messages import progress_sender, split_meta, without_later_fields
from mcp_patchbay.session.http_sessions import SessionManager, holding
from mcp_patchbay.session.proxy import Proxy
from mcp_patchbay.tasks import EXTENSION as TASKS_EXTENSION
from mcp_patchbay.wire.jsonrpc import RequestId, deeper_than, is_request_id

logger = logging.getLogger(__name__)

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
    """``tools/call`` of known 2025-era sessions and stateless 2026-07-28 clients, answered past
    the SDK's server."""

    def __init__(self, proxy: Proxy, manager: SessionManager, max_depth: int | None) -> None:
        self.proxy = proxy
        self.manager = manager
        self.max_depth = max_depth
        self.served = 0
        """Calls answered here (tests read it: the path was taken)."""
        self.enabled = proxy.config.settings.fast_path
        """``patchbay.fast_path``, read at start."""
        self._server_info = proxy.server.server_info_stamp
        self._calls: dict[tuple[str, Any], anyio.CancelScope] = {}
        """(session id, request id) -> the call in flight, for the client's notifications/cancelled."""

    # Long on purpose: every reason to leave a call to the SDK's path, checked before any work.
    async def __call__(self, scope: Scope, receive: Receive, send: Send, body: bytes) -> bool:  # noqa: PLR0912
        if not self.enabled or (b'"tools/call"' not in body and b'"notifications/cancelled"' not in body):
            return False
        headers = dict(scope["headers"])
        session_id = headers.get(_SESSION)
        version = headers.get(_VERSION)
        modern = version is not None and version.decode("latin-1") not in HANDSHAKE_PROTOCOL_VERSIONS
        if session_id is None and not modern:
            return False
        if self.max_depth is not None and deeper_than(body, self.max_depth):
            return False
        try:  # what pydantic-core refuses (a lone surrogate, a BOM) the SDK's path answers (400)
            message = pydantic_core.from_json(body)
        except ValueError:
            return False
        if not isinstance(message, dict):
            return False
        values = cast("dict[str, Any]", message)
        if modern:
            return await self._modern(scope, receive, send, values)
        if session_id is None:
            return False
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
        if call.token is not None and self.manager.json_response:
            return False  # progress would need a stream the gateway was told not to open
        ctx = _context(connection, values, call.id, request)
        answer = Answer(send, [(_SESSION, session_id)])
        with holding(transport):
            message = await self._run(ctx, (sid, call.id), receive, call, answer)
        if message is None:
            await answer.cancelled()
            return True
        self.served += 1
        await answer.finish(message)
        return True

    async def _modern(self, scope: Scope, receive: Receive, send: Send, values: dict[str, Any]) -> bool:
        """A stateless 2026-07-28 ``tools/call`` the SDK's entry would serve as one exchange: the
        same checks first (``modern_route``); one that could be asked for input (its client
        declared sampling, elicitation or roots: ``rounds``) or resumes one takes the SDK's path."""
        call = _call_of(values)
        if call is None:
            return False
        request = Request(scope, receive)
        connection = await modern_route(self.manager, request, values, self.proxy.server.get_tool_input_schema)
        if connection is None:
            return False
        caps = connection.client_capabilities
        if caps is not None and (caps.sampling is not None or caps.elicitation is not None or caps.roots is not None):
            return False
        if caps is not None and caps.extensions is not None and TASKS_EXTENSION in caps.extensions:
            return False  # its call may be answered with a task (tasks)
        streams = "text/event-stream" in request.headers.get("accept", "")
        if call.token is not None and (self.manager.json_response or not streams):
            return False  # progress needs a stream
        ctx = _context(connection, values, call.id, request)
        answer = Answer(send, [])
        message = await self._run(ctx, ("", object()), receive, call, answer)
        if message is None:  # the client hung up: nobody to answer
            return True
        self.served += 1
        status = 200
        if "result" in message:  # what the SDK's entry stamps on a 2026-07-28 result
            result = message["result"]
            result.setdefault("resultType", "complete")
            meta = result.get("_meta")
            kept = cast("dict[str, Any]", meta) if isinstance(meta, dict) else None
            if meta is None or (kept is not None and kept.get(SERVER_INFO_META_KEY) is None):
                result["_meta"] = {**(kept or {}), SERVER_INFO_META_KEY: self._server_info}
        else:
            status = ERROR_CODE_HTTP_STATUS.get(message["error"]["code"], 200)
        await answer.finish(message, status)
        return True

    async def _run(
        self,
        ctx: ServerRequestContext[Any, Any],
        key: tuple[str, Any],
        receive: Receive,
        call: _Call,
        answer: Answer,
    ) -> dict[str, Any] | None:
        """The call's JSON-RPC answer; None when it was cancelled (the client hung up or said so).
        Its progress, if it asked for it, goes to ``answer`` (posted through the outboxes).

        The call runs in this task; a plain asyncio task watches for the client hanging up (an
        anyio task group here was a tenth of the gateway's CPU per call)."""
        request_id = call.id
        if key in self._calls:
            return {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32600, "message": "Duplicate request id"}}
        progress: ProgressFn | None = None
        token, outboxes = call.token, self.proxy.outboxes
        if token is not None and outboxes is not None:
            progress = outboxes.progress(progress_sender(token, answer.progress))
        scope = self._calls[key] = anyio.CancelScope()
        watcher = asyncio.get_running_loop().create_task(_hang_up(receive, scope, request_id))
        try:
            with scope:
                try:
                    result = await self.proxy.run_tool(call.name, call.arguments, progress, call.meta, request=ctx)
                except MCPError as exc:  # unknown_tool: "error"
                    error = exc.error.model_dump(by_alias=True, mode="json", exclude_none=True)
                    return {"jsonrpc": "2.0", "id": request_id, "error": error}
                return {"jsonrpc": "2.0", "id": request_id, "result": without_later_fields(result)}
            return None  # cancelled
        finally:
            watcher.cancel()
            del self._calls[key]

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


async def modern_route(
    manager: SessionManager, request: Request, body: dict[str, Any], input_schema: Callable[[str], Any] | None
) -> Connection | None:
    """A stateless 2026-07-28 request's connection when it passes what the SDK's entry
    checks before serving it (``handle_modern_request``: Host and Origin, Accept, duplicated
    routing headers, the ``_meta`` envelope against the headers, a call's ``Mcp-Param-*``
    headers against the tool's schema); None: the SDK's entry is to answer it."""
    if await manager.security.validate_request(request, is_post=True) is not None:
        return None
    has_json, has_sse = check_accept_headers(request)
    if not has_json or not (has_sse or manager.json_response):
        return None
    if find_duplicated_routing_header(request.headers.items()) is not None:
        return None
    verdict = classify_inbound_request(body, headers=dict(request.headers))
    if isinstance(verdict, InboundLadderRejection):
        return None
    params = cast("dict[str, Any]", body.get("params") or {})
    arguments = cast("dict[str, Any]", params.get("arguments") or {})
    if input_schema is not None and (
        arguments or any(name.startswith(MCP_PARAM_HEADER_PREFIX.lower()) for name in request.headers)
    ):
        schema = input_schema(str(params.get("name")))
        if (
            schema is not None
            and _annotated(schema)
            and validate_mcp_param_headers(schema, arguments, request.headers) is not None
        ):
            return None
    return Connection.from_envelope(verdict.protocol_version, verdict.client_info, verdict.client_capabilities)


_ANNOTATED: dict[int, tuple[Any, bool]] = {}
"""Per schema object (kept, so its id is not reused): whether it carries ``x-mcp-header`` anywhere."""


def _annotated(schema: Any) -> bool:
    """Whether a tool's input schema declares any ``Mcp-Param`` header: only then is there anything
    for ``validate_mcp_param_headers`` to check (it walks the schema on every call otherwise)."""
    seen = _ANNOTATED.get(id(schema))
    if seen is not None and seen[0] is schema:
        return seen[1]
    if len(_ANNOTATED) > 4096:  # catalogs rebuilt many times over: start again
        _ANNOTATED.clear()
    annotated = X_MCP_HEADER_KEY in json.dumps(schema, default=str)
    _ANNOTATED[id(schema)] = (schema, annotated)
    return annotated


async def _hang_up(receive: Receive, scope: anyio.CancelScope, request_id: Any) -> None:
    """Cancel ``scope`` when the client hangs up (its body was read: only a disconnect is left)."""
    while (await receive())["type"] != "http.disconnect":
        pass
    logger.debug("fast path: the client of call %r hung up", request_id)
    scope.cancel()


class _Call(NamedTuple):
    id: RequestId
    name: str
    arguments: dict[str, Any] | None
    meta: dict[str, Any] | None
    """The client's ``_meta`` to pass on (``fastpath.messages.split_meta``)."""
    token: RequestId | None
    """Its progress token: its progress is streamed to it (``gateway_answer``)."""


def _call_of(message: dict[str, Any]) -> _Call | None:
    """A ``tools/call`` the fast path serves, else None."""
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
    if "requestState" in values or "inputResponses" in values or "task" in values:
        return None
    token, meta = split_meta(wire_meta)
    if token is None and isinstance(wire_meta, dict) and "progressToken" in wire_meta:
        return None  # a token that is not an id: the SDK's path answers it
    return _Call(cast("RequestId", request_id), name, cast("dict[str, Any] | None", arguments), meta, token)


def _accepts_json(headers: dict[bytes, bytes]) -> bool:
    """What the SDK's transport asks of a POST: JSON in, and an Accept it may answer JSON to."""
    content_type = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
    if content_type != b"application/json":
        return False
    accept = [part.split(b";")[0].strip().lower() for part in headers.get(b"accept", b"").split(b",")]
    has_json = any(t in (b"application/json", b"application/*", b"*/*") for t in accept)
    has_sse = any(t in (b"text/event-stream", b"text/*", b"*/*") for t in accept)
    return has_json and has_sse


__all__ = ["FastPath"]


def _context(
    connection: Connection, values: dict[str, Any], request_id: RequestId, request: Request
) -> ServerRequestContext[Any, Any]:
    """The SDK's context of a ``tools/call`` served here, as its own dispatch would make it."""
    return ServerRequestContext(
        session=ServerSession(cast(Any, _NO_STREAM), connection),
        lifespan_context={},
        protocol_version=connection.protocol_version,
        method="tools/call",
        params=values.get("params"),
        request_id=request_id,
        request=request,
    )
