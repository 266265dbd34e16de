"""The steps of a tool call's path, and the one state a call carries down it.

One callable type, ``Step``: it takes a call's ``CallState`` and answers its result. Every step
takes the next step and is one (as every policy in ``policies`` takes a Handler and is one):
``ToolPath`` builds the path once, in its documented order, and the upstream's policy chain is
its last link.

A step with nothing to wait for on the common path is a plain function that returns the next
step's awaitable itself: no coroutine of its own for each call. A failure is raised, never
answered here; the edge (``ToolPath.run``) answers it.

The steps here check, tell and send; the name's resolution is ``resolve``'s, the proxy's own
tools ``routes``', confirmation ``confirm``'s.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from mcp.server.context import ServerRequestContext

from mcp_patchbay.calls.deadlines import Deadline, ProgressFn
from mcp_patchbay.calls.policies import RawResult, ToolCall
from mcp_patchbay.calls.results import bounded
from mcp_patchbay.catalog.apps import app_only
from mcp_patchbay.catalog.merge import CatalogTool
from mcp_patchbay.catalog.naming import OwnTools
from mcp_patchbay.config import Settings
from mcp_patchbay.errors.tree import ClientError, Code, UpstreamError
from mcp_patchbay.session.exposure import reads_only as reads_only_tool
from mcp_patchbay.session.requests_back import SessionChannel
from mcp_patchbay.session.status import config_problem_text
from mcp_patchbay.session.views import View
from mcp_patchbay.upstreams.supervisor import Supervisor
from mcp_patchbay.upstreams.upstream import Upstream

if TYPE_CHECKING:
    from mcp_patchbay.tasks import Tasks

logger = logging.getLogger(__name__)

Request = ServerRequestContext[Any, Any]


@dataclass(slots=True)
class CallState:
    """One tool call on its way down the path: what the client asked, and what the steps found."""

    called: str
    """The name as the client gave it."""
    arguments: dict[str, Any] | None
    on_progress: ProgressFn | None
    meta: dict[str, Any] | None
    """The client's ``_meta`` less its progress token, passed on upstream."""
    request: Request | None
    """The SDK's context of the client's request (None on a lane)."""
    named_as_data: bool
    """The name came as a call route's argument (``route_limits``, ``confirmed``, the edge's answer)."""
    reads_only: bool
    """It came through the read route: only a tool that says it only reads runs (``route_limits``)."""
    task: dict[str, Any] | None
    """The client's ``task``, for an upstream that runs the tool as one; without one, a tool whose
    upstream requires a task is run as one and waited for (``sent``)."""
    long: bool
    """The call runs as a task: within ``task_timeout`` rather than the tool's timeout."""
    started: float
    """When the call arrived (``time.monotonic``)."""
    view: View
    """What the caller may see."""
    target: CatalogTool | None
    """The tool called: looked up as named, then resolved (``resolve``) if it was not."""
    server: str | None = None
    """Its server, once the checks of the tool are passed."""
    upstream: Upstream | None = None
    excused: Callable[[], bool] | None = None
    """Whether the proxy refused a request the server made for this call (``in_flight``)."""


Step = Callable[[CallState], Awaitable[RawResult]]
"""A step of the path, or the rest of the path below a step: each step is built around the next."""

CallObserver = Callable[[str | None, str | None, str, float], None]
"""(server, upstream tool, outcome, seconds): ``ok``, ``tool_error`` (the tool's own
``isError``) or the proxy's error code; server and tool None when the name was not resolved."""


class Hooks(Protocol):
    """What the path's owner (``ToolPath``) is given after the path is built, read per call."""

    on_call: CallObserver | None
    on_activity: Callable[[tuple[Any, ...]], None] | None
    tasks: Tasks | None
    on_listing_changed: Callable[[], None]


def configured(inner: Step, supervisor: Supervisor) -> Step:
    """A config file that cannot be loaded answers every call with what is wrong in it."""

    def step(state: CallState) -> Awaitable[RawResult]:
        if supervisor.config_problem is not None:
            raise ClientError(Code.CONFIG_INVALID, config_problem_text(supervisor.config_problem))
        return inner(state)

    return step


def route_limits(inner: Step, names: OwnTools) -> Step:
    """What a call route may run: never a tool its server keeps for its app (``apps.app_only``: the
    app calls it directly), and through the read route only a tool that says it only reads."""

    def step(state: CallState) -> Awaitable[RawResult]:
        target = state.target
        assert target is not None
        if state.named_as_data and app_only(target.definition):
            raise ClientError(
                Code.TOOL_NOT_AVAILABLE,
                f"'{target.exposed}' is called by its server's app (the user interface the host shows), "
                "not by the model. Use another tool.",
                server=target.server,
                tool=target.upstream_name,
            )
        if state.reads_only and not reads_only_tool(target.definition):
            from mcp_patchbay.session.own_tools import read_route  # search mode's: not on the start's path

            raise ClientError(
                Code.NOT_READ_ONLY,
                f"{read_route(names)} runs only tools that say they only read, and '{target.exposed}' may change "
                f"things: call it with {names.call_tool} instead, where the user may be asked to approve it.",
                server=target.server,
                tool=target.upstream_name,
            )
        return inner(state)

    return step


