"""Change notifications: who has been served which list, and telling them it changed.

Each client session (a 2025-era ``Connection``) is an audience: what it was last served of
each list (tools, prompts, resources) is kept, and when the catalog changes it is told
``notifications/*/list_changed`` for the lists that differ now in content, once until it
lists again. 2026-07-28 clients have no standalone channel: they hear of changes on a
``subscriptions/listen`` stream, one audience and one bus per access, so a change or a
resource update reaches only those who may see it. On the gateway the streams are bounded
in all and per member, and each session's notices go through its ``outbox``, never awaited.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from weakref import WeakKeyDictionary

import anyio
import mcp_types as types
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
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

from mcp_patchbay.catalog.apps import declares_apps
from mcp_patchbay.catalog.restriction import Permits
from mcp_patchbay.config.gateway import GatewaySettings
from mcp_patchbay.session.outbox import Outboxes
from mcp_patchbay.session.sdk import connection_of
from mcp_patchbay.session.views import View, Views
from mcp_patchbay.throttle import LogThrottle

logger = logging.getLogger(__name__)

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


@dataclass(eq=False)
class Audience:
    """What one client session has been served (a change is measured against it)."""

    access: Permits | None
    for_apps: bool = False
    """It renders MCP Apps (its tools are listed with ``Views.tools_listing``'s ``for_apps``)."""
    served: dict[str, object] = field(default_factory=dict[str, object])
    """Each list as it was last served, by kind."""
    told: set[str] = field(default_factory=set[str])
    """Kinds it was told changed and has not listed since: one notice is enough."""


class Listeners:
    """The 2026-07-28 clients of one access, which hear of changes on ``subscriptions/listen``:
    an audience of their own (as a 2025-era session is), and a bus of their own, so that a
    change or a resource update reaches only those who may see it."""

    def __init__(self, access: Permits | None, max_streams: int | None) -> None:
        self.access = access
        self.bus = InMemorySubscriptionBus()
        self.handler = (
            ListenHandler(self.bus) if max_streams is None else ListenHandler(self.bus, max_subscriptions=max_streams)
        )


class ListChanges:
    """The audiences, the listen streams, and the loop that tells them what changed."""

    def __init__(
        self,
        views: Views,
        *,
        limits: GatewaySettings | None,
        identity_of: IdentityOf | None,
        outboxes: Outboxes | None,
    ) -> None:
        """``limits``: the gateway's (None on stdio); ``identity_of``: who a request's caller
        is, for the per-member quota of listen streams."""
        self.views = views
        self._limits = limits
        self._identity_of = identity_of
        self._outboxes = outboxes
        self._listeners: dict[Permits | None, Listeners] = {}
        """The listen streams' audiences, by access."""
        self._listening: dict[str, int] = {}
        """Open listen streams per member (on the gateway)."""
        self.listen_streams = 0
        self._refusals = LogThrottle(logger)
        """Listen streams refused over a quota: a WARNING, at most 10 a minute."""
        self._audiences: WeakKeyDictionary[Connection | Listeners, Audience] = WeakKeyDictionary()
        """Per client session (the SDK's ``Connection``), what it was served."""
        self._pending: set[str] = set()
        self._changes = anyio.Event()

    # --- listen streams -------------------------------------------------------------------

    def listeners_of(self, access: Permits | None) -> Listeners:
        listeners = self._listeners.get(access)
        if listeners is None:
            limit = self._limits.max_listen_streams if self._limits is not None else None
            listeners = self._listeners[access] = Listeners(access, limit)
        return listeners

    def listen_buses(self, server: str) -> list[InMemorySubscriptionBus]:
        """The listen buses of the accesses that may use ``server`` (its resource updates)."""
        return [
            listeners.bus
            for access, listeners in self._listeners.items()
            if access is None or access.permits_server(server)
        ]

    async def listen(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """``subscriptions/listen``: the stream of the caller's access. On the gateway within
        ``gateway.max_listen_streams`` in all and ``max_listen_streams_per_identity`` a member;
        beyond either, a JSON-RPC error that says so, as the SDK refuses past its own cap."""
        listeners = self.listeners_of(self.views.current_access())
        limits = self._limits
        if limits is None or self._identity_of is None:
            return await listeners.handler(ctx, params)
        member = self._identity_of(ctx)
        held = self._listening.get(member, 0)
        if self.listen_streams >= limits.max_listen_streams:
            self._refusals.log("refused a listen stream of %s: %d streams open", member, self.listen_streams)
            raise MCPError(
                types.INTERNAL_ERROR,
                f"This gateway has {self.listen_streams} subscriptions/listen streams open, its limit. "
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
        self.listen_streams += 1
        try:
            return await listeners.handler(ctx, params)
        finally:
            self.listen_streams -= 1
            left = self._listening[member] - 1
            if left:
                self._listening[member] = left
            else:
                del self._listening[member]

    # --- what was served, and what changed ------------------------------------------------

    def on_catalog_change(self, kinds: set[str]) -> None:
        self._pending |= kinds
        self._changes.set()

    def serving(self, ctx: ServerRequestContext[Any, Any], kind: str, listing: object) -> None:
        """A list was served to ``ctx``'s client: remember it for its session."""
        access = self.views.current_access()
        handshake = ctx.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS
        key: Connection | Listeners = connection_of(ctx.session) if handshake else self.listeners_of(access)
        audience = self._audiences.get(key)
        if audience is None:
            audience = self._audiences[key] = Audience(access)
        audience.served[kind] = listing
        audience.told.discard(kind)
        audience.for_apps = declares_apps(ctx.session.client_capabilities)

    def _current(self, kind: str, view: View, audience: Audience) -> object:
        """What a client would get now for a list (the value an audience's ``served`` keeps)."""
        catalog = view.catalog
        if kind == "tools":
            return self.views.tools_listing(view, for_apps=audience.for_apps)
        if kind == "prompts":
            return list(catalog.prompts)
        return (list(catalog.resources), list(catalog.templates))

    def _changed_lists(self, audience: Audience, kinds: set[str]) -> list[str]:
        """The kinds worth a ``list_changed`` for one audience: served to it, not yet announced,
        and different now in content (an upstream that restarts with the same tools changes nothing)."""
        changed: list[str] = []
        view = self.views.view(audience.access)
        for kind in sorted(kinds):
            if (
                kind in audience.served
                and kind not in audience.told
                and self._current(kind, view, audience) != audience.served[kind]
            ):
                audience.told.add(kind)
                changed.append(kind)
        return changed

    async def run(self) -> None:
        """Tell each audience what changed for it, until cancelled. On the gateway a session's
        notices go to its outbox (``outbox``): this loop never waits for one client on behalf of others."""
        outboxes = self._outboxes
        while True:
            await self._changes.wait()
            self._changes = anyio.Event()
            kinds, self._pending = self._pending, set()
            told = 0
            for key, audience in list(self._audiences.items()):
                changed = self._changed_lists(audience, kinds)
                if not changed:
                    continue
                told += 1
                if isinstance(key, Listeners):
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


__all__ = ["Audience", "IdentityOf", "ListChanges", "Listeners"]
