"""The clients' file formats as text: read (JSON, JSON with comments, TOML) and edited in their own style.

Reading: :func:`parse` takes JSON, the JSON-with-comments that VS Code and Gemini CLI accept
(``//`` and ``/* */`` comments, trailing commas), and TOML (``tomllib``). Writing JSON: the file
is written again by ``json`` in the style it was found in (:class:`JsonStyle`: the indent unit,
compact separators, ASCII escapes, line endings, the final newline); keys keep their order, ours
go last. A file with comments is not rewritten (``json`` would drop them): :func:`editable_json`
says so. Writing TOML goes through ``tomlkit``, which keeps comments, key order and spacing.
Pure: text in, text out.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

__all__ = [
    "FormatError",
    "JsonStyle",
    "dump_json",
    "editable_json",
    "json_style",
    "objects_at",
    "parse",
    "remove_servers",
    "set_server",
    "toml_remove",
    "toml_set",
]


class FormatError(ValueError):
    """The text is not in the file's format; the message says where (line and column)."""


def _strip_jsonc(text: str) -> str:
    """``text`` without comments and trailing commas (strings untouched), same length per line."""
    out: list[str] = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
            out.append(c)
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append(" " * (end - i))
            i = end
            continue
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
            continue
        else:
            out.append(c)
        i += 1
    stripped = "".join(out)
    # Trailing commas: a comma followed (past blanks) by } or ]; strings hold no bare comma-brace
    # pair once the comments are blanked, except inside string literals, which the pattern skips.
    return re.sub(r'("(?:[^"\\]|\\.)*")|,(\s*[}\]])', lambda m: m.group(1) or " " + m.group(2), stripped)


