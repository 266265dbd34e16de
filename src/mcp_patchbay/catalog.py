"""The merged catalog: every upstream's tools, prompts and resources as the client sees them.

Pure. Built from snapshots of the upstreams whenever one of them changes (never per
call), so a call's lookups are dictionary hits: exposed name -> ``CatalogTool``
with its upstream name, its compiled argument checker and its retry safety.

Lists are in a deterministic order, whatever order upstreams list in or come up in
(the 2026-07-28 revision asks it: clients and model providers cache the tool list by
its bytes): servers in config order, each server's items by name (resources by URI).

Resource URIs are kept unchanged (tool results refer to them); when two servers
offer the same URI, the server listed first in the config wins, so a URI's meaning
never changes when a late upstream arrives.

An upstream that lists a tool name twice keeps its first definition; that is logged, once
per listing (the one side effect here: the same listing is built into every catalog until
the server lists again, so it is told only when a new listing arrives).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import mcp_types as types

from mcp_patchbay.arguments import ArgumentChecker
from mcp_patchbay.config import RemoteSpec, StdioSpec, ToolFilter
from mcp_patchbay.naming import NameEntry, Resolver, build_names

logger = logging.getLogger("mcp_patchbay.catalog")

DUPLICATES_NAMED = 5
"""At most this many of an upstream's repeated tool names are named in its warning; the rest are counted."""

_TOLD: dict[str, object] = {}
"""Per server, the tool listing whose repeated names were last logged (kept by identity: a
listing is one tuple until the server lists again). One entry per server name."""


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


@dataclass(frozen=True, slots=True)
class CatalogPrompt:
    exposed: str
    server: str
    upstream_name: str
    definition: types.Prompt


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

    def tool_signature(self) -> list[str]:
        """What the client would see change: exposed definitions, serialised once per rebuild."""
        return [t.model_dump_json(by_alias=True, exclude_none=True) for t in self.tools]


def build_catalog(
    sources: Iterable[Source],
    *,
    separator: str,
    max_length: int,
    validate_arguments: bool,
    checkers: CheckerCache | None = None,
) -> Catalog:
    """Merge the sources, in config order. ``checkers`` carries compiled validators between builds."""
    sources = list(sources)
    checkers = {} if checkers is None else checkers
    catalog = Catalog(separator=separator)

    tool_filters = {source.server: source.tool_filter for source in sources}
    visible: list[tuple[str, types.Tool]] = []
    hidden: list[tuple[str, str]] = []
    unavailable: dict[str, str] = {}
    for source in sources:
        if source.unavailable is not None:
            unavailable[source.server] = source.unavailable
        seen: set[str] = set()
        repeated: dict[str, None] = {}
        for tool in sorted(source.tools, key=_name):  # stable: the first of a name twice still wins
            if tool.name in seen:
                repeated[tool.name] = None  # an upstream listing a name twice: the first definition wins
                continue
            seen.add(tool.name)
            if source.tool_filter is None or source.tool_filter.permits(tool.name):
                visible.append((source.server, tool))
            else:
                hidden.append((source.server, tool.name))
        _tell_repeated(source, tuple(repeated))

    names = build_names(((s, t.name) for s, t in visible), separator=separator, max_length=max_length)
    entries: list[NameEntry] = []
    live_checkers: CheckerCache = {}
    for server, tool in visible:
        exposed = names[(server, tool.name)]
        checker = _checker(server, tool, checkers, live_checkers) if validate_arguments else None
        annotations = tool.annotations
        retry_safe = bool(annotations and (annotations.read_only_hint or annotations.idempotent_hint))
        tool_filter = tool_filters[server]
        listed = tool_filter is not None and tool_filter.always_listed(tool.name)
        catalog.by_exposed[exposed] = CatalogTool(exposed, server, tool.name, tool, checker, retry_safe, listed)
        catalog.tools.append(tool if exposed == tool.name else tool.model_copy(update={"name": exposed}))
        entries.append(NameEntry(exposed=exposed, server=server, item=tool.name))
    checkers.clear()
    checkers.update(live_checkers)
    catalog.tool_resolver = Resolver(entries, separator=separator, hidden=hidden, unavailable=unavailable)

    prompt_pairs = [(s.server, p) for s in sources for p in sorted(_unique(s.prompts), key=_name)]
    prompt_names = build_names(((s, p.name) for s, p in prompt_pairs), separator=separator, max_length=max_length)
    prompt_entries: list[NameEntry] = []
    for server, prompt in prompt_pairs:
        exposed = prompt_names[(server, prompt.name)]
        catalog.prompts_by_exposed[exposed] = CatalogPrompt(exposed, server, prompt.name, prompt)
        catalog.prompts.append(prompt.model_copy(update={"name": exposed}))
        prompt_entries.append(NameEntry(exposed=exposed, server=server, item=prompt.name))
    catalog.prompt_resolver = Resolver(prompt_entries, separator=separator, unavailable=unavailable)

    for source in sources:
        for resource in sorted(source.resources, key=lambda r: str(r.uri)):
            if resource.uri not in catalog.resource_owner:
                catalog.resource_owner[str(resource.uri)] = source.server
                catalog.resources.append(resource)
        for template in sorted(source.templates, key=lambda t: t.uri_template):
            if template.uri_template not in catalog.template_owner:
                catalog.template_owner[template.uri_template] = source.server
                catalog.template_patterns.append((_template_pattern(template.uri_template), source.server))
                catalog.templates.append(template)
    return catalog


