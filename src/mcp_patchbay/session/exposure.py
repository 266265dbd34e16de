"""What the client is shown of the upstreams' tools: every tool, or a search and two call routes.

Two facts shape it. Every tool listed costs the model context before the user typed a
word (30 popular servers list some 140,000 tokens of tools). And most clients refuse a
tool name they did not list, so the proxy's forgiving name resolution reaches the model
only when the name travels as data. ``patchbay.expose`` picks the listing:

- ``"all"``: every upstream tool, namespaced (``server__tool``); with
  ``patchbay.call_tool: true`` also the two call routes.
- ``"search"``: ``patchbay__find_tools`` and the two call routes (named with the
  configured separator), the tools searches found (``found``) and the tools kept listed
  with an entry's ``tools.always_list``; nothing else. The model searches, then calls by
  name as data.
- ``"auto"`` (default): search once the merged catalog has more than
  ``patchbay.search_threshold`` tools, all tools below it.

MCP Apps (``apps``) are listed in every mode: a tool with a user interface
(``_meta.ui.resourceUri``), since a host renders an app only for a tool it listed, and a tool
its server keeps for its app (``apps.app_only``), since the host enforces that from the
listing. An app-only tool is never offered to the model by the proxy's own tools: not
searched, not suggested, not run by a call route, not counted in ``call_tool``'s reach.

An app calls its server's tools by the server's own names (``get-time``, not
``clock__get-time``), and a host may refuse an app's call of a name it did not list. So a
client that declares the extension also lists, for each server with a user interface, each
tool an app may call under that name, visible to the app only (``app_names``): the model's
names stay namespaced, and a host that honours visibility never shows the model the second
entry. Only where the name calls exactly that tool (``naming``: one tool has it); where two
servers share a name neither is listed so, and a call by it runs nothing.

The call routes, so that a client's approval means what the user thinks (``session.own_tools`` says
why): ``call_read`` runs only a tool whose annotations say it only reads (``reads_only``),
``call_tool`` any tool, annotated for the worst it can reach (``reach``); ``find_tools``
names each tool's route (``route_of``).

In search mode ``tools/list`` does not wait for the upstreams (its tools do not depend on
them; ``find_tools``' description follows with ``list_changed``). ``find_tools`` waits for
startup as an all-mode listing does, searches an index built once per
catalog (``search.ToolIndex``), and names servers that cannot serve now but would have
matched, with what to do. A call route hands the name and arguments to the same
``Proxy.run_tool`` path as a direct call: resolution, suggestions, argument checks,
policies, deadlines, progress and cancellation are exactly those of a direct call.

The ``search`` package is imported at the first search-mode listing, not at startup.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import anyio
import anyio.to_thread
import mcp_types as types

from mcp_patchbay.catalog import apps
from mcp_patchbay.catalog.merge import Catalog, CatalogTool
from mcp_patchbay.catalog.naming import OwnTools, normalize
from mcp_patchbay.config import Settings
from mcp_patchbay.errors.tree import ClientError, Code
from mcp_patchbay.upstreams.upstream import State, Upstream

if TYPE_CHECKING:
    from mcp_patchbay.search import IndexedTool, ServerNote, ToolIndex
CHARS_PER_TOKEN = 4
"""A common estimate for English text and JSON in current tokenizers."""


def search_mode(settings: Settings, tool_count: int) -> bool:
    """Whether a catalog of ``tool_count`` tools is served in search mode."""
    if settings.expose == "auto":
        return tool_count > settings.search_threshold
    return settings.expose == "search"


def listing_cost(tools: Sequence[types.Tool]) -> tuple[int, int]:
    """(characters, estimated tokens) of a ``tools/list`` answer's tools, as JSON."""
    chars = sum(len(tool.model_dump_json(by_alias=True, exclude_none=True)) for tool in tools)
    return chars, math.ceil(chars / CHARS_PER_TOKEN)


def call_tool_definition(names: OwnTools, catalog: Catalog, *, searching: bool = True) -> types.Tool:
    """``call_tool`` (``session.own_tools`` owns its definition), annotated for what ``catalog``'s tools may do."""
    from mcp_patchbay.session.own_tools import call_tool_json

    read_only, destructive = reach(catalog)
    definition = call_tool_json(names, searching=searching, read_only=read_only, destructive=destructive)
    return types.Tool.model_validate(definition, by_name=False)


def call_read_definition(names: OwnTools, *, searching: bool = True) -> types.Tool:
    """The read route (``session.own_tools`` owns its definition)."""
    from mcp_patchbay.session.own_tools import call_read_json

    return types.Tool.model_validate(call_read_json(names, searching=searching), by_name=False)


