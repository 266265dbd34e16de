"""The downstream edge: the one MCP server the client sees.

Handlers for the client's requests, built on the SDK's low-level ``Server``. This is
the only place where a tool call's exception becomes what the client sees: a
``PatchbayError`` becomes an ``isError`` tool result (``errors.to_result``), or a
JSON-RPC error for unknown tools when ``unknown_tool`` is ``"error"``; requests that have
no result form (prompts, resources) get their JSON-RPC error in ``passthrough``.
Everything inside raises.

What upstreams ask of the client (sampling, elicitation, roots, notifications) goes
through ``client_channel``; a 2026-07-28 client is asked through its call (``rounds``:
the call answers ``input_required`` and the client's retry resumes it). The client's
stdio wire is ``client_wire``.
Non-tool requests are ``passthrough``'s; what the client lists is ``exposure``'s.
On the gateway every notice to a session (list changes here, resource updates and log
messages in ``client_channel``) goes through that session's ``outbox``, never awaited;
``subscriptions/listen`` streams have an audience per access, and quotas per member.

One module on purpose, though past 450 lines: the tool path (``run_tool``, ``_fail``) and
the change notifications both answer "what has this client been served", and the edge
where errors become results must stay the only one.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager, AsyncExitStack, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any
from weakref import WeakKeyDictionary

import anyio
import anyio.abc
import mcp_types as types
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.request_state import RequestStateBoundary
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ServerEvent,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import BaseModel, ValidationError

from mcp_patchbay import __version__
from mcp_patchbay.catalog import Catalog, CatalogTool, Permits, restricted
from mcp_patchbay.client_channel import SessionChannel
from mcp_patchbay.client_wire import Wire, message_wire
from mcp_patchbay.config import Config
from mcp_patchbay.config.gateway import GatewaySettings
from mcp_patchbay.deadlines import Deadline, ProgressFn
from mcp_patchbay.errors import (
    ClientError,
    Code,
    PatchbayError,
    SignedIn,
    UpstreamError,
    to_mcp_error,
    to_result,
)
from mcp_patchbay.exposure import (
    Exposure,
    call_request,
    described_servers,
    find_request,
    find_result,
    unavailable_notes,
)
from mcp_patchbay.lane import CallLane, split_meta
from mcp_patchbay.messages import hidden_tool, unknown_name
from mcp_patchbay.outbox import EndSession, Outboxes
from mcp_patchbay.passthrough import STATUS_URI, Passthrough
from mcp_patchbay.policies import ToolCall
from mcp_patchbay.results import bounded
from mcp_patchbay.rounds import AUDIENCE, Rounds, answers_input, refused_state_as_result, state_security
from mcp_patchbay.sdk import connection_of
from mcp_patchbay.spawn import Prespawned
from mcp_patchbay.status import Viewer
from mcp_patchbay.supervisor import Supervisor
from mcp_patchbay.throttle import LogThrottle
from mcp_patchbay.transports import Connector
from mcp_patchbay.upstream import Upstream

logger = logging.getLogger("mcp_patchbay.server")

STATUS_TOOL = "patchbay__status"
_REQUEST: ContextVar[ServerRequestContext[Any, Any] | None] = ContextVar("patchbay_request", default=None)
"""The client request being handled (set by ``Proxy._observe``); None on the stdio call lane."""
CallObserver = Callable[[str | None, str | None, str, float], None]
"""(server, upstream tool, outcome, seconds): ``ok``, ``tool_error`` (the tool's own
``isError``) or the proxy's error code; server and tool None when the name was not resolved."""
AccessFor = Callable[[], Permits | None]
"""What the caller of the current request may use; None: everything (stdio, open gateways)."""
IdentityOf = Callable[[ServerRequestContext[Any, Any]], str]
"""The member behind a request (the gateway's ``identity.request_identity`` of ``ctx.request``)."""
_LIST_EVENTS: dict[str, ServerEvent] = {
    "tools": ToolsListChanged(),
    "prompts": PromptsListChanged(),
    "resources": ResourcesListChanged(),
}
_LIST_METHODS: dict[str, str] = {
    "tools": "notifications/tools/list_changed",
    "prompts": "notifications/prompts/list_changed",
    "resources": "notifications/resources/list_changed",
}


