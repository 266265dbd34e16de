"""The scan of what the model will read of a tool or prompt: pure, compiled once.

    scanner = Scanner.default()                      # patterns.toml, compiled once per process
    context = ScanContext.of({"mail": [defs...], "notes": [defs...]})   # once per catalog
    findings = scanner.scan(definition, "tool", server="notes", context=context)
    flagged = any(f.holds for f in findings)

What is read: every string the model reads of a definition (its title, description,
parameter and output descriptions and titles, enum values, defaults, examples, annotation
titles; a prompt's argument descriptions), each joined on its own line, so a pattern never
matches across two of them. What is found:

- the data patterns of ``patterns.toml`` (instructions aimed at the model, secrecy, files
  holding keys, secrets asked into arguments, fixed addresses to send to, shadowing language,
  parameters asking for unrelated data): each an id, a regular expression and a sentence;
- in code: hidden characters and direction controls (``text``), look-alike letters in a name
  or mixed into words, a mention of another server's tool or of another server (which needs
  the ``ScanContext``: the other servers' names and tools), a description far longer than the
  catalog's (a note: length alone holds nothing).

Measured by ``benchmarks/scan.py`` (the figures are in ``docs/TRUST.md``).
"""

from __future__ import annotations

import bisect
import functools
import re
import statistics
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Any, Literal, cast

from mcp_patchbay.trust.fingerprint import Definition, Kind
from mcp_patchbay.trust.reading import SCOPES, Unit, joined, line_of, units
from mcp_patchbay.trust.text import name_lookalikes, oddities, plain

__all__ = ["Finding", "ScanContext", "Scanner", "Severity"]

Severity = Literal["hold", "note"]
PATTERNS_FILE = "patterns.toml"
LONG_FLOOR = 1500
"""A description is "far longer than the rest" past this many characters and ..."""
LONG_FACTOR = 12
"""... this many times the catalog's median description."""
EXCERPT = 80
"""The most characters of the matched text a finding quotes."""
MAX_FIELD_CHARS = 64 * 1024
"""The most characters of one string of a definition scanned (the longest real description
seen is some 30,000); past it, or past ``MAX_DEFINITION_CHARS`` in all, the rest is not
scanned and the definition gets the ``too-long`` finding, which holds like any other."""
MAX_DEFINITION_CHARS = 256 * 1024
MAX_TOKEN_CHARS = 256
"""The longest word looked up as another server's tool (MCP names have at most 128 characters)."""
_FLAGS = re.MULTILINE
"""Patterns are written in lower case and read lower-cased text: ``re.IGNORECASE`` costs three times as much."""
_IDENTIFIER = re.compile(r"[a-z0-9][a-z0-9_.:/-]{4,}[a-z0-9]")
"""Words that could name a tool (six characters or more: shorter names are never distinctive)."""
_SPLIT = re.compile(r"__|[._:/-]")
_NAME_WORDS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
_MCP_PREFIX = re.compile(r"^(mcp[_.:/-]*)+")
_GENERIC_PREFIXES = frozenset({"tool", "tools", "tool_", "function", "functions", "default_api", "api"})
"""Prefixes a client or a model puts before a tool's name (``mcp_tool_``, ``functions.``)."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One reason to look twice at a definition."""

    id: str
    """The pattern's or check's id (``patterns.toml``)."""
    finding: str
    """Its kind: instructions, secrecy, sensitive-file, exfiltration, shadowing, parameter, characters, length."""
    where: str
    """Which part of the definition: ``description``, ``parameter 'sidenote'``, ``name``, ..."""
    excerpt: str
    """What was found, as the model reads it (clipped)."""
    explain: str
    """One sentence for the person deciding."""
    severity: Severity = "hold"

    @property
    def holds(self) -> bool:
        """Flags the definition (held under ``patchbay.scan: "hold"``); a note only informs."""
        return self.severity == "hold"

    def sentence(self) -> str:
        """The finding for a person: where, what it means, and the words found."""
        quoted = f' ("{self.excerpt}")' if self.excerpt else ""
        return f"{self.where}: {self.explain}{quoted}"

    def as_json(self) -> dict[str, str]:
        return {
            "id": self.id,
            "finding": self.finding,
            "where": self.where,
            "excerpt": self.excerpt,
            "explain": self.explain,
            "severity": self.severity,
        }

    @classmethod
    def from_json(cls, values: Mapping[str, Any]) -> Finding:
        severity: Severity = "note" if values.get("severity") == "note" else "hold"
        return cls(
            *(str(values.get(key, "")) for key in ("id", "finding", "where", "excerpt", "explain")),
            severity=severity,
        )


