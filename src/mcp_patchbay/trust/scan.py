"""The scan of what the model will read of a tool or prompt: pure, compiled once.

    scanner = Scanner.default()                      # patterns.toml, compiled once per process
    context = ScanContext.of({"mail": [defs...], "notes": [defs...]})   # once per catalog
    findings = scanner.scan(definition, "tool", server="notes", context=context)
    flagged = any(f.holds for f in findings)

What is read: every string the model reads of a definition (its title, description,
parameter and output descriptions and titles, enum values, defaults, examples, annotation
titles, parameter names read as words; a prompt's argument descriptions), each joined on its
own line, so a pattern never matches across two of them. What is found:

- the data of ``patterns.toml``: each pattern an id, a sentence for a person, and either one
  regular expression or a set of signals (named expressions) that must all be found in one
  sentence (or inside one hidden element), unless another signal (a refusal, a detector's
  framing) is found there too: what a text asks the model to do, not which words it uses;
- in code: hidden characters and direction controls (``text``), look-alike letters in a name
  or mixed into words, a mention of another server's tool or of another server (which needs
  the ``ScanContext``: the other servers' names and tools), a description far longer than the
  catalog's (a note: length alone holds nothing).

Each finding says where (the field, and the character it starts at) and what, in one sentence.
Measured by ``benchmarks/scan.py`` (the figures are in ``docs/TRUST.md``).
"""

from __future__ import annotations

import base64
import binascii
import bisect
import functools
import importlib
import re
import statistics
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Any, Literal, cast

from mcp_patchbay.trust.fingerprint import Definition, Kind
from mcp_patchbay.trust.reading import SCOPES, Unit, joined, line_of, units
from mcp_patchbay.trust.text import name_lookalikes, oddities, plain, raw_offset

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
PURPOSE_CHARS = 300
"""The most characters of a description read as what the tool says it is for (its first sentence)."""
MIN_ENCODED = 24
"""The shortest run of base64 decoded (16 bytes: a short sentence)."""
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
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SEPARATORS = re.compile(r"[_.\-]+")
_QUOTED = re.compile(r"'([^']*)'")
_WORDS = re.compile(r"\{\{([a-z_]+)\}\}")
_BASE64 = re.compile(r"[A-Za-z0-9+/]{24,}={0,2}")
_TOOL_NAME = re.compile(r"[a-z][a-z0-9]*(?:(?:_|__|\.)[a-z0-9]+)+")
_SRE_PARSE: Any = importlib.import_module("re._parser")
_SRE: Any = importlib.import_module("re._constants")
"""The standard library's regular-expression parser (``re`` compiles with it): its tree gives
each branch's gate. Private, and stable across the versions this runs on (3.11 to 3.13)."""

Window = Literal["sentence", "match"]


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
    offset: int = -1
    """The character of ``where``'s text (as the server wrote it) the finding starts at; -1: the whole."""

    @property
    def holds(self) -> bool:
        """Flags the definition (held under ``patchbay.scan: "hold"``); a note only informs."""
        return self.severity == "hold"

    def sentence(self) -> str:
        """The finding for a person: where (the field and the character), what it means, and the words found."""
        quoted = f' ("{self.excerpt}")' if self.excerpt else ""
        at = f", at character {self.offset}" if self.offset >= 0 else ""
        return f"{self.where}{at}: {self.explain}{quoted}"

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "finding": self.finding,
            "where": self.where,
            "offset": self.offset,
            "excerpt": self.excerpt,
            "explain": self.explain,
            "severity": self.severity,
        }

    @classmethod
    def from_json(cls, values: Mapping[str, Any]) -> Finding:
        severity: Severity = "note" if values.get("severity") == "note" else "hold"
        offset = values.get("offset", -1)
        return cls(
            *(str(values.get(key, "")) for key in ("id", "finding", "where", "excerpt", "explain")),
            severity=severity,
            offset=offset if isinstance(offset, int) else -1,
        )