class Permits(Protocol):
    """What one caller may use (``gateway.access.Access``): servers, and tools by upstream name."""

    def permits_server(self, server: str) -> bool: ...

    def permits(self, server: str, upstream_tool: str) -> bool: ...


def restricted(catalog: Catalog, access: Permits) -> Catalog:
    """The part of ``catalog`` one caller may use, under the same exposed names. What it may
    not use does not exist for it: never listed, never suggested, never matched by a loose
    rule, and a call to it answers exactly as a call to a name nothing ever had (servers it
    may not use are not named at all). Tools the config itself turns off stay hidden
    (``TOOL_NOT_AVAILABLE``) where the caller would otherwise have had them: that is the
    user's documented choice, and it names nothing the caller may not see."""
    view = Catalog(separator=catalog.separator)
    entries: list[NameEntry] = []
    turned_off = catalog.tool_resolver.hidden_pairs() if catalog.tool_resolver else ()
    hidden = [(server, tool) for server, tool in turned_off if access.permits(server, tool)]
    for tool, target in zip(catalog.tools, catalog.by_exposed.values(), strict=True):
        if access.permits(target.server, target.upstream_name):
            view.tools.append(tool)
            view.by_exposed[target.exposed] = target
            entries.append(NameEntry(exposed=target.exposed, server=target.server, item=target.upstream_name))
    everywhere: Mapping[str, str] = catalog.tool_resolver.unavailable if catalog.tool_resolver else {}
    unavailable = {server: why for server, why in everywhere.items() if access.permits_server(server)}
    view.tool_resolver = Resolver(entries, separator=catalog.separator, hidden=hidden, unavailable=unavailable)
    prompt_entries: list[NameEntry] = []
    for prompt, target in zip(catalog.prompts, catalog.prompts_by_exposed.values(), strict=True):
        if access.permits_server(target.server):
            view.prompts.append(prompt)
            view.prompts_by_exposed[target.exposed] = target
            prompt_entries.append(NameEntry(exposed=target.exposed, server=target.server, item=target.upstream_name))
    view.prompt_resolver = Resolver(prompt_entries, separator=catalog.separator, unavailable=unavailable)
    for resource in catalog.resources:
        owner = catalog.resource_owner[str(resource.uri)]
        if access.permits_server(owner):
            view.resources.append(resource)
            view.resource_owner[str(resource.uri)] = owner
    for template in catalog.templates:
        owner = catalog.template_owner[template.uri_template]
        if access.permits_server(owner):
            view.templates.append(template)
            view.template_owner[template.uri_template] = owner
    view.template_patterns = [(p, s) for p, s in catalog.template_patterns if access.permits_server(s)]
    return view


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


def owner_of_uri(catalog: Catalog, uri: str) -> str | None:
    """Which server answers for a resource URI: a listed resource first, then the first matching template."""
    owner = catalog.resource_owner.get(uri)
    if owner is not None:
        return owner
    for pattern, server in catalog.template_patterns:
        if pattern.fullmatch(uri):
            return server
    return None


def _template_pattern(template: str) -> re.Pattern[str]:
    """An RFC 6570 template as a regex: ``{var}`` matches one segment, ``{+var}``/``{#var}`` anything."""
    parts: list[str] = []
    pos = 0
    for match in re.finditer(r"\{([^}]*)\}", template):
        parts.append(re.escape(template[pos : match.start()]))
        expr = match.group(1)
        parts.append(".*" if expr[:1] in ("+", "#") else r"[^/?#]*" if expr[:1] not in ("?", "&") else r"(?:[?&].*)?")
        pos = match.end()
    parts.append(re.escape(template[pos:]))
    return re.compile("".join(parts))