@dataclass(frozen=True, slots=True)
class _Pattern:
    id: str
    finding: str
    scope: Literal["text", "parameter"]
    branches: tuple[re.Pattern[str], ...]
    """The match's top-level alternatives, compiled apart: ``re`` tries every alternative at
    every position, while one word-led alternative jumps to its first letters (half the time)."""
    unless: re.Pattern[str] | None
    explain: str


@dataclass(frozen=True, slots=True)
class _Check:
    explain: str
    severity: Severity


def _server_key(name: str) -> str:
    return name.lower().replace("-", "_")


def _distinctive(name: str) -> bool:
    """A tool name specific enough that its mention in another server's text is no accident:
    two words or more (``send_email``, ``sendEmail``) and six characters or more."""
    return len(name) >= 6 and (any(c in name for c in "_-.") or any(c.isupper() for c in name[1:]))


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
                if _distinctive(name):
                    tools_by_name.setdefault(name.lower(), set()).add(server)
                    if len(_NAME_WORDS.findall(name)) >= 3:
                        specific.add(name.lower())
            lengths.extend(len(str(d.get("description") or "")) for d in definitions)
        servers = frozenset(_server_key(server) for server in listings)
        phrase = None
        if servers:
            spelled = sorted({re.escape(s).replace("_", "[_ -]?") for s in servers if len(s) >= 3}, key=len)
            if spelled:
                alternatives = "|".join(reversed(spelled))
                phrase = re.compile(
                    rf"\b({alternatives})\s+(?:mcp|server'?s tools?)\b|\bmcp[_-]({alternatives})\b",
                    _FLAGS,
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
            if not head or head in _GENERIC_PREFIXES or _server_key(head) in {_server_key(o) for o in owners}:
                return tail
        return None

    def other_server_prefix(self, token: str, server: str) -> str | None:
        """Another server named as the prefix of an exposed name (``mail__send``)."""
        head, sep, _ = token.partition("__")
        key = _server_key(head)
        return key if sep and key in self.servers and key != _server_key(server) else None


class Scanner:
    """The compiled patterns and checks; ``scan`` is pure and thread-safe."""

    def __init__(self, patterns: Sequence[_Pattern], checks: Mapping[str, _Check]) -> None:
        self.patterns = tuple(patterns)
        self.checks = dict(checks)

    @classmethod
    @functools.cache
    def default(cls) -> Scanner:
        """The patterns shipped in the package (``patterns.toml``), read and compiled once."""
        text = resources.files("mcp_patchbay.trust").joinpath(PATTERNS_FILE).read_text(encoding="utf-8")
        return cls.from_toml(text)

    @classmethod
    def from_toml(cls, text: str) -> Scanner:
        data = tomllib.loads(text)
        patterns: list[_Pattern] = []
        for raw in cast("list[dict[str, Any]]", data.get("pattern", [])):
            scope = raw.get("scope", "text")
            if scope not in ("text", "parameter"):
                raise ValueError(f"pattern {raw.get('id')!r}: scope must be 'text' or 'parameter'")
            unless = raw.get("unless")
            patterns.append(
                _Pattern(
                    id=str(raw["id"]),
                    finding=str(raw["finding"]),
                    scope=scope,
                    branches=_branches(str(raw["match"])),
                    unless=re.compile(str(unless), _FLAGS) if unless else None,
                    explain=str(raw["explain"]),
                )
            )
        checks = {
            str(key): _Check(str(value["explain"]), "note" if value.get("severity") == "note" else "hold")
            for key, value in cast("dict[str, dict[str, Any]]", data.get("check", {})).items()
        }
        return cls(patterns, checks)

    def scan(
        self, definition: Definition, kind: Kind = "tool", *, server: str = "", context: ScanContext | None = None
    ) -> tuple[Finding, ...]:
        """Every finding in one definition, at most one per pattern or check (the first place found)."""
        read, cut = _capped(units(definition, kind))
        found: dict[str, Finding] = {}
        if cut is not None:
            said = f"over {MAX_FIELD_CHARS:,} characters in one text or {MAX_DEFINITION_CHARS:,} in all"
            self._check(found, "too-long", "length", cut, said)
        self._characters(read, found)
        texts = {scope: joined([u for u in read if u.scope in scopes]) for scope, scopes in SCOPES.items()}
        for pattern in self.patterns:
            if pattern.id in found:
                continue
            text, starts = texts[pattern.scope]
            first = min(
                (m for b in pattern.branches if (m := _first(b, pattern.unless, text))), key=_start, default=None
            )
            if first is not None:
                where = starts[line_of(starts, first.start())][1]
                found[pattern.id] = Finding(pattern.id, pattern.finding, where, _clip(first[0]), pattern.explain)
        if context is not None:
            self._mentions(texts["text"][0], texts["text"][1], server, context, found)
            description = str(definition.get("description") or "")
            if len(description) > context.long_limit:
                self._check(
                    found,
                    "long-description",
                    "length",
                    "description",
                    f"{len(description):,} characters; most in this catalog have under {context.long_limit:,}",
                )
        return tuple(found.values())

    def _check(self, found: dict[str, Finding], check: str, finding: str, where: str, excerpt: str) -> None:
        if check in found:
            return
        info = self.checks.get(check) or _Check(check.replace("-", " "), "hold")
        found[check] = Finding(check, finding, where, excerpt, info.explain, info.severity)

    def _characters(self, units: Sequence[Unit], found: dict[str, Finding]) -> None:
        for unit in units:
            if plain(unit.text) or unit.scope == "name-parameter":
                continue
            if unit.scope == "name":
                why = name_lookalikes(unit.text)
                if why is not None:
                    self._check(found, "lookalike-name", "characters", unit.where, why)
            odd = oddities(unit.text)
            if odd.bidi:
                self._check(found, "direction-controls", "characters", unit.where, f"{odd.bidi} direction controls")
            if odd.hidden > odd.bidi:
                said = f'hidden text: "{_clip(odd.tags)}"' if odd.tags else f"{odd.hidden - odd.bidi} hidden characters"
                self._check(found, "hidden-characters", "characters", unit.where, said)
            if odd.mixed_words and unit.scope != "name":
                self._check(found, "mixed-script", "characters", unit.where, ", ".join(odd.mixed_words[:3]))

    def _mentions(
        self, text: str, starts: list[tuple[int, str]], server: str, context: ScanContext, found: dict[str, Finding]
    ) -> None:
        seen: set[str] = set()
        for match in _IDENTIFIER.finditer(text):
            token = match[0]
            if token in seen or len(token) > MAX_TOKEN_CHARS:
                continue
            seen.add(token)
            named = context.other_tool(token, server)
            if named is not None:
                owners = ", ".join(sorted(context.tools_by_name[named]))
                where = starts[line_of(starts, match.start())][1]
                self._check(found, "other-server-tool", "shadowing", where, f"{named} (a tool of {owners})")
            prefix = context.other_server_prefix(token, server)
            if prefix is not None:
                where = starts[line_of(starts, match.start())][1]
                self._check(found, "other-server", "shadowing", where, token)
        if context.server_phrase is not None:
            own = _server_key(server).replace("_", "")
            for match in context.server_phrase.finditer(text):
                named = _server_key(match[1] or match[2] or "").replace(" ", "").replace("_", "")
                if named != own:
                    where = starts[line_of(starts, match.start())][1]
                    self._check(found, "other-server", "shadowing", where, _clip(match[0]))
                    break


def _branches(expression: str) -> tuple[re.Pattern[str], ...]:
    """``expression``'s top-level alternatives, each compiled (the whole, if it cannot be split)."""
    parts: list[str] = []
    depth, start, i = 0, 0, 0
    while i < len(expression):
        char = expression[i]
        if char == "\\":
            i += 2
            continue
        if char == "[":
            i = expression.index("]", i + 2 if expression[i + 1 : i + 2] in ("]", "^") else i + 1)
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            parts.append(expression[start:i])
            start = i + 1
        i += 1
    parts.append(expression[start:])
    whole = re.compile(expression, _FLAGS)  # a mistake in the file is reported as the file has it
    try:
        return tuple(re.compile(part, _FLAGS) for part in parts)
    except re.error:
        return (whole,)


def _start(match: re.Match[str]) -> int:
    return match.start()


def _first(branch: re.Pattern[str], unless: re.Pattern[str] | None, text: str) -> re.Match[str] | None:
    breaks: list[int] | None = None
    checked: dict[tuple[int, int], bool] = {}
    for match in _word_matches(branch, text):
        if unless is None:
            return match
        if breaks is None:
            breaks = [m.start() for m in _BREAK.finditer(text)]  # once per text: linear
        span = _sentence(breaks, len(text), match.start(), match.end())
        cancelled = checked.get(span)
        if cancelled is None:  # each sentence searched once, however many matches it holds
            cancelled = checked[span] = unless.search(text[span[0] : span[1]]) is not None
        if not cancelled:
            return match
    return None


def _word_matches(pattern: re.Pattern[str], text: str) -> Iterator[re.Match[str]]:
    """The matches of ``pattern`` that start a word (a match starting with a letter right after
    another is inside a word: ``skip`` in ``autoskip``); the patterns need no leading ``\\b``,
    which would make ``re`` try every position instead of jumping to its first letters."""
    position = 0
    while (match := pattern.search(text, position)) is not None:
        start = match.start()
        if start > 0 and text[start].isalnum() and (text[start - 1].isalnum() or text[start - 1] == "_"):
            position = start + 1
            continue
        yield match
        position = max(match.end(), start + 1)


_BREAK = re.compile(r"\. |\n")


def _sentence(breaks: Sequence[int], size: int, start: int, end: int) -> tuple[int, int]:
    """The span of the sentence (or line) around a match, for its ``unless``: ``breaks`` are
    where each ``". "`` or line break starts, in order."""
    index = bisect.bisect_left(breaks, start)
    before = breaks[index - 1] + 1 if index > 0 else 0
    after = bisect.bisect_left(breaks, end)
    return before, breaks[after] if after < len(breaks) else size


def _capped(read: Iterator[Unit]) -> tuple[list[Unit], str | None]:
    """The units to scan, each cut at ``MAX_FIELD_CHARS`` and all at ``MAX_DEFINITION_CHARS``;
    where the first cut was (None: nothing cut)."""
    kept: list[Unit] = []
    left = MAX_DEFINITION_CHARS
    cut: str | None = None
    for unit in read:
        limit = min(MAX_FIELD_CHARS, left)
        scanned = unit
        if len(unit.text) > limit:
            cut = cut or unit.where
            if limit <= 0:
                break
            scanned = replace(unit, text=unit.text[:limit])
        kept.append(scanned)
        left -= len(scanned.text)
    return kept, cut


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= EXCERPT else text[: EXCERPT - 1] + "…"