@dataclass(frozen=True, slots=True)
class _Expression:
    """A named regular expression: a ``[[signal]]`` of the file, or a pattern's own ``match``."""

    id: str
    scope: Literal["text", "parameter"]
    branches: tuple[re.Pattern[str], ...]
    """The top-level alternatives, compiled apart: ``re`` tries every alternative at every
    position, while one word-led alternative jumps to its first letters (half the time)."""
    gates: tuple[tuple[tuple[str, ...], ...], ...] = ()
    ascii_gates: tuple[tuple[tuple[str, ...], ...], ...] = ()
    """The same gates for a text in ASCII (nearly every description): their strings outside ASCII
    left out, so a branch written in another script is passed over with no test at all."""
    """Per branch, sets of strings such that every match of it holds one string of each set
    (``_required``; none: nothing worth testing): a branch a text fails a set of is not searched
    (a substring test is some 200 times cheaper than ``re`` over the same text, and most texts fail)."""


@dataclass(frozen=True, slots=True)
class _Pattern:
    id: str
    finding: str
    scope: Literal["text", "parameter"]
    parts: tuple[_Expression, ...]
    """Found together in one window; the first is where the finding is (its anchor)."""
    window: Window
    """``sentence``: the anchor's sentence (or line); ``match``: inside the anchor's own match
    (a hidden element and what it holds)."""
    none: tuple[_Expression, ...]
    """Signals that cancel the finding when found in the window (a refusal, a detector's framing)."""
    unless: re.Pattern[str] | None
    unless_tool: re.Pattern[str] | None
    """Cancels the finding when the definition's own name, title or description matches: what
    the tool says it is for (a secrets manager asks for secrets)."""
    unless_name: re.Pattern[str] | None
    """Cancels a parameter's finding when the parameter's name matches (``api_key`` asking for a key)."""
    other_tool: str | None
    """A signal of ``parts`` whose match must name a tool (an identifier such as ``make_payment``)
    that is neither this definition nor one of its parameters nor a tool of its own server."""
    explain: str
    severity: Severity


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


@dataclass
class _Read:
    """One scope of a definition as the patterns read it, and what was found in it so far."""

    text: str
    starts: list[tuple[int, int]]
    units: Sequence[Unit]
    breaks: list[int] | None = None
    matches: dict[str, list[tuple[int, int]]] = field(default_factory=dict[str, list[tuple[int, int]]])

    contains: dict[str, bool] = field(default_factory=dict[str, bool])
    ascii: bool = False
    passed: dict[tuple[str, ...], bool] = field(default_factory=dict[tuple[str, ...], bool])
    possible: dict[str, list[re.Pattern[str]]] = field(default_factory=dict[str, list[re.Pattern[str]]])

    windows: dict[tuple[str, int, int], tuple[int, int] | None] = field(
        default_factory=dict[tuple[str, int, int], tuple[int, int] | None]
    )

    def found(self, expression: _Expression) -> list[tuple[int, int]]:
        """Every match of ``expression`` that starts a word, as (start, end), in order (once per scan)."""
        spans = self.matches.get(expression.id)
        if spans is None:
            branches = self._possible(expression)
            spans = self.matches[expression.id] = _word_matches(branches, self.text) if branches else []
        return spans

    def first_in(self, expression: _Expression, window: tuple[int, int]) -> tuple[int, int] | None:
        """The first match of ``expression`` starting a word inside ``window``: what ``found`` would
        give there, searched for only there (to the end of the window's line, where a match ends)."""
        spans = self.matches.get(expression.id)
        if spans is not None:
            return _inside(spans, window)
        key = (expression.id, *window)
        if key in self.windows:
            return self.windows[key]
        text = self.text
        line_end = text.find("\n", window[1])
        end = len(text) if line_end < 0 else line_end
        first: tuple[int, int] | None = None
        for branch in self._possible(expression):
            position = window[0]
            while (match := branch.search(text, position, end)) is not None and match.start() < window[1]:
                start = match.start()
                if start > 0 and _inside_word(text[start - 1], text[start]):
                    position = start + 1
                    continue
                if first is None or start < first[0]:
                    first = (start, match.end())
                break
        self.windows[key] = first
        return first

    def _possible(self, expression: _Expression) -> list[re.Pattern[str]]:
        """The branches of ``expression`` whose gates this text passes (once per text)."""
        known = self.possible.get(expression.id)
        if known is not None:
            return known
        contains, passed, text = self.contains, self.passed, self.text
        branches: list[re.Pattern[str]] = []
        every = expression.ascii_gates if self.ascii else expression.gates
        for branch, gates in zip(expression.branches, every, strict=True):
            for gate in gates:  # inline: this loop runs some 300 times a definition
                ok = passed.get(gate)
                if ok is None:
                    ok = False
                    for string in gate:
                        has = contains.get(string)
                        if has is None:
                            has = contains[string] = string in text
                        if has:
                            ok = True
                            break
                    passed[gate] = ok
                if not ok:
                    break  # no string of this gate: the branch cannot match
            else:
                branches.append(branch)
        self.possible[expression.id] = branches
        return branches

    def sentence(self, start: int, end: int) -> tuple[int, int]:
        if self.breaks is None:
            self.breaks = [m.start() for m in _BREAK.finditer(self.text)]  # once per text: linear
        return _sentence(self.breaks, len(self.text), start, end)

    def unit_at(self, position: int) -> tuple[Unit | None, int]:
        """The unit a position is in, and the position's offset in that unit's visible text."""
        line = line_of(self.starts, position)
        index = self.starts[line][1]
        if index < 0:
            return None, 0
        first = line
        while first > 0 and self.starts[first - 1][1] == index:
            first -= 1
        return self.units[index], position - self.starts[first][0]


