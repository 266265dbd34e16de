"""The gateway's HTTP sessions: the SDK's streamable HTTP session manager, with what a shared gateway needs.

``SessionManager`` replaces a few of the SDK's private methods (``_handle_stateful_request``,
``_admit_session``, ``_discard_session``) and reads its private tables; ``holding`` does what
the SDK's transport does for a request served past it. ``tests/test_sdk.py`` and the gateway's
tests fail when an SDK upgrade moves them. What the manager adds is in its docstring.
"""

from __future__ import annotations

import logging
import math
from collections import Counter, OrderedDict, deque
from collections.abc import Awaitable, Callable, Generator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Protocol, cast, runtime_checkable

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, AuthorizationContext, authorization_context
from mcp.server.connection import Connection
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, EventStore, StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecurityMiddleware
from mcp_types import INTERNAL_ERROR, INVALID_REQUEST, ErrorData, JSONRPCError
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from mcp_patchbay.throttle import LogThrottle
from mcp_patchbay.wire.jsonrpc import RequestId, deeper_than, envelope_of

logger = logging.getLogger(__name__)


class SessionManager(StreamableHTTPSessionManager):
    """The SDK's streamable HTTP session manager, with what a shared gateway needs on top.

    - One event store per session (the SDK's manager shares one, in which sessions'
      stream ids, their request ids, collide).
    - Sessions per member: ``member`` says who makes a request (``gateway.identity``); one
      member holds at most ``max_sessions_per_member`` sessions, counted where sessions are
      admitted and counted down in the one place every session ends, however it ends
      (DELETE, idle timeout, a crash, the opening request failing, ``end_session``). At the
      limit, the member's least recently used idle session (no request in flight, no open
      stream) is ended to admit the new one: clients that never end their sessions (Claude
      Code's health check does not) would otherwise lock their own user out for the idle
      timeout. A session is busy while a request of it is in flight, its opening request
      included until it is answered (ending one still opening dropped its client). Only when
      every one of its sessions is busy is the member refused (429 with ``Retry-After``); the
      other members are never touched.
    - A session opened with a credential answers only that member: another member's
      request for it gets the 404 of an unknown session (the SDK compares the token's
      client, issuer and subject only, so two JWTs without ``sub`` and with one ``azp``
      shared sessions).
    - The gateway's fast path (``fast``) is offered each POST's body first, with what it needs of
      a session: ``usable_session`` (the checks the SDK would make), ``connections`` (each
      session's connection) and ``holding`` (its idle timer).
    - A client that goes away while sending a body is one DEBUG line (the SDK logged it
      at ERROR with a traceback, and passed the error into the session).
    """

    def __init__(
        self,
        app: Server[Any],
        *,
        event_stores: Callable[[], EventStore] | None = None,
        member: Callable[[Scope], str] | None = None,
        max_sessions_per_member: int | None = None,
        max_json_depth: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(app, **kwargs)
        self._max_depth = max_json_depth
        self._event_stores = event_stores
        self._member = member
        self._max_per_member = max_sessions_per_member
        self._members: dict[str, str] = {}
        """Session id -> the member that opened it."""
        self._recency: dict[str, OrderedDict[str, None]] = {}
        """Member -> its sessions, least recently used first."""
        self._held: Counter[str] = Counter()
        """Member -> sessions it holds."""
        self._opening: set[str] = set()
        """Sessions whose opening request is not answered yet: busy, never ended to make room
        (the SDK counts the request in flight only once the session's server task has started)."""
        self._refusals = LogThrottle(logger)
        self._evictions = LogThrottle(logger, level=logging.INFO)
        """Sessions refused to a member over its quota: a WARNING, at most 10 a minute."""
        self._streams: dict[str, set[Callable[[], None]]] = {}
        """Session id -> how to drop the connection of each GET stream it has open."""
        self.connections: dict[str, Connection] = {}
        """Session id -> its connection, once a request of it went through the SDK's server
        (``remember_connection``): what the fast path (``fastpath.gateway_calls``) calls with."""
        self.fast: FastPath | None = None
        """The gateway's fast path: offered every POST's read body first (True: it answered)."""
        self.security = TransportSecurityMiddleware(self.security_settings)
        """The Host and Origin checks of the SDK's transports, for requests served past them."""

    async def handle_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        method = scope.get("method")
        if method == "POST":
            read = await self._read_body(scope, receive)
            if read is None:
                return
            receive, body = read
            fast = self.fast if len(body) <= self.max_request_body_size else None  # past it: the SDK's 413
            if fast is not None and await fast(scope, receive, send, body):
                return
            if self._max_depth is not None and deeper_than(body, self._max_depth):
                # As on stdio (patchbay.max_json_depth): refused before anything recurses on it.
                request_id = envelope_of(body).request_id
                message = (
                    f"Invalid request: the message nests arrays and objects more than {self._max_depth} deep "
                    "(patchbay.max_json_depth)."
                )
                await _error(400, INVALID_REQUEST, message, request_id=request_id)(scope, receive, send)
                return
        elif method == "GET":
            # The session's standalone stream: while it is open, ``end_session`` can drop its
            # connection (a client that reads nothing would otherwise hold it, and the task
            # writing to it, until the client itself hung up).
            session_id = Headers(scope=scope).get(MCP_SESSION_ID_HEADER)
            extensions = cast("dict[str, Any]", scope.get("extensions") or {})
            abort = cast("Callable[[], None] | None", extensions.get(ABORT_EXTENSION))
            if session_id is not None and abort is not None:
                held = self._streams.setdefault(session_id, set())
                held.add(abort)
                try:
                    await super().handle_request(scope, receive, send)
                finally:
                    held.discard(abort)
                    if not held and self._streams.get(session_id) is held:
                        del self._streams[session_id]
                return
        await super().handle_request(scope, receive, send)

    async def _read_body(self, scope: Scope, receive: Receive) -> tuple[Receive, bytes] | None:
        """The request's body read up front (up to the size limit; past it the SDK answers
        413): a receive that replays it and the body, or None when the client went away mid-body."""
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_request_body_size:
            return receive, b""  # the SDK answers 413 without reading
        messages: deque[Message] = deque()
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                logger.debug("client %s went away mid-request (%d bytes of its body read)", _client(scope), size)
                return None
            messages.append(message)
            size += len(message.get("body", b""))
            if not message.get("more_body", False) or size > self.max_request_body_size:
                break

        # One chunk in almost every request: no copy then.
        body = messages[0].get("body", b"") if len(messages) == 1 else b"".join(m.get("body", b"") for m in messages)

        async def replay() -> Message:
            return messages.popleft() if messages else await receive()

        return replay, body

    async def _handle_stateful_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        member = self._member(scope) if self._member is not None else None
        session_id = Headers(scope=scope).get(MCP_SESSION_ID_HEADER)
        if (
            member is not None
            and session_id is not None
            and isinstance(scope.get("user"), AuthenticatedUser)
            and self._members.get(session_id, member) != member
        ):
            logger.warning("Rejecting request for session %s: another member opened it", session_id[:64])
            await _error(404, INVALID_REQUEST, "Session not found")(scope, receive, send)
            return
        if session_id is not None and (owner := self._members.get(session_id)) is not None:
            self._recency[owner].move_to_end(session_id)
        admitting = _admitting.set(member)
        opened = _opened.set([])
        try:
            await super()._handle_stateful_request(scope, receive, send)
        except _OverQuota as over:
            self._refusals.log(
                "Refusing a new session to %s: all %d of its sessions are busy (gateway.max_sessions_per_identity)",
                over.member,
                over.held,
            )
            message = (
                f"Too many open sessions for your credential ({over.held}, the limit, all of them busy): close "
                "the clients you no longer use, or end their sessions (DELETE with their Mcp-Session-Id), then "
                "connect again"
            )
            await _error(429, INVALID_REQUEST, message, {"Retry-After": str(QUOTA_RETRY_AFTER)})(scope, receive, send)
        except _Full:
            self._refusals.log("Refusing a new session: %d sessions are open (gateway.max_sessions)", self.sessions)
            message = (
                "This gateway has as many sessions open as it allows (gateway.max_sessions): try again in a "
                "moment, or ask its operator to raise the limit"
            )
            await _error(503, INTERNAL_ERROR, message, {"Retry-After": str(QUOTA_RETRY_AFTER)})(scope, receive, send)
        finally:
            self._opening.difference_update(_opened.get() or ())
            _opened.reset(opened)
            _admitting.reset(admitting)

    async def usable_session(self, request: Request, session_id: str) -> StreamableHTTPServerTransport | None:
        """The live transport of a 2025-era session ``request`` may use as the SDK's path would let
        it (Host and Origin, same credential, same member), its recency noted; None: the SDK's
        path is to answer (a refusal, a 404, a terminated or expiring session)."""
        transport = self._server_instances.get(session_id)  # pyright: ignore[reportPrivateUsage]
        if transport is None or transport.is_terminated:
            return None
        if transport.idle_scope is not None and transport.idle_scope.cancel_called:
            return None
        scope = request.scope
        user = scope.get("user")
        requestor = authorization_context(user) if isinstance(user, AuthenticatedUser) else None
        if requestor != self._session_owners.get(session_id):  # pyright: ignore[reportPrivateUsage]
            return None
        owner = self._members.get(session_id)
        member = self._member(scope) if self._member is not None and isinstance(user, AuthenticatedUser) else None
        if owner is not None and member is not None and member != owner:
            return None
        if await self.security.validate_request(request, is_post=True) is not None:
            return None
        if owner is not None:
            self._recency[owner].move_to_end(session_id)
        return transport

    def remember_connection(self, session_id: str, connection: Connection) -> None:
        """A request of a live session went through the SDK's server: its connection, for the fast path."""
        if session_id in self._server_instances and session_id not in self.connections:  # pyright: ignore[reportPrivateUsage]
            self.connections[session_id] = connection

    def _admit_session(self, requestor: AuthorizationContext | None) -> StreamableHTTPServerTransport | None:
        member = _admitting.get()
        if member is not None and self._max_per_member is not None and self._held[member] >= self._max_per_member:
            self._make_room(member)
        transport = super()._admit_session(requestor)
        if transport is None:
            raise _Full
        if self._event_stores is not None:
            transport._event_store = self._event_stores()  # pyright: ignore[reportPrivateUsage]
        session_id = transport.mcp_session_id
        if session_id is not None:
            self._opening.add(session_id)
            if (opened := _opened.get()) is not None:
                opened.append(session_id)
        if member is not None and session_id is not None:
            self._members[session_id] = member
            self._held[member] += 1
            self._recency.setdefault(member, OrderedDict())[session_id] = None
        return transport

    def _make_room(self, member: str) -> None:
        """End ``member``'s least recently used idle session, or raise ``_OverQuota``."""
        instances = self._server_instances  # pyright: ignore[reportPrivateUsage]
        recency: OrderedDict[str, None] = self._recency.get(member) or OrderedDict()
        for session_id in list(recency):
            transport = instances.get(session_id)
            if (
                transport is None
                or session_id in self._opening
                or getattr(transport, "_requests_in_flight", 1)  # busy (unknown: busy)
            ):
                continue
            self._forget(session_id)
            instances.pop(session_id, None)
            self._session_owners.pop(session_id, None)  # pyright: ignore[reportPrivateUsage]
            self._evictions.log(
                "Ended session %s of %s, its least recently used idle one, to open a new one "
                "(gateway.max_sessions_per_identity)",
                session_id,
                member,
            )
            assert self._task_group is not None  # pyright: ignore[reportPrivateUsage]
            self._task_group.start_soon(self._terminate, transport)  # pyright: ignore[reportPrivateUsage]
            return
        raise _OverQuota(member, self._held[member])

    async def _terminate(self, transport: StreamableHTTPServerTransport) -> None:
        with anyio.CancelScope(shield=True):
            await transport.terminate()

    def _forget(self, session_id: str) -> None:
        """Count a session down for its member (once: before any await)."""
        self.connections.pop(session_id, None)
        member = self._members.pop(session_id, None)
        if member is None:
            return
        self._held[member] -= 1
        if self._held[member] <= 0:
            del self._held[member]
        recency = self._recency.get(member)
        if recency is not None:
            recency.pop(session_id, None)
            if not recency:
                del self._recency[member]

    async def _discard_session(self, session_id: str, transport: StreamableHTTPServerTransport) -> None:
        self._forget(session_id)
        store = transport._event_store  # pyright: ignore[reportPrivateUsage]
        if isinstance(store, ClosingEventStore):
            store.close()  # the resumed streams it follows end with the session
        await super()._discard_session(session_id, transport)

    @property
    def sessions(self) -> int:
        """Open 2025-era sessions."""
        return len(self._server_instances)  # pyright: ignore[reportPrivateUsage]

    async def end_session(self, session_id: str) -> None:
        """End one session now: its id answers 404 from here on, and the connections of its
        GET streams are dropped (the session is ended because its client does not read: a
        clean end of the stream could never be written)."""
        transport = self._server_instances.get(session_id)  # pyright: ignore[reportPrivateUsage]
        if transport is not None:
            await self._discard_session(session_id, transport)
        for abort in list(self._streams.pop(session_id, ())):
            abort()

    async def close_sessions(self) -> None:
        """End every session now (their GET streams end cleanly; later requests get 404)."""
        for session_id, transport in list(self._server_instances.items()):  # pyright: ignore[reportPrivateUsage]
            await self._discard_session(session_id, transport)


@contextmanager
def holding(transport: StreamableHTTPServerTransport) -> Generator[None]:
    """A request served past the SDK's transport holds its session as one the transport served
    does (``StreamableHTTPServerTransport.handle_request``): the idle countdown is suspended
    while it is in flight and restarts when the last one ends."""
    idle = transport.idle_scope
    timeout = transport._idle_timeout  # pyright: ignore[reportPrivateUsage]
    if idle is None or timeout is None:
        yield
        return
    transport._requests_in_flight += 1  # pyright: ignore[reportPrivateUsage]
    idle.deadline = math.inf
    try:
        yield
    finally:
        transport._requests_in_flight -= 1  # pyright: ignore[reportPrivateUsage]
        if not transport._requests_in_flight:  # pyright: ignore[reportPrivateUsage]
            idle.deadline = anyio.current_time() + timeout


FastPath = Callable[[Scope, Receive, Send, bytes], Awaitable[bool]]
"""Offered a POST's body before the SDK's path: True when it answered the request itself."""

ABORT_EXTENSION = "patchbay.abort"
"""The ASGI scope extension under which the gateway's listener (``gateway.edge``) lends a
request a way to drop its connection at once, unsent data and all."""


@runtime_checkable
class ClosingEventStore(Protocol):
    """An event store that follows resumed streams itself (``gateway.event_store``): told when its session ends."""

    def close(self) -> None: ...


class _Full(Exception):
    """Every session the gateway allows is open (``gateway.max_sessions``): 503 with ``Retry-After``."""


QUOTA_RETRY_AFTER = 30
"""Seconds a member over its session quota is told to wait (``Retry-After``): long enough
not to hammer, short enough for a client that has just closed a session."""

_admitting: ContextVar[str | None] = ContextVar("patchbay_admitting", default=None)
"""The member whose request may open a session (the SDK's ``_admit_session`` sees only the
credential's client, issuer and subject)."""
_opened: ContextVar[list[str] | None] = ContextVar("patchbay_opened", default=None)
"""The sessions this request opened (``_admit_session``): busy until it is answered."""


class _OverQuota(Exception):
    def __init__(self, member: str, held: int) -> None:
        super().__init__(member)
        self.member = member
        self.held = held


def _error(
    status: int, code: int, message: str, headers: dict[str, str] | None = None, *, request_id: RequestId | None = None
) -> Response:
    """A JSON-RPC error body (without an id unless one is known), as the SDK's manager answers."""
    body = JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message))
    return Response(
        body.model_dump_json(by_alias=True, exclude_unset=True),
        status_code=status,
        headers=headers,
        media_type="application/json",
    )


def _client(scope: Scope) -> str:
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if isinstance(client, tuple | list) and len(client) == 2 else "?"  # pyright: ignore[reportUnknownArgumentType]


__all__ = ["ABORT_EXTENSION", "ClosingEventStore", "FastPath", "SessionManager", "holding"]
