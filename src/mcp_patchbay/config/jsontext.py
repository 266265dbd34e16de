"""The file's text as JSON: strict, and remembering keys given more than once.

``json`` alone lets a later duplicate key silently replace an earlier one and accepts
``NaN``; here objects come back as :class:`JsonObject`, which keeps the keys given twice
for :func:`duplicate_keys` to report, the constants are refused, and a syntax error
becomes a :class:`ConfigError` with its line and column and a hint for the usual causes
(comments, a trailing comma).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

from mcp_patchbay.config.problems import ConfigError, ConfigProblem, key_path

__all__ = ["JsonObject", "duplicate_keys", "parse_json"]


class JsonObject(dict[str, Any]):
    """A JSON object that remembers keys given more than once (the last value wins)."""

    duplicates: tuple[str, ...] = ()


def _object_hook(pairs: list[tuple[str, Any]]) -> JsonObject:
    obj = JsonObject(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        duplicates: dict[str, None] = {}
        for key, _ in pairs:
            if key in seen:
                duplicates[key] = None
            seen.add(key)
        obj.duplicates = tuple(duplicates)
    return obj


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not valid JSON")


def parse_json(text: str, path: Path) -> object:
    try:
        return json.loads(text, object_pairs_hook=_object_hook, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        hint = ""
        rest = exc.doc[exc.pos : exc.pos + 2]
        before = exc.doc[: exc.pos].rstrip()
        if rest.startswith(("//", "/*")):
            hint = " (comments are not allowed in JSON)"
        elif before.endswith(",") and rest[:1] in ("}", "]"):
            hint = " (trailing comma?)"
        raise ConfigError(
            path, "", f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}{hint}"
        ) from None
    except RecursionError:
        raise ConfigError(path, "", "not valid JSON: nested too deeply") from None
    except ValueError as exc:  # NaN/Infinity, integers too long to convert
        raise ConfigError(path, "", f"not valid JSON: {exc}") from None


def duplicate_keys(value: object, prefix: tuple[str | int, ...]) -> list[ConfigProblem]:
    """Keys given twice in any object inside ``value`` (iterative: the JSON may be deep)."""
    problems: list[ConfigProblem] = []
    stack: list[tuple[object, tuple[str | int, ...]]] = [(value, prefix)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, JsonObject):
            problems.extend(ConfigProblem(key_path(*where, k), "key given more than once") for k in item.duplicates)
            stack.extend((v, (*where, k)) for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((v, (*where, i)) for i, v in enumerate(cast("list[object]", item)))
    problems.reverse()
    return problems