class Scanner:
    """The compiled patterns and checks; ``scan`` is pure and thread-safe."""

    def __init__(
        self,
        patterns: Sequence[_Pattern],
        checks: Mapping[str, _Check],
        signals: Mapping[str, _Expression] | None = None,
    ) -> None:
        self.patterns = tuple(patterns)
        self.checks = dict(checks)
        self.order = (signals or {}).get("order")
        """Orders to the model (``patterns.toml``'s signal): another server's tool named in a
        sentence that gives one is held; named alone, it is a note."""

    @classmethod
    @functools.cache
    def default(cls) -> Scanner:
        """The patterns shipped in the package (``patterns.toml``), read and compiled once."""
        text = resources.files("mcp_patchbay.trust").joinpath(PATTERNS_FILE).read_text(encoding="utf-8")
        return cls.from_toml(text)

    @classmethod
    def from_toml(cls, text: str) -> Scanner:
        data = tomllib.loads(text)
        words = {str(key): str(value) for key, value in cast("dict[str, Any]", data.get("words", {})).items()}

        def spelled(expression: Any) -> str:
            """``{{name}}`` in an expression stands for the ``[words]`` list of that name."""
            return _WORDS.sub(lambda m: f"(?:{words[m[1]]})", str(expression))

        signals: dict[str, _Expression] = {}
        for raw in cast("list[dict[str, Any]]", data.get("signal", [])):
            scope = _scope(raw)
            signals[str(raw["id"])] = _expression(str(raw["id"]), scope, spelled(raw["match"]))
        patterns: list[_Pattern] = []
        for raw in cast("list[dict[str, Any]]", data.get("pattern", [])):
            pattern_id = str(raw["id"])
            scope = _scope(raw)
            parts: list[_Expression] = []
            if "match" in raw:
                parts.append(_expression(f"pattern:{pattern_id}", scope, spelled(raw["match"])))
            parts.extend(_signals(signals, raw.get("all", []), scope, pattern_id))
            if not parts:
                raise ValueError(f"pattern {pattern_id!r}: needs a 'match' or signals in 'all'")
            window = raw.get("window", "sentence")
            if window not in ("sentence", "match"):
                raise ValueError(f"pattern {pattern_id!r}: window must be 'sentence' or 'match'")
            patterns.append(
                _Pattern(
                    id=pattern_id,
                    finding=str(raw["finding"]),
                    scope=scope,
                    parts=tuple(parts),
                    window=window,
                    none=tuple(_signals(signals, raw.get("none", []), scope, pattern_id)),
                    unless=_compiled(spelled(raw["unless"]) if raw.get("unless") else None),
                    unless_tool=_compiled(raw.get("unless_tool")),
                    unless_name=_compiled(raw.get("unless_name")),
                    other_tool=_other_tool(raw, parts),
                    explain=str(raw["explain"]),
                    severity="note" if raw.get("severity") == "note" else "hold",
                )
            )
        checks = {
            str(key): _Check(str(value["explain"]), "note" if value.get("severity") == "note" else "hold")
            for key, value in cast("dict[str, dict[str, Any]]", data.get("check", {})).items()
        }
        return cls(patterns, checks, signals)

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
        read = [*read, *self._decoded(read, found)]
        # A parameter's name is read as words too: a schema can spell its instruction in one.
        worded = [
            *read,
            *(
                Unit(u.where, w, "parameter")
                for u in read
                if u.scope == "name-parameter" and (w := name_words(u.text)) != u.text
            ),
        ]
        texts: dict[str, _Read] = {}
        seen: dict[str, list[str]] = {}
        for scope, scopes in SCOPES.items():
            chosen = [u for u in worded if u.scope in scopes]
            text, starts = joined(chosen, seen)
            texts[scope] = _Read(text, starts, chosen, ascii=text.isascii())
        own = _OwnPurpose(definition, read, context.own_names.get(server, frozenset()) if context else frozenset())
        for pattern in self.patterns:
            if pattern.id not in found:
                finding = self._first(pattern, texts[pattern.scope], own)
                if finding is not None:
                    found[pattern.id] = finding
        if context is not None:
            self._mentions(texts["text"], server, context, found)
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

    def _first(self, pattern: _Pattern, read: _Read, own: _OwnPurpose) -> Finding | None:
        """The pattern's first finding in ``read``: its anchor's first match with every other part
        found in the same window and nothing there that cancels it."""
        anchors = read.found(pattern.parts[0])
        if not anchors:
            return None
        if pattern.unless_tool is not None and own.matches(pattern.unless_tool):
            return None
        checked: dict[tuple[int, int], bool] = {}
        for start, end in anchors:
            window = read.sentence(start, end) if pattern.window == "sentence" else (start, end)
            last = end
            named = (start, end)
            for part in pattern.parts[1:]:  # searched for in the window only: most texts hold few anchors
                inside = read.first_in(part, window)
                if inside is None:
                    break
                last = max(last, inside[1])
                if part.id == pattern.other_tool:
                    named = inside
            else:
                cancelled = checked.get(window)
                if cancelled is None:  # each window searched once, however many matches it holds
                    cancelled = checked[window] = _cancelled(pattern, read, window)
                if cancelled:
                    continue
                unit, offset = read.unit_at(start)
                where = unit.where if unit is not None else ""
                if pattern.unless_name is not None and unit is not None and _named(pattern.unless_name, unit):
                    continue
                if pattern.other_tool is not None and not own.names_another(read.text[named[0] : named[1]]):
                    continue
                at = raw_offset(unit.text, offset) if unit is not None else -1
                excerpt = _clip(read.text[start : min(last, start + 4 * EXCERPT)])
                return Finding(pattern.id, pattern.finding, where, excerpt, pattern.explain, pattern.severity, at)
        return None

    def _check(
        self, found: dict[str, Finding], check: str, finding: str, where: str, excerpt: str, *, offset: int = -1
    ) -> None:
        if check in found:
            return
        info = self.checks.get(check) or _Check(check.replace("-", " "), "hold")
        found[check] = Finding(check, finding, where, excerpt, info.explain, info.severity, offset)

    def _decoded(self, units: Sequence[Unit], found: dict[str, Finding]) -> Iterator[Unit]:
        """Text spelled in base64 inside a string, decoded, as one more string of the same field
        (a note says so): a person sees letters, the model can decode them. In code, not a
        pattern: a pattern cannot decode."""
        for unit in units:
            if unit.scope not in ("text", "parameter") or len(unit.text) < MIN_ENCODED:
                continue
            if max(map(len, unit.text.split()), default=0) < MIN_ENCODED:
                continue  # no word long enough: the common case, decided without a search
            for match in _BASE64.finditer(unit.text):
                decoded = _words_in_base64(match[0])
                if decoded is not None:
                    self._check(found, "encoded-text", "characters", unit.where, _clip(decoded))
                    yield Unit(f"{unit.where} (decoded from base64)", decoded, unit.scope)

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

    def _mentions(self, read: _Read, server: str, context: ScanContext, found: dict[str, Finding]) -> None:
        seen: set[str] = set()
        for match in _IDENTIFIER.finditer(read.text):
            token = match[0]
            if token in seen or len(token) > MAX_TOKEN_CHARS:
                continue
            seen.add(token)
            named = context.other_tool(token, server)
            if named is not None:
                owners = ", ".join(sorted(context.tools_by_name[named]))
                check = self._ordered(read, match.start(), match.end(), "other-server-tool")
                self._check_at(read, match.start(), found, check, f"{named} (a tool of {owners})")
            prefix = context.other_server_prefix(token, server)
            if prefix is not None:
                check = self._ordered(read, match.start(), match.end(), "other-server")
                self._check_at(read, match.start(), found, check, token)
        if context.server_phrase is not None:
            own = _server_key(server).replace("_", "")
            for match in context.server_phrase.finditer(read.text):
                named = _server_key(match[1] or match[2] or "").replace(" ", "").replace("_", "")
                if named != own:
                    check = self._ordered(read, match.start(), match.end(), "other-server")
                    self._check_at(read, match.start(), found, check, _clip(match[0]))
                    break

    def _ordered(self, read: _Read, start: int, end: int, check: str) -> str:
        """``check`` when the sentence naming another server or its tool gives the model an order
        (``Call mail__send_email first``), else its note (``-named``: "use after github's
        create_pull_request" names a tool and steers nothing). In code, not a pattern: which names
        are another server's is known only from the catalog, as the scan runs."""
        if self.order is None:
            return check
        return check if read.first_in(self.order, read.sentence(start, end)) is not None else f"{check}-named"

    def _check_at(self, read: _Read, position: int, found: dict[str, Finding], check: str, excerpt: str) -> None:
        if check.endswith("-named") and check.removesuffix("-named") in found:
            return
        unit, offset = read.unit_at(position)
        where = unit.where if unit is not None else ""
        self._check(found, check, "shadowing", where, excerpt, offset=raw_offset(unit.text, offset) if unit else -1)


