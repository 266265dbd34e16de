"""The step that answers the proxy's own tools: the status tool, ``find_tools`` and the call routes.

A name the caller's catalog does not hold may be one of the proxy's own (``session.own_tools``).
``call_tool`` and ``call_read`` re-enter the path from its top with the name and arguments they
were given as data (``ToolPath.run``, ``named_as_data``), so resolution, checks, confirmation,
policies and the edge are exactly those of a direct call; the routed call is answered by its own
run, and the route returns that answer.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from mcp_patchbay.calls.policies import RawResult
from mcp_patchbay.calls.steps import CallState, Hooks, Request, Step
from mcp_patchbay.catalog.naming import OwnTools
from mcp_patchbay.config import Settings
from mcp_patchbay.errors.tree import ClientError, Code
from mcp_patchbay.session.exposure import Exposure, call_request, find_request, find_result, reach, unavailable_notes
from mcp_patchbay.session.status import STATUS_TOOL, tool_result
from mcp_patchbay.session.views import View
from mcp_patchbay.upstreams.supervisor import Supervisor

RunTool = Callable[..., Awaitable[dict[str, Any]]]
"""``ToolPath.run``, as ``Proxy.run_tool`` holds it."""
StatusOf = Callable[["Request | None"], dict[str, Any]]
"""The status as the caller of a request may see it (``Proxy.status_snapshot``)."""


def own_tools(
    inner: Step,
    *,
    settings: Settings,
    supervisor: Supervisor,
    exposure: Exposure,
    status_of: StatusOf,
    hooks: Hooks,
    run: RunTool,
) -> Step:
    """The proxy's own tools, for a name the caller's catalog does not hold; any other goes on."""

    async def answered(state: CallState) -> RawResult:
        called, view = state.called, state.view
        own = exposure.names
        if called == STATUS_TOOL and settings.status_tool:
            return _logged(state, hooks, tool_result(status_of(state.request)))
        if called == own.find_tools:
            found = await _find_tools(
                state.arguments, view, own=own, settings=settings, supervisor=supervisor, hooks=hooks
            )
            return _logged(state, hooks, found)
        from mcp_patchbay.session.own_tools import read_route  # search mode's: not on the start's path

        read = read_route(own)
        if called in (own.call_tool, read):
            name, arguments = call_request(state.arguments, own, called)
            if name in (own.find_tools, own.call_tool, read):
                raise ClientError(
                    Code.INVALID_ARGUMENTS, f"{called} calls the servers' tools; call {name} directly instead."
                )
            return await run(
                name,
                arguments,
                state.on_progress,
                state.meta,
                request=state.request,
                named_as_data=True,
                reads_only=called == read or reach(view.catalog)[0],  # call_tool's claim holds
                long=state.long,
            )
        return await inner(state)

    def step(state: CallState) -> Awaitable[RawResult]:
        if state.target is None:
            return answered(state)
        return inner(state)

    return step


def _logged(state: CallState, hooks: Hooks, result: RawResult) -> RawResult:
    """One of the proxy's own tools answered: the activity log gets it as a call of no server (a
    routed call is logged by its own run; a failure, the edge logs)."""
    if hooks.on_activity is not None:
        hooks.on_activity(
            ("tool_call", state.started, time.monotonic(), state.request, state.called, None, None, None,
             state.arguments, result)
        )  # fmt: skip
    return result


async def _find_tools(
    arguments: dict[str, Any] | None,
    view: View,
    *,
    own: OwnTools,
    settings: Settings,
    supervisor: Supervisor,
    hooks: Hooks,
) -> RawResult:
    """Search mode's ``find_tools`` (after startup, as ``tools/list``)."""
    request = find_request(arguments)
    index = await view.exposure.index(view.catalog, view.servers)
    upstreams = [u for name, u in supervisor.upstreams.items() if name in view.servers]
    notes = unavailable_notes(request.query, upstreams)
    listed = settings.found_tools > 0
    result = find_result(index, request, notes, own, catalog=view.catalog, listed=listed)
    found = [tool["name"] for tool in result["structuredContent"]["tools"]]
    if view.exposure.found(found):
        hooks.on_listing_changed()
    return result


__all__ = ["RunTool", "StatusOf", "own_tools"]
