"""Which server answers for a resource URI the client sent, in the merged catalog.

Pure. A listed resource's URI is its first lister's; a URI a template matches goes to the first
template's server (``template_pattern``, compiled when the catalog is built); an exposed ``ui://``
URI goes back to its server's own (``catalog.apps``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcp_patchbay.catalog.merge import Catalog

__all__ = ["owner_of_uri", "resource_target", "template_pattern"]


def resource_target(catalog: Catalog, uri: str) -> tuple[str | None, str]:
    """The server that answers for a URI the client sent (None: not known), and the URI that
    server knows: an exposed ``ui://`` URI is its server's own; a server's own ``ui://`` URI that
    one server has goes to it unchanged (``ui_owners``: the caller refuses one several have);
    else ``owner_of_uri``."""
    ui = catalog.ui_resources.get(uri)
    if ui is not None:
        return ui.server, ui.upstream
    owners = catalog.ui_owners.get(uri, ())
    if len(owners) == 1:
        return owners[0], uri
    return owner_of_uri(catalog, uri), uri


def owner_of_uri(catalog: Catalog, uri: str) -> str | None:
    """Which server answers for a resource URI: a listed resource first, then the first matching template."""
    owner = catalog.resource_owner.get(uri)
    if owner is not None:
        return owner
    for pattern, server in catalog.template_patterns:
        if pattern.fullmatch(uri):
            return server
    return None


def template_pattern(template: str) -> re.Pattern[str]:
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
