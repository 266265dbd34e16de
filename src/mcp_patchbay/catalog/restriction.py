"""The part of the merged catalog one caller may use (``restricted``), by what it ``Permits``.

Pure: a catalog in, a smaller one out, under the same exposed names. ``session.views`` caches
one per caller and catalog; the gateway's rules (``gateway.access.Access``) are the ``Permits``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from mcp_patchbay.catalog.merge import Catalog
from mcp_patchbay.catalog.resolution import NameEntry, Resolver

__all__ = ["Permits", "restricted"]


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
    view.waiting = tuple(server for server in catalog.waiting if access.permits_server(server))
    entries: list[NameEntry] = []
    turned_off = catalog.tool_resolver.hidden_pairs() if catalog.tool_resolver else ()
    hidden = [(server, tool) for server, tool in turned_off if access.permits(server, tool)]
    for tool, target in zip(catalog.tools, catalog.by_exposed.values(), strict=True):
        if access.permits(target.server, target.upstream_name):
            view.tools.append(tool)
            view.by_exposed[target.exposed] = target
            entries.append(target.name_entry())
    everywhere: Mapping[str, str] = catalog.tool_resolver.unavailable if catalog.tool_resolver else {}
    unavailable = {server: why for server, why in everywhere.items() if access.permits_server(server)}
    view.tool_resolver = Resolver(entries, separator=catalog.separator, hidden=hidden, unavailable=unavailable)
    prompt_entries: list[NameEntry] = []
    for prompt, target in zip(catalog.prompts, catalog.prompts_by_exposed.values(), strict=True):
        if access.permits_server(target.server):
            view.prompts.append(prompt)
            view.prompts_by_exposed[target.exposed] = target
            prompt_entries.append(target.name_entry())
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
    for exposed, ui in catalog.ui_resources.items():
        if access.permits_server(ui.server):
            view.ui_resources[exposed] = ui
            view.ui_exposed[ui.server, ui.upstream] = exposed
            view.ui_owners[ui.upstream] = (*view.ui_owners.get(ui.upstream, ()), ui.server)
    return view
