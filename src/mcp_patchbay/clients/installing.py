"""The edits ``install`` and ``uninstall`` make to a client's file, planned on its text.

:func:`plan_install` puts the proxy's entry under its name (refusing a name another server has),
and with ``--replace`` takes out the entries the import absorbed: those whose name and content
are the patchbay config's. :func:`plan_uninstall` takes the proxy's entry out again and puts back
what ``--replace`` took. :func:`holds` checks a written text: it parses and has our entry. Every
other key, the key order and the file's style are kept (``formats``). Pure: text in, text out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from mcp_patchbay.clients.entries import content, normalize
from mcp_patchbay.clients.formats import (
    FormatError,
    dump_json,
    editable_json,
    json_style,
    objects_at,
    parse,
    remove_servers,
    set_server,
    toml_remove,
    toml_set,
)
from mcp_patchbay.clients.locations import Place
from mcp_patchbay.clients.reading import self_launching

__all__ = ["EditRefused", "InstallPlan", "UninstallPlan", "holds", "plan_install", "plan_uninstall"]


class EditRefused(Exception):
    """The file cannot be edited as asked; the message says why and what to do."""


@dataclass(frozen=True)
class InstallPlan:
    text: str
    """The file's new text."""
    previous: dict[str, Any] | None = None
    """The entry that had our name before (an earlier install's)."""
    removed: dict[str, Any] = field(default_factory=dict[str, Any])
    """The entries ``--replace`` took out, as they were."""
    unchanged: bool = False
    """The file already says all this: nothing to write."""


@dataclass(frozen=True)
class UninstallPlan:
    text: str
    removed_ours: bool
    restored: list[str] = field(default_factory=list[str])


def _servers(place: Place, text: str) -> dict[str, Any]:
    data = parse(text, place.format)
    return dict(objects_at(data, place.keys) or {})


def _is_ours(place: Place, raw: object) -> bool:
    normalized = normalize(place.client, raw)
    return normalized.entry is not None and normalized.transport == "stdio" and self_launching(normalized.entry)


def _edit(place: Place, text: str, put: Mapping[str, Mapping[str, Any]], remove: list[str]) -> str:
    """``text`` with the entries ``put`` set and ``remove`` taken out, in the file's own style."""
    if place.format == "toml":
        for name, entry in put.items():
            text = toml_set(text, place.keys, name, entry)
        return toml_remove(text, place.keys, remove)[0] if remove else text
    if not editable_json(text):
        raise EditRefused(
            f"{place.file} has comments (or trailing commas), which a JSON rewrite would lose; "
            "add the entry by hand instead"
        )
    data = parse(text, "json")
    for name, entry in put.items():
        set_server(data, place.keys, name, entry)
    remove_servers(data, place.keys, remove)
    return dump_json(data, json_style(text))


def plan_install(
    place: Place,
    text: str | None,
    name: str,
    entry: Mapping[str, Any],
    absorbed: Mapping[str, Mapping[str, Any]] | None = None,
) -> InstallPlan:
    """``text`` (None: no file yet) with the proxy's ``entry`` as ``name``; with ``absorbed`` (the
    patchbay config's entries), the client's entries of the same name and content taken out."""
    text = text or ""
    try:
        servers = _servers(place, text)
    except FormatError as exc:
        raise EditRefused(f"{place.file}: {exc}") from None
    previous = servers.get(name)
    if previous is not None and not _is_ours(place, previous):
        raise EditRefused(
            f"{place.file} already has a server named {name!r} that is not patchbay; "
            "choose another name with --name (or remove that entry)"
        )
    removed: dict[str, Any] = {}
    for other, raw in servers.items():
        if other == name or absorbed is None or other not in absorbed:
            continue
        normalized = normalize(place.client, raw)
        if normalized.entry is not None and content(normalized.entry) == content(absorbed[other]):
            removed[other] = raw
    if previous == dict(entry) and not removed:
        return InstallPlan(text, cast("dict[str, Any]", previous), unchanged=True)
    new_text = _edit(place, text, {name: entry}, list(removed))
    return InstallPlan(new_text, previous, removed)


def plan_uninstall(place: Place, text: str, name: str, restore: Mapping[str, Any] | None = None) -> UninstallPlan:
    """``text`` without the proxy's entry ``name`` (only if it launches patchbay), and with the
    entries of ``restore`` (what ``--replace`` took, an earlier entry of ours) back where they are missing."""
    try:
        servers = _servers(place, text)
    except FormatError as exc:
        raise EditRefused(f"{place.file}: {exc}") from None
    ours = name in servers and _is_ours(place, servers[name])
    # An entry of ours that install replaced (an earlier install's) takes its place again.
    put = {n: e for n, e in (restore or {}).items() if n not in servers or (n == name and ours)}
    if not ours and not put:
        return UninstallPlan(text, False)
    return UninstallPlan(_edit(place, text, put, [name] if ours and name not in put else []), ours, list(put))


def holds(place: Place, text: str, name: str, entry: Mapping[str, Any]) -> bool:
    """Whether ``text`` parses and has ``entry`` as ``name`` (a written file, read back)."""
    try:
        return _servers(place, text).get(name) == dict(entry)
    except FormatError:
        return False
