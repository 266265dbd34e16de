"""The answer of ``find_tools``: structured content, its output schema, and the same as text.

Pure. Rules:

- Hits keep their rank order. The first ``full`` hits (default ``FULL_SCHEMAS`` = 3) carry
  their whole ``inputSchema``, compacted (``compact_schema``); the rest carry a brief one:
  each parameter with its type only (the first ``MAX_BRIEF_PARAMS``; ``moreParameters``
  counts the rest), plus ``required`` (still a valid object schema).
  Descriptions are cut to ``FULL_DESCRIPTION`` (full) or ``BRIEF_DESCRIPTION`` (brief)
  characters at a word boundary, with an ellipsis.
- ``compact_schema`` removes what carries no meaning for a caller: ``$schema``, ``$id``,
  ``additionalProperties: false``, empty ``required``/``description``, and ``title`` where
  it only repeats the property's name; parameter descriptions longer than
  ``PARAM_DESCRIPTION`` characters are cut. Types, enums, formats, defaults, nesting,
  ``$ref``/``$defs`` and required lists are kept.
- The text is at most ``TEXT_BUDGET`` characters, always. When full schemas would push it
  over, the lowest-ranked full hits become brief, one at a time, then the lowest-ranked
  brief hits are dropped (and the text says how many). The structured content carries the
  same tools at the same level of detail as the text.
- Notes: unavailable servers whose ``match`` is at least ``NOTE_MIN_MATCH`` (or that the
  search was restricted to) are named with their state and what to do, best match
  first, at most ``MAX_NOTES``.
- The structured answer says what the text says, in its own fields: ``next`` (how to call a
  tool found, or what to search instead), each tool's ``via`` (the tool to call it with) and
  ``required`` arguments, each unavailable server's ``action``. Claude Code and Codex show the
  model the structured answer in place of the text.
- Each tool found names its route (``routes``, from ``session.exposure.route_of``): the read route for a
  tool that only reads, ``call_tool`` for the others, or its own name where the client lists it.
  The text marks each tool's route after its name and says how to call each route once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from mcp_patchbay.catalog.naming import normalize
from mcp_patchbay.search.documents import Hit, IndexedTool, as_mapping

__all__ = [
    "FULL_SCHEMAS",
    "OUTPUT_SCHEMA",
    "TEXT_BUDGET",
    "ServerNote",
    "brief_schema",
    "compact_schema",
    "render_answer",
]

TEXT_BUDGET = 9_500
FULL_SCHEMAS = 3
FULL_DESCRIPTION = 600
BRIEF_DESCRIPTION = 160
PARAM_DESCRIPTION = 300
NOTE_MIN_MATCH = 0.3
MAX_NOTES = 5
MAX_BRIEF_PARAMS = 12

OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "next": {
            "type": "string",
            "description": "What to do with this answer: how to call a tool found, or what to search instead.",
        },
        "tools": {
            "type": "array",
            "description": "Matching tools, best first. Call one with the tool its 'via' names.",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The name to pass to the call tool."},
                    "via": {
                        "type": "string",
                        "description": "The tool to call it with: a call route (pass name and arguments), or its own "
                        "name (pass its arguments).",
                    },
                    "server": {"type": "string"},
                    "tool": {"type": "string", "description": "The tool's name on its server."},
                    "title": {"type": "string", "description": "The tool's display title, or its name."},
                    "description": {"type": "string"},
                    "inputSchema": {"type": "object", "description": "The JSON Schema of the arguments."},
                    "required": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "The arguments a call must give.",
                    },
                    "detail": {
                        "enum": ["full", "brief"],
                        "description": "brief: parameters and types only; search the exact name for the full schema.",
                    },
                    "moreParameters": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "brief: parameters left out of inputSchema (at most 12 are shown).",
                    },
                },
                "required": ["name", "via", "server", "tool", "title", "description", "inputSchema", "detail"],
            },
        },
        "omitted": {"type": "integer", "minimum": 0, "description": "Matches left out to keep the answer short."},
        "unavailable": {
            "type": "array",
            "description": "Servers that may have matching tools but cannot serve now.",
            "items": {
                "type": "object",
                "properties": {
                    "server": {"type": "string"},
                    "state": {"type": "string"},
                    "action": {"type": "string"},
                },
                "required": ["server", "state", "action"],
            },
        },
    },
    "required": ["next", "tools"],
}
"""The ``outputSchema`` of ``find_tools``; every ``render_answer`` structured answer satisfies it.
``next`` comes first: Claude Code and Codex show the model the structured answer instead of the
text, so what the text says to do must be in it too."""


@dataclass(frozen=True, slots=True)
class ServerNote:
    """A server that cannot serve now. ``match`` (0..1) is how well what is known of it
    (name, tool names, description) matches the query: ``index.note_match`` computes it."""

    server: str
    state: str
    """Short and free of internals: "starting", "down", "needs sign-in"."""
    action: str
    """What the caller can do: "try again in a few seconds", "ask the user to sign in"."""
    match: float = 0.0


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    space = head.rfind(" ")
    if space > limit // 2:
        head = head[:space]
    return head.rstrip(" ,;:.") + "…"


def _names_itself(key: str, title: object) -> bool:
    if not isinstance(title, str):
        return False
    squash = str.maketrans("", "", "_- ")
    return title.translate(squash).lower() == key.translate(squash).lower()


def compact_schema(schema: Mapping[str, Any], *, param_description: int = PARAM_DESCRIPTION) -> dict[str, Any]:
    """``schema`` without meaningless parts (see the module docstring); a new dict."""

    def walk(node: object, key: str | None) -> object:
        mapping = as_mapping(node)
        if mapping is not None:
            out: dict[str, object] = {}
            for name, value in mapping.items():
                if name in ("$schema", "$id") or (name == "additionalProperties" and value is False):
                    continue
                if name in ("required", "description", "examples") and value in ([], "", None):
                    continue
                if name == "title" and key is not None and _names_itself(key, value):
                    continue
                children = as_mapping(value)
                if name == "description" and isinstance(value, str):
                    out[name] = _cut(value, param_description)
                elif name in ("properties", "$defs", "definitions", "patternProperties") and children is not None:
                    out[name] = {str(p): walk(sub, str(p)) for p, sub in children.items()}
                else:
                    out[name] = walk(value, None)
            return out
        if isinstance(node, list):
            return [walk(item, None) for item in cast("list[object]", node)]
        return node

    result: dict[str, Any] = dict(as_mapping(walk(schema, None)) or {})
    result.setdefault("type", "object")
    return result


def _type_of(sub: object) -> object:
    mapping = as_mapping(sub)
    if mapping is None:
        return None
    kind: object = mapping.get("type")
    if isinstance(kind, list):
        return [str(k) for k in cast("list[object]", kind)]
    return kind if isinstance(kind, str) else None


def brief_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Parameters with their types only, and ``required``: still a valid object schema."""
    brief: dict[str, Any] = {"type": "object"}
    props = as_mapping(schema.get("properties"))
    if props is not None:
        brief["properties"] = {
            str(key): ({"type": kind} if kind is not None else {})
            for key, kind in ((k, _type_of(v)) for k, v in list(props.items())[:MAX_BRIEF_PARAMS])
        }
    required: object = schema.get("required")
    if isinstance(required, list) and required:
        brief["required"] = [str(r) for r in cast("list[object]", required)]
    return brief