class _OwnPurpose:
    """What a definition says it is for: its name as words, its title and the first sentence of its
    description (what a tool is comes first; a long description's later sentences may be anything),
    read once and only when a pattern's ``unless_tool`` asks."""

    def __init__(
        self, definition: Definition, read: Sequence[Unit] = (), server_names: frozenset[str] = frozenset()
    ) -> None:
        self.definition = definition
        self.text: str | None = None
        self.read = read
        self.server_names = server_names

    def names_another(self, text: str) -> bool:
        """``text`` names a tool that is not this one: an identifier that is neither this
        definition's name, nor a parameter's, nor a tool of the same server."""
        own = {str(self.definition.get("name", "")).lower(), *self.server_names}
        own.update(unit.text.lower() for unit in self.read if unit.scope == "name-parameter")
        return any(
            token not in own and token.rpartition(".")[2] not in own and token.rpartition("__")[2] not in own
            for token in _TOOL_NAME.findall(text)
        )

    def matches(self, expression: re.Pattern[str]) -> bool:
        if self.text is None:
            description = str(self.definition.get("description") or "")[:PURPOSE_CHARS]
            first = _BREAK.search(description)
            parts = [name_words(str(self.definition.get("name", ""))), str(self.definition.get("title") or "")]
            parts.append(description[: first.start()] if first else description)
            self.text = "\n".join(parts).lower()
        return expression.search(self.text) is not None


