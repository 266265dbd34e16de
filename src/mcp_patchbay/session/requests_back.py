"""The channel back to the client: what upstreams ask of the client on the proxy's far side.

An upstream may send requests to its client (sampling, elicitation, roots) and
notifications (log messages, resource updates). The proxy stands in for the client
towards every upstream, so those travel on through the client's session.
``ClientChannel`` is what an upstream may ask (``upstream.Upstream`` takes one);
``SessionChannel`` is its implementation over the clients' SDK sessions.

On stdio there is one client: its session is learnt from its first request (``meet``)
and everything goes there. The HTTP gateway serves many (``shared``): a request from an
upstream goes to the session whose tool call to that upstream is in flight
(``calling``), never to another; when calls from several sessions are in flight to
that server at once, the request cannot be attributed (stdio upstreams of the 2025 era
do not say which call a request belongs to) and is refused, unless all the calls are one
member's and all but one of them are suspended on a question already out (a call
waiting for its answer is likely not asking another; across members a guess is never
made): ``session.in_flight`` decides. A refusal excuses the call's failure from the
server's circuit breaker.

What upstreams are offered is ``capabilities``' to say: on stdio the client's own
declaration, on the gateway what some member may answer; a request the client it reaches
did not declare is answered for it there (``capabilities.refusal``). A URL elicitation's
``notifications/elicitation/complete`` goes to the session that saw the elicitation (asked
through it, or told in a ``-32042`` error: ``elicited``), on the gateway to no other.

A client of the 2026-07-28 protocol has no channel for requests: on stdio as on the
gateway, what its call's upstream asks is put to it through that call (``rounds``: the
call answers ``input_required`` and the client's retry brings the answer back).

Requests an upstream sends before the client spoke, or that the client cannot answer,
get a JSON-RPC error back, never an exception: an upstream's own call must not fail
because its question could not be asked.
"""

from __future__ import annotations

import logging
import weakref
from collections import OrderedDict
from collections.abc import Callable, Generator, Iterable
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, Final, Protocol, cast, get_args
from weakref import WeakKeyDictionary

import anyio
import mcp_types as types
from mcp.client.session import ClientRequestContext
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import ResourceUpdated, SubscriptionBus
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from mcp_patchbay.session import rounds
from mcp_patchbay.session.capabilities import GATEWAY_OFFER, offered, refusal
from mcp_patchbay.session.in_flight import InFlight, caller_among
from mcp_patchbay.session.outbox import Outboxes
from mcp_patchbay.session.sdk import connection_of

logger = logging.getLogger(__name__)

RELATED_TASK = "io.modelcontextprotocol/related-task"
"""The ``_meta`` key naming the task a request belongs to."""

CLIENT_HELLO_WAIT = 2.0
"""Upstreams start once the client's first request arrives (it names the client's
features) or after this long, whichever comes first."""


