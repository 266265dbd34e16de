"""The description of ``find_tools`` itself: what each server is for, and how to use the pair.

Pure. Rules:

- Each server gets one line: its name, its tool count and a few words on what it is for.
  With ``instructions``, their first sentence (headings and markup skipped; none when it
  is about the instructions themselves, "Audience: these instructions ..."); else its
  tools' topics: what is left of a tool's name without stop words, common verbs and the
  server's own name ("pull request" of ``create_pull_request``). A word in more than half
  of a server's tool names (``browser_*``) comes first, once, and is left out of the
  other topics; then the most frequent topics (plurals folded), ties in first-seen order,
  and words of descriptions if there are fewer than four; with none, the tool names. A
  server with no tools now (down, starting, needs sign-in) says "not available now".
- The lines share what is left of ``budget`` (default 2,000 characters) after the fixed
  text, each cut at a word boundary to its share (at least ``MIN_LINE``); servers that
  still do not fit are counted in a last line ("and N more").
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence

from mcp_patchbay.search.documents import IndexedTool
from mcp_patchbay.search.render import _cut  # pyright: ignore[reportPrivateUsage]
from mcp_patchbay.search.text import STOP_WORDS, fold, split_words

__all__ = ["DESCRIPTION_BUDGET", "find_tools_description", "server_summary"]

DESCRIPTION_BUDGET = 2_000
MIN_LINE = 40
TOPIC_WORDS = 4

_VERBS = frozenset(
    (
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
        "many",
        "all",
        "bulk",
    )
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")
_MARKUP = re.compile(r"[*_`>]+|^[-+] ")


_ABOUT_THE_TEXT = re.compile(r"(?i)^(audience\b|these instructions\b|this (document|guide|file)\b|instructions\b)")
"""A sentence about the instructions themselves ("Audience: these instructions are written for
an LLM ..."): it says nothing of what the server is for."""


def _first_sentence(instructions: str) -> str:
    """The first sentence of the first line that is not a markdown heading, markup removed;
    none when it is about the instructions themselves."""
    for raw in instructions.splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            text = _MARKUP.sub("", line).strip()
            sentence = _SENTENCE_END.split(text, maxsplit=1)[0].rstrip(".")
            return "" if _ABOUT_THE_TEXT.match(sentence) else sentence  # then the tools say it better
    return ""


def server_summary(server: str, instructions: str | None, tools: Sequence[IndexedTool]) -> str:
    """A few words on what ``server`` is for (see the module docstring)."""
    first = _first_sentence(instructions) if instructions else ""
    if first:
        return first
    skip = STOP_WORDS | _VERBS | set(split_words(server))
    names = [[w for w in split_words(t.tool) if w not in skip and not w.isdigit() and len(w) > 1] for t in tools]
    spread: Counter[str] = Counter(w for words in names for w in set(words))
    common = [w for w, n in spread.most_common(2) if len(tools) >= 3 and n > len(tools) / 2]
    phrases: Counter[str] = Counter()
    shown: dict[str, str] = {}  # folded phrase -> its first spelling: "issue" and "issues" are one
    for words in names:
        kept = [w for w in words if w not in common]
        if kept:
            key = " ".join(fold(w) for w in kept)
            shown.setdefault(key, " ".join(kept))
            phrases[key] += 1
    if len(phrases) < TOPIC_WORDS:
        skip |= set(common)
        for tool in tools:
            for word in split_words(tool.description)[:30]:
                if word not in skip and len(word) > 3 and not word.isdigit():
                    shown.setdefault(fold(word), word)
                    phrases[fold(word)] += 1
    topics = common + [shown[p] for p, _ in phrases.most_common(TOPIC_WORDS)]
    return ", ".join(topics or [t.tool for t in tools[:TOPIC_WORDS]])


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
        f'Find tools of the servers below by the task in a few words ("create a GitHub issue") or by '
        f"a tool name; the answer lists the best matches with their arguments schemas. Then call one "
        f'with {call_tool} {{"name": <from the answer>, "arguments": {{...}}}}. Optional: "server" '
        f'(search one server), "limit" (1-20, default 5). Call {find_tools} again with a tool\'s exact '
        f"name for its full arguments schema.\nServers (tool count):"
    )
    lines: list[str] = []
    for name, instructions in servers.items():
        own = by_server.get(name, [])
        summary = server_summary(name, instructions, own)
        if not own:
            summary = f"not available now{'; ' + summary if summary else ''}"
        lines.append(f"- {name} ({len(own)}): {summary}")
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
