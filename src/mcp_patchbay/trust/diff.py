"""A held definition as a person reads it: a unified diff of the approved and the new one. Pure.

Both are shown as pretty JSON (two-space indent, keys sorted, Unicode as is, except hidden and
direction-changing characters, shown escaped as ``\\u200b`` so the diff shows what the model
reads), with long descriptions broken at sentences, so a word changed in a paragraph is one
line of the diff, not the whole paragraph.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from typing import Any, cast

from mcp_patchbay.trust.text import HIDDEN

__all__ = ["definition_diff", "shown"]

_SENTENCE_END = re.compile(r"(?<=[.!?:;])\s+|\n")


def _escaped(text: str) -> str:
    return HIDDEN.sub(lambda m: f"\\u{ord(m[0]):04x}" if ord(m[0]) < 0x10000 else f"\\U{ord(m[0]):08x}", text)


def shown(definition: Mapping[str, Any]) -> list[str]:
    """The lines a definition is shown as (descriptions one sentence a line)."""
    return _lines(definition, 0, None)


def _lines(value: Any, depth: int, key: str | None) -> list[str]:
    pad = "  " * depth
    head = f"{pad}{json.dumps(key, ensure_ascii=False)}: " if key is not None else pad
    if isinstance(value, dict):
        items = sorted(cast("dict[str, Any]", value).items())
        if not items:
            return [head + "{}"]
        lines = [head + "{"]
        for name, item in items:
            lines.extend(_lines(item, depth + 1, name))
        return [*lines, pad + "}"]
    if isinstance(value, list):
        entries = cast("list[Any]", value)
        if not entries:
            return [head + "[]"]
        lines = [head + "["]
        for item in entries:
            lines.extend(_lines(item, depth + 1, None))
        return [*lines, pad + "]"]
    parts = [part for part in _SENTENCE_END.split(value) if part] if isinstance(value, str) else []
    if len(parts) > 1:
        return [head + _escaped(json.dumps(parts[0], ensure_ascii=False))] + [
            f"{pad}  + {_escaped(json.dumps(part, ensure_ascii=False))}" for part in parts[1:]
        ]
    text = json.dumps(value, ensure_ascii=False)
    return [head + (_escaped(text) if HIDDEN.search(text) else text)]


def definition_diff(approved: Mapping[str, Any] | None, now: Mapping[str, Any], *, context: int = 2) -> str:
    """The unified diff from the approved definition to the held one (all ``+`` when new)."""
    before = shown(approved) if approved else []
    lines = difflib.unified_diff(
        before, shown(now), fromfile="approved" if approved else "(none approved)", tofile="now", n=context
    )
    return "\n".join(line.rstrip("\n") for line in lines)
