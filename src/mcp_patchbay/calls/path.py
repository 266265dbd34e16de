"""The tool path: one ``tools/call``, whatever way it came, and the one error edge.

Both lanes end here: the handshake-era lane (``fastpath.stdio_calls.CallLane``, JSON values) calls
``ToolPath.run``; the SDK's typed path (2026-07-28 connections, calls before the
handshake ended) calls ``ToolPath.call_tool``, which runs a 2026-07-28 call that can
answer input through ``rounds``. ``run`` looks the name up in the caller's view, resolves
a mistaken one (``naming``, ``errors.names``; a name that stands for a tool held back until the
user approves it gets ``TOOL_CHANGED``: ``Supervisor.held_error``), checks the arguments, and sends the call down
its upstream's policy chain (``upstream.chain``), bounding the result (``results``).

The edge: everything on the path raises a ``PatchbayError`` (foreign exceptions are
translated where they are met, ``errors.foreign.translated``); ``error_result`` is the one place
where such an error becomes what the client sees: logged once, recorded in the status,
told to the metrics, and answered as an ``isError`` result (or raised as the JSON-RPC error the
lane and the SDK write: an unknown tool with ``unknown_tool: "error"``, and an upstream's
``-32042`` for a client that takes URL elicitations, ``data.elicitations`` and all).

Who is calling is passed down explicitly: ``run``'s ``request`` is the SDK's request
context (None on the lane); the channel back to the client, the status and the error
record read it from there.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

from mcp_patchbay.calls.confirm import confirm
from mcp_patchbay.calls.deadlines import Deadline, ProgressFn
from mcp_patchbay.calls.policies import ToolCall
from mcp_patchbay.calls.results import bounded
from mcp_patchbay.catalog.apps import app_only
from mcp_patchbay.catalog.client_quirks import errors_as_text
from mcp_patchbay.catalog.merge import CatalogTool
from mcp_patchbay.config import Settings
from mcp_patchbay.errors.foreign import translated
from mcp_patchbay.errors.names import hidden_tool, unknown_name
from mcp_patchbay.errors.tree import (
    ClientError,
    Code,
    ElicitationRequired,
    PatchbayError,
    SignedIn,
    UpstreamError,
    result_values,
    to_mcp_error,
)
from mcp_patchbay.fastpath.stdio_calls import split_meta
from mcp_patchbay.session.capabilities import takes_url_elicitation
from mcp_patchbay.session.exposure import call_request, find_request, find_result, reach, unavailable_notes
from mcp_patchbay.session.exposure import reads_only as reads_only_tool
from mcp_patchbay.session.notifications import IdentityOf
from mcp_patchbay.session.outbox import Outboxes
from mcp_patchbay.session.requests_back import SessionChannel
from mcp_patchbay.session.rounds import Rounds, answers_input
from mcp_patchbay.session.status import STATUS_TOOL, config_problem_text, tool_result
from mcp_patchbay.session.views import View, Views
from mcp_patchbay.upstreams.supervisor import Supervisor
from mcp_patchbay.upstreams.upstream import Upstream

if TYPE_CHECKING:
    from mcp_patchbay.tasks import Tasks
logger = logging.getLogger(__name__)

Request = ServerRequestContext[Any, Any]
CallObserver = Callable[[str | None, str | None, str, float], None]
"""(server, upstream tool, outcome, seconds): ``ok``, ``tool_error`` (the tool's own
``isError``) or the proxy's error code; server and tool None when the name was not resolved."""
RunTool = Callable[..., Awaitable[dict[str, Any]]]
"""``ToolPath.run``, as ``Proxy.run_tool`` holds it."""
StatusOf = Callable[["Request | None"], dict[str, Any]]
"""The status as the caller of a request may see it (``Proxy.status_snapshot``)."""


