"""The merged catalog: every upstream's tools, prompts and resources as the client sees them.

Pure. Built from snapshots of the upstreams whenever one of them changes (never per
call), so a call's lookups are dictionary hits: exposed name -> ``CatalogTool``
with its upstream name, its compiled argument checker and its retry safety.

Lists are in a deterministic order, whatever order upstreams list in or come up in
(the 2026-07-28 revision asks it: clients and model providers cache the tool list by
its bytes): servers in config order, each server's items by name (resources by URI).

Resource URIs are kept unchanged (tool results refer to them); when two servers
offer the same URI, the server listed first in the config wins, so a URI's meaning
never changes when a late upstream arrives. ``ui://`` URIs (MCP Apps' user interfaces) are
the exception: every one a server lists or links a tool to is exposed as its own
(``apps.exposed_uri``), in the listing and in the tool's ``_meta`` alike, and mapped back
(``Catalog.ui_resources``), so two servers' apps never answer for each other.
Which server answers for a URI the client sends is ``catalog.resources``; one caller's part
of the catalog, ``catalog.restriction``.

A server's entry may override its tools' and prompts' definitions (``overrides``): the
catalog holds the changed ones (``CatalogTool.definition``, what the model sees everywhere),
each renamed item answering to its upstream name too, and the mapper from the model's
arguments to the upstream's (``CatalogTool.to_upstream``). An override that does not fit what
the server listed is skipped and kept in ``Catalog.remarks``.

An upstream that lists a tool name twice keeps its first definition, and a skipped override
is told: each is logged once per listing (the side effects here: the same listing is built
into every catalog until the server lists again, so it is told only when a new listing
arrives, or the entry's overrides change).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import mcp_types as types

from mcp_patchbay.catalog import apps
from mcp_patchbay.catalog.arguments import ArgumentChecker
from mcp_patchbay.catalog.naming import build_names, sanitize
from mcp_patchbay.catalog.overrides import ChangedTool, Remark, change_prompts, change_tools
from mcp_patchbay.catalog.resolution import NameEntry, Resolver
from mcp_patchbay.catalog.resources import template_pattern
from mcp_patchbay.config import RemoteSpec, StdioSpec, ToolFilter
from mcp_patchbay.config.problems import key_path, quote

logger = logging.getLogger(__name__)

DUPLICATES_NAMED = 5
"""At most this many of an upstream's repeated tool names are named in its warning; the rest are counted."""

_RESERVED_TOLD: set[tuple[str, str]] = set()
_TOLD: dict[str, object] = {}
"""Per server, the tool listing whose repeated names were last logged (kept by identity: a
listing is one tuple until the server lists again). One entry per server name."""

_TOLD_REMARKS: dict[str, tuple[object, object, object]] = {}
"""Per server, the tool listing, prompt listing and entry whose skipped overrides were last logged."""

_Overridden = tuple[dict[str, ChangedTool], dict[str, types.Prompt], list[Remark]]
_CHANGED: dict[str, tuple[object, object, object, _Overridden]] = {}
"""Per server, its listings and entry (by identity: each is one object until the server lists
again or the file is reloaded) and what its overrides made of them: a rebuild for another
server's change does not apply them again (checking a fixed value against a schema is not free)."""


@dataclass(frozen=True, slots=True)
class Source:
    """One upstream as the catalog needs it."""

    server: str
    tools: Sequence[types.Tool] = ()
    prompts: Sequence[types.Prompt] = ()
    resources: Sequence[types.Resource] = ()
    templates: Sequence[types.ResourceTemplate] = ()
    tool_filter: ToolFilter | None = None
    unavailable: str | None = None
    """Why the server cannot serve (disabled, config error, failed); None when it can or may soon."""
    spec: StdioSpec | RemoteSpec | None = None
    """The server's entry as configured (its overrides); None when it has none (tests, a broken entry)."""
    icons: Sequence[types.Icon] | None = None
    """The server's own icons (its ``initialize``): listed as a tool's where the tool has none."""


@dataclass(frozen=True, slots=True)
class CatalogTool:
    exposed: str
    server: str
    upstream_name: str
    definition: types.Tool
    checker: ArgumentChecker | None
    retry_safe: bool
    always_listed: bool = False
    """Listed in search mode too (``tools.always_list``)."""
    to_upstream: Callable[[dict[str, Any] | None], dict[str, Any] | None] | None = None
    """The arguments the upstream expects from those the model sent, when they differ (an override's
    fixed values, defaults and renamed arguments); None: sent as they are."""

    def name_entry(self) -> NameEntry:
        entry = _name_entry(self.exposed, self.server, self.definition.name, self.upstream_name)
        return replace(entry, app_only=True) if apps.app_only(self.definition) else entry