def _words_in_base64(candidate: str) -> str | None:
    """``candidate`` decoded, if it is base64 of readable text (words and spaces), else None."""
    try:
        raw = base64.b64decode(candidate + "=" * (-len(candidate) % 4), validate=True)
        decoded = raw.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    letters = sum(char.isalpha() for char in decoded)
    if decoded.count(" ") < 2 or letters < 0.6 * len(decoded) or not decoded.isprintable():
        return None
    return decoded


def _scope(raw: Mapping[str, Any]) -> Literal["text", "parameter"]:
    scope = raw.get("scope", "text")
    if scope not in ("text", "parameter"):
        raise ValueError(f"{raw.get('id')!r}: scope must be 'text' or 'parameter'")
    return scope


def _signals(signals: Mapping[str, _Expression], ids: Sequence[str], scope: str, pattern_id: str) -> list[_Expression]:
    chosen: list[_Expression] = []
    for signal_id in ids:
        signal = signals.get(signal_id)
        if signal is None:
            raise ValueError(f"pattern {pattern_id!r}: no signal {signal_id!r}")
        if signal.scope != scope:
            raise ValueError(f"pattern {pattern_id!r}: signal {signal_id!r} reads another scope")
        chosen.append(signal)
    return chosen


def _other_tool(raw: Mapping[str, Any], parts: Sequence[_Expression]) -> str | None:
    """The signal ``other_tool`` names, which must be one of the pattern's parts."""
    signal = raw.get("other_tool")
    if signal is None:
        return None
    if signal not in {part.id for part in parts}:
        raise ValueError(f"pattern {raw.get('id')!r}: other_tool names no signal of 'all'")
    return str(signal)