def reads_only(tool: types.Tool) -> bool:
    """Whether a tool's annotations say it only reads: only such tools go through the read route."""
    return tool.annotations is not None and tool.annotations.read_only_hint is True


def reach(catalog: Catalog) -> tuple[bool, bool]:
    """(read-only, destructive): what the tools ``call_tool`` can reach may do. Read-only when every
    one only reads (an empty catalog is not: what comes later is not known); destructive unless
    every one that does not only read says it is not (a tool that says nothing may destroy). A
    server configured to serve that cannot now (``Catalog.waiting``) may destroy: its tools come
    back when it does. ``calls.routes`` runs a ``call_tool`` annotated read-only as the read route."""
    if catalog.waiting:
        return False, True
    tools = [target.definition for target in catalog.by_exposed.values() if not apps.app_only(target.definition)]
    others = [tool for tool in tools if not reads_only(tool)]
    read_only = bool(tools) and not others
    destructive = not tools or any(
        tool.annotations is None or tool.annotations.destructive_hint is not False for tool in others
    )
    return read_only, destructive


def always_listed(target: CatalogTool) -> bool:
    """Whether search mode lists a tool from the start: kept by an entry's ``always_list``, or an
    MCP App's (a tool with a user interface, or one for its server's app only)."""
    definition = target.definition
    return target.always_listed or apps.resource_uri(definition) is not None or apps.app_only(definition)


def route_of(target: CatalogTool, names: OwnTools) -> str:
    """The tool the model calls ``target`` with: the read route when it only reads, its own name when
    the client lists it from the start (``always_listed``), else ``call_tool``."""
    if reads_only(target.definition):
        from mcp_patchbay.session.own_tools import read_route

        return read_route(names)
    return target.exposed if always_listed(target) else names.call_tool


def app_names(catalog: Catalog, taken: set[str]) -> list[types.Tool]:
    """The tools of the servers with a user interface, each again under its server's own name as
    its app calls it, for the app only (``apps.as_app_name``); only where that name resolves to
    exactly that tool and is not ``taken`` (a name already listed)."""
    resolver = catalog.tool_resolver
    drawn = {target.server for target in catalog.by_exposed.values() if apps.resource_uri(target.definition)}
    if resolver is None or not drawn:
        return []
    named: list[types.Tool] = []
    for tool in catalog.tools:
        target = catalog.by_exposed[tool.name]
        own = target.upstream_name
        if target.server not in drawn or own in taken or not apps.for_apps(target.definition):
            continue
        if own.startswith((f"patchbay{catalog.separator}", "patchbay__")):
            continue  # the proxy's own tools' names (listed or not) are never a server's
        resolution = resolver.resolve(own)
        if resolution.entry is not None and resolution.entry.exposed == tool.name:
            named.append(apps.as_app_name(tool, own))
    return named


def find_tools_definition(names: OwnTools, description: str) -> types.Tool:
    """``find_tools`` (``session.own_tools`` owns its definition)."""
    from mcp_patchbay.session.own_tools import find_tools_json

    return types.Tool.model_validate(find_tools_json(names, description), by_name=False)