@dataclass(frozen=True, slots=True)
class UiResource:
    """An exposed ``ui://`` URI's server, and the URI that server knows it by."""

    server: str
    upstream: str


@dataclass(frozen=True, slots=True)
class CatalogPrompt:
    exposed: str
    server: str
    upstream_name: str
    definition: types.Prompt

    def name_entry(self) -> NameEntry:
        return _name_entry(self.exposed, self.server, self.definition.name, self.upstream_name)


def _name_entry(exposed: str, server: str, listed: str, upstream_name: str) -> NameEntry:
    """An item as the resolver takes it: its listed name, and its upstream one when an override renamed it."""
    return NameEntry(exposed, server, listed, (upstream_name,) if listed != upstream_name else ())


CheckerCache = dict[tuple[str, str], tuple[str, ArgumentChecker]]


@dataclass
class Catalog:
    separator: str = "__"
    tools: list[types.Tool] = field(default_factory=lambda: list[types.Tool]())
    by_exposed: dict[str, CatalogTool] = field(default_factory=lambda: dict[str, CatalogTool]())
    tool_resolver: Resolver | None = None
    prompts: list[types.Prompt] = field(default_factory=lambda: list[types.Prompt]())
    prompts_by_exposed: dict[str, CatalogPrompt] = field(default_factory=lambda: dict[str, CatalogPrompt]())
    prompt_resolver: Resolver | None = None
    resources: list[types.Resource] = field(default_factory=lambda: list[types.Resource]())
    templates: list[types.ResourceTemplate] = field(default_factory=lambda: list[types.ResourceTemplate]())
    resource_owner: dict[str, str] = field(default_factory=lambda: dict[str, str]())
    template_owner: dict[str, str] = field(default_factory=lambda: dict[str, str]())
    template_patterns: list[tuple[re.Pattern[str], str]] = field(
        default_factory=lambda: list[tuple[re.Pattern[str], str]]()
    )
    ui_resources: dict[str, UiResource] = field(default_factory=lambda: dict[str, UiResource]())
    """Every exposed ``ui://`` URI (listed, or linked from a tool) to its server's own."""
    ui_exposed: dict[tuple[str, str], str] = field(default_factory=lambda: dict[tuple[str, str], str]())
    """(server, its ``ui://`` URI) to the exposed one: ``ui_resources`` the other way."""
    ui_owners: dict[str, tuple[str, ...]] = field(default_factory=lambda: dict[str, tuple[str, ...]]())
    """A server's own ``ui://`` URI to the servers that have it (a client may send it unexposed)."""
    remarks: list[Remark] = field(default_factory=lambda: list[Remark]())
    """Overrides skipped because they do not fit what their server listed (``check`` names them)."""
    waiting: tuple[str, ...] = ()
    """Servers configured to serve that cannot now (starting, failed, restarting with nothing
    listed): what their tools may do is not known (``session.exposure.reach``). Disabled ones are not."""

    def tool_signature(self) -> list[str]:
        """What the client would see change: exposed definitions, serialised once per rebuild."""
        return [t.model_dump_json(by_alias=True, exclude_none=True) for t in self.tools]