class ClientChannel(Protocol):
    """What an upstream may ask of the client on the other side of the proxy."""

    def client_capabilities(self) -> types.ClientCapabilities | None: ...

    async def create_message(
        self, server: str, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData: ...

    async def elicit(self, server: str, params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData: ...

    async def list_roots(self, server: str) -> types.ListRootsResult | types.ErrorData: ...

    async def notify(self, server: str, notification: types.ServerNotification) -> None: ...


PauseDeadlines = Callable[[str], AbstractContextManager[None]]
"""The calls in flight of a server, paused while a person answers its elicitation."""
ListenBuses = Callable[[str], Iterable[SubscriptionBus]]
"""The ``subscriptions/listen`` buses of the audiences that may see a server's resources."""
LOG_LEVEL: Final = "mcp_patchbay.log_level"
"""Where a gateway session keeps the level it asked for (``Connection.state``; ``session.passthrough``)."""
_LEVELS: Final[tuple[types.LoggingLevel, ...]] = get_args(types.LoggingLevel)
"""Least severe first."""
ELICITATIONS_KEPT: Final = 1024
"""URL elicitations whose session is remembered for their completion notice (``shared``; the
oldest is forgotten past this: the notice is optional, and a client may not wait for it)."""


def _no_pause(server: str) -> AbstractContextManager[None]:
    return nullcontext()


class SessionChannel:
    """``ClientChannel`` over the client's session, as captured from its first request."""

    def __init__(
        self,
        buses: ListenBuses,
        pause_deadlines: PauseDeadlines | None = None,
        *,
        shared: bool = False,
        outboxes: Outboxes | None = None,
        answer_timeout: float | None = None,
        identity_of: Callable[[ServerRequestContext[Any, Any]], str] | None = None,
    ) -> None:
        """``outboxes``: how notices reach the gateway's sessions (never awaited); None on
        stdio, where the one client's notices are sent in place. ``answer_timeout``: how long
        a person may take over an elicitation while the server's calls are paused (the
        gateway's ``max_call_time``; None on stdio, where the person is the proxy's one user)."""
        self._buses = buses
        self._answer_timeout = answer_timeout
        self._identity_of = identity_of
        """Who a request's caller is (the gateway's ``identity``): a question is never put to
        another member's session. None: one member (stdio, and gateways built without it)."""
        self._pause: PauseDeadlines = pause_deadlines or _no_pause
        self.shared = shared
        self.outboxes = outboxes
        self.session: ServerSession | None = None
        """The one client's session (stdio); None when ``shared``."""
        self._caps: types.ClientCapabilities | None = GATEWAY_OFFER if shared else None
        """What upstreams are offered; on stdio, what the one client declared (``capabilities``)."""
        self._elicitations: OrderedDict[tuple[str, str], weakref.ref[Connection]] = OrderedDict()
        """Per (server, elicitationId) of a URL elicitation, the session that saw it (``shared``)."""
        self._calls: dict[str, list[InFlight]] = {}
        """Per server, the client requests with a tool call to it in flight (``shared``, or
        a 2026-07-28 client on stdio)."""
        self._modern = False
        """The stdio client speaks 2026-07-28: no requests on its session."""
        self._subscribers: WeakKeyDictionary[Connection, dict[str, str]] = WeakKeyDictionary()
        """Per session, the resource URIs it subscribed to, each to the server that took the
        subscription (``shared``): only that server's updates of that URI reach it."""
        self.hello = anyio.Event()
        """Set once the client's first request arrived."""
        self.related_task: Callable[[str, str], str | None] = lambda server, upstream_id: None
        """The id the client holds of a server's task (``tasks``), or None when the proxy knows none."""

    @contextmanager
    def calling(self, server: str, ctx: ServerRequestContext[Any, Any] | None) -> Generator[InFlight | None]:
        """A tool call of ``ctx``'s client to ``server`` is in flight: what the server asks
        meanwhile is for that client (for a 2026-07-28 client, for that call)."""
        if ctx is None or not (self.shared or ctx.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS):
            yield None
            return
        call = InFlight(ctx, rounds.CURRENT.get(), self._member(ctx) if self.shared else None)
        calls = self._calls.setdefault(server, [])
        calls.append(call)
        try:
            yield call
        finally:
            calls.remove(call)

    def subscribed(self, session: ServerSession, uri: str, server: str) -> None:
        """Record a session's resource subscription, taken by ``server`` (``shared``)."""
        self._subscribers.setdefault(connection_of(session), {})[uri] = server

    def unsubscribed(self, session: ServerSession, uri: str) -> tuple[str | None, bool]:
        """Forget a session's subscription (``shared``): the server that held it (None: it held
        none), and whether another session still holds one to ``uri`` there (then the
        upstream's subscription stays)."""
        connection = connection_of(session)
        server = self._subscribers.get(connection, {}).pop(uri, None)
        others = server is not None and any(
            held.get(uri) == server for other, held in self._subscribers.items() if other is not connection
        )
        return server, others

    def _member(self, ctx: ServerRequestContext[Any, Any]) -> str | None:
        return self._identity_of(ctx) if self._identity_of is not None else None

    def meet(self, ctx: ServerRequestContext[Any, Any]) -> None:
        """Learn who the client is from its first request (later ones change nothing)."""
        if self.shared:
            if ctx.method == "initialize":
                _log_client(ctx, self._member(ctx))
            return
        if self.hello.is_set() or ctx.request_id is None:
            return
        self.session = ctx.session
        self._modern = ctx.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS
        if ctx.method == "initialize":
            init = _log_client(ctx)
            if init is not None:
                self._caps = offered(init.capabilities)
        else:
            self._caps = offered(ctx.session.client_capabilities)
        self.hello.set()

    async def wait_for_client(self) -> None:
        if self.shared:
            return  # the gateway's upstreams start at once: clients come and go
        with anyio.move_on_after(CLIENT_HELLO_WAIT):
            await self.hello.wait()

    def client_capabilities(self) -> types.ClientCapabilities | None:
        return self._caps

    def declared(self, ctx: ServerRequestContext[Any, Any] | None) -> types.ClientCapabilities | None:
        """What the client of ``ctx`` declared (None: a call the stdio lane took, its one client's)."""
        return ctx.session.client_capabilities if ctx is not None else self._caps

    def elicited(self, server: str, ids: Iterable[str], ctx: ServerRequestContext[Any, Any] | None) -> None:
        """``ctx``'s session was told of these URL elicitations of ``server`` (a ``-32042`` error):
        their completion notices go to it (``shared``: on stdio every notice goes to the one client)."""
        if not self.shared or ctx is None or ctx.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
            return  # a 2026-07-28 request has no session a notice could reach later
        connection = weakref.ref(connection_of(ctx.session))
        for elicitation_id in ids:
            self._elicitations[(server, elicitation_id)] = connection
            self._elicitations.move_to_end((server, elicitation_id))
        while len(self._elicitations) > ELICITATIONS_KEPT:
            self._elicitations.popitem(last=False)

    async def create_message(
        self, server: str, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData:
        # With tools, the answer may be a tool_use (or several blocks): the SDK's plain result refuses it.
        with_tools = params.tools is not None or params.tool_choice is not None
        result_type = types.CreateMessageResultWithTools if with_tools else types.CreateMessageResult
        return await self._ask(server, types.CreateMessageRequest(params=params), result_type)

    async def elicit(self, server: str, params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
        return await self._ask(server, types.ElicitRequest(params=params), types.ElicitResult, pause=True)

    async def list_roots(self, server: str) -> types.ListRootsResult | types.ErrorData:
        return await self._ask(server, types.ListRootsRequest(), types.ListRootsResult)

    def _related_task_told(self, server: str, request: Any) -> Any:
        """``request`` with the task it belongs to named by the id the client holds: a server asking
        for input while its task runs names the task by its own id, which never reaches the client
        (``related_task`` maps it; a task the proxy does not know of is not named at all)."""
        params = getattr(request, "params", None)
        meta = getattr(params, "meta", None)
        if params is None or not isinstance(meta, dict) or RELATED_TASK not in meta:
            return request
        related = cast("dict[str, Any]", meta)[RELATED_TASK]
        upstream_id = cast("dict[str, Any]", related).get("taskId") if isinstance(related, dict) else None
        ours = self.related_task(server, upstream_id) if isinstance(upstream_id, str) else None
        rest = {k: v for k, v in cast("dict[str, Any]", meta).items() if k != RELATED_TASK}
        if ours is not None:
            rest[RELATED_TASK] = {"taskId": ours}
        return request.model_copy(update={"params": params.model_copy(update={"meta": rest or None})})

    async def _ask(self, server: str, request: Any, result_type: type[Any], *, pause: bool = False) -> Any:
        """``pause``: the server's calls in flight do not time out while a person answers on a
        2025-era session. A 2026-07-28 call's question is not paused: that call is suspended
        until its client comes back, and its deadline is what bounds the wait (and frees its
        concurrency slot), whoever the client is."""
        session, declared, caller = self.session, self._caps, None
        if self.shared or self._modern:
            caller = caller_among(self._calls.get(server) or [], server, request.method, shared=self.shared)
            if isinstance(caller, types.ErrorData):
                return caller
            if caller.exchange is not None:
                return await caller.exchange.ask(request)
            if caller.ctx.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
                caller.refused = True
                return types.ErrorData(
                    code=types.INVALID_REQUEST,
                    message=f"The client cannot answer {request.method}: it speaks the 2026-07-28 protocol and "
                    "declared neither sampling, elicitation nor roots.",
                )
            session, declared = caller.ctx.session, caller.ctx.session.client_capabilities
        if session is None:
            return types.ErrorData(code=types.INVALID_REQUEST, message="The client is not connected yet.")
        refused = refusal(declared, request)
        if refused is not None:  # the gateway offers what some member may answer; this one may not
            logger.info(
                "'%s' sent %s the client did not declare: answered for it (%s)", server, request.method, refused.code
            )
            if caller is not None:
                caller.refused = True
            return refused
        request = self._related_task_told(server, request)
        params = getattr(request, "params", None)
        if isinstance(params, types.ElicitRequestURLParams) and params.elicitation_id and caller is not None:
            self.elicited(server, (params.elicitation_id,), caller.ctx)
        limit = self._answer_timeout if pause else None
        try:
            with self._pause(server) if pause else nullcontext():
                # Bounded on the gateway: while a person answers, every call to this server is paused
                # and this one holds its concurrency slot; a member who never answers must not hold
                # them, and others' deadlines, for good.
                with anyio.fail_after(limit) if limit is not None else nullcontext():
                    return await session.send_request(request, result_type)
        except TimeoutError:
            logger.warning(
                "'%s' asked the client for %s; no answer within %g s: refused", server, request.method, limit
            )
            return types.ErrorData(
                code=types.REQUEST_TIMEOUT,
                message=f"The user did not answer within {limit:g} s (patchbay.max_call_time).",
            )
        except MCPError as exc:
            return exc.error
        except Exception as exc:
            logger.warning("forwarding %s from '%s' to the client failed: %r", request.method, server, exc)
            return types.ErrorData(
                code=types.INTERNAL_ERROR, message=f"The client could not answer {request.method} through the proxy."
            )

    async def notify(self, server: str, notification: types.ServerNotification) -> None:
        if self.shared:
            await self._notify_shared(server, notification)
            return
        session = self.session
        if session is None:
            return
        match notification:
            case types.LoggingMessageNotification(params=p):
                logger_name = f"{server}/{p.logger}" if p.logger else server
                await session.send_notification(
                    types.LoggingMessageNotification(
                        params=types.LoggingMessageNotificationParams(level=p.level, logger=logger_name, data=p.data)
                    )
                )
            case types.ResourceUpdatedNotification(params=p):
                for bus in self._buses(server):
                    await bus.publish(ResourceUpdated(uri=str(p.uri)))
                await session.send_notification(notification)
            case types.ElicitCompleteNotification() if not self._modern:
                await session.send_notification(notification)
            case _:
                pass

    async def _notify_shared(self, server: str, notification: types.ServerNotification) -> None:
        """A log message goes to the session whose call is in flight, at or above the level
        that session asked for; a resource update to the sessions that subscribed to it on
        that server, and to the 2026-07-28 listeners that may see the server. Through each
        session's outbox: never waiting for a client to read."""
        outboxes = self.outboxes
        match notification:
            case types.LoggingMessageNotification(params=p):
                calls = self._calls.get(server) or []
                connections = {id(call.connection): call.connection for call in calls}
                if len(connections) != 1 or outboxes is None:
                    return
                (connection,) = connections.values()
                wanted = connection.state.get(LOG_LEVEL)
                if wanted is not None and _LEVELS.index(p.level) < _LEVELS.index(wanted):
                    return
                params: dict[str, Any] = {"level": p.level, "data": p.data}
                params["logger"] = f"{server}/{p.logger}" if p.logger else server
                outboxes.post(connection, "notifications/message", params)
            case types.ResourceUpdatedNotification(params=p):
                uri = str(p.uri)
                for bus in self._buses(server):
                    await bus.publish(ResourceUpdated(uri=uri))
                if outboxes is None:
                    return
                for connection, held in list(self._subscribers.items()):
                    if held.get(uri) == server:
                        outboxes.post(connection, "notifications/resources/updated", {"uri": uri})
            case types.ElicitCompleteNotification(params=p):
                seen_by = self._elicitations.pop((server, p.elicitation_id), None)
                connection = seen_by() if seen_by is not None else None
                if connection is None or outboxes is None:
                    logger.debug("'%s' completed an elicitation no session here saw: dropped", server)
                    return
                outboxes.post(connection, "notifications/elicitation/complete", {"elicitationId": p.elicitation_id})
            case _:
                pass


def _log_client(ctx: ServerRequestContext[Any, Any], member: str | None = None) -> types.InitializeRequestParams | None:
    try:
        init = types.InitializeRequestParams.model_validate(ctx.params or {}, by_name=False)
    except Exception:
        logger.debug("could not read the client's initialize params", exc_info=True)
        return None
    logger.info(
        "client %s %s connected (protocol %s)%s",
        init.client_info.name,
        init.client_info.version,
        init.protocol_version,
        f" as {member}" if member else "",
    )
    return init


def session_callbacks(client: ClientChannel | None, name: str) -> dict[str, Any]:
    """The SDK session's callbacks for an upstream, and what it is offered (``offered``: what the
    client on the other side declared, or on the gateway what some member may answer); sampling,
    elicitation and roots are each answered through ``client``."""
    if client is None:
        return {}
    caps = client.client_capabilities()
    if caps is None:
        return {}
    callbacks: dict[str, Any] = {"offered": caps}  # declared as they are (``sdk.OfferingSession``)
    if caps.sampling is not None:

        async def sampling(
            ctx: ClientRequestContext, params: types.CreateMessageRequestParams
        ) -> types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData:
            return await client.create_message(name, params)

        callbacks["sampling_callback"] = sampling
    if caps.elicitation is not None:

        async def elicitation(
            ctx: ClientRequestContext, params: types.ElicitRequestParams
        ) -> types.ElicitResult | types.ErrorData:
            return await client.elicit(name, params)

        callbacks["elicitation_callback"] = elicitation
    if caps.roots is not None:

        async def roots(ctx: ClientRequestContext) -> types.ListRootsResult | types.ErrorData:
            return await client.list_roots(name)

        callbacks["list_roots_callback"] = roots
    return callbacks


__all__ = ["CLIENT_HELLO_WAIT", "RELATED_TASK", "ClientChannel", "SessionChannel", "session_callbacks"]
