"""The proxy's own tools, search mode's ``find_tools`` and its two call routes, as JSON values.

Two call routes, so that a client's approval of one means what the user thinks it does:

- ``call_read`` (``patchbay__call_read``) runs only tools whose annotations say they only read
  (``readOnlyHint``), and says so in its own annotations (read-only, not destructive): a client
  that runs read-only tools without asking (Codex's default) runs it, and a user who allows it
  once has allowed reading, nothing more. Any other target is refused (``NOT_READ_ONLY``).
- ``call_tool`` (``patchbay__call_tool``) runs any tool, and its annotations say what the worst
  of its targets may do (``call_tool_annotations``), so no client waves it through as harmless.

Their names keep the rules of the others: ``patchbay``, the separator, a word no longer than
``find_tools`` (the name budget checks that one), so ``read_route`` derives the read route's
name from ``OwnTools``' ``call_tool``.

One owner of their definitions: ``session.exposure`` makes them the SDK's ``Tool`` models for every
listing, and ``wire.early_handshake`` answers a first ``tools/list`` with them before the SDK is
loaded, when the config alone says what the listing is (``early_search_listing``). Pure,
and light to import (no SDK, no pydantic): the ``search`` package's description and
schemas, and ``naming``'s names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from mcp_patchbay.catalog.naming import NAME_CHARS, OwnTools
from mcp_patchbay.search.describe import find_tools_description
from mcp_patchbay.search.index import DEFAULT_LIMIT, MAX_LIMIT
from mcp_patchbay.search.render import OUTPUT_SCHEMA

__all__ = [
    "READ_ONLY",
    "call_read_json",
    "call_tool_annotations",
    "call_tool_json",
    "early_search_listing",
    "find_tools_json",
    "read_route",
    "routes_phrase",
]

READ_ROUTE_WORD = "call_read"
"""The read route's word after ``patchbay`` and the separator: no longer than ``find_tools``."""

READ_ONLY: dict[str, Any] = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True}
"""The annotations of ``call_read``, and of ``call_tool`` when every tool it reaches only reads."""


def read_route(names: OwnTools) -> str:
    """The read route's name for these names' separator (``patchbay__call_read``)."""
    return names.call_tool.removesuffix("call_tool") + READ_ROUTE_WORD


def routes_phrase(names: OwnTools) -> str:
    """How the two routes are named where a text tells the model to call a tool found."""
    return f"{read_route(names)} (a tool that only reads) or {names.call_tool} (any other)"


def call_tool_annotations(*, read_only: bool, destructive: bool = True) -> dict[str, Any]:
    """``call_tool``'s annotations, true of every tool it can reach: read-only only when every one
    is (``read_only``); else not read-only, destructive unless every tool that does not only read
    says it is not (``destructive``), open-world and not idempotent as a tool that says nothing."""
    if read_only:
        return dict(READ_ONLY)
    return {"readOnlyHint": False, "destructiveHint": destructive, "idempotentHint": False, "openWorldHint": True}


def call_tool_json(
    names: OwnTools, *, searching: bool = True, read_only: bool = False, destructive: bool = True
) -> dict[str, Any]:
    """``call_tool``; in search mode it points at ``find_tools``, otherwise at the listed tools.

    Its annotations say what its targets may do, since clients approve by them (Codex runs a
    tool without asking only when it is read-only): ``call_tool_annotations``."""
    where = f"Find the tool and its arguments with {names.find_tools} first." if searching else ""
    source = "as find_tools gave it" if searching else "as the tool list shows it"
    return {
        "name": names.call_tool,
        "description": (
            f"Call a tool of the servers behind this proxy by its name. {where} It runs any tool, ones that "
            f"change or delete things too, so the user may be asked first; for a tool that only reads, use "
            f"{read_route(names)}. A mistaken or partial name is resolved when it is unambiguous; otherwise the "
            "answer suggests names."
        ).replace("  ", " "),
        "inputSchema": _call_schema(source),
        "annotations": call_tool_annotations(read_only=read_only, destructive=destructive),
    }


def call_read_json(names: OwnTools, *, searching: bool = True) -> dict[str, Any]:
    """The read route: ``call_tool`` for tools whose annotations say they only read."""
    where = f" ({names.find_tools} marks them)" if searching else ""
    source = "as find_tools gave it" if searching else "as the tool list shows it"
    return {
        "name": read_route(names),
        "description": (
            f"Call a tool that only reads{where} by its name; it refuses one that may change things (call "
            f"those with {names.call_tool}). A mistaken or partial name is resolved when it is unambiguous; "
            "otherwise the answer suggests names."
        ),
        "inputSchema": _call_schema(source),
        "annotations": dict(READ_ONLY),
    }


def _call_schema(source: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": f"The tool's name, {source}."},
            "arguments": {"type": "object", "description": "The tool's arguments, matching its inputSchema."},
        },
        "required": ["name"],
    }


def find_tools_json(names: OwnTools, description: str) -> dict[str, Any]:
    return {
        "name": names.find_tools,
        "description": description,
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What you need to do, in a few words, or a tool name."},
                "limit": {
                    "type": "integer",
                    "description": f"How many tools to return, 1 to {MAX_LIMIT} (default {DEFAULT_LIMIT}).",
                },
                "server": {"type": "string", "description": "Search only this server's tools."},
            },
            "required": ["query"],
        },
        "outputSchema": OUTPUT_SCHEMA,
        "annotations": {"readOnlyHint": True, "idempotentHint": True},
    }


def early_search_listing(document: object, last_tools: int | None = None) -> list[dict[str, Any]] | None:
    """What a client lists before any upstream answered, read from the config file's JSON alone;
    None unless it is search mode's: ``"expose": "search"``, or ``"auto"`` when the last start of
    this file found more than ``search_threshold`` tools (``last_tools``, ``upstreams.start_memory``); no
    ``always_list``, no status tool, and entries plain enough to name. A wrong guess (the
    validated config or the catalog says otherwise) is corrected by the ``list_changed`` that
    follows a listing that differs (``wire.early_handshake.Handover``)."""
    if not isinstance(document, dict):
        return None
    top = cast("dict[str, Any]", document)
    settings = top.get("patchbay", {})
    if not isinstance(settings, dict):
        return None
    patchbay = cast("dict[str, Any]", settings)
    separator = patchbay.get("separator", "__")
    expose, threshold = patchbay.get("expose", "auto"), patchbay.get("search_threshold", 40)
    remembered = expose == "auto" and isinstance(threshold, int) and last_tools is not None and last_tools > threshold
    if (expose != "search" and not remembered) or patchbay.get("status_tool") or not isinstance(separator, str):
        return None
    if not NAME_CHARS.match(separator) or len(separator) > 8:
        return None
    servers: dict[str, str | None] = {}
    for shape in ("mcpServers", "servers"):
        entries = top.get(shape, {})
        if not isinstance(entries, dict):
            return None
        for name, raw in cast("dict[str, Any]", entries).items():
            if not isinstance(raw, dict) or name in servers:
                return None
            entry = cast("dict[str, Any]", raw)
            tools = entry.get("tools")
            if isinstance(tools, Mapping) and cast("Mapping[str, Any]", tools).get("always_list"):
                return None
            if entry.get("disabled") is not True:
                servers[name] = None  # instructions come with the handshake: none yet
    names = OwnTools.for_separator(separator)
    description = find_tools_description(
        [], servers=servers, find_tools=names.find_tools, call_tool=routes_phrase(names)
    )
    return [find_tools_json(names, description), call_read_json(names), call_tool_json(names)]