# Long on purpose: one pass over every server's lists keeps the merge's order rules in one place.
def build_catalog(  # noqa: PLR0912, PLR0915
    sources: Iterable[Source],
    *,
    separator: str,
    max_length: int,
    validate_arguments: bool,
    checkers: CheckerCache | None = None,
    config_path: Path | None = None,
) -> Catalog:
    """Merge the sources, in config order. ``checkers`` carries compiled validators between builds;
    ``config_path`` names the file in the warning about a skipped override."""
    sources = list(sources)
    checkers = {} if checkers is None else checkers
    catalog = Catalog(separator=separator)

    tool_filters = {source.server: source.tool_filter for source in sources}
    icons = {source.server: list(source.icons) for source in sources if source.icons}
    visible: list[tuple[str, types.Tool, types.Tool]] = []  # (server, upstream's, as the model sees it)
    hidden: list[tuple[str, str]] = []
    unavailable: dict[str, str] = {}
    mappers: dict[tuple[str, str], ChangedTool] = {}
    prompt_pairs: list[tuple[str, types.Prompt, types.Prompt]] = []
    for source in sources:
        _expose_ui(catalog, source)
        if source.unavailable is not None:
            unavailable[source.server] = source.unavailable
            if source.spec is None or not source.spec.disabled:
                catalog.waiting += (source.server,)
        seen: set[str] = set()
        repeated: dict[str, None] = {}
        unique: list[types.Tool] = []
        for tool in sorted(source.tools, key=_name):  # stable: the first of a name twice still wins
            if tool.name in seen:
                repeated[tool.name] = None  # an upstream listing a name twice: the first definition wins
                continue
            seen.add(tool.name)
            unique.append(tool)
        _tell_repeated(source, tuple(repeated))
        prompts = sorted(_unique(source.prompts), key=_name)
        changed, changed_prompts, remarks = _overridden(source, unique, prompts)
        for tool in unique:
            if source.tool_filter is None or source.tool_filter.permits(tool.name):
                change = changed.get(tool.name)
                shown = tool if change is None else change.definition
                exposer = partial(_exposed_ui_uri, catalog, source.server)
                visible.append((source.server, tool, apps.with_exposed_uri(shown, exposer)))
                if change is not None:
                    mappers[(source.server, tool.name)] = change
            else:
                hidden.append((source.server, tool.name))
        prompt_pairs.extend((source.server, p, changed_prompts.get(p.name, p)) for p in prompts)
        remarks.extend(_over_budget(source.server, changed, separator, max_length))
        _tell_remarks(source, remarks, config_path)
        catalog.remarks.extend(remarks)

    names = build_names(((s, shown.name) for s, _, shown in visible), separator=separator, max_length=max_length)
    entries: list[NameEntry] = []
    live_checkers: CheckerCache = {}
    own = {f"patchbay{separator}{word}" for word in ("find_tools", "call_tool", "call_read")} | {"patchbay__status"}
    for server, tool, shown in visible:
        exposed = names[(server, shown.name)]
        if exposed in own:  # the proxy's own tool answers to its name, never a server's
            _tell_reserved(server, tool.name, exposed)
            continue
        checker = _checker(server, shown, checkers, live_checkers) if validate_arguments else None
        annotations = shown.annotations
        retry_safe = bool(annotations and (annotations.read_only_hint or annotations.idempotent_hint))
        tool_filter = tool_filters[server]
        listed = tool_filter is not None and tool_filter.always_listed(tool.name)
        change = mappers.get((server, tool.name))
        to_upstream = None if change is None else change.to_upstream
        target = CatalogTool(exposed, server, tool.name, shown, checker, retry_safe, listed, to_upstream)
        catalog.by_exposed[exposed] = target
        listed_as: dict[str, Any] = {} if exposed == shown.name else {"name": exposed}
        if shown.icons is None and server in icons:
            listed_as["icons"] = icons[server]
        catalog.tools.append(shown.model_copy(update=listed_as) if listed_as else shown)
        entries.append(target.name_entry())
    checkers.clear()
    checkers.update(live_checkers)
    catalog.tool_resolver = Resolver(entries, separator=separator, hidden=hidden, unavailable=unavailable)

    prompt_names = build_names(((s, p.name) for s, _, p in prompt_pairs), separator=separator, max_length=max_length)
    prompt_entries: list[NameEntry] = []
    for server, prompt, shown in prompt_pairs:
        exposed = prompt_names[(server, shown.name)]
        prompt_target = CatalogPrompt(exposed, server, prompt.name, shown)
        catalog.prompts_by_exposed[exposed] = prompt_target
        catalog.prompts.append(shown.model_copy(update={"name": exposed}))
        prompt_entries.append(prompt_target.name_entry())
    catalog.prompt_resolver = Resolver(prompt_entries, separator=separator, unavailable=unavailable)

    for source in sources:
        for resource in sorted(map(partial(_exposed_resource, catalog, source.server), source.resources), key=_uri):
            if resource.uri not in catalog.resource_owner:
                catalog.resource_owner[resource.uri] = source.server
                catalog.resources.append(resource)
        for template in sorted(source.templates, key=lambda t: t.uri_template):
            if template.uri_template not in catalog.template_owner:
                catalog.template_owner[template.uri_template] = source.server
                catalog.template_patterns.append((template_pattern(template.uri_template), source.server))
                catalog.templates.append(template)
    return catalog


def _expose_ui(catalog: Catalog, source: Source) -> None:
    """Record the ``ui://`` URIs ``source`` lists or links its tools to, each exposed as its own
    (a server may link a user interface it does not list: MCP Apps allows it)."""
    linked = (apps.resource_uri(tool) for tool in source.tools)
    listed = (resource.uri for resource in source.resources)
    for uri in (*linked, *listed):
        if uri is None or not uri.startswith(apps.SCHEME) or (source.server, uri) in catalog.ui_exposed:
            continue
        exposed = apps.exposed_uri(source.server, uri)
        catalog.ui_exposed[source.server, uri] = exposed
        catalog.ui_resources[exposed] = UiResource(source.server, uri)
        catalog.ui_owners[uri] = (*catalog.ui_owners.get(uri, ()), source.server)


def _exposed_resource(catalog: Catalog, server: str, resource: types.Resource) -> types.Resource:
    exposed = catalog.ui_exposed.get((server, resource.uri))
    return resource if exposed is None else resource.model_copy(update={"uri": exposed})


