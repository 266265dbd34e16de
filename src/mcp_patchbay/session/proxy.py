"""The proxy's wiring: the one MCP server the client sees, and the parts behind it.

``Proxy`` is what the CLI (stdio) and the gateway (``serve --http``) build. It makes the
SDK's low-level ``Server`` and routes its handlers to the modules that own each job:

- ``calls.path`` (``ToolPath``): ``tools/call`` from both lanes, and the one edge where an
  error becomes what the client sees;
- ``views``: what one caller may see (catalog under its access, listings);
- ``notifications`` (``ListChanges``): ``list_changed`` audiences, ``subscriptions/listen``
  streams and their quotas;
- ``session.passthrough``: resources, prompts, completion, logging level, roots (their JSON-RPC
  errors are its own: those requests have no result form for an error);
- ``status``: the status resource and tool, as the caller may see them;
- ``tasks``: a task-augmented ``tools/call`` and ``tasks/*`` (server middleware: its answer is
  no ``CallToolResult``).

What upstreams ask of the client (sampling, elicitation, roots, notifications) goes
through ``session.requests_back``; a 2026-07-28 client is asked through its call (``rounds``).
The client's stdio wire is ``wire.stdio``, its handshake-era tool calls ``fastpath.stdio_calls``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager, AsyncExitStack, nullcontext
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.request_state import RequestStateBoundary
from mcp.server.subscriptions import InMemorySubscriptionBus
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from mcp_patchbay import __version__
from mcp_patchbay.calls.path import CallObserver, ToolPath
from mcp_patchbay.catalog.apps import declares_apps
from mcp_patchbay.config import Config
from mcp_patchbay.config.gateway import GatewaySettings
from mcp_patchbay.fastpath.stdio_calls import CallLane
from mcp_patchbay.session.exposure import Exposure
from mcp_patchbay.session.notifications import IdentityOf, ListChanges
from mcp_patchbay.session.outbox import EndSession, Outboxes
from mcp_patchbay.session.passthrough import Passthrough, UiChannel
from mcp_patchbay.session.request_state import AUDIENCE, refused_state_as_result, state_security
from mcp_patchbay.session.rounds import Rounds
from mcp_patchbay.session.status import visible
from mcp_patchbay.session.views import AccessFor, Views
from mcp_patchbay.tasks import EXTENSION as TASKS_EXTENSION
from mcp_patchbay.tasks import Tasks, UpdateTaskParams
from mcp_patchbay.tasks import capabilities as task_capabilities
from mcp_patchbay.upstreams.spawn import Prespawned
from mcp_patchbay.upstreams.supervisor import Supervisor
from mcp_patchbay.upstreams.transports import Connector
from mcp_patchbay.wire.stdio import Wire, message_wire

logger = logging.getLogger(__name__)


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

    def get_capabilities(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
        *,
        protocol_version: str | None = None,
    ) -> types.ServerCapabilities:
        """With ``tasks`` on the handshake's eras (2026-07-28 has the tasks extension instead)."""
        capabilities = super().get_capabilities(
            notification_options, experimental_capabilities, extensions, protocol_version=protocol_version
        )
        if protocol_version is None or protocol_version in HANDSHAKE_PROTOCOL_VERSIONS:
            capabilities.tasks = task_capabilities()
        return capabilities


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
        config_problem: str | None = None,
    ) -> None:
        """``access_for``: the current caller's access (the gateway's sign-in); ``shared``:
        many clients at once (the gateway), so upstreams are offered what any may answer;
        ``request_state_keys``: the gateway's keys sealing ``requestState`` (stdio reads
        ``$PATCHBAY_STATE_KEY``; without either, a key made at start); ``identity_of``: who
        a request's caller is, for the per-member quotas (listen streams, suspended calls);
        ``end_session``: ends one HTTP session by id (a session that does not read its
        notices). Shared, the limits are ``config.gateway``'s. ``config_problem``: why the config
        file could not be used (``config`` is then an empty stand-in; ``Supervisor.config_problem``)."""
        self.config = config
        self.settings = config.settings
        limits = (config.gateway or GatewaySettings()) if shared else None
        self._identity_of = identity_of if shared else None
        self._state_security = state_security(request_state_keys, environ=None if shared else os.environ)
        self.rounds = Rounds(
            self._state_security.ttl,
            max_waiting=limits.max_waiting_calls_per_identity if limits is not None else None,
        )
        """2026-07-28 calls suspended on a question of their upstream."""
        self.outboxes = (
            Outboxes(
                send_timeout=limits.send_timeout,
                max_queued=limits.max_queued_messages,
                end_session=end_session,
            )
            if limits is not None
            else None
        )
        """Notices to the gateway's sessions, each session's sent by a task of its own."""
        self.channel = UiChannel(
            self._listen_buses,
            self._pause_deadlines,
            shared=shared,
            outboxes=self.outboxes,
            answer_timeout=self.settings.max_call_time if shared else None,
            identity_of=self._identity_of,
        )
        self.supervisor = Supervisor(
            config,
            client=self.channel,
            wait_for_client=self.channel.wait_for_client,
            connector=connector,
            prespawned=prespawned or Prespawned(),
            config_problem=config_problem,
        )
        self.channel.catalog = lambda: self.supervisor.catalog  # updates of ui:// URIs as the client knows them
        self.exposure = Exposure(self.settings)
        self.views = Views(self.settings, self.supervisor, self.exposure, access_for)
        """What each caller may see."""
        self.changes = ListChanges(self.views, limits=limits, identity_of=self._identity_of, outboxes=self.outboxes)
        """Who was served which list, and the listen streams: told when a list changes."""
        self.supervisor.listeners.append(self.changes.on_catalog_change)
        self.passthrough = Passthrough(
            self.supervisor,
            self.changes.serving,
            self.status_snapshot,
            lambda: self.views.view().catalog,
            (lambda: self.views.view().servers) if access_for is not None else None,
            shared=shared,
        )
        self.supervisor.ready_listeners.append(self.passthrough.on_upstream_ready)
        self.tools = ToolPath(
            self.settings,
            self.supervisor,
            self.views,
            channel=self.channel,
            rounds=self.rounds,
            status_of=self.status_snapshot,
            identity_of=self._identity_of,
            outboxes=self.outboxes,
        )
        """The tool path, both lanes, and the error edge."""
        self.tasks = Tasks(
            self.settings,
            self.supervisor,
            self.tools,
            self._state_security.codec,
            identity_of=self._identity_of,
            outboxes=self.outboxes,
        )
        """Tasks: run by upstreams or by the proxy, each its caller's."""
        self.tools.tasks = self.tasks
        self.supervisor.task_notices = self.tasks
        self.run_tool = self.tools.run
        """One tool call, whatever way it came (``calls.path.ToolPath.run``)."""
        self.server = self._build_server()
        self.tasks.server_info = lambda: self.server.server_info_stamp
        self.channel.related_task = self.tasks.client_id
        self.lane = CallLane(self.run_tool, fast_path=config.settings.fast_path)
        self.tools.lane_client = lambda: self.lane.client_name
        self.tools.on_listing_changed = lambda: self.changes.on_catalog_change({"tools"})
        self.remembers_start = not shared and config.profile is None
        """A profile's catalog is not the file's: start_memory keeps only whole files' sizes."""
        """Whether this run keeps its catalog's size for the next start's early listing
        (``upstreams.start_memory``): not the gateway's (it answers no listing early), nor a run on part
        of the config (``mcp-patchbay call`` starting only the server a name names)."""

    @property
    def on_call(self) -> CallObserver | None:
        """Told of every tool call's outcome (the gateway's metrics)."""
        return self.tools.on_call

    @on_call.setter
    def on_call(self, observer: CallObserver | None) -> None:
        self.tools.on_call = observer

    @property
    def on_activity(self) -> Callable[[tuple[Any, ...]], None] | None:
        """Told of what happens, one tuple each (the activity log, ``activity.events``): tool calls,
        resource reads, prompt gets, upstreams' changes of state, what is held."""
        return self.tools.on_activity

    @on_activity.setter
    def on_activity(self, observer: Callable[[tuple[Any, ...]], None] | None) -> None:
        self.tools.on_activity = self.passthrough.on_activity = self.supervisor.on_activity = observer

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
            on_subscriptions_listen=self.changes.listen,
        )
        # Registered by method rather than by the deprecated constructor arguments: logging and
        # roots are deprecated in the 2026-07-28 protocol, but 2025-era clients still use them.
        server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, self.passthrough.set_level)
        server.add_notification_handler(
            "notifications/roots/list_changed", types.NotificationParams, self.passthrough.roots_changed
        )
        # Tasks: 2025-11-25's methods, and the 2026-07-28 extension's (each answers the era it serves).
        server.add_request_handler("tasks/get", types.GetTaskRequestParams, self.tasks.requests.get)
        server.add_request_handler("tasks/result", types.GetTaskPayloadRequestParams, self.tasks.requests.result)
        server.add_request_handler("tasks/list", types.PaginatedRequestParams, self.tasks.requests.list)
        server.add_request_handler("tasks/cancel", types.CancelTaskRequestParams, self.tasks.requests.cancel)
        server.add_request_handler("tasks/update", UpdateTaskParams, self.tasks.requests.update)
        server.extensions[TASKS_EXTENSION] = {}
        # The SDK checks a 2026-07-28 call's Mcp-Param-* headers against the tool's inputSchema;
        # without this it runs a whole tools/list through the server for every call.
        server.get_tool_input_schema = self.views.input_schema
        # Our observer, then requestState sealed and opened (rounds). Not the SDK's default
        # OpenTelemetry middleware: it costs ~10% per call and exports nothing unless an OTel
        # SDK is configured in this process, which it never is.
        server.middleware = [
            self._observe,
            self.tasks.intercept,
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
            await tg.start(self.tasks.run)
            await tg.start(self.supervisor.run)
            tg.start_soon(self.changes.run)
            tg.start_soon(self.tools.warm_index)
            if self.remembers_start:
                tg.start_soon(self._remember_start)
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
        """Middleware: the channel back to the client learns it from its first request."""
        self.channel.meet(ctx)
        return await call_next(ctx)

    # --- resource subscriptions ---------------------------------------------------------

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

    def _listen_buses(self, server: str) -> list[InMemorySubscriptionBus]:
        return self.changes.listen_buses(server)

    def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> Awaitable[types.CallToolResult | types.InputRequiredResult]:
        """``tools/call`` on the SDK's path: ``ToolPath.call_tool``, running ``self.run_tool``
        (returned, not awaited here: no hop of its own)."""
        return self.tools.call_tool(ctx, params, self.run_tool)

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        # Search mode's two tools are there whatever the upstreams do: listed at once (a client
        # that lists early gets them; find_tools' text follows with list_changed). Every tool
        # listed is worth the wait, within startup_wait ("auto" is "all" until it knows, and
        # "always_list" lists upstreams' tools in search mode too).
        if self.settings.expose != "search" or self._lists_upstream_tools():
            await self.supervisor.wait_startup()
        else:  # listings under review: call_tool's annotations say what their tools do once judged
            await self.supervisor.reviewed(within=self.settings.startup_wait)
        tools = self.views.tools_listing(self.views.view(), for_apps=declares_apps(ctx.session.client_capabilities))
        self.changes.serving(ctx, "tools", tools)
        return types.ListToolsResult(tools=tools)

    async def _remember_start(self) -> None:
        """Keep the most tools the catalog has had in this run, for the next start's early listing
        in ``auto`` mode (``upstreams.start_memory``): a client may end the proxy before every upstream
        has answered, so each new high is kept as it comes."""
        import anyio.to_thread

        from mcp_patchbay.upstreams.start_memory import remember

        grew = anyio.Event()
        self.supervisor.listeners.append(lambda kinds: grew.set() if "tools" in kinds else None)
        kept = 0
        while True:
            await grew.wait()
            grew = anyio.Event()
            count = len(self.supervisor.catalog.tools)
            if count > kept and self.supervisor.config_problem is None:
                kept = count
                await anyio.to_thread.run_sync(remember, self.config.path, count)

    def _lists_upstream_tools(self) -> bool:
        """Whether search mode's listing holds tools of upstreams too (an ``always_list``)."""
        return any(e.spec is not None and e.spec.tools.always_list for e in self.supervisor.config.servers)

    def status_snapshot(self, request: ServerRequestContext[Any, Any] | None = None) -> dict[str, Any]:
        """The health of the servers the caller of ``request`` (None: the lane's, on stdio) may
        use; a caller restricted by access rules sees its own errors whole and others' only as
        health (``status.visible``)."""
        view = self.views.view()
        health = {n: u.status() for n, u in self.supervisor.upstreams.items() if n in view.servers}
        if view.access is None:
            return visible(self.supervisor.status, health, None, None)
        caller = self._identity_of(request) if self._identity_of is not None and request is not None else None
        return visible(self.supervisor.status, health, view.access, caller)

    def _pause_deadlines(self, server: str) -> AbstractContextManager[None]:
        upstream = self.supervisor.upstreams.get(server)
        return upstream.deadlines.paused() if upstream is not None else nullcontext()


__all__ = ["Proxy"]
