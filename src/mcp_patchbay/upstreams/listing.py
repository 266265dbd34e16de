"""What an upstream offers (tools, resources, templates, prompts), read over its session.

Every list is read whole, page after page (a server that repeats a cursor does not loop
us forever). Tools are required of a server that advertises them; the other lists are
optional: a server that advertises resources but fails to list them still serves its
tools, with a warning in the log.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

import mcp_types as types
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError


@dataclass(frozen=True, slots=True)
class Listing:
    """What an upstream offers, as last read. Kept while it restarts."""

    tools: tuple[types.Tool, ...] = ()
    resources: tuple[types.Resource, ...] = ()
    templates: tuple[types.ResourceTemplate, ...] = ()
    prompts: tuple[types.Prompt, ...] = ()


@dataclass
class Rereads:
    """Re-reads of an upstream's lists after it said one changed, a burst of such notices coalesced.

    At most one re-read per kind is in flight and one more is owed: a notice that comes while
    one runs only marks the list stale, and the running one reads it once more when it is done,
    so the last change is always read. (The SDK runs every notice in a task of its own: 5,000
    ``tools/list_changed`` made 5,000 ``tools/list`` requests.)
    """

    read: Callable[[str], Awaitable[None]]
    """Re-reads one kind of list (``tools``, ``prompts``, ``resources``): ``Upstream.refresh``."""
    _running: set[str] = field(default_factory=lambda: set[str]())
    _stale: set[str] = field(default_factory=lambda: set[str]())

    async def soon(self, what: str) -> None:
        if what in self._running:
            self._stale.add(what)
            return
        self._running.add(what)
        try:
            while True:
                self._stale.discard(what)
                await self.read(what)
                if what not in self._stale:
                    return
        finally:
            self._running.discard(what)


async def read_listing(session: ClientSession, caps: types.ServerCapabilities, log: logging.Logger) -> Listing:
    """Everything a freshly connected server advertises."""
    tools: list[types.Tool] = []
    resources: list[types.Resource] = []
    templates: list[types.ResourceTemplate] = []
    prompts: list[types.Prompt] = []
    if caps.tools is not None:
        tools = await _all_pages(session.list_tools, "tools")
    if caps.resources is not None:
        resources = await _optional_list(session.list_resources, "resources", log)
        templates = await _optional_list(session.list_resource_templates, "resource_templates", log)
    if caps.prompts is not None:
        prompts = await _optional_list(session.list_prompts, "prompts", log)
    return Listing(tuple(tools), tuple(resources), tuple(templates), tuple(prompts))


async def reread(session: ClientSession, listing: Listing, what: str, log: logging.Logger) -> Listing:
    """``listing`` with one kind (``tools``, ``prompts``, ``resources``) read again."""
    if what == "tools":
        return replace(listing, tools=tuple(await _all_pages(session.list_tools, "tools")))
    if what == "prompts":
        return replace(listing, prompts=tuple(await _all_pages(session.list_prompts, "prompts")))
    if what == "resources":
        resources = await _all_pages(session.list_resources, "resources")
        templates = await _optional_list(session.list_resource_templates, "resource_templates", log)
        return replace(listing, resources=tuple(resources), templates=tuple(templates))
    return listing


async def _optional_list(fetch: Callable[..., Awaitable[Any]], attr: str, log: logging.Logger) -> list[Any]:
    try:
        return await _all_pages(fetch, attr)
    except MCPError as exc:
        log.warning("a server advertised %s but listing them failed: %s", attr, exc)
        return []


async def _all_pages(fetch: Callable[..., Awaitable[Any]], attr: str) -> list[Any]:
    """Read every page; a server that repeats a cursor does not loop us forever."""
    items: list[Any] = []
    cursor: str | None = None
    seen: set[str] = set()
    while True:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await fetch(params=params)
        items.extend(getattr(page, attr))
        cursor = page.next_cursor
        if not cursor or cursor in seen or len(seen) > 1000:
            return items
        seen.add(cursor)


__all__ = ["Listing", "Rereads", "read_listing", "reread"]