def _exposed_ui_uri(catalog: Catalog, server: str, uri: str) -> str:
    return catalog.ui_exposed.get((server, uri), uri)


def _uri(resource: types.Resource) -> str:
    return resource.uri


def _tell_reserved(server: str, tool: str, exposed: str) -> None:
    """One warning per server's tool whose exposed name is one of the proxy's own tools' names."""
    if (server, tool) in _RESERVED_TOLD:
        return
    _RESERVED_TOLD.add((server, tool))
    logger.warning(
        "server %r lists tool %.80r as %r, the name of one of the proxy's own tools: it is not served; "
        "rename the server, or the tool with an override",
        server,
        tool,
        exposed,
    )


def _tell_repeated(source: Source, repeated: tuple[str, ...]) -> None:
    """One warning per listing that names a tool twice (a few of the names, and how many)."""
    if not repeated:
        _TOLD.pop(source.server, None)
        return
    if _TOLD.get(source.server) is source.tools:
        return  # this listing was told already, by an earlier build
    _TOLD[source.server] = source.tools
    shown = ", ".join(f"{name[:80]!r}" for name in repeated[:DUPLICATES_NAMED])
    more = f" and {len(repeated) - DUPLICATES_NAMED} more" if len(repeated) > DUPLICATES_NAMED else ""
    logger.warning(
        "server %r listed %d tool name(s) more than once: %s%s; the first definition of each is kept",
        source.server,
        len(repeated),
        shown,
        more,
    )


def _overridden(source: Source, tools: Sequence[types.Tool], prompts: Sequence[types.Prompt]) -> _Overridden:
    """The source's tools and prompts its entry overrides, changed, and the overrides that do not
    fit. Only a server that has listed is judged (one still starting or signing in lists nothing
    of its own yet)."""
    spec = source.spec
    if spec is None or source.unavailable is not None or not (spec.tools.overrides or spec.prompts.overrides):
        _CHANGED.pop(source.server, None)
        return {}, {}, []
    known = _CHANGED.get(source.server)
    if known is not None and known[0] is source.tools and known[1] is source.prompts and known[2] is spec:
        changed, changed_prompts, remarks = known[3]
        return changed, changed_prompts, list(remarks)
    changed, remarks = change_tools(source.server, tools, spec.tools.overrides)
    changed_prompts, prompt_remarks = change_prompts(source.server, prompts, spec.prompts.overrides)
    made = (changed, changed_prompts, remarks + prompt_remarks)
    _CHANGED[source.server] = (source.tools, source.prompts, spec, made)
    return changed, changed_prompts, list(made[2])


def _over_budget(server: str, changed: Mapping[str, ChangedTool], separator: str, max_length: int) -> list[Remark]:
    """A new name too long for the name budget is still used, shortened as any name is: said."""
    remarks: list[Remark] = []
    for upstream_name, change in changed.items():
        name = change.definition.name
        whole = sanitize(server) + separator + name
        if name != upstream_name and len(whole) > max_length:
            sentence = (
                f"{quote(whole)} is longer than the {max_length} characters an exposed name may have "
                "(patchbay.max_name_length, less the client's prefix), so it is shortened with a hash; "
                "choose a shorter name"
            )
            remarks.append(Remark(server, key_path(server, "tools", "overrides", upstream_name, "name"), sentence))
    return remarks


def _tell_remarks(source: Source, remarks: Sequence[Remark], config_path: Path | None) -> None:
    """Skipped overrides, logged once per listing (and again when the entry changes)."""
    if not remarks:
        _TOLD_REMARKS.pop(source.server, None)
        return
    told = _TOLD_REMARKS.get(source.server)
    if told is not None and told[0] is source.tools and told[1] is source.prompts and told[2] == source.spec:
        return
    _TOLD_REMARKS[source.server] = (source.tools, source.prompts, source.spec)
    where = str(config_path) if config_path is not None else "the config file"
    for remark in remarks:
        logger.warning("override skipped in %s: %s", where, remark)


def _name(item: types.Tool | types.Prompt) -> str:
    return item.name


def _unique(prompts: Sequence[types.Prompt]) -> list[types.Prompt]:
    seen: set[str] = set()
    out: list[types.Prompt] = []
    for prompt in prompts:
        if prompt.name not in seen:
            seen.add(prompt.name)
            out.append(prompt)
    return out


def _checker(server: str, tool: types.Tool, previous: CheckerCache, live: CheckerCache) -> ArgumentChecker:
    key = (server, tool.name)
    schema_text = json.dumps(tool.input_schema, sort_keys=True, default=str)
    cached = previous.get(key)
    if cached is not None and cached[0] == schema_text:
        live[key] = cached
        return cached[1]
    checker = ArgumentChecker(tool.input_schema)
    live[key] = (schema_text, checker)
    return checker
