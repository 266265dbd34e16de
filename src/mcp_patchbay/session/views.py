"""What one caller may see: the catalog under its access, what it lists, its servers.

A ``View`` is made per access (the gateway's sign-in says whose request this is) and
cached until the catalog changes; stdio and open gateways see everything through one
uncached view. ``Views`` owns that cache and the listing of tools a caller gets.

Who is calling: the caller's access comes from ``access_for`` (the gateway's sign-in, which
reads the SDK's access token, a ContextVar the SDK's auth middleware sets); the proxy keeps
no ambient record of its own. The request is passed explicitly to what needs it: the tool
path (``calls.path.ToolPath.run``), the lists served (``notifications.ListChanges.serving``)
and the status (``server.Proxy.status_snapshot``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mcp_types as types

from mcp_patchbay.catalog.merge import Catalog
from mcp_patchbay.catalog.restriction import Permits, restricted
from mcp_patchbay.config import Settings
from mcp_patchbay.session.exposure import Exposure, app_names, described_servers
from mcp_patchbay.session.status import config_problem_tool, status_tool
from mcp_patchbay.upstreams.supervisor import Supervisor

AccessFor = Callable[[], Permits | None]
"""What the caller of the current request may use; None: everything (stdio, open gateways)."""


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


class Views:
    """The views of the current catalog, one per access."""

    def __init__(
        self, settings: Settings, supervisor: Supervisor, exposure: Exposure, access_for: AccessFor | None
    ) -> None:
        self.settings = settings
        self.supervisor = supervisor
        self.exposure = exposure
        """What a caller who may use everything lists."""
        self.access_for = access_for
        self._views: dict[Permits, View] = {}
        self._exposures: dict[Permits, Exposure] = {}
        self._views_of: Catalog | None = None
        """The catalog the cached views were made from."""

    def view(self, access: Permits | bool | None = True) -> View:
        """What the current caller (or ``access``) may see; cached per access and catalog."""
        if access is True:
            access = self.access_for() if self.access_for is not None else None
        catalog = self.supervisor.catalog
        if access is None or access is False or getattr(access, "everything", False):
            return View(catalog, self.exposure, None, self.servers)
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
            return {name: text for name, text in self.servers().items() if permitted.permits_server(name)}

        view = self._views[access] = View(restricted(catalog, access), exposure, access, servers)
        return view

    def servers(self) -> dict[str, str | None]:
        """Every server, in config order, to its instructions."""
        return described_servers(self.supervisor.upstreams)

    def current_access(self) -> Permits | None:
        """The current caller's access; None for one who may use everything."""
        access = self.access_for() if self.access_for is not None else None
        return None if access is None or getattr(access, "everything", False) else access

    def tools_listing(self, view: View, *, for_apps: bool = False) -> list[types.Tool]:
        """The tools ``view``'s caller lists (with the status tool, when the config asks for it);
        ``for_apps``: a client that renders MCP Apps, which lists apps' tools by their servers'
        own names too (``session.exposure.app_names``)."""
        if self.supervisor.config_problem is not None:
            return [config_problem_tool(self.supervisor.config_problem)]
        tools = view.exposure.listing(view.catalog, view.servers)
        if self.settings.status_tool:
            tools = [*tools, status_tool()]
        if for_apps:
            tools = [*tools, *app_names(view.catalog, {tool.name for tool in tools})]
        return tools

    def input_schema(self, name: str) -> dict[str, Any] | None:
        """A listed tool's inputSchema, as the current caller sees it (None: nothing to check)."""
        target = self.view().catalog.by_exposed.get(name)
        return None if target is None else target.definition.input_schema


__all__ = ["AccessFor", "View", "Views"]