def served(inner: Step, supervisor: Supervisor) -> Step:
    """The tool's server is still in the config: the call is now that server's."""

    def step(state: CallState) -> Awaitable[RawResult]:
        target = state.target
        assert target is not None
        state.server = server = target.server
        state.upstream = supervisor.upstreams.get(server)
        if state.upstream is None:
            raise UpstreamError(
                Code.SERVER_UNAVAILABLE, f"Server '{server}' was removed from the config.", server=server
            )
        return inner(state)

    return step


def arguments_checked(inner: Step) -> Step:
    """Arguments the tool's schema refuses are the model's to fix: nothing is sent (``catalog.arguments``)."""

    def step(state: CallState) -> Awaitable[RawResult]:
        target = state.target
        assert target is not None
        if target.checker is not None:
            problems = target.checker.problems(state.arguments)
            if problems:
                raise ClientError(
                    Code.INVALID_ARGUMENTS,
                    f"Invalid arguments for '{target.exposed}': " + "; ".join(problems) + ". Fix them and call again.",
                    server=target.server,
                    tool=target.upstream_name,
                )
        return inner(state)

    return step


def told(inner: Step, hooks: Hooks) -> Step:
    """A call its tool answered is told to the observers (the gateway's metrics, the activity log)
    and the debug log, with the result as the client gets it; a failure, the edge tells."""

    async def step(state: CallState) -> RawResult:
        result = await inner(state)
        target, server, started = state.target, state.server, state.started
        assert target is not None
        if hooks.on_call is not None:
            outcome = "tool_error" if result.get("isError") else "ok"
            hooks.on_call(server, target.upstream_name, outcome, time.monotonic() - started)
        if hooks.on_activity is not None:
            end = time.monotonic()
            hooks.on_activity(
                ("tool_call", started, end, state.request, state.called, target, server, None, state.arguments, result)
            )
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "call %s -> %s/%s ok%s in %.1f ms",
                state.called,
                server,
                target.upstream_name,
                " (tool reported isError)" if result.get("isError") else "",
                (time.monotonic() - started) * 1000,
            )
        return result

    return step


def size_limited(inner: Step, settings: Settings) -> Step:
    """The result held to ``max_result_bytes`` (``results``)."""

    async def step(state: CallState) -> RawResult:
        result = await inner(state)
        target = state.target
        assert target is not None
        return bounded(result, settings.max_result_bytes, target.exposed, target.server, target.upstream_name)

    return step


def recorded(inner: Step, supervisor: Supervisor) -> Step:
    """The status counts the call to its server's tool (its failure, the edge records)."""

    def step(state: CallState) -> Awaitable[RawResult]:
        target = state.target
        assert target is not None
        supervisor.status.record_call(target.server, target.upstream_name)
        return inner(state)

    return step


def in_flight(inner: Step, channel: SessionChannel) -> Step:
    """While the call is in flight, what its server asks is for its caller (``session.requests_back``);
    a request the proxy refuses for it excuses the server's failure (``policies.with_breaker``)."""

    async def flying(state: CallState, request: Request) -> RawResult:
        assert state.server is not None
        with channel.calling(state.server, request) as flight:
            if flight is not None:
                state.excused = lambda: flight.refused
            return await inner(state)

    def step(state: CallState) -> Awaitable[RawResult]:
        request = state.request
        if request is None:  # a lane's call: no session of its own to route to (``calling`` notes none)
            return inner(state)
        return flying(state, request)

    return step


def sent(settings: Settings, hooks: Hooks) -> Step:
    """The path's end: the call down its upstream's policy chain (``upstream.chain``), with its
    deadline; a plain call of a tool whose upstream requires a task is run as one and waited for
    (``tasks``), within ``task_timeout`` as a task is."""

    def step(state: CallState) -> Awaitable[RawResult]:
        target, upstream = state.target, state.upstream
        assert target is not None and upstream is not None
        tasks = hooks.tasks
        waits = state.task is None and tasks is not None and tasks.required(upstream, target)
        arguments = state.arguments
        call = ToolCall(
            server=upstream.name,
            tool=target.upstream_name,
            arguments=arguments if target.to_upstream is None else target.to_upstream(arguments),
            deadline=Deadline(settings.task_timeout, settings.task_timeout)
            if state.long or waits
            else Deadline(upstream.timeout_for(target.upstream_name), settings.max_call_time),
            retry_safe=target.retry_safe,
            meta=state.meta,
            on_progress=state.on_progress,
            excused=state.excused,
            task=state.task,
        )
        if waits and tasks is not None:
            return tasks.run_and_wait(upstream, call)
        return upstream.chain(call)

    return step


__all__ = [
    "CallObserver",
    "CallState",
    "Hooks",
    "Request",
    "Step",
    "arguments_checked",
    "configured",
    "in_flight",
    "recorded",
    "route_limits",
    "sent",
    "served",
    "size_limited",
    "told",
]