class Exposure:
    """The listing for the current catalog, and the search index, each built once per catalog."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.names = OwnTools.for_separator(settings.separator)
        self._built_for: Catalog | None = None
        self._described: tuple[tuple[str, str | None], ...] = ()
        self._index: ToolIndex | None = None
        self._tools: list[IndexedTool] = []
        self._find_tools: types.Tool | None = None
        self._building = anyio.Lock()
        self._found: OrderedDict[str, None] = OrderedDict()
        """Exposed names searches found, least recently found first (``found``)."""

    def search_mode(self, catalog: Catalog) -> bool:
        return search_mode(self.settings, len(catalog.tools))

    def listing(self, catalog: Catalog, servers: Mapping[str, str | None]) -> list[types.Tool]:
        """The tools the client lists now (without the status tool, which the server adds).
        ``servers``: every server in config order, to its instructions."""
        if not self.search_mode(catalog):
            routes = self.routes(catalog, searching=False) if self.settings.call_tool else []
            return [*catalog.tools, *routes]
        self._build(catalog, servers)
        assert self._find_tools is not None
        kept = [
            tool for tool in catalog.tools if always_listed(catalog.by_exposed[tool.name]) or tool.name in self._found
        ]
        return [self._find_tools, *self.routes(catalog), *kept]

    def routes(self, catalog: Catalog, *, searching: bool = True) -> list[types.Tool]:
        """The two call routes: the read route, and ``call_tool`` annotated for ``catalog``."""
        return [
            call_read_definition(self.names, searching=searching),
            call_tool_definition(self.names, catalog, searching=searching),
        ]

    def found(self, names: Sequence[str]) -> bool:
        """Tools a search found join the listing (``found_tools``, the most recent kept); whether
        the listing changed, so the client should be told."""
        limit = self.settings.found_tools
        if not limit or not names:
            return False
        before = set(self._found)
        for name in names:
            self._found.pop(name, None)
            self._found[name] = None
        while len(self._found) > limit:
            self._found.popitem(last=False)
        return set(self._found) != before

    async def index(self, catalog: Catalog, servers: Mapping[str, str | None]) -> ToolIndex:
        """The search index of this catalog, built once, in a worker thread (a few hundred ms
        for thousands of tools), at the first search or after startup (``Proxy._warm_index``).
        A catalog changes many times while servers start; only the listing is needed for each."""
        async with self._building:
            self._build(catalog, servers)
            if self._index is not None:
                return self._index
            from mcp_patchbay.search import ToolIndex

            built_for = self._built_for
            index = await anyio.to_thread.run_sync(ToolIndex.build, self._tools)
            if self._built_for is built_for:  # else a listing moved on to a newer catalog meanwhile
                self._index = index
            return index  # the index of the catalog this search was asked against

    def _build(self, catalog: Catalog, servers: Mapping[str, str | None]) -> None:
        described = tuple(servers.items())
        if self._built_for is catalog and self._described == described:
            return  # the catalog object itself is kept: an id() could be reused by a later one
        from mcp_patchbay.search import find_tools_description
        from mcp_patchbay.session.own_tools import routes_phrase

        self._tools = indexed_tools(catalog, servers)
        self._index = None
        description = find_tools_description(
            self._tools, servers=servers, find_tools=self.names.find_tools, call_tool=routes_phrase(self.names)
        )
        self._find_tools = find_tools_definition(self.names, description)
        self._built_for, self._described = catalog, described


TITLE_CHARS = 80
"""A server's title and website, as ``find_tools`` describes it, are cut to this (an upstream's text)."""


def described_servers(upstreams: Mapping[str, Upstream]) -> dict[str, str | None]:
    """Every server that may serve, in config order, to what it says it is for: its title and
    website (from its ``initialize`` answer) before its instructions. Disabled ones are the
    user's choice and are not described."""
    return {name: _described(name, up) for name, up in upstreams.items() if up.state is not State.DISABLED}


def _described(name: str, upstream: Upstream) -> str | None:
    info = upstream.server_info
    said = [
        " ".join(text.split())[:TITLE_CHARS]
        for text in (info.title if info else None, info.website_url if info else None)
        if text and text != name
    ]
    if not said:
        return upstream.instructions
    return f"{', '.join(said)}: {upstream.instructions}" if upstream.instructions else ", ".join(said)


def indexed_tools(catalog: Catalog, servers: Mapping[str, str | None]) -> list[IndexedTool]:
    from mcp_patchbay.search import IndexedTool

    indexed: list[IndexedTool] = []
    for tool in catalog.tools:  # the exposed definitions, in listing order (the index's tie-break)
        entry = catalog.by_exposed[tool.name]
        if apps.app_only(tool):
            continue  # never offered to the model
        indexed.append(IndexedTool.of(tool.name, entry.server, entry.upstream_name, tool, servers.get(entry.server)))
    return indexed


@dataclass(frozen=True, slots=True)
class FindRequest:
    query: str
    limit: int | None
    server: str | None


def find_request(arguments: Mapping[str, Any] | None) -> FindRequest:
    """``find_tools``' arguments, forgiving where the meaning is plain: a numeric string as
    ``limit``, out-of-range limits clamped (by the index), an empty ``server`` as none."""
    args = arguments or {}
    query = args.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ClientError(
            Code.INVALID_ARGUMENTS,
            "find_tools needs a 'query': what you need to do in a few words, or a tool name. Call it again with one.",
        )
    limit = args.get("limit")
    if isinstance(limit, str) and limit.strip().lstrip("-").isdigit():
        limit = int(limit.strip())
    elif isinstance(limit, float) and limit.is_integer():
        limit = int(limit)
    server = args.get("server")
    return FindRequest(
        query=query.strip(),
        limit=limit if isinstance(limit, int) and not isinstance(limit, bool) else None,
        server=server.strip() if isinstance(server, str) and server.strip() else None,
    )


