"""The description of ``find_tools`` itself: what each server is for, and how to use the pair.

Pure. Rules:

- Each server gets one line: its name and a few words on what it is for. With
  ``instructions``, their first sentence; else its tools' most frequent topic words
  (words of tool names, then of descriptions, without stop words, common verbs and the
  server's own name), most frequent first, ties in first-seen order; then its tool count.
- The lines share what is left of ``budget`` (default 2,000 characters) after the fixed
  text, each cut at a word boundary to its share (at least ``MIN_LINE``); servers that
  still do not fit are counted in a last line ("and N more").
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence

from mcp_patchbay.search.index import IndexedTool
from mcp_patchbay.search.render import _cut  # pyright: ignore[reportPrivateUsage]
from mcp_patchbay.search.text import STOP_WORDS, split_words

__all__ = ["DESCRIPTION_BUDGET", "find_tools_description", "server_summary"]

DESCRIPTION_BUDGET = 2_000
MIN_LINE = 40
TOPIC_WORDS = 4

_VERBS = frozenset(
    [
        "get",
        "fetch",
        "read",
        "retrieve",
        "list",
        "show",
        "create",
        "add",
        "new",
        "make",
        "delete",
        "remove",
        "update",
        "edit",
        "modify",
        "set",
        "search",
        "find",
        "query",
        "run",
        "execute",
        "write",
        "save",
        "send",
        "post",
        "open",
        "close",
        "start",
        "stop",
        "check",
        "view",
        "info",
        "details",
        "detail",
        "by",
        "id",
        "ids",
        "multiple",
        "batch",
        "tool",
        "tools",
        "data",
    ]
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def server_summary(server: str, instructions: str | None, tools: Sequence[IndexedTool]) -> str:
    """A few words on what ``server`` is for (see the module docstring)."""
    if instructions and instructions.strip():
        first = _SENTENCE_END.split(instructions.strip(), maxsplit=1)[0]
        return _cut(first, 120).rstrip(".")
    own = set(split_words(server))
    skip = STOP_WORDS | _VERBS | own
    counts: Counter[str] = Counter()
    for tool in tools:
        counts.update(w for w in split_words(tool.tool) if w not in skip and len(w) > 2 and not w.isdigit())
    if len(counts) < TOPIC_WORDS:
        for tool in tools:
            counts.update(
                w for w in split_words(tool.description)[:30] if w not in skip and len(w) > 3 and not w.isdigit()
            )
    words = [w for w, _ in counts.most_common(TOPIC_WORDS)]
    count = f"{len(tools)} tool{'s' if len(tools) != 1 else ''}"
    return f"{', '.join(words)} ({count})" if words else count


def find_tools_description(
    tools: Sequence[IndexedTool],
    *,
    servers: Mapping[str, str | None] | None = None,
    find_tools: str = "patchbay__find_tools",
    call_tool: str = "patchbay__call_tool",
    budget: int = DESCRIPTION_BUDGET,
) -> str:
    """The ``find_tools`` description for this catalog, at most ``budget`` characters.

    ``servers`` maps every server to name (config order, including ones with no tools now)
    to its instructions; without it, the servers and instructions of ``tools`` are used.
    """
    by_server: dict[str, list[IndexedTool]] = {}
    for tool in tools:
        by_server.setdefault(tool.server, []).append(tool)
    if servers is None:
        servers = {
            s: next((t.server_instructions for t in ts if t.server_instructions), None) for s, ts in by_server.items()
        }
    head = (
        f"Search the tools of the servers below by what you need to do, in a few words "
        f'("create a GitHub issue") or by a tool name. Returns the best matches with their '
        f'arguments schemas. Then call one with {call_tool}, passing "name" (from the results) '
        f'and "arguments" (an object matching its schema). Optional: "server" to search one '
        f'server, "limit" (1-20, default 5).\nServers:'
    )
    lines = [f"- {name}: {server_summary(name, instr, by_server.get(name, []))}" for name, instr in servers.items()]
    room = budget - len(head) - 40
    if not lines:
        return (head.rsplit("\n", 1)[0] + " No servers are connected yet.")[:budget]
    share = max(MIN_LINE, room // len(lines) - 1)
    kept: list[str] = []
    used = 0
    for number, full_line in enumerate(lines):
        line = _cut(full_line, share)
        if used + len(line) + 1 > room:
            kept.append(f"- and {len(lines) - number} more servers")
            break
        kept.append(line)
        used += len(line) + 1
    return "\n".join([head, *kept])[:budget]
