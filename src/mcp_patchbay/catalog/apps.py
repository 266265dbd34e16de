"""MCP Apps (``io.modelcontextprotocol/ui``): a tool's user interface, who calls the tool, and
``ui://`` URIs kept apart across servers. Pure.

An MCP Apps server links a tool to an HTML resource that a host renders in a frame
(``_meta.ui.resourceUri``, a ``ui://`` URI; ext-apps' ``registerAppTool`` also sends the
deprecated flat ``_meta["ui/resourceUri"]``), and may say who calls the tool
(``_meta.ui.visibility``: ``"model"``, ``"app"``; both when absent). The app in its frame calls
its server's tools through the host, by the server's own names.

Behind one proxy two servers may publish the same ``ui://`` URI (each ext-apps example names
its resource after its tool, ``ui://get-time/mcp-app.html``), and the first would answer for
both. So every ``ui://`` URI a server lists or links a tool to is exposed as
``ui://<server>/<its URI less ui://>`` (``exposed_uri``): unique, still a ``ui://`` URI a host
renders, and the same whatever other servers are configured. The catalog maps each back to its
server and the URI the server knows. Only the URI changes: the resource's ``_meta`` (csp,
permissions, domain) and its HTML pass as the server sent them.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from typing import Any, cast

import mcp_types as types

from mcp_patchbay.session.capabilities import APPS_EXTENSION

SCHEME = "ui://"
_FLAT_KEY = "ui/resourceUri"
_AUTHORITY = re.compile(r"[A-Za-z0-9._~-]+\Z")
"""A server name a URI's authority holds as it is (RFC 3986's unreserved characters)."""
_NOT_AUTHORITY = re.compile(r"[^A-Za-z0-9._~-]")


def _ui(tool: types.Tool) -> Mapping[str, Any] | None:
    ui = tool.meta.get("ui") if tool.meta else None
    return cast("Mapping[str, Any]", ui) if isinstance(ui, Mapping) else None


def resource_uri(tool: types.Tool) -> str | None:
    """The ``ui://`` URI of a tool's user interface (the nested form first), None without one."""
    ui = _ui(tool)
    uri = ui.get("resourceUri") if ui is not None else None
    if not isinstance(uri, str) and tool.meta:
        uri = tool.meta.get(_FLAT_KEY)
    return uri if isinstance(uri, str) and uri.startswith(SCHEME) else None


def visibility(tool: types.Tool) -> tuple[str, ...]:
    """Who calls a tool: ``"model"``, ``"app"`` (both when it says nothing readable)."""
    ui = _ui(tool)
    said = ui.get("visibility") if ui is not None else None
    if isinstance(said, list) and all(isinstance(who, str) for who in cast("list[Any]", said)):
        return tuple(cast("list[str]", said))
    return ("model", "app")


def app_only(tool: types.Tool) -> bool:
    """A tool its server keeps from the model (its visibility lacks ``"model"``): listed for the
    host, which enforces that, but never offered to the model by the proxy's own tools."""
    return "model" not in visibility(tool)


def for_apps(tool: types.Tool) -> bool:
    """Whether an app may call the tool (its visibility has ``"app"``)."""
    return "app" in visibility(tool)


def authority(server: str) -> str:
    """The part of a server's exposed ``ui://`` URIs that names it: its name when a URI holds it
    as it is, else a readable form and six hex digits of its hash (so two names never meet)."""
    if _AUTHORITY.match(server):
        return server
    return _NOT_AUTHORITY.sub("_", server) + "-" + hashlib.sha256(server.encode()).hexdigest()[:6]


def exposed_uri(server: str, uri: str) -> str:
    """How the client knows ``server``'s ``ui://`` URI ``uri``: ``ui://<server>/<rest>``."""
    return f"{SCHEME}{authority(server)}/{uri[len(SCHEME) :]}"


def with_exposed_uri(tool: types.Tool, exposed: Callable[[str], str]) -> types.Tool:
    """``tool`` with the URI of its user interface (both forms) as ``exposed`` makes it; the tool
    itself when it links none."""
    meta = tool.meta
    if not meta:
        return tool
    changed = dict(meta)
    ui = _ui(tool)
    nested = ui.get("resourceUri") if ui is not None else None
    if ui is not None and isinstance(nested, str) and nested.startswith(SCHEME):
        changed["ui"] = {**ui, "resourceUri": exposed(nested)}
    flat = meta.get(_FLAT_KEY)
    if isinstance(flat, str) and flat.startswith(SCHEME):
        changed[_FLAT_KEY] = exposed(flat)
    return tool if changed == meta else tool.model_copy(update={"meta": changed})


def as_app_name(tool: types.Tool, name: str) -> types.Tool:
    """A listed tool as its server's app calls it: under ``name`` (the server's own), visible to
    the app only, so a host that checks an app's call against the listing finds it and never
    shows it to the model."""
    meta = dict(tool.meta or {})
    meta["ui"] = {**(_ui(tool) or {}), "visibility": ["app"]}
    return tool.model_copy(update={"name": name, "meta": meta})


def declares_apps(capabilities: types.ClientCapabilities | None) -> bool:
    """Whether a client said it renders MCP Apps (``capabilities.extensions``)."""
    extensions = capabilities.extensions if capabilities is not None else None
    return bool(extensions) and APPS_EXTENSION in (extensions or {})


__all__ = [
    "SCHEME",
    "app_only",
    "as_app_name",
    "authority",
    "declares_apps",
    "exposed_uri",
    "for_apps",
    "resource_uri",
    "visibility",
    "with_exposed_uri",
]