def _compiled(expression: Any) -> re.Pattern[str] | None:
    return re.compile(str(expression), _FLAGS) if expression else None


def _named(expression: re.Pattern[str], unit: Unit) -> bool:
    """A parameter unit's name (its ``where`` is ``parameter 'name'``) matches ``expression``."""
    quoted = _QUOTED.search(unit.where)
    return quoted is not None and expression.search(quoted[1].lower()) is not None


def _cancelled(pattern: _Pattern, read: _Read, window: tuple[int, int]) -> bool:
    if any(read.first_in(signal, window) is not None for signal in pattern.none):
        return True
    return pattern.unless is not None and pattern.unless.search(read.text, window[0], window[1]) is not None


def _inside(spans: list[tuple[int, int]], window: tuple[int, int]) -> tuple[int, int] | None:
    """The first span that starts inside ``window`` (``spans`` in order of start)."""
    index = bisect.bisect_left(spans, (window[0], -1))
    if index < len(spans) and spans[index][0] < window[1]:
        return spans[index]
    return None


def _expression(expression_id: str, scope: Literal["text", "parameter"], expression: str) -> _Expression:
    branches = _branches(expression)
    gates = tuple(_required(branch.pattern) for branch in branches)
    ascii_gates = tuple(tuple(tuple(t for t in gate if t.isascii()) for gate in each) for each in gates)
    return _Expression(expression_id, scope, branches, gates, ascii_gates)


_COMMON_WORDS = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "in", "is", "it", "not", "of",
    "on", "or", "the", "this", "that", "to", "use", "with", "you", "your",
})  # fmt: skip
"""Words nearly every description holds: a gate made of one of them lets nearly every text through."""
_COMMON_MARKS = frozenset(" .,;:!?'\"`()-/_*=\n")
_LENGTH_COST = {1: 30.0, 2: 8.0, 3: 3.0, 4: 1.0}
"""How likely a string of so many letters is to be in a text, roughly (longer: 0.5)."""


def _required(expression: str) -> tuple[tuple[str, ...], ...]:
    """Sets of strings such that every match of ``expression`` holds one string of each, read off
    its parse tree: a run of literal characters in its top-level sequence is a set of one; a group
    every match goes through gives its own best set, an alternation the union of its alternatives'
    (when each has one). The two least common sets, judged by their strings' length (each tried
    shortest string first: the commonest, so a text holding one passes soonest); none when nothing
    is worth testing."""
    best = _candidates(list(_SRE_PARSE.parse(expression, _FLAGS)))[:2]
    return tuple(tuple(sorted(strings, key=len)) for strings in best)


def _candidates(items: list[tuple[Any, Any]]) -> list[frozenset[str]]:
    """The sets every match of a parsed sequence has one string of, the best first."""
    found: list[frozenset[str]] = []
    run: list[str] = []
    for op, value in items:
        if op is _SRE.LITERAL:
            run.append(chr(value))
            continue
        if run:
            found.append(frozenset({"".join(run)}))
            run = []
        found.extend(_inner(op, value))
    if run:
        found.append(frozenset({"".join(run)}))
    useful = [strings for strings in found if _cost(strings) < 40]
    return sorted(set(useful), key=_cost)


