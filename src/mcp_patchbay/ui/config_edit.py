"""Turning a server or a tool off and on, written to the config file the proxies watch.

``turn_server`` sets or removes the entry's ``"disabled": true``; ``turn_tool`` adds the tool's
exact name to the entry's ``tools.deny`` or takes it out (and, under an ``allow`` list that does
not name it, adds it there). The edits are pure (``edited``: text in, text out): the file is
parsed keeping its key order, changed in place (a key added goes last in its object) and
written back in the style it was found in (``clients.formats``: indent, separators, line
endings, final newline). The config is plain JSON (``config.jsontext`` refuses comments), so
nothing is lost. ``apply`` does the I/O: a timestamped backup beside the file first
(``clients.files.backup``), then an atomic replace keeping the file's mode; the result must load
as a config before it is written. The running proxies' config watch applies it.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

__all__ = ["EditRefused", "Edited", "apply", "edited", "turn_server", "turn_tool"]

Change = Callable[[dict[str, Any]], str]
"""Changes the parsed file in place; says what it did, for the page and the log."""


class EditRefused(Exception):
    """The change cannot be made by the page (the message says why and what to edit instead)."""


@dataclass(frozen=True)
class Edited:
    said: str
    backup: Path | None


def _entry(data: dict[str, Any], server: str) -> dict[str, Any]:
    for shape in ("mcpServers", "servers"):
        servers = data.get(shape)
        entry = cast("dict[str, Any]", servers).get(server) if isinstance(servers, dict) else None
        if isinstance(entry, dict):
            return cast("dict[str, Any]", entry)
    raise EditRefused(f"the config has no entry named '{server}'")


def turn_server(server: str, on: bool) -> Change:
    def change(data: dict[str, Any]) -> str:
        entry = _entry(data, server)
        if on:
            if entry.get("disabled") is not True:
                return f"server '{server}' was on already"
            del entry["disabled"]
            return f"turned server '{server}' on"
        if entry.get("disabled") is True:
            return f"server '{server}' was off already"
        entry["disabled"] = True
        return f"turned server '{server}' off"

    return change


def _names(value: object, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(item, str) for item in cast("list[object]", value)):
        return list(cast("list[str]", value))
    raise EditRefused(f"{where} is not a list of names: edit the file by hand")


def turn_tool(server: str, tool: str, on: bool) -> Change:
    def change(data: dict[str, Any]) -> str:
        entry = _entry(data, server)
        tools = entry.get("tools")
        if tools is not None and not isinstance(tools, dict):
            raise EditRefused(f"the 'tools' of '{server}' is not an object: edit the file by hand")
        filters = cast("dict[str, Any]", tools) if tools is not None else {}
        deny = _names(filters.get("deny"), f"'{server}'.tools.deny")
        allow = _names(filters.get("allow"), f"'{server}'.tools.allow") if "allow" in filters else None
        if not on:
            if tool in deny:
                return f"tool '{tool}' of '{server}' was off already"
            filters["deny"] = [*deny, tool]
            entry["tools"] = filters
            return f"turned tool '{tool}' of '{server}' off"
        said = f"tool '{tool}' of '{server}' was on already"
        if tool in deny:
            deny.remove(tool)
            if deny:
                filters["deny"] = deny
            else:
                del filters["deny"]
            said = f"turned tool '{tool}' of '{server}' on"
        pattern = next((p for p in deny if fnmatch.fnmatchcase(tool, p)), None)
        if pattern is not None:
            raise EditRefused(
                f"tool '{tool}' of '{server}' is turned off by the pattern '{pattern}' in its tools.deny: "
                "edit the file to narrow it"
            )
        if allow is not None and not any(fnmatch.fnmatchcase(tool, p) for p in allow):
            filters["allow"] = [*allow, tool]
            said = f"turned tool '{tool}' of '{server}' on (added to its tools.allow)"
        if filters:
            entry["tools"] = filters
        elif "tools" in entry:
            del entry["tools"]
        return said

    return change


def edited(text: str, change: Change) -> tuple[str, str]:
    """``text`` with ``change`` made, in the file's own style; and what was done."""
    from mcp_patchbay.clients.formats import dump_json, json_style

    try:
        data: object = json.loads(text.removeprefix("\ufeff"))
    except ValueError as exc:
        raise EditRefused(f"the config is not plain JSON ({exc}): fix it first") from None
    if not isinstance(data, dict):
        raise EditRefused("the config is not a JSON object")
    document = cast("dict[str, Any]", data)
    said = change(document)
    return dump_json(document, json_style(text)), said


def apply(path: Path, change: Change) -> Edited:
    """Make ``change`` to the config file at ``path``: backup, check, atomic write. Raises
    ``EditRefused`` (nothing written) or OSError."""
    from mcp_patchbay import bounded_read
    from mcp_patchbay.clients.files import backup, write_atomic
    from mcp_patchbay.config import ConfigError, parse_config

    text = bounded_read.read_config(path)
    new, said = edited(text, change)
    if new == text:
        return Edited(said, None)
    try:
        parse_config(new, path)
    except ConfigError as exc:
        raise EditRefused(f"the file would not load as a config after this change: {exc}") from None
    saved = backup(path)
    write_atomic(path, new.encode("utf-8"))
    return Edited(said, saved)