class _ProxyServer(Server[Any]):
    """The SDK's server, announcing ``listChanged`` for every list: upstreams come and go."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options
            or NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True),
            experimental_capabilities,
            extensions,
        )


@dataclass(eq=False)
class View:
    """What one caller may see: the catalog under its access, what it lists, its servers."""

    catalog: Catalog
    exposure: Exposure
    access: Permits | None
    servers_now: Callable[[], dict[str, str | None]]

    @functools.cached_property
    def servers(self) -> dict[str, str | None]:
        """Every server it may use, in config order, to its instructions (asked for only by
        listings and searches: a call need not build it)."""
        return self.servers_now()


@dataclass(eq=False)
class _Audience:
    """What one client session has been served (a change is measured against it)."""

    access: Permits | None
    served: dict[str, object] = field(default_factory=dict[str, object])
    """Each list as it was last served, by kind."""
    told: set[str] = field(default_factory=set[str])
    """Kinds it was told changed and has not listed since: one notice is enough."""


class _Listeners:
    """The 2026-07-28 clients of one access, which hear of changes on ``subscriptions/listen``:
    an audience of their own (as a 2025-era session is), and a bus of their own, so that a
    change or a resource update reaches only those who may see it."""

    def __init__(self, access: Permits | None, max_streams: int | None) -> None:
        self.access = access
        self.bus = InMemorySubscriptionBus()
        self.handler = (
            ListenHandler(self.bus) if max_streams is None else ListenHandler(self.bus, max_subscriptions=max_streams)
        )


class Proxy:
    """The proxy: stdio serves one client with it; the HTTP gateway serves every session."""

    def __init__(
        self,
        config: Config,
        *,
        connector: Connector | None = None,
        prespawned: Prespawned | None = None,
        access_for: AccessFor | None = None,
        shared: bool = False,
        request_state_keys: Sequence[str] = (),
        identity_of: IdentityOf | None = None,
        end_session: EndSession | None = None,
    ) -> None:
        """``access_for``: the current caller's access (the gateway's sign-in); ``shared``:
        many clients at once (the gateway), so upstreams are offered what any may answer;
        ``request_state_keys``: the gateway's keys sealing ``requestState`` (stdio reads
        ``$PATCHBAY_STATE_KEY``; without either, a key made at start); ``identity_of``: who
        a request's caller is, for the per-member quotas (listen streams, suspended calls);
        ``end_session``: ends one HTTP session by id (a session that does not read its
        notices). Shared, the limits are ``config.gateway``'s."""
        self.config = config
        self.settings = config.settings
        self._limits = (config.gateway or GatewaySettings()) if shared else None
        self._identity_of = identity_of if shared else None
        self._state_security = state_security(request_state_keys, environ=None if shared else os.environ)
        self.rounds = Rounds(
            self._state_security.ttl,
            max_waiting=self._limits.max_waiting_calls_per_identity if self._limits is not None else None,
        )
        """2026-07-28 calls suspended on a question of their upstream."""
        self._listeners: dict[Permits | None, _Listeners] = {}
        """The listen streams' audiences, by access."""
        self._listening: dict[str, int] = {}
        """Open listen streams per member (``shared``)."""
        self._listen_streams = 0
        self._refusals = LogThrottle(logger)
        """Listen streams refused over a quota: a WARNING, at most 10 a minute."""
        self.outboxes = (
            Outboxes(
                send_timeout=self._limits.send_timeout,
                max_queued=self._limits.max_queued_messages,
                end_session=end_session,
            )
            if self._limits is not None
            else None
        )
        """Notices to the gateway's sessions, each session's sent by a task of its own."""
        self.channel = SessionChannel(
            self._listen_buses,
            self._pause_deadlines,
            shared=shared,
            outboxes=self.outboxes,
            answer_timeout=self.settings.max_call_time if shared else None,
        )
        self._access_for = access_for
        self._audiences: WeakKeyDictionary[Connection | _Listeners, _Audience] = WeakKeyDictionary()
        """Per client session (the SDK's ``Connection``), what it was served."""
        self._views: dict[Permits, View] = {}
        self._exposures: dict[Permits, Exposure] = {}
        self.supervisor = Supervisor(
            config,
            client=self.channel,
            wait_for_client=self.channel.wait_for_client,
            connector=connector,
            prespawned=prespawned or Prespawned(),
        )
        self.supervisor.listeners.append(self._on_catalog_change)
        self.passthrough = Passthrough(
            self.supervisor,
            self._serving,
            self.status_snapshot,
            lambda: self.view().catalog,
            (lambda: self.view().servers) if access_for is not None else None,
            shared=shared,
        )
        self.supervisor.ready_listeners.append(self.passthrough.on_upstream_ready)
        self._pending_changes: set[str] = set()
        self._changes = anyio.Event()
        self.exposure = Exposure(self.settings)
        self.on_call: CallObserver | None = None
        """Told of every tool call's outcome (the gateway's metrics)."""
        self._views_of: Catalog | None = None
        """The catalog the cached views were made from."""
        self.server = self._build_server()
        self.lane = CallLane(self.run_tool)

    # --- wiring ---------------------------------------------------------------------------

    def _build_server(self) -> Server[Any]:
        server: Server[Any] = _ProxyServer(
            "mcp-patchbay",
            version=__version__,
            instructions=None,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_resources=self.passthrough.list_resources,
            on_list_resource_templates=self.passthrough.list_templates,
            on_read_resource=self.passthrough.read_resource,
            on_subscribe_resource=self._subscribe,
            on_unsubscribe_resource=self._unsubscribe,
            on_list_prompts=self.passthrough.list_prompts,
            on_get_prompt=self.passthrough.get_prompt,
            on_completion=self.passthrough.complete,
            # 2026-07-28 clients have no standalone channel: they hear about changes on a listen stream.
            on_subscriptions_listen=self._listen,
        )
        # Registered by method rather than by the deprecated constructor arguments: logging and
        # roots are deprecated in the 2026-07-28 protocol, but 2025-era clients still use them.
        server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, self.passthrough.set_level)
        server.add_notification_handler(
            "notifications/roots/list_changed", types.NotificationParams, self.passthrough.roots_changed
        )
        # The SDK checks a 2026-07-28 call's Mcp-Param-* headers against the tool's inputSchema;
        # without this it runs a whole tools/list through the server for every call.
        server.get_tool_input_schema = self._input_schema
        # Our observer, then requestState sealed and opened (rounds). Not the SDK's default
        # OpenTelemetry middleware: it costs ~10% per call and exports nothing unless an OTel
        # SDK is configured in this process, which it never is.
        server.middleware = [
            self._observe,
            refused_state_as_result,
            RequestStateBoundary(self._state_security, default_audience=AUDIENCE),
        ]
        return server

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """The proxy's background work (upstreams, change notifications), until cancelled."""
        async with anyio.create_task_group() as tg:
            self.passthrough.tg = tg
            if self.outboxes is not None:
                self.outboxes.tg = tg
            await tg.start(self.rounds.run)
            await tg.start(self.supervisor.run)
            tg.start_soon(self._send_changes)
            tg.start_soon(self._warm_index)
            task_status.started()

    async def serve(
        self,
        read_stream: Any,
        write_stream: Any,
        wire: Wire | None = None,
        *,
        before_stop: Callable[[], None] | None = None,
    ) -> None:
        """Serve one client over the given streams until it goes away (with ``run`` beside).
        ``before_stop`` runs as serving ends, however it ends, before the upstreams are cancelled."""
        async with anyio.create_task_group() as tg:
            await tg.start(self.run)
            try:
                await self.serve_client(read_stream, write_stream, wire)
                logger.info("client closed the connection; stopping upstreams")
            finally:
                if before_stop is not None:
                    before_stop()
                tg.cancel_scope.cancel()

    async def serve_client(self, read_stream: Any, write_stream: Any, wire: Wire | None = None) -> None:
        """The client's side only: the SDK's server, and the tool-call lane on ``wire`` beside it
        (made by our stdio transport with ``self.lane.offer``; made here over the message
        streams otherwise)."""
        async with AsyncExitStack() as stack:
            if wire is None:
                read_stream, wire = await stack.enter_async_context(
                    message_wire(read_stream, write_stream, self.lane.offer)
                )
            await stack.enter_async_context(self.lane.serving(wire.send))
            await self.server.run(read_stream, write_stream, self.server.create_initialization_options())

    async def _observe(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Middleware: the channel back to the client learns it from its first request, and
        the handler (and the calls it starts) knows which request it serves."""
        self.channel.meet(ctx)
        _REQUEST.set(ctx)
        return await call_next(ctx)

    # --- what a caller sees ---------------------------------------------------------------

    def view(self, access: Permits | bool | None = True) -> View:
        """What the current caller (or ``access``) may see; cached per access and catalog."""
        if access is True:
            access = self._access_for() if self._access_for is not None else None
        catalog = self.supervisor.catalog
        if access is None or access is False or getattr(access, "everything", False):
            return View(catalog, self.exposure, None, self._servers)
        if self._views_of is not catalog:  # the catalog object itself is kept: an id() could be reused
            self._views.clear()
            self._views_of = catalog
        cached = self._views.get(access)
        if cached is not None:
            return cached
        exposure = self._exposures.get(access)
        if exposure is None:
            exposure = self._exposures[access] = Exposure(self.settings)
        permitted = access  # bound for the closure below (pyright: narrowed to Permits here)

        def servers() -> dict[str, str | None]:
            return {name: text for name, text in self._servers().items() if permitted.permits_server(name)}

        view = self._views[access] = View(restricted(catalog, access), exposure, access, servers)
        return view

    def _servers(self) -> dict[str, str | None]:
        return described_servers(self.supervisor.upstreams)

    def _current_access(self) -> Permits | None:
        access = self._access_for() if self._access_for is not None else None
        return None if access is None or getattr(access, "everything", False) else access

    # --- resource subscriptions and listen streams ----------------------------------------

    async def _subscribe(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        """Recorded (on the gateway) once a server the caller may use took it, and for that
        server only: its updates of that URI, and no other's, reach the session."""
        server = await self.passthrough.subscribe_at(str(params.uri), types.SubscribeRequest(params=params))
        if self.channel.shared:
            self.channel.subscribed(ctx.session, str(params.uri), server)
        return types.EmptyResult()

    async def _unsubscribe(
        self, ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        """On the gateway, the upstream's subscription stays while another session holds one."""
        if self.channel.shared:
            _, others = self.channel.unsubscribed(ctx.session, str(params.uri))
            if others:
                return types.EmptyResult()
        return await self.passthrough.unsubscribe(ctx, params)

    def _listeners_of(self, access: Permits | None) -> _Listeners:
        listeners = self._listeners.get(access)
        if listeners is None:
            limit = self._limits.max_listen_streams if self._limits is not None else None
            listeners = self._listeners[access] = _Listeners(access, limit)
        return listeners

    def _listen_buses(self, server: str) -> list[InMemorySubscriptionBus]:
        """The listen buses of the accesses that may use ``server`` (its resource updates)."""
        return [
            listeners.bus
            for access, listeners in self._listeners.items()
            if access is None or access.permits_server(server)
        ]

    async def _listen(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """``subscriptions/listen``: the stream of the caller's access. On the gateway within
        ``gateway.max_listen_streams`` in all and ``max_listen_streams_per_identity`` a member;
        beyond either, a JSON-RPC error that says so, as the SDK refuses past its own cap."""
        listeners = self._listeners_of(self._current_access())
        limits = self._limits
        if limits is None or self._identity_of is None:
            return await listeners.handler(ctx, params)
        member = self._identity_of(ctx)
        held = self._listening.get(member, 0)
        if self._listen_streams >= limits.max_listen_streams:
            self._refusals.log("refused a listen stream of %s: %d streams open", member, self._listen_streams)
            raise MCPError(
                types.INTERNAL_ERROR,
                f"This gateway has {self._listen_streams} subscriptions/listen streams open, its limit. "
                "Try again later.",
            )
        if held >= limits.max_listen_streams_per_identity:
            self._refusals.log("refused a listen stream of %s: it holds %d already", member, held)
            raise MCPError(
                types.INTERNAL_ERROR,
                f"You have {held} subscriptions/listen streams open, the most one member may hold. "
                "Close one before opening another.",
            )
        self._listening[member] = held + 1
        self._listen_streams += 1
        try:
            return await listeners.handler(ctx, params)
        finally:
            self._listen_streams -= 1
            left = self._listening[member] - 1
            if left:
                self._listening[member] = left
            else:
                del self._listening[member]

    def _input_schema(self, name: str) -> dict[str, Any] | None:
        """A listed tool's inputSchema, as the current caller sees it (None: nothing to check)."""
        target = self.view().catalog.by_exposed.get(name)
        return None if target is None else target.definition.input_schema

    # --- change notifications -------------------------------------------------------------

    def _on_catalog_change(self, kinds: set[str]) -> None:
        self._pending_changes |= kinds
        self._changes.set()

    def _current(self, kind: str, view: View) -> object:
        """What a client would get now for a list (the value an audience's ``served`` keeps)."""
        catalog = view.catalog
        if kind == "tools":
            return self._tools_listing(view)
        if kind == "prompts":
            return list(catalog.prompts)
        return (list(catalog.resources), list(catalog.templates))

    def _serving(self, kind: str, listing: object) -> None:
        """A list was served to the current request's client: remember it for its session."""
        ctx = _REQUEST.get()
        if ctx is None:
            return
        access = self._current_access()
        handshake = ctx.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS
        key: Connection | _Listeners = connection_of(ctx.session) if handshake else self._listeners_of(access)
        audience = self._audiences.get(key)
        if audience is None:
            audience = self._audiences[key] = _Audience(access)
        audience.served[kind] = listing
        audience.told.discard(kind)

    def _changed_lists(self, audience: _Audience, kinds: set[str]) -> list[str]:
        """The kinds worth a ``list_changed`` for one audience: served to it, not yet announced,
        and different now in content (an upstream that restarts with the same tools changes nothing)."""
        changed: list[str] = []
        view = self.view(audience.access)
        for kind in sorted(kinds):
            if (
                kind in audience.served
                and kind not in audience.told
                and self._current(kind, view) != audience.served[kind]
            ):
                audience.told.add(kind)
                changed.append(kind)
        return changed

    async def _send_changes(self) -> None:
        """Tell each audience what changed for it. On the gateway a session's notices go to
        its outbox (``outbox``): this loop never waits for one client on behalf of others."""
        outboxes = self.outboxes
        while True:
            await self._changes.wait()
            self._changes = anyio.Event()
            kinds, self._pending_changes = self._pending_changes, set()
            told = 0
            for key, audience in list(self._audiences.items()):
                changed = self._changed_lists(audience, kinds)
                if not changed:
                    continue
                told += 1
                if isinstance(key, _Listeners):
                    for kind in changed:
                        await key.bus.publish(_LIST_EVENTS[kind])
                    continue
                if outboxes is not None:
                    for kind in changed:
                        outboxes.post(key, _LIST_METHODS[kind])
                    continue
                try:
                    if "tools" in changed:
                        await key.send_tool_list_changed()
                    if "prompts" in changed:
                        await key.send_prompt_list_changed()
                    if "resources" in changed:
                        await key.send_resource_list_changed()
                    logger.debug("told a client that %s changed", ", ".join(changed))
                except Exception:
                    logger.debug("could not send list_changed", exc_info=True)
            if not told:
                logger.debug("lists recomputed (%s): nothing a client was served changed", ", ".join(sorted(kinds)))

    # --- tools ----------------------------------------------------------------------------

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        await self.supervisor.wait_startup()
        tools = self._tools_listing(self.view())
        self._serving("tools", tools)
        return types.ListToolsResult(tools=tools)

    def _tools_listing(self, view: View) -> list[types.Tool]:
        tools = view.exposure.listing(view.catalog, view.servers)
        return [*tools, _status_tool()] if self.settings.status_tool else tools

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        """The SDK's typed path: calls the lane does not take (2026-07-28 connections, calls
        before the handshake ended). The lane (``lane.CallLane``) serves all others.
        A 2026-07-28 client that can answer input has its call run by ``rounds``: what the
        upstream asks mid-call comes back as ``input_required``, and its retry resumes it."""
        wire_meta = params.model_dump(by_alias=True, mode="json", include={"meta"}).get("_meta")
        _, meta = split_meta(wire_meta)
        started = time.monotonic()
        progress = _context_progress(ctx)
        if progress is not None and self.outboxes is not None:  # never awaited on the gateway
            progress = self.outboxes.progress(progress)

        def call(on_progress: ProgressFn | None) -> Awaitable[dict[str, Any]]:
            return self.run_tool(params.name, params.arguments, on_progress, meta)

        try:
            if params.request_state is not None:
                raw = await self.rounds.resume(params.request_state, params.input_responses, progress)
            elif answers_input(ctx):
                member = self._identity_of(ctx) if self._identity_of is not None else None
                raw = await self.rounds.start(call, ctx.session.client_capabilities, progress, member)
            else:
                raw = await call(progress)
        except PatchbayError as error:  # a retry of a call that is no longer waiting
            target = self.view().catalog.by_exposed.get(params.name)
            raw = self._fail(error, params.name, target, target.server if target else None, started)
        if isinstance(raw, types.InputRequiredResult):
            if self.channel.shared and raw.request_state is not None and await _hung_up(ctx):
                self.rounds.abandon(raw.request_state)
            return raw
        try:
            return types.CallToolResult.model_validate(raw, by_name=False)
        except ValidationError as exc:  # an upstream's result the SDK's model refuses: its fault, not the client's
            error = UpstreamError(
                Code.PROTOCOL_ERROR,
                "The server answered with a malformed tool result. Retry once; if it persists, tell the user.",
                detail=f"not a valid CallToolResult: {exc}",
            )
            target = self.view().catalog.by_exposed.get(params.name)
            failed = self._fail(error, params.name, target, target.server if target else None, started)
            return types.CallToolResult.model_validate(failed, by_name=False)

    async def run_tool(
        self,
        called: str,
        arguments: dict[str, Any] | None,
        on_progress: ProgressFn | None = None,
        meta: dict[str, Any] | None = None,
        *,
        named_as_data: bool = False,
    ) -> dict[str, Any]:
        """One tool call, whatever the way it came: the result as JSON values, an ``isError``
        result for every failure (only ``unknown_tool: "error"`` raises, an MCPError).
        ``meta`` is the client's ``_meta`` less its progress token, passed on upstream.
        ``named_as_data``: the name came as ``call_tool``'s argument, so a name that cannot be
        resolved is always answered with a result (``unknown_tool: "error"`` is for tools/call)."""
        started = time.monotonic()
        view = self.view()
        target = view.catalog.by_exposed.get(called)
        server: str | None = None
        try:
            if target is None and not self.supervisor.started:
                await self.supervisor.wait_startup()
                view = self.view()
                target = view.catalog.by_exposed.get(called)
            if target is None:
                if called == STATUS_TOOL and self.settings.status_tool:
                    return self._status_result()
                own = self.exposure.names
                if called == own.find_tools:
                    return await self._find_tools(arguments, view)
                if called == own.call_tool:
                    name, target_arguments = call_request(arguments, own)
                    if name in (own.find_tools, own.call_tool):
                        raise ClientError(
                            Code.INVALID_ARGUMENTS,
                            f"{own.call_tool} calls the servers' tools; call {name} directly instead.",
                        )
                    return await self.run_tool(name, target_arguments, on_progress, meta, named_as_data=True)
                target = await self._resolve(called, view)
            server = target.server
            upstream = self.supervisor.upstreams.get(server)
            if upstream is None:
                raise UpstreamError(
                    Code.SERVER_UNAVAILABLE, f"Server '{server}' was removed from the config.", server=server
                )
            if target.checker is not None:
                problems = target.checker.problems(arguments)
                if problems:
                    raise ClientError(
                        Code.INVALID_ARGUMENTS,
                        f"Invalid arguments for '{target.exposed}': " + "; ".join(problems) + ". Fix them and call "
                        "again.",
                        server=server,
                        tool=target.upstream_name,
                    )
            self.supervisor.status.record_call(server, target.upstream_name)
            with self.channel.calling(server, _REQUEST.get()) as flight:
                call = self._tool_call(upstream, target, arguments, on_progress, meta)
                if flight is not None:
                    call.excused = lambda: flight.refused
                result = await upstream.chain(call)
            result = bounded(
                result, self.settings.max_result_bytes, target.exposed, target.server, target.upstream_name
            )
            if self.on_call is not None:
                outcome = "tool_error" if result.get("isError") else "ok"
                self.on_call(server, target.upstream_name, outcome, time.monotonic() - started)
            if logger.isEnabledFor(logging.DEBUG):
                logger.debug(
                    "call %s -> %s/%s ok%s in %.1f ms",
                    called,
                    server,
                    target.upstream_name,
                    " (tool reported isError)" if result.get("isError") else "",
                    (time.monotonic() - started) * 1000,
                )
            return result
        except PatchbayError as error:
            return self._fail(error, called, target, server, started, named_as_data=named_as_data)
        except Exception as exc:  # a bug of ours: the session still goes on
            logger.exception("unexpected error in tools/call %.200r", called)
            error = UpstreamError(
                Code.INTERNAL_ERROR,
                "An unexpected error occurred in the proxy while running this tool. Retry once; if it persists, "
                "tell the user.",
                detail=repr(exc),
                server=server,
            )
            return self._fail(error, called, target, server, started, named_as_data=named_as_data)

    async def _warm_index(self) -> None:
        """In search mode, build the index once startup is done, so the first search need not."""
        await self.supervisor.wait_startup()
        view = self.view(None)
        if view.exposure.search_mode(view.catalog):
            await view.exposure.index(view.catalog, view.servers)

    async def _find_tools(self, arguments: dict[str, Any] | None, view: View) -> dict[str, Any]:
        """Search mode's ``find_tools`` (after startup, as ``tools/list``)."""
        request = find_request(arguments)
        index = await view.exposure.index(view.catalog, view.servers)
        upstreams = [u for name, u in self.supervisor.upstreams.items() if name in view.servers]
        notes = unavailable_notes(request.query, upstreams)
        return find_result(index, request, notes, self.exposure.names)

    async def _resolve(self, called: str, view: View, *, again: bool = True) -> CatalogTool:
        catalog = view.catalog
        resolver = catalog.tool_resolver
        assert resolver is not None
        resolution = resolver.resolve(called)
        if resolution.kind in ("exact", "resolved") and resolution.entry is not None:
            target = catalog.by_exposed[resolution.entry.exposed]
            logger.info("resolved tool name %.200r to %r (rule: %s)", called, target.exposed, resolution.rule)
            return target
        if resolution.kind == "hidden":
            raise hidden_tool(resolution)
        if resolution.kind == "server_unavailable" and resolution.server is not None:
            upstream = self.supervisor.upstreams.get(resolution.server)
            if upstream is not None:
                error = await upstream.unavailable()
                # Signed in just now (oauth.gate): once it is ready its tools are in the catalog.
                if again and isinstance(error, SignedIn) and await upstream.wait_ready(self.settings.connect_timeout):
                    return await self._resolve(called, self.view(view.access), again=False)
                raise error
        searching = view.exposure.search_mode(catalog)
        raise unknown_name(resolution, resolver, search_tool=self.exposure.names.find_tools if searching else None)

    def _tool_call(
        self,
        upstream: Upstream,
        target: CatalogTool,
        arguments: dict[str, Any] | None,
        on_progress: ProgressFn | None,
        meta: dict[str, Any] | None,
    ) -> ToolCall:
        return ToolCall(
            server=upstream.name,
            tool=target.upstream_name,
            arguments=arguments,
            deadline=Deadline(upstream.timeout_for(target.upstream_name), self.settings.max_call_time),
            retry_safe=target.retry_safe,
            meta=meta,
            on_progress=on_progress,
        )

    def _fail(
        self,
        error: PatchbayError,
        called: str,
        target: CatalogTool | None,
        server: str | None,
        started: float,
        *,
        named_as_data: bool = False,
    ) -> dict[str, Any]:
        """The isError result of a failed call, logged. A name given as ``call_tool``'s argument
        is always answered with a result; a tool the client knows to declare an ``outputSchema``
        gets its error as text only (clients check structured content against that schema, even
        in an error, and would drop the proxy's answer)."""
        server = server or error.server
        tool = target.upstream_name if target is not None else error.tool
        ctx = _REQUEST.get()
        caller = self._identity_of(ctx) if self._identity_of is not None and ctx is not None else None
        self.supervisor.status.record_error(error, called=called, server=server, tool=tool, caller=caller)
        if self.on_call is not None:
            self.on_call(server, tool, error.code.value, time.monotonic() - started)
        # A model's mistake (a name, arguments) is answered and logged at INFO: stderr is for the
        # proxy's and the upstreams' failures, which clients show to the user as errors.
        # A sign-in the user has to give is not a failure either: the gate logs the sign-in itself.
        if isinstance(error, ClientError) or error.code is Code.AUTH_REQUIRED:
            level = logging.INFO
        else:
            level = logging.WARNING if error.code is Code.SERVER_STARTING else logging.ERROR
        logger.log(
            level,
            "tools/call %.200r%s failed in %.0f ms: %s %s%s",
            called,
            f" -> {server}/{tool}" if server and tool else "",
            (time.monotonic() - started) * 1000,
            error.code.value,
            error.message,
            f" | detail: {error.detail}" if error.detail else "",
            exc_info=error if logger.isEnabledFor(logging.DEBUG) and error.__cause__ is not None else None,
        )
        if (
            not named_as_data
            and self.settings.unknown_tool == "error"
            and error.code in (Code.TOOL_NOT_FOUND, Code.TOOL_AMBIGUOUS)
        ):
            raise to_mcp_error(error)
        result = _dump(to_result(error))
        if not named_as_data and self._declares_output(called, target):
            del result["structuredContent"]
        return result

    def _declares_output(self, called: str, target: CatalogTool | None) -> bool:
        """Whether the tool the client called has an ``outputSchema`` the client knows of."""
        if target is not None:
            return target.definition.output_schema is not None
        return called == self.exposure.names.find_tools

    def _status_result(self) -> dict[str, Any]:
        snapshot = self.status_snapshot()
        return {"content": [{"type": "text", "text": json.dumps(snapshot, indent=1)}], "structuredContent": snapshot}

    def status_snapshot(self) -> dict[str, Any]:
        """The health of the servers the current caller may use; a caller restricted by access
        rules sees its own errors whole and others' only as health (``status.Viewer``)."""
        view = self.view()
        upstreams = {n: u.status() for n, u in self.supervisor.upstreams.items() if n in view.servers}
        if view.access is None:
            return self.supervisor.status.snapshot(upstreams)
        ctx = _REQUEST.get()
        caller = self._identity_of(ctx) if self._identity_of is not None and ctx is not None else None
        return self.supervisor.status.snapshot(upstreams, Viewer(view.access, caller))

    def _pause_deadlines(self, server: str) -> AbstractContextManager[None]:
        upstream = self.supervisor.upstreams.get(server)
        return upstream.deadlines.paused() if upstream is not None else nullcontext()


async def _hung_up(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether the HTTP client of this request has gone (its answer would be written to no one)."""
    is_disconnected = getattr(ctx.request, "is_disconnected", None)
    if is_disconnected is None:
        return False
    try:
        return bool(await is_disconnected())
    except Exception:
        return False


def _context_progress(ctx: ServerRequestContext[Any, Any]) -> ProgressFn | None:
    """Progress for the client of a call on the SDK's path, if it asked for it."""
    token = ctx.meta.get("progress_token") if ctx.meta else None
    if token is None:
        return None
    session = ctx.session
    request_id = ctx.request_id

    async def forward(progress: float, total: float | None, message: str | None) -> None:
        await session.send_progress_notification(
            token, progress, total, message, related_request_id=str(request_id) if request_id is not None else None
        )

    return forward


def _status_tool() -> types.Tool:
    return types.Tool(
        name=STATUS_TOOL,
        description="Health of the proxy's upstream servers: state, errors by code, restarts. Takes no arguments.",
        input_schema={"type": "object", "properties": {}},
        annotations=types.ToolAnnotations(read_only_hint=True),
    )


def _dump(model: BaseModel) -> dict[str, Any]:
    """A result of the proxy's own as JSON values, in the fields every era shares: the
    2026-07-28 ``resultType`` is the SDK's to add on the connections that speak it."""
    return model.model_dump(by_alias=True, mode="json", exclude_none=True, exclude={"result_type"})


__all__ = ["STATUS_URI", "Proxy"]