def parse(text: str, fmt: Literal["json", "toml"]) -> dict[str, Any]:
    """The document as a dict; ``FormatError`` when it is not one (JSON comments are accepted)."""
    if fmt == "toml":
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise FormatError(f"not valid TOML: {exc}") from None
    text = text.removeprefix("\ufeff")
    if not text.strip():
        return {}
    try:
        value: object = json.loads(text)
    except json.JSONDecodeError:
        try:
            value = json.loads(_strip_jsonc(text))
        except json.JSONDecodeError as exc:
            raise FormatError(f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    if not isinstance(value, dict):
        raise FormatError(f"expected a JSON object at the top, found {type(value).__name__}")
    return cast("dict[str, Any]", value)


def editable_json(text: str) -> bool:
    """Whether ``json`` can write the file again without losing anything (no comments, no trailing commas)."""
    if not text.strip():
        return True
    try:
        json.loads(text.removeprefix("\ufeff"))
    except json.JSONDecodeError:
        return False
    return True


@dataclass(frozen=True)
class JsonStyle:
    """How a JSON file was written, so it is written back the same way."""

    indent: str | None = "  "
    """The indent unit (``None``: all on one line)."""
    compact: bool = False
    """On one line without blanks after ``,`` and ``:``."""
    ensure_ascii: bool = False
    newline: str = "\n"
    final_newline: bool = True
    bom: bool = False


def json_style(text: str) -> JsonStyle:
    """The style of ``text`` (an empty text: two spaces, the style most clients write)."""
    bom = text.startswith("\ufeff")
    text = text.removeprefix("\ufeff")
    if not text.strip():
        return JsonStyle()
    newline = "\r\n" if "\r\n" in text else "\n"
    final_newline = text.endswith(("\n", "\r"))
    ensure_ascii = not any(ord(c) > 127 for c in text) and "\\u" in text
    found = re.search(r"[{\[][ \t]*\r?\n([ \t]+)\S", text)
    if found is None:
        compact = '":' in text and '": ' not in text
        return JsonStyle(None, compact, ensure_ascii, newline, final_newline, bom)
    return JsonStyle(found.group(1), False, ensure_ascii, newline, final_newline, bom)


def dump_json(data: Mapping[str, Any], style: JsonStyle) -> str:
    """``data`` written in ``style``."""
    if style.indent is None:
        separators = (",", ":") if style.compact else (", ", ": ")
        text = json.dumps(data, ensure_ascii=style.ensure_ascii, separators=separators)
    else:
        text = json.dumps(data, indent=style.indent, ensure_ascii=style.ensure_ascii)
    if style.newline != "\n":
        text = text.replace("\n", style.newline)
    if style.final_newline:
        text += style.newline
    return ("\ufeff" if style.bom else "") + text


def _same_folder(a: str, b: str) -> bool:
    """Two spellings of one project folder (Claude Code's keys may differ in slashes or case on Windows)."""
    return a.replace("\\", "/").rstrip("/").lower() == b.replace("\\", "/").rstrip("/").lower()


def _child(parent: Mapping[str, Any], key: str, depth: int, keys: tuple[str, ...]) -> str | None:
    """The key of ``parent`` that ``key`` names: itself, or for a project folder, a spelling of it."""
    if key in parent:
        return key
    if depth == 1 and keys[0] == "projects":
        return next((k for k in parent if _same_folder(k, key)), None)
    return None


def objects_at(data: Mapping[str, Any], keys: tuple[str, ...]) -> Mapping[str, Any] | None:
    """The object at the key path ``keys``, or None when some key is absent or not an object."""
    node: Mapping[str, Any] = data
    for depth, key in enumerate(keys):
        found = _child(node, key, depth, keys)
        child: object = node[found] if found is not None else None
        if not isinstance(child, dict):
            return None
        node = cast("dict[str, Any]", child)
    return node


def set_server(data: dict[str, Any], keys: tuple[str, ...], name: str, entry: Mapping[str, Any]) -> None:
    """Put ``entry`` as ``name`` at ``keys`` (objects created as needed; an existing ``name`` keeps its place)."""
    node = data
    for depth, key in enumerate(keys):
        found = _child(node, key, depth, keys) or key
        child = node.get(found)
        if not isinstance(child, dict):
            child = {}
            node[found] = child
        node = cast("dict[str, Any]", child)
    node[name] = dict(entry)


def remove_servers(data: dict[str, Any], keys: tuple[str, ...], names: Iterable[str]) -> list[str]:
    """Remove the entries ``names`` at ``keys``; the names that were there."""
    servers = objects_at(data, keys)
    if servers is None:
        return []
    target = cast("dict[str, Any]", servers)
    removed = [name for name in names if name in target]
    for name in removed:
        del target[name]
    return removed


def toml_set(text: str, keys: tuple[str, ...], name: str, entry: Mapping[str, Any]) -> str:
    """``text`` with ``[KEYS.name]`` set to ``entry``; comments, order and spacing kept (tomlkit)."""
    import tomlkit
    from tomlkit.items import Table

    doc = tomlkit.parse(text)
    table = tomlkit.table()
    for key, value in entry.items():
        table[key] = value
    node: Any = doc
    for key in keys:
        if key not in node:
            node[key] = tomlkit.table(is_super_table=True)
        node = node[key]
    if name in node:
        node[name] = table
        return tomlkit.dumps(doc)
    if isinstance(node, Table) and list(doc)[-1] != keys[0]:
        table.add(tomlkit.nl())  # a blank line before the next table, as the file has between others
    node[name] = table
    return tomlkit.dumps(doc)


def toml_remove(text: str, keys: tuple[str, ...], names: Iterable[str]) -> tuple[str, list[str]]:
    """``text`` without the tables ``[KEYS.NAME]`` for ``names``; the names that were there."""
    import tomlkit

    doc = tomlkit.parse(text)
    node: Any = doc
    for key in keys:
        if key not in node:
            return text, []
        node = node[key]
    removed = [name for name in names if name in node]
    for name in removed:
        del node[name]
    if not removed:
        return text, []
    if len(keys) == 1 and not node and keys[0] in doc:
        del doc[keys[0]]  # no empty [mcp_servers] left behind
    return tomlkit.dumps(doc), removed