def _entry(tool: IndexedTool, full: bool, via: str) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": tool.name,
        "via": via,
        "server": tool.server,
        "tool": tool.tool,
        "title": tool.title or tool.tool,  # a string always: some clients refuse union types
        "description": _cut(tool.description, FULL_DESCRIPTION if full else BRIEF_DESCRIPTION),
        "inputSchema": compact_schema(tool.input_schema) if full else brief_schema(tool.input_schema),
        "detail": "full" if full else "brief",
    }
    required = tool.input_schema.get("required")
    if isinstance(required, list) and required:
        entry["required"] = [str(name) for name in cast("list[object]", required)]
    if not full:
        more = len(as_mapping(tool.input_schema.get("properties")) or {}) - len(
            entry["inputSchema"].get("properties", {})
        )
        if more > 0:
            entry["moreParameters"] = more
    return entry


def _ways(entries: Sequence[Mapping[str, Any]], call_tool: str, read_tool: str | None, *, name: str) -> list[str]:
    """How each route the tools found take is called, once each: a call route with the tool's name and
    arguments, a tool listed under its own name directly (``name``: the placeholder shown)."""
    vias = {e["via"] for e in entries}
    ways: list[str] = []
    if read_tool is not None and read_tool in vias:
        ways.append(f'{read_tool} {{"name": {name}, "arguments": {{...}}}} for a tool that only reads')
    if call_tool in vias:
        ways.append(f'{call_tool} {{"name": {name}, "arguments": {{...}}}} for the others (the user may be asked)')
    if vias - {call_tool, read_tool}:
        ways.append("a tool whose via is its own name: that tool, with its arguments")
    return ways


