"""The steps where a called name becomes the tool it stands for, once per call.

``ToolPath.run`` looks the name up as given (an exact name, most calls); these steps act only
when that was not enough:

- ``after_startup``: a name not known while the first connections are still being made waits
  for them (``startup_wait``) and is looked up again.
- ``resolved``: any other name the catalog does not hold is resolved (``catalog.resolution``: a
  mistaken separator, a server's own name) or answered with why not (``errors.names``); a tool
  held back until the user approves it is ``TOOL_CHANGED`` (``Supervisor.held_error``).
- ``fresh``: a tool of a server not running (a lazy one, listed from its kept listing) is
  judged again once the server has started.

The tool found is carried in ``CallState.target``; no later step looks the name up again.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable

from mcp_patchbay.calls.policies import RawResult
from mcp_patchbay.calls.steps import CallState, Step
from mcp_patchbay.catalog.merge import CatalogTool
from mcp_patchbay.config import Settings
from mcp_patchbay.errors.names import hidden_tool, unknown_name
from mcp_patchbay.errors.tree import SignedIn
from mcp_patchbay.session.views import View, Views
from mcp_patchbay.upstreams.supervisor import Supervisor
from mcp_patchbay.upstreams.upstream import Upstream

logger = logging.getLogger(__name__)


class Names:
    """Resolution against a caller's view, with the waits it may need."""

    def __init__(self, settings: Settings, supervisor: Supervisor, views: Views) -> None:
        self.settings = settings
        self.supervisor = supervisor
        self.views = views

    async def resolve(self, called: str, view: View, *, again: bool = True) -> CatalogTool:
        """The tool ``called`` stands for in ``view``, or the error that says why there is none."""
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
                    return await self.resolve(called, self.views.view(view.access), again=False)
                raise error
        searching = view.exposure.search_mode(catalog)
        find_tools = self.views.exposure.names.find_tools if searching else None
        raise unknown_name(resolution, resolver, search_tool=find_tools)

    async def started(self, upstream: Upstream, target: CatalogTool, called: str, view: View) -> CatalogTool:
        """A server not running is started before its tool is checked: the read route and the pins
        judge what it lists now, not what it listed last time. A tool it no longer lists as it was
        (held, gone) is sent nothing."""
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
        return await self.resolve(called, fresh)  # gone, or another name: as any name is


def after_startup(inner: Step, names: Names) -> Step:
    """A name not known before the first connection attempts are done waits for them."""
    supervisor, views = names.supervisor, names.views

    async def waited(state: CallState) -> RawResult:
        await supervisor.wait_startup()
        state.view = view = views.view()
        state.target = view.catalog.by_exposed.get(state.called)
        return await inner(state)

    def step(state: CallState) -> Awaitable[RawResult]:
        if state.target is None and not supervisor.started:
            return waited(state)
        return inner(state)

    return step


def resolved(inner: Step, names: Names) -> Step:
    """A name the caller's catalog does not hold as given is resolved, or answered with why not."""

    async def resolving(state: CallState) -> RawResult:
        state.target = await names.resolve(state.called, state.view)
        return await inner(state)

    def step(state: CallState) -> Awaitable[RawResult]:
        if state.target is None:
            return resolving(state)
        return inner(state)

    return step


def fresh(inner: Step, names: Names) -> Step:
    """A tool of a server not running is judged again once its server has started (``Names.started``)."""
    supervisor = names.supervisor

    async def starting(state: CallState, upstream: Upstream, target: CatalogTool) -> RawResult:
        state.target = await names.started(upstream, target, state.called, state.view)
        return await inner(state)

    def step(state: CallState) -> Awaitable[RawResult]:
        target = state.target
        assert target is not None
        upstream = supervisor.upstreams.get(target.server)
        if upstream is not None and not upstream.running:
            return starting(state, upstream, target)
        return inner(state)

    return step


__all__ = ["Names", "after_startup", "fresh", "resolved"]