class ToolPath:
    """Tool calls from both lanes, down to the upstream's chain, and the error edge."""

    def __init__(
        self,
        settings: Settings,
        supervisor: Supervisor,
        views: Views,
        *,
        channel: SessionChannel,
        rounds: Rounds,
        status_of: StatusOf,
        identity_of: IdentityOf | None,
        outboxes: Outboxes | None,
    ) -> None:
        self.settings = settings
        self.supervisor = supervisor
        self.views = views
        self.exposure = views.exposure
        self.channel = channel
        self.rounds = rounds
        self._status_of = status_of
        self._identity_of = identity_of
        self._outboxes = outboxes
        self.on_call: CallObserver | None = None
        """Told of every tool call's outcome (the gateway's metrics)."""
        self.on_activity: Callable[[tuple[Any, ...]], None] | None = None
        """Told of every tool call as one tuple, queued as it is (the activity log: ``activity.events``)."""
        self.on_listing_changed: Callable[[], None] = lambda: None
        """A search made tools join the listing: ``Proxy`` tells the clients that were served it."""
        self.lane_client: Callable[[], str | None] = lambda: None
        """The stdio client's name, for a call the lane took (no SDK session to ask): ``Proxy`` sets it."""
        self.tasks: Tasks | None = None
        """Runs a plain call of a tool whose upstream requires a task as one, and waits: ``Proxy`` sets it."""

    async def call_tool(
        self, ctx: Request, params: types.CallToolRequestParams, run: RunTool
    ) -> types.CallToolResult | types.InputRequiredResult:
        """The SDK's typed path: calls the lane does not take (2026-07-28 connections, calls
        before the handshake ended). The lane (``fastpath.stdio_calls.CallLane``) serves all others. ``run`` is
        ``Proxy.run_tool`` (``run`` itself, unless a test put another in its place).
        A 2026-07-28 client that can answer input has its call run by ``rounds``: what the
        upstream asks mid-call comes back as ``input_required``, and its retry resumes it."""
        wire_meta = params.model_dump(by_alias=True, mode="json", include={"meta"}).get("_meta")
        _, meta = split_meta(wire_meta)
        started = time.monotonic()
        progress = _context_progress(ctx)
        if progress is not None and self._outboxes is not None:  # never awaited on the gateway
            progress = self._outboxes.progress(progress)

        def call(on_progress: ProgressFn | None) -> Awaitable[dict[str, Any]]:
            return run(params.name, params.arguments, on_progress, meta, request=ctx)

        try:
            if params.request_state is not None:
                raw = await self.rounds.resume(params.request_state, params.input_responses, progress)
            elif answers_input(ctx):
                member = self._identity_of(ctx) if self._identity_of is not None else None
                raw = await self.rounds.start(call, ctx.session.client_capabilities, progress, member)
            else:
                raw = await call(progress)
            if isinstance(raw, types.InputRequiredResult):
                if self.channel.shared and raw.request_state is not None and await _hung_up(ctx):
                    self.rounds.abandon(raw.request_state)
                return raw
            target = self.views.view().catalog.by_exposed.get(params.name)
            with translated(server=target.server if target else "", tool=params.name):  # a result the SDK refuses
                return types.CallToolResult.model_validate(raw, by_name=False)
        except PatchbayError as error:  # a retry of a call that is no longer waiting; a malformed result
            target = self.views.view().catalog.by_exposed.get(params.name)
            server = target.server if target else None
            failed = self.error_result(error, params.name, target, server, started=started, request=ctx)
            return types.CallToolResult.model_validate(failed, by_name=False)

    # Long on purpose: the tool-call path's steps in order, one branch each; to become a chain (issue 34's follow-up).
    async def run(  # noqa: PLR0912, PLR0915
        self,
        called: str,
        arguments: dict[str, Any] | None,
        on_progress: ProgressFn | None = None,
        meta: dict[str, Any] | None = None,
        *,
        request: Request | None = None,
        named_as_data: bool = False,
        reads_only: bool = False,
        task: dict[str, Any] | None = None,
        long: bool = False,
    ) -> dict[str, Any]:
        """One tool call, whatever the way it came: the result as JSON values, an ``isError``
        result for every failure (only ``unknown_tool: "error"`` raises, an MCPError).
        ``meta`` is the client's ``_meta`` less its progress token, passed on upstream.
        ``request``: the SDK's context of the client's request (None on the lane).
        ``task``: the client's ``task``, for an upstream that runs the tool as one (``tasks``: the
        result is then its ``CreateTaskResult``); ``long``: the call runs as a task, within
        ``task_timeout`` rather than the tool's timeout. A plain call of a tool whose upstream
        requires a task is run as one and waited for (``tasks``).
        ``named_as_data``: the name came as a call route's argument, so a name that cannot be
        resolved is always answered with a result (``unknown_tool: "error"`` is for tools/call).
        ``reads_only``: it came through the read route, which runs only a tool that says it only
        reads (else ``NOT_READ_ONLY``, nothing sent). A call route never runs a tool for its
        server's app only (``apps.app_only``: ``TOOL_NOT_AVAILABLE``); the app calls it directly."""
        started = time.monotonic()
        view = self.views.view()
        target = view.catalog.by_exposed.get(called)
        server: str | None = None
        try:
            if self.supervisor.config_problem is not None:
                raise ClientError(Code.CONFIG_INVALID, config_problem_text(self.supervisor.config_problem))
            if target is None and not self.supervisor.started:
                await self.supervisor.wait_startup()
                view = self.views.view()
                target = view.catalog.by_exposed.get(called)
            if target is None:
                if called == STATUS_TOOL and self.settings.status_tool:
                    return tool_result(self._status_of(request))
                own = self.exposure.names
                if called == own.find_tools:
                    return await self._find_tools(arguments, view)
                from mcp_patchbay.session.own_tools import read_route  # search mode's: not on the start's path

                read = read_route(own)
                if called in (own.call_tool, read):
                    name, target_arguments = call_request(arguments, own, called)
                    if name in (own.find_tools, own.call_tool, read):
                        raise ClientError(
                            Code.INVALID_ARGUMENTS,
                            f"{called} calls the servers' tools; call {name} directly instead.",
                        )
                    return await self.run(
                        name,
                        target_arguments,
                        on_progress,
                        meta,
                        request=request,
                        named_as_data=True,
                        reads_only=called == read or reach(view.catalog)[0],  # call_tool's claim holds
                        long=long,
                    )
                target = await self._resolve(called, view)
            upstream = self.supervisor.upstreams.get(target.server)
            if upstream is not None and not upstream.running:
                target = await self._started(upstream, target, called, view)
            if named_as_data and app_only(target.definition):
                raise ClientError(
                    Code.TOOL_NOT_AVAILABLE,
                    f"'{target.exposed}' is called by its server's app (the user interface the host shows), "
                    "not by the model. Use another tool.",
                    server=target.server,
                    tool=target.upstream_name,
                )
            if reads_only and not reads_only_tool(target.definition):
                from mcp_patchbay.session.own_tools import read_route

                own = self.exposure.names
                raise ClientError(
                    Code.NOT_READ_ONLY,
                    f"{read_route(own)} runs only tools that say they only read, and '{target.exposed}' may change "
                    f"things: call it with {own.call_tool} instead, where the user may be asked to approve it.",
                    server=target.server,
                    tool=target.upstream_name,
                )
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
            with self.channel.calling(server, request) as flight:
                if named_as_data and self.settings.confirm:
                    await confirm(self.channel, target, arguments)
                waits = task is None and self.tasks is not None and self.tasks.required(upstream, target)
                call = self._tool_call(upstream, target, arguments, on_progress, meta, long=long or waits)
                call.task = task
                if flight is not None:
                    call.excused = lambda: flight.refused
                if waits and self.tasks is not None:
                    result = await self.tasks.run_and_wait(upstream, call)
                else:
                    result = await upstream.chain(call)
            result = bounded(
                result, self.settings.max_result_bytes, target.exposed, target.server, target.upstream_name
            )
            if self.on_call is not None:
                outcome = "tool_error" if result.get("isError") else "ok"
                self.on_call(server, target.upstream_name, outcome, time.monotonic() - started)
            if self.on_activity is not None:
                end = time.monotonic()
                self.on_activity(("tool_call", started, end, request, called, target, server, None, arguments, result))
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
            return self.error_result(
                error, called, target, server, arguments, started=started, request=request, named_as_data=named_as_data
            )
        except MCPError:  # the edge's answer in JSON-RPC's error form, from a call route's own run
            raise
        except Exception as exc:  # a bug of ours: the session still goes on
            logger.exception("unexpected error in tools/call %.200r", called)
            error = UpstreamError(
                Code.INTERNAL_ERROR,
                "An unexpected error occurred in the proxy while running this tool. Retry once; if it persists, "
                "tell the user.",
                detail=repr(exc),
                server=server,
            )
            return self.error_result(
                error, called, target, server, arguments, started=started, request=request, named_as_data=named_as_data
            )

    async def warm_index(self) -> None:
        """In search mode, build the index once startup is done, so the first search need not."""
        await self.supervisor.wait_startup()
        view = self.views.view(None)
        if view.exposure.search_mode(view.catalog):
            await view.exposure.index(view.catalog, view.servers)

    async def _find_tools(self, arguments: dict[str, Any] | None, view: View) -> dict[str, Any]:
        """Search mode's ``find_tools`` (after startup, as ``tools/list``)."""
        request = find_request(arguments)
        index = await view.exposure.index(view.catalog, view.servers)
        upstreams = [u for name, u in self.supervisor.upstreams.items() if name in view.servers]
        notes = unavailable_notes(request.query, upstreams)
        listed = self.settings.found_tools > 0
        result = find_result(index, request, notes, self.exposure.names, catalog=view.catalog, listed=listed)
        found = [tool["name"] for tool in result["structuredContent"]["tools"]]
        if view.exposure.found(found):
            self.on_listing_changed()
        return result

    async def _started(self, upstream: Upstream, target: CatalogTool, called: str, view: View) -> CatalogTool:
        """A server not running (a lazy one, listed from its kept listing) is started before its
        tool is checked: the read route and the pins judge what it lists now, not what it listed
        last time. A tool it no longer lists as it was (held, gone) is sent nothing."""
        if await upstream.ensure_started(self.settings.connect_timeout) is None:
            return target  # the chain answers why it cannot serve
        await self.supervisor.reviewed(within=self.settings.startup_wait)  # what it lists now, judged
        fresh = self.views.view(view.access)
        now = fresh.catalog.by_exposed.get(target.exposed)
        if now is not None and now.server == target.server and now.upstream_name == target.upstream_name:
            return now
        held = self.supervisor.held_error(target.exposed, server=target.server, permits=fresh.access)
        if held is not None:
            raise held
        return await self._resolve(called, fresh)  # gone, or another name: as any name is

    async def _resolve(self, called: str, view: View, *, again: bool = True) -> CatalogTool:
        catalog = view.catalog
        resolver = catalog.tool_resolver
        assert resolver is not None
        resolution = resolver.resolve(called)
        if resolution.kind in ("hidden", "unknown") and self.supervisor.reviewing:
            # A listing under review (a first sight, a change) serves its new tools once judged, and
            # holds them meanwhile: wait for the verdict (bounded as a server's start is) rather than
            # call the tool turned off.
            await self.supervisor.reviewed(within=self.settings.connect_timeout)
            view = self.views.view(view.access)
            catalog = view.catalog
            resolver = catalog.tool_resolver
            assert resolver is not None
            resolution = resolver.resolve(called)
        if resolution.kind in ("exact", "resolved") and resolution.entry is not None:
            target = catalog.by_exposed[resolution.entry.exposed]
            # An app's call by its server's own name is how apps call (``apps``), not a mistake to note.
            level = logging.DEBUG if called == target.upstream_name else logging.INFO
            logger.log(level, "resolved tool name %.200r to %r (rule: %s)", called, target.exposed, resolution.rule)
            return target
        if resolution.kind in ("hidden", "unknown"):  # a held tool is hidden: the user must approve it first
            held = self.supervisor.held_error(
                called, server=resolution.server if resolution.kind == "hidden" else None, permits=view.access
            )
            if held is not None:
                raise held
        if resolution.kind == "hidden":
            raise hidden_tool(resolution)
        if resolution.kind == "server_unavailable" and resolution.server is not None:
            upstream = self.supervisor.upstreams.get(resolution.server)
            if upstream is not None:
                error = await upstream.unavailable()
                # Signed in just now (oauth.gate): once it is ready its tools are in the catalog.
                if again and isinstance(error, SignedIn) and await upstream.wait_ready(self.settings.connect_timeout):
                    return await self._resolve(called, self.views.view(view.access), again=False)
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
        *,
        long: bool = False,
    ) -> ToolCall:
        settings = self.settings
        return ToolCall(
            server=upstream.name,
            tool=target.upstream_name,
            arguments=arguments if target.to_upstream is None else target.to_upstream(arguments),
            deadline=Deadline(settings.task_timeout, settings.task_timeout)
            if long
            else Deadline(upstream.timeout_for(target.upstream_name), settings.max_call_time),
            retry_safe=target.retry_safe,
            meta=meta,
            on_progress=on_progress,
        )

    # --- the edge -------------------------------------------------------------------------

    def error_result(
        self,
        error: PatchbayError,
        called: str,
        target: CatalogTool | None,
        server: str | None,
        arguments: dict[str, Any] | None = None,
        *,
        started: float,
        request: Request | None,
        named_as_data: bool = False,
    ) -> dict[str, Any]:
        """The one place a failed call becomes what the client sees: logged, recorded (with
        who called), and answered as an isError result. A name given as ``call_tool``'s argument
        is always answered with a result; a tool the client knows to declare an ``outputSchema``
        gets its error as text only (clients check structured content against that schema, even
        in an error, and would drop the proxy's answer), and so does a client that would show the
        model the same message twice (``catalog.client_quirks.errors_as_text``). An upstream's ``-32042`` is
        raised as that JSON-RPC error to a client that declared URL elicitation; any other gets the
        URLs in the result's text."""
        server = server or error.server or None
        tool = target.upstream_name if target is not None else error.tool
        caller = self._identity_of(request) if self._identity_of is not None and request is not None else None
        self.supervisor.status.record_error(error, called=called, server=server, tool=tool, caller=caller)
        if self.on_call is not None:
            self.on_call(server, tool, error.code.value, time.monotonic() - started)
        if self.on_activity is not None:
            end = time.monotonic()
            self.on_activity(("tool_call", started, end, request, called, target, server, error, arguments, None))
        # A model's mistake (a name, arguments) is answered and logged at INFO: stderr is for the
        # proxy's and the upstreams' failures, which clients show to the user as errors.
        # A sign-in the user has to give is not a failure either: the gate logs the sign-in itself.
        if isinstance(error, ClientError | ElicitationRequired) or error.code is Code.AUTH_REQUIRED:
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
        if isinstance(error, ElicitationRequired) and takes_url_elicitation(self.channel.declared(request)):
            if server is not None:
                self.channel.elicited(server, error.elicitation_ids, request)  # its completion notice goes there
            raise error.to_mcp_error()  # the URLs reach the client as the spec has them, whatever the route
        if (
            not named_as_data
            and self.settings.unknown_tool == "error"
            and error.code in (Code.TOOL_NOT_FOUND, Code.TOOL_AMBIGUOUS)
        ):
            raise to_mcp_error(error)
        result = result_values(error)
        if (not named_as_data and self._declares_output(called, target)) or errors_as_text(self._client(request)):
            del result["structuredContent"]
        return result

    def _client(self, request: Request | None) -> str | None:
        """The ``clientInfo.name`` of who called: from the SDK's session, or the lane's handshake."""
        if request is None:
            return self.lane_client()
        params = getattr(getattr(request, "session", None), "client_params", None)
        info = getattr(params, "client_info", None)
        name = getattr(info, "name", None)
        return name if isinstance(name, str) else None

    def _declares_output(self, called: str, target: CatalogTool | None) -> bool:
        """Whether the tool the client called has an ``outputSchema`` the client knows of."""
        if target is not None:
            return target.definition.output_schema is not None
        return called == self.exposure.names.find_tools


async def _hung_up(ctx: Request) -> bool:
    """Whether the HTTP client of this request has gone (its answer would be written to no one)."""
    is_disconnected = getattr(ctx.request, "is_disconnected", None)
    if is_disconnected is None:
        return False
    try:
        return bool(await is_disconnected())
    except Exception:
        return False


def _context_progress(ctx: Request) -> ProgressFn | None:
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


__all__ = ["CallObserver", "ToolPath"]