def _next(
    entries: Sequence[Mapping[str, Any]],
    notes: Sequence[Mapping[str, str]],
    call_tool: str,
    read_tool: str | None,
    listed: bool,
) -> str:
    """What the answer tells the model to do next, for the structured answer (the text says it
    in its header, its footnotes and its notes)."""
    if not entries:
        told = "No tool matches. Search again with other words, or fewer."
    else:
        ways = _ways(entries, call_tool, read_tool, name="<its name>")
        told = f'Call a tool with the tool its "via" names: {"; ".join(ways)}. Give every argument in its "required".'
        if any(e["detail"] == "brief" for e in entries):
            told += ' For a "brief" tool, search its exact name first for its full arguments schema.'
        if listed:
            told += " The tools found also join your tool list: once you see one there, you may call it by its name."
    if notes:
        told += ' Some servers cannot serve now: see "unavailable" for what to tell the user.'
    return told


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _entry_text(rank: int, entry: Mapping[str, Any]) -> str:
    title = f" ({entry['title']})" if entry["title"] and entry["title"] != entry["tool"] else ""
    via = "its own name" if entry["via"] == entry["name"] else entry["via"]
    head = f"{rank}. {entry['name']}{title} [via {via}]: {entry['description'] or '(no description)'}"
    schema: Mapping[str, Any] = entry["inputSchema"]
    if entry["detail"] == "full":
        return f"{head}\n   arguments schema: {_dumps(schema)}"
    props = as_mapping(schema.get("properties")) or {}
    required = set(cast("list[str]", schema.get("required") or []))
    params = ", ".join(p + ("*" if p in required else "") for p in props)
    more = f", +{entry['moreParameters']} more" if entry.get("moreParameters") else ""
    return f"{head}\n   arguments: {params or 'none'}{more}"


def _header(entries: Sequence[Mapping[str, Any]], query: str, call_tool: str, read_tool: str | None) -> str:
    if not entries:
        return f"No tools match {_dumps(query)}. Try other words, or fewer."
    ways = _ways(entries, call_tool, read_tool, name='"<name>"')
    count = len(entries)
    return f"{count} tool{'s' if count != 1 else ''} for {_dumps(query)}, best first. Call each via {'; '.join(ways)}."


def _notes(notes: Sequence[ServerNote], server: str | None) -> list[dict[str, str]]:
    wanted = normalize(server) if server is not None else None
    kept = [n for n in notes if n.match >= NOTE_MIN_MATCH or normalize(n.server) == wanted]
    kept.sort(key=lambda n: (-n.match, n.server))
    return [{"server": n.server, "state": _cut(n.state, 40), "action": _cut(n.action, 160)} for n in kept[:MAX_NOTES]]


def _text(
    query: str,
    entries: Sequence[Mapping[str, Any]],
    omitted: int,
    unavailable: Sequence[Mapping[str, str]],
    call: str,
    *,
    read: str | None = None,
    listed: bool = False,
) -> str:
    lines = [_header(entries, query, call, read)]
    if listed and entries:
        lines[0] += " They also join your tool list: once you see one there, you may call it by its name."
    lines.extend(_entry_text(rank, entry) for rank, entry in enumerate(entries, 1))
    if any(e["detail"] == "brief" for e in entries):
        lines.append("(* required. Search a tool's exact name for its full arguments schema.)")
    if omitted:
        lines.append(f"({omitted} more matches left out to keep this short.)")
    for note in unavailable:
        lines.append(
            f"Not available now, may have matching tools: {note['server']} ({note['state']}). {note['action']}"
        )
    return "\n".join(lines)


def render_answer(
    hits: Sequence[Hit],
    *,
    query: str,
    unavailable: Sequence[ServerNote] = (),
    server: str | None = None,
    full: int = FULL_SCHEMAS,
    budget: int = TEXT_BUDGET,
    call_tool: str = "patchbay__call_tool",
    read_tool: str | None = None,
    routes: Mapping[str, str] | None = None,
    listed: bool = False,
) -> tuple[dict[str, Any], str]:
    """(structuredContent, text) for ``hits``; the text is at most ``budget`` characters.
    ``routes``: each tool's route by its name (``call_tool`` for one it lacks): ``read_tool``, the
    read route, ``call_tool``, or the tool's own name.
    ``listed``: the tools found join the client's tool list (the answer says so)."""
    notes = _notes(unavailable, server)
    query_shown = _cut(query, 200)
    levels = [index < full for index in range(len(hits))]
    vias = [(routes or {}).get(hit.tool.name, call_tool) for hit in hits]
    entries = [_entry(hit.tool, full_, via) for hit, full_, via in zip(hits, levels, vias, strict=True)]
    omitted = 0
    text = _text(query_shown, entries, omitted, notes, call_tool, read=read_tool, listed=listed)
    while len(text) > budget:
        if any(e["detail"] == "full" for e in entries):
            last = max(i for i, e in enumerate(entries) if e["detail"] == "full")
            entries[last] = _entry(hits[last].tool, False, vias[last])
        elif entries:
            entries.pop()
            omitted += 1
        elif notes:
            notes.pop()
        else:
            text = text[: budget - 1] + "…"
            break
        text = _text(query_shown, entries, omitted, notes, call_tool, read=read_tool, listed=listed)
    structured: dict[str, Any] = {"next": _next(entries, notes, call_tool, read_tool, listed), "tools": entries}
    if omitted:
        structured["omitted"] = omitted
    if notes:
        structured["unavailable"] = notes
    return structured, text
