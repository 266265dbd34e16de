"""The tool path: one ``tools/call``, whatever way it came, as one chain of steps, and the one error edge.

Both lanes end here: the handshake-era lane (``fastpath.stdio_calls.CallLane``, JSON values) calls
``ToolPath.run``; the SDK's typed path (2026-07-28 connections, calls before the handshake ended)
calls ``ToolPath.call_tool``, which runs a 2026-07-28 call that can answer input through ``rounds``.

``run`` looks the name up as given in the caller's view and sends the call, a ``steps.CallState``,
down the path: one callable type, ``steps.Step``, each step taking the next and being one (the
shape of ``policies``' chain, which is the path's last link). Built once, in this order:

    run: the edge (a failure becomes the answer: ``error_result``)
    -> configured      a config file that cannot be loaded: CONFIG_INVALID
    -> after_startup   a name not known yet waits for the first connections (``resolve``)
    -> own_tools       the status tool, find_tools, the call routes (``routes``; a route re-enters ``run``)
    -> resolved        a name not held as given is resolved, once (``resolve``: catalog.resolution,
                       errors.names, held tools)
    -> fresh           a lazy server is started and its tool judged again (``resolve``)
    -> route_limits    what a call route may run: no app-only tool, the read route only readers
    -> served          the tool's server is still configured
    -> arguments_checked
    -> told            observers (metrics, the activity log) and the debug log, told of the result
    -> size_limited    the result held to max_result_bytes (``results``)
    -> recorded        the status counts the call
    -> in_flight       what the server asks meanwhile is for this caller (``session.requests_back``)
    -> confirmed       ``patchbay.confirm`` for a call route's call (``confirm``)
    -> sent            the ToolCall down ``upstream.chain`` (breaker, deadline, bulkhead, retry), or
                       run as a task and waited for (``tasks``)

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
from functools import partial
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

from mcp_patchbay.calls.confirm import confirmed
from mcp_patchbay.calls.deadlines import ProgressFn
from mcp_patchbay.calls.resolve import Names, after_startup, fresh, resolved
from mcp_patchbay.calls.routes import RunTool, StatusOf, own_tools
from mcp_patchbay.calls.steps import (
    CallObserver,
    CallState,
    Request,
    Step,
    arguments_checked,
    configured,
    in_flight,
    recorded,
    route_limits,
    sent,
    served,
    size_limited,
    told,
)
from mcp_patchbay.catalog.client_quirks import errors_as_text
from mcp_patchbay.catalog.merge import CatalogTool
from mcp_patchbay.config import Settings
from mcp_patchbay.errors.foreign import translated
from mcp_patchbay.errors.tree import (
    ClientError,
    Code,
    ElicitationRequired,
    PatchbayError,
    UpstreamError,
    result_values,
    to_mcp_error,
)
from mcp_patchbay.fastpath.messages import split_meta
from mcp_patchbay.session.capabilities import takes_url_elicitation
from mcp_patchbay.session.notifications import IdentityOf
from mcp_patchbay.session.outbox import Outboxes
from mcp_patchbay.session.requests_back import SessionChannel
from mcp_patchbay.session.rounds import Rounds, answers_input
from mcp_patchbay.session.views import Views
from mcp_patchbay.upstreams.supervisor import Supervisor

if TYPE_CHECKING:
    from mcp_patchbay.tasks import Tasks
logger = logging.getLogger(__name__)


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
        names = Names(settings, supervisor, views)
        steps: tuple[Callable[[Step], Step], ...] = (  # outermost first, as the module's docstring draws them
            partial(configured, supervisor=supervisor),
            partial(after_startup, names=names),
            partial(
                own_tools,
                settings=settings,
                supervisor=supervisor,
                exposure=self.exposure,
                status_of=status_of,
                hooks=self,
                run=self.run,
            ),
            partial(resolved, names=names),
            partial(fresh, names=names),
            partial(route_limits, names=self.exposure.names),
            partial(served, supervisor=supervisor),
            arguments_checked,
            partial(told, hooks=self),
            partial(size_limited, settings=settings),
            partial(recorded, supervisor=supervisor),
            partial(in_flight, channel=channel),
            partial(confirmed, channel=channel, settings=settings),
        )
        path = sent(settings, self)
        for wrap in reversed(steps):
            path = wrap(path)
        self._path: Step = path
        """The call's path below the edge, built once."""

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

    async def run(
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
        result for every failure (only ``unknown_tool: "error"`` raises, an MCPError). The
        arguments are ``CallState``'s, which says what each means. ``task``: the result is then the
        upstream's ``CreateTaskResult`` (``tasks``); ``named_as_data``: a name that cannot be resolved
        is always answered with a result (``unknown_tool: "error"`` is for tools/call).

        The call goes down the path (``self._path``), its name looked up as given; this is the
        edge around it, where a failure becomes the answer (``error_result``)."""
        view = self.views.view()
        state = CallState(
            called,
            arguments,
            on_progress,
            meta,
            request,
            named_as_data,
            reads_only,
            task,
            long,
            time.monotonic(),
            view,
            view.catalog.by_exposed.get(called),
        )
        try:
            return await self._path(state)
        except PatchbayError as error:
            return self._answer(error, state)
        except MCPError:  # the edge's answer in JSON-RPC's error form, from a call route's own run
            raise
        except Exception as exc:  # a bug of ours: the session still goes on
            logger.exception("unexpected error in tools/call %.200r", called)
            error = UpstreamError(
                Code.INTERNAL_ERROR,
                "An unexpected error occurred in the proxy while running this tool. Retry once; if it persists, "
                "tell the user.",
                detail=repr(exc),
                server=state.server,
            )
            return self._answer(error, state)

    def _answer(self, error: PatchbayError, state: CallState) -> dict[str, Any]:
        return self.error_result(
            error,
            state.called,
            state.target,
            state.server,
            state.arguments,
            started=state.started,
            request=state.request,
            named_as_data=state.named_as_data,
        )

    async def warm_index(self) -> None:
        """In search mode, build the index once startup is done, so the first search need not."""
        await self.supervisor.wait_startup()
        view = self.views.view(None)
        if view.exposure.search_mode(view.catalog):
            await view.exposure.index(view.catalog, view.servers)

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
