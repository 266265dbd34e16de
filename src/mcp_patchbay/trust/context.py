"""What a definition is scanned against: the other servers and their tools, the catalog's lengths. Pure.

    context = ScanContext.of({"mail": [defs...], "notes": [defs...]})   # once per catalog
    context.other_tool("mail__send_email", "notes")                      # "send_email"

Which names are another server's, and which are this tool's own or its server's, is known only
from the catalog as the scan runs: no pattern can say it, so the scan's code asks this.
"""

from __future__ import annotations

import functools
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from mcp_patchbay.trust.fingerprint import Definition
from mcp_patchbay.trust.gates import FLAGS

__all__ = ["LONG_FACTOR", "LONG_FLOOR", "ScanContext", "ascii_skeleton", "distinctive", "name_words", "server_key"]

LONG_FLOOR = 1500
"""A description is "far longer than the rest" past this many characters and ..."""
LONG_FACTOR = 12
"""... this many times the catalog's median description."""
_SPLIT = re.compile(r"__|[._:/-]")
_NAME_WORDS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
_MCP_PREFIX = re.compile(r"^(mcp[_.:/-]*)+")
_GENERIC_PREFIXES = frozenset({"tool", "tools", "tool_", "function", "functions", "default_api", "api"})
"""Prefixes a client or a model puts before a tool's name (``mcp_tool_``, ``functions.``)."""
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SEPARATORS = re.compile(r"[_.\-]+")


def server_key(name: str) -> str:
    return name.lower().replace("-", "_")


def distinctive(name: str) -> bool:
    """A tool name specific enough that its mention in another server's text is no accident:
    two words or more (``send_email``, ``sendEmail``) and six characters or more."""
    return len(name) >= 6 and (any(c in name for c in "_-.") or any(c.isupper() for c in name[1:]))


def ascii_skeleton(name: str) -> str:
    """What ``name`` reads as when its ASCII look-alikes are taken for the letters they pass for: a
    capital I, a 1 or a | for an l, a 0 for an o, rn for m, vv for w (``send_emaiI``: ``send_email``)."""
    folded = name.replace("I", "l").replace("|", "l").lower()
    return folded.replace("1", "l").replace("0", "o").replace("rn", "m").replace("vv", "w")


def name_words(name: str) -> str:
    """A parameter's name as the words a model reads in it (``content_from_reading_ssh_id_rsa``)."""
    return _SEPARATORS.sub(" ", _CAMEL.sub(" ", name)).strip()


@dataclass(frozen=True)
class ScanContext:
    """What a definition is measured against: the other servers and the catalog's lengths."""

    tools_by_name: Mapping[str, frozenset[str]] = field(default_factory=dict[str, frozenset[str]])
    """A distinctive tool name (lower case) -> the servers that have it."""
    own_names: Mapping[str, frozenset[str]] = field(default_factory=dict[str, frozenset[str]])
    """Server -> its own tool and prompt names (lower case): never a mention of another's."""
    specific: frozenset[str] = frozenset()
    """Of those, the names of three words or more: specific enough when named bare."""
    servers: frozenset[str] = frozenset()
    """Every server's name, lower case, ``-`` as ``_``."""
    server_phrase: re.Pattern[str] | None = None
    long_limit: int = LONG_FLOOR

    @classmethod
    def of(cls, listings: Mapping[str, Sequence[Definition]]) -> ScanContext:
        """From every server's definitions (tools and prompts), by server name."""
        tools_by_name: dict[str, set[str]] = {}
        specific: set[str] = set()
        own: dict[str, frozenset[str]] = {}
        lengths: list[int] = []
        for server, definitions in listings.items():
            names = {str(d.get("name", "")) for d in definitions}
            own[server] = frozenset(name.lower() for name in names)
            for name in names:
                if distinctive(name):
                    tools_by_name.setdefault(name.lower(), set()).add(server)
                    if len(_NAME_WORDS.findall(name)) >= 3:
                        specific.add(name.lower())
            lengths.extend(len(str(d.get("description") or "")) for d in definitions)
        servers = frozenset(server_key(server) for server in listings)
        phrase = None
        if servers:
            spelled = sorted({re.escape(s).replace("_", "[_ -]?") for s in servers if len(s) >= 3}, key=len)
            if spelled:
                alternatives = "|".join(reversed(spelled))
                phrase = re.compile(
                    rf"\b({alternatives})\s+(?:mcp|server'?s tools?)\b|\bmcp[_-]({alternatives})\b",
                    FLAGS,
                )
        median = statistics.median(lengths) if lengths else 0
        return cls(
            tools_by_name={name: frozenset(owners) for name, owners in tools_by_name.items()},
            own_names=own,
            specific=frozenset(specific),
            servers=servers,
            server_phrase=phrase,
            long_limit=max(LONG_FLOOR, int(LONG_FACTOR * median)),
        )

    @functools.cached_property
    def names(self) -> list[str]:
        """The distinctive tool names (lower case), for a near spelling's look-up."""
        return list(self.tools_by_name)

    def other_tool(self, token: str, server: str) -> str | None:
        """The other server's tool an identifier in ``server``'s text names, if any: a specific
        name whole (``create_pull_request_review``), or any name after a prefix that says whose
        it is (``mail__send_email``, ``mcp_tool_send_email``): two-word names (``update_issue``)
        are shared by too many servers to mean another one's when bare."""
        own = self.own_names.get(server, frozenset())
        if token in own:
            return None
        owners = self.tools_by_name.get(token)
        if owners and server not in owners and token in self.specific:
            return token
        for split in _SPLIT.finditer(token):
            tail = token[split.end() :]
            if tail in own:
                return None
            owners = self.tools_by_name.get(tail)
            if not owners or server in owners:
                continue
            head = _MCP_PREFIX.sub("", token[: split.start()])
            if not head or head in _GENERIC_PREFIXES or server_key(head) in {server_key(o) for o in owners}:
                return tail
        return None

    def other_server_prefix(self, token: str, server: str) -> str | None:
        """Another server named as the prefix of an exposed name (``mail__send``)."""
        head, sep, _ = token.partition("__")
        key = server_key(head)
        return key if sep and key in self.servers and key != server_key(server) else None