def _inner(op: Any, value: Any) -> list[frozenset[str]]:
    """What one parsed item that is not a literal requires of every match: its best set, or none."""
    if op is _SRE.SUBPATTERN:
        return _candidates(list(value[3]))[:1]
    if op is _SRE.BRANCH:
        each = [_candidates(list(alternative))[:1] for alternative in value[1]]
        return [frozenset[str]().union(*(best[0] for best in each))] if each and all(each) else []
    if (op is _SRE.MAX_REPEAT or op is _SRE.MIN_REPEAT) and value[0] >= 1:
        return _candidates(list(value[2]))[:1]
    members = cast("list[tuple[Any, int]]", value) if op is _SRE.IN else []
    if members and len(members) <= 4 and all(member is _SRE.LITERAL for member, _ in members):
        return [frozenset(chr(code) for _, code in members)]
    return []


@functools.cache
def _cost(strings: frozenset[str]) -> float:
    """How often a text is likely to hold one of ``strings``: short and common strings cost most."""
    total = 0.0
    for text in strings:
        stripped = text.strip()
        if not stripped or stripped in _COMMON_WORDS or (len(stripped) == 1 and stripped in _COMMON_MARKS):
            return 100.0
        if not stripped.isascii():
            total += 0.5  # nearly every description is written in English
        else:
            total += _LENGTH_COST.get(len(stripped), 0.5) if stripped.isalnum() or len(stripped) > 1 else 1.0
    return total


def _branches(expression: str) -> tuple[re.Pattern[str], ...]:
    """``expression``'s top-level alternatives, each compiled (the whole, if it cannot be split);
    ``(a|b|c)\\b``, one group of alternatives, is split as ``a\\b|b\\b|c\\b``."""
    whole = _ONE_GROUP.fullmatch(expression)
    if whole is not None and not _BACKREFERENCE.search(expression):
        inner = _alternatives(whole[1])
        if len(inner) > 1:
            try:
                return tuple(re.compile(f"(?:{part}){whole[2]}", _FLAGS) for part in inner)
            except re.error:
                pass
    parts = _alternatives(expression)
    try:
        return tuple(re.compile(part, _FLAGS) for part in parts)
    except re.error:
        return (re.compile(expression, _FLAGS),)  # a mistake in the file is reported as the file has it


_ONE_GROUP = re.compile(r"\((?!\?)(.*)\)(\\b)?", re.DOTALL)
_BACKREFERENCE = re.compile(r"\\[1-9]")


def _alternatives(expression: str) -> list[str]:
    """The top-level alternatives of an expression (split at ``|`` outside groups and classes);
    for ``_ONE_GROUP``'s inner text, only if the group closes at the end (``(a)|(b)`` is two groups)."""
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
        if depth < 0:
            return [expression]  # ``(a)|(b)`` read as one group's inner text: not one group
        i += 1
    parts.append(expression[start:])
    return parts


def _word_matches(branches: Sequence[re.Pattern[str]], text: str) -> list[tuple[int, int]]:
    """The matches of each branch that start a word (a match starting with a letter right after
    another is inside a word: ``skip`` in ``autoskip``), in order; the patterns need no leading
    ``\\b``, which would make ``re`` try every position instead of jumping to its first letters."""
    spans: list[tuple[int, int]] = []
    for branch in branches:
        position = 0
        while (match := branch.search(text, position)) is not None:
            start = match.start()
            if start > 0 and _inside_word(text[start - 1], text[start]):
                position = start + 1
                continue
            spans.append((start, match.end()))
            position = max(match.end(), start + 1)
    if len(branches) > 1:
        spans.sort()
    return spans


def _inside_word(before: str, char: str) -> bool:
    """``char`` continues a word (``skip`` in ``autoskip``): a letter after a letter, digit or ``_``.
    Chinese and Japanese are written without spaces, so any of their characters may start a phrase."""
    if not char.isalnum() or not (before.isalnum() or before == "_"):
        return False
    return not ("\u3040" <= char <= "\u9fff" or "\uf900" <= char <= "\ufaff")


_BREAK = re.compile("[.!?] |[\u3002\uff01\uff1f]|\n")
"""Where a sentence ends: a full stop (or ! or ?) and a space, a CJK full stop, ! or ?, a line break."""


def _sentence(breaks: Sequence[int], size: int, start: int, end: int) -> tuple[int, int]:
    """The span of the sentence (or line) around a match: ``breaks`` are where each sentence's
    end (``". "``, a CJK full stop, a line break) starts, in order."""
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
