"""The proxy's own tools, search mode's ``find_tools`` and ``call_tool``, as JSON values.

One owner of their definitions: ``exposure`` makes them the SDK's ``Tool`` models for every
listing, and ``early_handshake`` answers a first ``tools/list`` with them before the SDK is
loaded, when the config alone says what the listing is (``early_search_listing``). Pure,
and light to import (no SDK, no pydantic): the ``search`` package's description and
schemas, and ``naming``'s names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from mcp_patchbay.naming import NAME_CHARS, OwnTools
from mcp_patchbay.search.describe import find_tools_description
from mcp_patchbay.search.index import DEFAULT_LIMIT, MAX_LIMIT
from mcp_patchbay.search.render import OUTPUT_SCHEMA

__all__ = ["call_tool_json", "early_search_listing", "find_tools_json"]


def call_tool_json(names: OwnTools, *, searching: bool = True, read_only: bool = False) -> dict[str, Any]:
    """``call_tool``; in search mode it points at ``find_tools``, otherwise at the listed tools.

    Its annotations say what its targets may do, since clients approve by them (Codex runs a
    tool without asking only when it is read-only): read-only only when every tool it can reach
    is (``read_only``), else possibly destructive and open-world, as an unannotated tool is."""
    where = f"Find the tool and its arguments with {names.find_tools} first." if searching else ""
    source = "as find_tools gave it" if searching else "as the tool list shows it"
    return {
        "name": names.call_tool,
        "description": (
            f"Call a tool of the servers behind this proxy by its name. {where} A mistaken or partial name is "
            "resolved when it is unambiguous; otherwise the answer suggests names."
        ).replace("  ", " "),
        "inputSchema": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": f"The tool's name, {source}."},
                "arguments": {"type": "object", "description": "The tool's arguments, matching its inputSchema."},
            },
            "required": ["name"],
        },
        "annotations": (
            {"readOnlyHint": True, "idempotentHint": True}
            if read_only
            else {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False, "openWorldHint": True}
        ),
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
    this file found more than ``search_threshold`` tools (``last_tools``, ``start_memory``); no
    ``always_list``, no status tool, and entries plain enough to name. A wrong guess (the
    validated config or the catalog says otherwise) is corrected by the ``list_changed`` that
    follows a listing that differs (``early_handshake.Handover``)."""
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
    description = find_tools_description([], servers=servers, find_tools=names.find_tools, call_tool=names.call_tool)
    return [find_tools_json(names, description), call_tool_json(names)]