def call_request(
    arguments: Mapping[str, Any] | None, names: OwnTools, route: str | None = None
) -> tuple[str, dict[str, Any] | None]:
    """A call route's target name and arguments (an absent ``arguments`` is none); ``route``: the
    route called (``call_tool`` unless said)."""
    route = route or names.call_tool
    args = arguments or {}
    name = args.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ClientError(
            Code.INVALID_ARGUMENTS,
            f"{route} needs 'name' (a tool's name from {names.find_tools}) and 'arguments' (an object). "
            "Call it again with them.",
        )
    target_args = args.get("arguments")
    if target_args is not None and not isinstance(target_args, dict):
        raise ClientError(
            Code.INVALID_ARGUMENTS,
            f"{route}: 'arguments' must be an object of the tool's arguments, like "
            '{"path": "README.md"}. Call it again with an object.',
        )
    return name.strip(), cast("dict[str, Any] | None", target_args)


_NOTE_STATES: dict[State, tuple[str, str]] = {
    State.STARTING: ("starting", "try again in a few seconds"),
    State.RESTARTING: ("restarting", "try again in a few seconds"),
    State.FAILED: ("down", "tell the user it failed to start; 'mcp-patchbay check' says why"),
    State.INVALID: ("misconfigured", "tell the user to run 'mcp-patchbay check'"),
    State.SIGN_IN: ("needs sign-in", "call one of its tools to start a sign-in in the user's browser"),
}


def unavailable_notes(query: str, upstreams: Iterable[Upstream]) -> list[ServerNote]:
    """The servers that cannot serve now, each with how well what is known of it matches ``query``
    (its name, and the tools it listed when it last could). Disabled servers are the user's
    choice and are not mentioned."""
    from mcp_patchbay.search import ServerNote, note_match

    notes: list[ServerNote] = []
    for upstream in upstreams:
        state = upstream.state
        if state in (State.STARTING, State.RESTARTING) and upstream.first_ready_after is None and upstream.error:
            state = State.FAILED  # never served: its retry in the background is no promise (as availability says)
        described = _NOTE_STATES.get(state)
        if described is None:
            continue
        known = [upstream.name, *(f"{t.name} {t.description or ''}" for t in upstream.listing.tools)]
        notes.append(ServerNote(upstream.name, described[0], described[1], note_match(query, *known)))
    return notes


def _same_server(given: str, name: str) -> bool:
    """``server`` as the index takes it: case, ``-`` and ``_`` do not matter."""
    return normalize(given) == normalize(name)


def find_result(
    index: ToolIndex,
    request: FindRequest,
    notes: Sequence[ServerNote],
    names: OwnTools,
    *,
    catalog: Catalog | None = None,
    listed: bool = False,
) -> dict[str, Any]:
    """The ``tools/call`` result of a search, as JSON values: each tool found with the route it is
    called by (``route_of``, from ``catalog``'s definitions; ``call_tool`` for a tool it lacks).
    ``listed``: the tools found join the client's tool list (``Exposure.found``)."""
    from mcp_patchbay.search import render_answer
    from mcp_patchbay.session.own_tools import read_route

    servers = [*index.servers, *(note.server for note in notes if note.server not in index.servers)]
    if request.server is not None and not any(_same_server(request.server, name) for name in servers):
        known = ", ".join(servers[:20]) or "none yet"
        raise ClientError(
            Code.INVALID_ARGUMENTS,
            f"No server is named '{request.server[:80]}'. Servers: {known}. Search again without 'server' or "
            "with one of these.",
        )
    hits = index.search(request.query, limit=request.limit, server=request.server)
    routes: dict[str, str] = {}
    for hit in hits:
        entry = catalog.by_exposed.get(hit.tool.name) if catalog is not None else None
        routes[hit.tool.name] = route_of(entry, names) if entry is not None else names.call_tool
    structured, text = render_answer(
        hits,
        query=request.query,
        unavailable=notes,
        server=request.server,
        call_tool=names.call_tool,
        read_tool=read_route(names),
        routes=routes,
        listed=listed,
    )
    return {"content": [{"type": "text", "text": text}], "structuredContent": structured}


__all__ = [
    "Exposure",
    "FindRequest",
    "OwnTools",
    "always_listed",
    "app_names",
    "call_read_definition",
    "call_request",
    "call_tool_definition",
    "described_servers",
    "find_request",
    "find_result",
    "listing_cost",
    "reach",
    "reads_only",
    "route_of",
    "search_mode",
    "unavailable_notes",
]
