"""What is pinned of a definition, and its fingerprint: pure, values in and out.

A tool's pinned fields are what the model reads or the client acts on: ``name``, ``title``,
``description``, ``inputSchema``, ``outputSchema`` and ``annotations``; a prompt's are ``name``,
``title``, ``description`` and ``arguments``. Icons, ``_meta`` and ``execution`` are not pinned:
the model never reads them, and a server may change them (a signed icon URL, a trace id) with
every listing.

The fingerprint is the SHA-256 of the pinned fields as canonical JSON (keys sorted, no spaces,
UTF-8 unescaped), so the order a server writes its keys in, or absent versus ``null``
fields, never looks like a change.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Literal, cast

import mcp_types as types

__all__ = ["PINNED_FIELDS", "Definition", "Kind", "canonical", "definition_of", "fingerprint"]

Kind = Literal["tool", "prompt"]
Definition = dict[str, Any]
"""A definition's pinned fields as JSON values, keyed as on the wire (``inputSchema``)."""

PINNED_FIELDS: dict[Kind, tuple[str, ...]] = {
    "tool": ("name", "title", "description", "inputSchema", "outputSchema", "annotations"),
    "prompt": ("name", "title", "description", "arguments"),
}


def definition_of(item: types.Tool | types.Prompt | Mapping[str, Any], kind: Kind | None = None) -> Definition:
    """The pinned fields of a tool or prompt (an SDK model, or its JSON values as a server sent
    them: ``kind`` says which for those), without ``None`` values."""
    if isinstance(item, types.Tool | types.Prompt):
        kind = "tool" if isinstance(item, types.Tool) else "prompt"
        values = item.model_dump(by_alias=True, mode="json", exclude_none=True)
    else:
        values = dict(item)
        kind = kind or ("tool" if "inputSchema" in values else "prompt")
    return {key: _without_none(values[key]) for key in PINNED_FIELDS[kind] if values.get(key) is not None}


def canonical(definition: Mapping[str, Any]) -> str:
    """The one text a definition is compared and fingerprinted by."""
    return json.dumps(definition, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def fingerprint(definition: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of a definition's pinned fields."""
    return hashlib.sha256(canonical(definition).encode("utf-8", "surrogatepass")).hexdigest()


def _without_none(value: Any) -> Any:
    if isinstance(value, dict):
        mapping = cast("dict[str, Any]", value)
        return {key: _without_none(item) for key, item in mapping.items() if item is not None}
    if isinstance(value, list):
        return [_without_none(item) for item in cast("list[Any]", value)]
    return value
