"""A tool result held to the proxy's size limit (``max_result_bytes``).

A result larger than the limit would flood the model's context. Its text is cut to fit,
with a note saying how much was cut and how to see it all; a result whose bulk is not
text (images, audio, structured content) cannot be cut meaningfully and is refused with
``RESULT_TOO_LARGE``. Sizes are in characters of what the model would read. Pure.
"""

from __future__ import annotations

import json
from typing import Any, cast

from mcp_patchbay.errors.tree import Code, UpstreamError


def bounded(result: dict[str, Any], limit: int, exposed: str, server: str, tool: str) -> dict[str, Any]:
    """``result`` if it fits in ``limit``; else its text truncated with a note, or RESULT_TOO_LARGE."""
    size = sum(_block_size(block) for block in result.get("content") or ())
    structured = result.get("structuredContent")
    if size <= limit and structured is None:
        return result
    structured_size = len(json.dumps(structured)) if structured is not None else 0
    if size + structured_size <= limit:
        return result
    text_size = sum(_block_size(b) for b in result.get("content") or () if _is_text(b))
    if structured_size > limit or size - text_size + structured_size > limit:
        raise UpstreamError(
            Code.RESULT_TOO_LARGE,
            f"The result of '{exposed}' is too large to return ({size + structured_size:,} characters, "
            f"most of it not text that could be shortened; the limit is {limit:,}). Ask for less, for example "
            "with a narrower query.",
            server=server,
            tool=tool,
        )
    return _truncate(result, limit - (size - text_size) - structured_size)


def _block_size(block: Any) -> int:
    """Characters a content block carries (text, base64 data, embedded resource text or blob)."""
    if not isinstance(block, dict):
        return 0
    item = cast("dict[str, Any]", block)
    kind = item.get("type")
    if kind == "text":
        return len(item.get("text") or "")
    if kind in ("image", "audio"):
        return len(item.get("data") or "")
    if kind == "resource":
        resource = item.get("resource")
        if isinstance(resource, dict):
            inner = cast("dict[str, Any]", resource)
            return len(inner.get("text") or inner.get("blob") or "")
    return 0


def _is_text(block: Any) -> bool:
    return isinstance(block, dict) and cast("dict[str, Any]", block).get("type") == "text"


def _truncate(result: dict[str, Any], limit: int) -> dict[str, Any]:
    """Cut text blocks so that their total is ``limit`` characters, and say so."""
    remaining = limit
    cut_total = 0
    text_total = 0
    blocks: list[Any] = []
    for block in result.get("content") or ():
        kept: Any = block
        item = cast("dict[str, Any]", block) if isinstance(block, dict) else {}
        if item.get("type") == "text":
            text = cast("str", item.get("text") or "")
            text_total += len(text)
            if len(text) > remaining:
                cut_total += len(text) - remaining
                kept = {**item, "text": text[:remaining]}
                text = text[:remaining]
            remaining -= len(text)
        blocks.append(kept)
    note = (
        f"[mcp-patchbay: this result was truncated: {cut_total:,} of its {text_total:,} characters of text were "
        "cut to keep it within the proxy's size limit (max_result_bytes). Ask for less to see everything.]"
    )
    blocks.append({"type": "text", "text": note})
    return {**result, "content": blocks}


__all__ = ["bounded"]
