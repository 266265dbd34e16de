"""Exposed names for upstream items, and the resolution of names a client got wrong.

Pure: values in, values out. No I/O, no awaits, no logging.
One module on purpose, though past 450 lines: building names and resolving them are two
halves of one contract (every rule of one is an assumption of the other), stated once below.

Building names (``build_names``)
    An upstream item (a tool or a prompt) of server ``S`` named ``T`` is exposed as
    ``S<sep>T`` (``sep`` defaults to ``__``). Every exposed name matches ``NAME_CHARS``,
    is unique, at most ``max_length`` long, and depends only on the set of pairs, never
    on their order, so it is stable across restarts.

    - Characters outside ``[A-Za-z0-9_-]`` become ``_`` (``sanitize``); hyphens are kept.
    - A name that would be too long becomes a readable head plus ``_`` and six hex digits
      of sha256 over the raw ``server\\0item`` (``filesystem__read_multi_3f2a9c``).
    - Pairs whose names collide: one whose raw name already is its exposed form keeps the
      plain name (the smallest ``(server, item)`` if there are several), the others get
      the hash suffix. Plain names are claimed before any hashed one, and a hashed name
      that is taken gets a longer hash. So adding a pair never renames a pair whose raw
      name is already its exposed form; it can rename a *sanitized* one that now collides
      with it (``my.server``/``x`` is ``my_server__x`` until a ``my_server``/``x`` arrives).

Resolving a called name (``Resolver.resolve``)
    An exposed name is one dict lookup. Anything else runs only if the rules below, taken
    together, name exactly one tool; two or more is "ambiguous" and nothing runs. A typo
    never runs: typos get suggestions. ``norm`` lowercases and removes ``_ - . / :`` and
    spaces.

    1. normalized: ``norm(called)`` equals ``norm`` of the exposed name, of the raw or
       sanitized ``server<sep>item``, or of ``server + item``.
    2. prefix-stripped: after removing a prefix ending in a separator (``mcp__patchbay__``,
       ``claude__``; ``__`` counts as a separator too), the rest is an exposed name or
       matches one by rule 1. The rest never goes to rule 3, and when the first segment
       of the called name names a server, only that server's tools match, so
       ``jira__delete_issue`` never runs another server's ``delete_issue``.
    3. bare-name: the called name is an upstream item name of one server (exactly; then,
       only when the name has no separator, by ``norm``). An exact upstream name that one
       tool has (and no tool turned off) resolves to it before the other rules are tried:
       the name is the upstream's own (an MCP App calls its server's tools so), and reading
       a separator into it (``alpha_refresh`` as server ``alpha``'s ``refresh``) is a guess.
    4. server-only: the called name names a server that exposes exactly one tool.
    5. unshortened: the called name is the full raw or sanitized ``server<sep>item`` of an
       item whose exposed name differs from it (shortened, sanitized or hash-suffixed).

    An entry that is ``app_only`` (an MCP App's tool its server keeps from the model) is
    matched only by its exposed name and, by rule 3, exactly by its upstream name (the name
    its app calls it by); it is never suggested, never named in an overview, never server-only.

    An entry's ``aliases`` (an item's name before an override renamed it) take part in rules
    1, 3 and 5 as its item name does, so ``github__create_issue`` still resolves to the tool
    now exposed as ``github__new_issue``; suggestions only ever use the item name.

    Hidden items (filtered out by allow/deny lists) take part in the matching so that a
    loose rule never runs a visible tool in place of a hidden one; a name that matches
    only hidden items is "hidden", never suggested. When nothing matches and the server
    named by a leading part of the called name is unavailable, the result is
    "server_unavailable"; otherwise "unknown" with suggestions.

Suggesting (``Resolver.suggest``)
    rapidfuzz ``ratio`` over normalized strings precomputed here. The called name is
    split at the separator whose preceding segment is closest to a server name (which
    also skips client prefixes). A candidate's score is the best of: server part and
    tool part weighted together; the tool part alone (discounted: a missing or wrong
    server); the whole name, unless the server part named a server (it would reward a
    right server with a wrong tool); and, for a name without a separator, the server
    alone (full score for a one-tool server). Candidates come from three
    ``process.extract`` calls with a ``score_cutoff``: whole names, distinct tool names,
    and the tools of the closest servers. Scores below ``SUGGEST_CUTOFF`` are dropped,
    so nonsense gets no suggestions; ties go to the smaller exposed name.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Literal

from rapidfuzz import fuzz, process

__all__ = [
    "NAME_CHARS",
    "SUGGEST_CUTOFF",
    "NameEntry",
    "OwnTools",
    "Resolution",
    "Resolver",
    "build_names",
    "normalize",
    "sanitize",
]

NAME_CHARS: re.Pattern[str] = re.compile(r"^[A-Za-z0-9_-]+\Z")
"""What an exposed name (and a separator) is made of. ``\\Z``, so a trailing newline fails."""

SUGGEST_CUTOFF = 70.0
"""Suggestions scoring below this (0-100) are not shown."""

MIN_MAX_LENGTH = 16
"""The smallest ``max_length`` accepted: room for a readable head and a hash suffix."""

MAX_CALLED_LENGTH = 512
"""Longer called names get no loose matching, only suggestions for their head. No real
name comes near it (the clients' own limit is 64), and the loose rules grow with the
number of separators in a name: a hostile name must cost what a normal one does."""

_MAX_PART = 160
"""Leading parts longer than this are never tried as server names (none is that long)."""

_BAD_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_NORM_DROP = str.maketrans("", "", "_-./: ")
_CLIENT_SEPARATOR = "__"
_HASH_HEX = 6
_SERVER_CUTOFF = 60.0  # a called name's segment this close to a server name is taken as naming it
_TOOL_CUTOFF = 50.0  # tool parts below this cannot reach SUGGEST_CUTOFF even with a perfect server

ResolutionKind = Literal["exact", "resolved", "ambiguous", "hidden", "server_unavailable", "unknown"]


def sanitize(name: str) -> str:
    """Replace every character outside ``[A-Za-z0-9_-]`` with ``_``; ``""`` becomes ``"_"``."""
    return _BAD_CHARS.sub("_", name) or "_"


def normalize(name: str) -> str:
    """Lowercase and drop ``_ - . / :`` and spaces: the key of the "normalized" rule."""
    return name.translate(_NORM_DROP).lower()


@dataclass(frozen=True, slots=True)
class OwnTools:
    """The names of the proxy's own tools (search mode's ``find_tools`` and ``call_tool``) for a separator."""

    find_tools: str
    call_tool: str

    @classmethod
    def for_separator(cls, separator: str) -> OwnTools:
        return cls(f"patchbay{separator}find_tools", f"patchbay{separator}call_tool")


def _check_separator(separator: str) -> None:
    if not NAME_CHARS.match(separator):
        raise ValueError(f"separator must match {NAME_CHARS.pattern}, got {separator!r}")


# --- building names -----------------------------------------------------------------


def _digest(server: str, item: str) -> str:
    return hashlib.sha256(f"{server}\0{item}".encode()).hexdigest()


def _with_suffix(base: str, suffix: str, max_length: int) -> str:
    if len(base) + len(suffix) <= max_length:
        return base + suffix
    head = base[: max_length - len(suffix)]
    return (head.rstrip("_-") or head) + suffix


def _hashed_names(base: str, digest: str, max_length: int) -> Iterator[str]:
    """Ever longer hash suffixes, then numbered ones: the first free one is taken."""
    for hex_len in range(_HASH_HEX, min(len(digest), max_length - 2) + 1):
        yield _with_suffix(base, "_" + digest[:hex_len], max_length)
    number = 2
    while True:
        yield _with_suffix(base, f"_{digest[:_HASH_HEX]}{number}", max_length)
        number += 1


def build_names(pairs: Iterable[tuple[str, str]], *, separator: str, max_length: int) -> dict[tuple[str, str], str]:
    """Map each ``(server, item)`` to its exposed name (see the module docstring).

    Duplicate pairs are merged; the result keeps the first-seen order of the pairs, and
    its values do not depend on that order.
    """
    _check_separator(separator)
    if max_length < MIN_MAX_LENGTH:
        raise ValueError(f"max_length must be at least {MIN_MAX_LENGTH}, got {max_length}")
    unique = list(dict.fromkeys(pairs))
    plain: dict[tuple[str, str], str] = {}
    groups: dict[str, list[tuple[str, str]]] = {}
    for server, item in unique:
        plain[server, item] = sanitize(server) + separator + sanitize(item)
        groups.setdefault(plain[server, item], []).append((server, item))

    names: dict[tuple[str, str], str] = {}
    taken: set[str] = set()
    for name, members in groups.items():
        if len(name) > max_length:
            continue
        clean = [(s, i) for s, i in members if s + separator + i == name]
        if len(members) == 1 or clean:
            keeper = min(clean) if clean else members[0]
            names[keeper] = name
            taken.add(name)

    for pair in sorted(p for p in unique if p not in names):
        for candidate in _hashed_names(plain[pair], _digest(*pair), max_length):
            if candidate not in taken:
                names[pair] = candidate
                taken.add(candidate)
                break
    return {pair: names[pair] for pair in unique}


# --- resolving names ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NameEntry:
    """One exposed item: its exposed name and the raw names it came from."""

    exposed: str
    server: str
    item: str
    aliases: tuple[str, ...] = ()
    """Other item names that resolve to this entry as a mistaken name would (by every rule but
    the exact one), never suggested: the upstream's own name of an item an override renamed."""
    app_only: bool = False
    """For its server's app only (``apps.app_only``): matched by exact names alone, never suggested."""


@dataclass(frozen=True, slots=True)
class Resolution:
    """What a called name turned out to be. Only "exact" and "resolved" carry an entry."""

    kind: ResolutionKind
    called: str
    entry: NameEntry | None = None
    rule: str | None = None
    """For "resolved": normalized, prefix-stripped, bare-name, server-only or unshortened."""
    candidates: tuple[str, ...] = ()
    """Exposed names: the matches when "ambiguous", suggestions when "unknown"."""
    server: str | None = None
    """For "hidden" and "server_unavailable": the server's config name."""
    reason: str | None = None
    """For "server_unavailable": the caller's short reason (disabled, failed to start)."""


@dataclass(slots=True)
class _Target:
    server: str
    item: str
    entry: NameEntry | None  # None for a hidden item


# The order in which a resolved name's rule is reported when several rules name it.
_RULES = ("unshortened", "normalized", "prefix-stripped", "server-only", "bare-name")


_NOTHING: Mapping[int, None] = {}


@dataclass(slots=True)
class _Index:
    """Key -> targets, in insertion order, without duplicates."""

    by_key: dict[str, dict[int, None]] = field(default_factory=dict[str, dict[int, None]])

    def add(self, key: str, target: int) -> None:
        if key:  # an empty called name, or one of only punctuation, names nothing
            self.by_key.setdefault(key, {})[target] = None

    def get(self, key: str) -> Mapping[int, None]:
        return self.by_key.get(key, _NOTHING)


class Resolver:
    """Resolution and suggestions over one catalog. Indexes are built once, here."""

    def __init__(
        self,
        entries: Iterable[NameEntry],
        *,
        separator: str,
        hidden: Iterable[tuple[str, str]] = (),
        unavailable: Mapping[str, str] | None = None,
    ) -> None:
        _check_separator(separator)
        self._separator = separator
        self._delimiters = tuple(dict.fromkeys((separator, _CLIENT_SEPARATOR)))
        self._unavailable = dict(unavailable or {})
        hidden_pairs = list(dict.fromkeys(hidden))
        hidden_set = set(hidden_pairs)

        self._exact: dict[str, NameEntry] = {}
        self._targets: list[_Target] = []
        for entry in entries:
            if (entry.server, entry.item) in hidden_set:
                continue  # hidden wins: it is never run, never suggested
            if entry.exposed in self._exact:
                raise ValueError(f"duplicate exposed name {entry.exposed!r}")
            self._exact[entry.exposed] = entry
            self._targets.append(_Target(entry.server, entry.item, entry))
        visible_count = len(self._targets)
        self._targets.extend(_Target(server, item, None) for server, item in hidden_pairs)
        self._hidden = tuple(hidden_pairs)

        self._normalized = _Index()
        self._unshortened = _Index()
        self._bare_exact = _Index()
        self._bare_normalized = _Index()
        self._server_tools: dict[str, list[int]] = {}
        self._servers_by_key = _Index()  # normalized server name -> server number
        self._server_numbers: dict[str, int] = {}
        self._server_names: list[str] = []
        self._server_available: list[bool] = []

        for number, target in enumerate(self._targets):
            server = target.server
            keys: set[str] = set()
            # An alias (the upstream's own name of a renamed item) is matched as the item's name is.
            for item in (target.item, *(target.entry.aliases if target.entry is not None else ())):
                self._bare_exact.add(item, number)
                if target.entry is not None and target.entry.app_only:
                    continue  # its exact names only
                raw_full = server + separator + item
                sanitized_full = sanitize(server) + separator + sanitize(item)
                keys |= {normalize(raw_full), normalize(sanitized_full), normalize(server) + normalize(item)}
                keys.add(normalize(sanitize(server)) + normalize(sanitize(item)))
                if target.entry is not None:
                    for full in (raw_full, sanitized_full):
                        if full != target.entry.exposed:
                            self._unshortened.add(full, number)
                self._bare_normalized.add(normalize(item), number)
                self._bare_normalized.add(normalize(sanitize(item)), number)
            if target.entry is not None and not target.entry.app_only:
                keys.add(normalize(target.entry.exposed))
                self._server_tools.setdefault(server, []).append(number)
            for key in sorted(keys):
                self._normalized.add(key, number)
            self._register_server(server)
        for server in self._unavailable:
            self._register_server(server)

        self._build_fuzzy(visible_count)

    def _register_server(self, server: str) -> None:
        if server in self._server_numbers:
            return
        self._server_numbers[server] = len(self._server_names)
        self._server_names.append(server)
        self._server_available.append(server not in self._unavailable)
        for key in (normalize(server), normalize(sanitize(server))):
            self._servers_by_key.add(key, len(self._server_names) - 1)

    def servers(self) -> tuple[str, ...]:
        """Server names that have entries, in first-seen order."""
        return tuple(self._server_tools)

    def entries_of(self, server: str) -> tuple[NameEntry, ...]:
        """The visible entries of ``server``, in the order given; ``()`` for any other name."""
        return tuple(self._entry(n) for n in self._server_tools.get(server, ()))

    def hidden_pairs(self) -> tuple[tuple[str, str], ...]:
        """The (server, item) pairs hidden from this catalog."""
        return self._hidden

    @property
    def unavailable(self) -> Mapping[str, str]:
        """Servers that cannot serve now, to the reason."""
        return self._unavailable

    # -- resolve ------------------------------------------------------------------------

    def resolve(self, called: str) -> Resolution:
        """Classify ``called``; never raises. See the module docstring for the rules."""
        entry = self._exact.get(called)
        if entry is not None:
            return Resolution("exact", called, entry=entry)
        if len(called) > MAX_CALLED_LENGTH:
            return Resolution("unknown", called, candidates=self.suggest(called[:MAX_CALLED_LENGTH]))
        own = self._bare_exact.get(called)
        if len(own) == 1:
            (number,) = own
            owner = self._targets[number].entry
            if owner is not None:  # one tool's own name, and not a turned-off one's
                return Resolution("resolved", called, entry=owner, rule="bare-name")

        matches = self._match(called)
        visible = sorted({t for t in matches if self._targets[t].entry is not None})
        if len(matches) == 1 and visible:
            number = visible[0]
            rule = next(r for r in _RULES if r in matches[number])
            return Resolution("resolved", called, entry=self._targets[number].entry, rule=rule)
        if visible:
            names = sorted(self._exposed(t) for t in visible)
            return Resolution("ambiguous", called, candidates=tuple(names))
        if matches:
            first = min(matches, key=lambda t: (self._targets[t].server, self._targets[t].item))
            return Resolution("hidden", called, server=self._targets[first].server)

        down = self._unavailable_server(called)
        if down is not None:
            return Resolution("server_unavailable", called, server=down, reason=self._unavailable[down])
        return Resolution("unknown", called, candidates=self.suggest(called))

    def _entry(self, number: int) -> NameEntry:
        entry = self._targets[number].entry
        assert entry is not None, "only visible targets have entries"
        return entry

    def _exposed(self, number: int) -> str:
        return self._entry(number).exposed

    def _match(self, called: str) -> dict[int, set[str]]:
        """Targets named by the rules, each with the rules that name it."""
        found: dict[int, set[str]] = {}

        def add(targets: Iterable[int], rule: str) -> None:
            for number in targets:
                found.setdefault(number, set()).add(rule)

        key = normalize(called)
        add(self._unshortened.get(called), "unshortened")
        add(self._normalized.get(key), "normalized")

        positions = self._delimiter_positions(called)
        if positions:
            first_segment = called[: positions[0][0]]
            owners = {self._server_names[s] for s in self._servers_by_key.get(normalize(first_segment))}
            for start, length in positions:
                rest = called[start + length :]
                if not rest:
                    continue
                named = self._normalized.get(normalize(rest))
                add((t for t in named if not owners or self._targets[t].server in owners), "prefix-stripped")

        bare = self._bare_exact.get(called)
        if not bare and self._separator not in called:
            bare = self._bare_normalized.get(key)
        add(bare, "bare-name")

        for server_number in self._servers_by_key.get(key):
            tools = self._server_tools.get(self._server_names[server_number], ())
            if len(tools) == 1:
                add(tools, "server-only")
        return found

    def _delimiter_positions(self, called: str) -> list[tuple[int, int]]:
        """Every (start, length) where a separator (or the clients' ``__``) occurs."""
        positions: set[tuple[int, int]] = set()
        for delimiter in self._delimiters:
            start = called.find(delimiter)
            while start != -1:
                positions.add((start, len(delimiter)))
                start = called.find(delimiter, start + 1)
        return sorted(positions)

    def _unavailable_server(self, called: str) -> str | None:
        """The unavailable server a leading part of ``called`` names, if any.

        Parts are the text between delimiters (so ``mcp__patchbay__down__tool`` names
        ``down``), or the whole name. A name whose leading part names an available server
        is about that server, whatever follows.
        """
        if not self._unavailable:
            return None
        positions = self._delimiter_positions(called)
        starts = [0] + [start + length for start, length in positions]
        ends = [start for start, _ in positions]
        leading = [called, *(called[:end] for end in ends if end <= _MAX_PART)]
        for part in leading:
            for server_number in self._servers_by_key.get(normalize(part)):
                if self._server_available[server_number]:
                    return None
        parts = leading + [called[s:e] for s in starts[1:] for e in reversed(ends) if s < e and e - s <= _MAX_PART]
        for part in parts:
            numbers = self._servers_by_key.get(normalize(part))
            down = sorted(self._server_names[n] for n in numbers if not self._server_available[n])
            if down:
                return down[0]
        return None

    # -- suggest ------------------------------------------------------------------------

    def _build_fuzzy(self, visible_count: int) -> None:
        # Everything here is indexed by rank in exposed-name order, so that ties (and the
        # limits of process.extract) never depend on the order the entries came in.
        offered = [t for t in self._targets[:visible_count] if t.entry is not None and not t.entry.app_only]
        ranked = sorted(offered, key=lambda t: t.entry.exposed if t.entry else "")
        self._fz_names = [t.entry.exposed if t.entry else "" for t in ranked]
        self._fz_whole = [normalize(t.server) + normalize(t.item) for t in ranked]
        self._fz_item = [normalize(t.item) for t in ranked]
        self._fz_server = [normalize(t.server) for t in ranked]
        self._fz_server_size = [len(self._server_tools[t.server]) for t in ranked]
        item_ranks: dict[str, list[int]] = {}
        server_ranks: dict[str, list[int]] = {}
        for rank, target in enumerate(ranked):
            item_ranks.setdefault(self._fz_item[rank], []).append(rank)
            server_ranks.setdefault(target.server, []).append(rank)
        self._fz_items = list(item_ranks)
        self._fz_item_ranks = list(item_ranks.values())
        servers = sorted(server_ranks)
        self._fz_server_keys = [normalize(server) for server in servers]
        self._fz_server_ranks = [server_ranks[server] for server in servers]
        self._fz_server_items = [[self._fz_item[rank] for rank in server_ranks[server]] for server in servers]

    def suggest(self, called: str, limit: int = 5) -> tuple[str, ...]:
        """Up to ``limit`` exposed names close to ``called``, best first; never hidden or app-only ones."""
        if limit <= 0 or not normalize(called) or not self._fz_whole:
            return ()
        server_part, tool_part, whole_part, server_matched = self._split(called)
        tool_key, whole_key = normalize(tool_part), normalize(whole_part)
        server_key = normalize(server_part if server_part is not None else called)
        depth = max(4 * limit, 20)

        candidates: dict[int, None] = {}
        if not server_matched:  # else the server's own tools are searched below, more cheaply
            for _, _, rank in process.extract(
                whole_key, self._fz_whole, scorer=fuzz.ratio, processor=None, score_cutoff=SUGGEST_CUTOFF, limit=depth
            ):
                candidates[rank] = None
        for _, _, i in process.extract(
            tool_key, self._fz_items, scorer=fuzz.ratio, processor=None, score_cutoff=_TOOL_CUTOFF, limit=depth
        ):
            candidates.update(dict.fromkeys(self._fz_item_ranks[i][:depth]))
        close_servers = process.extract(
            server_key, self._fz_server_keys, scorer=fuzz.ratio, processor=None, score_cutoff=_SERVER_CUTOFF, limit=3
        )
        for _, _, s in close_servers:
            if server_part is None:
                # A bare name close to a server's name: that server's tools, in name order.
                candidates.update(dict.fromkeys(self._fz_server_ranks[s][:limit]))
                continue
            for _, _, i in process.extract(
                tool_key,
                self._fz_server_items[s],
                scorer=fuzz.ratio,
                processor=None,
                score_cutoff=_TOOL_CUTOFF,
                limit=depth,
            ):
                candidates[self._fz_server_ranks[s][i]] = None

        scored: list[tuple[float, int]] = []
        for rank in candidates:
            tool = fuzz.ratio(tool_key, self._fz_item[rank])
            server = fuzz.ratio(server_key, self._fz_server[rank])
            if server_matched:
                # The whole-name ratio would reward a right server with a wrong tool.
                score = max(0.35 * server + 0.65 * tool, 0.85 * tool)
            elif server_part is not None:
                score = max(fuzz.ratio(whole_key, self._fz_whole[rank]), 0.35 * server + 0.65 * tool, 0.85 * tool)
            else:
                server_only = server if self._fz_server_size[rank] == 1 else 0.9 * server
                score = max(fuzz.ratio(whole_key, self._fz_whole[rank]), 0.95 * tool, server_only)
            if score >= SUGGEST_CUTOFF:
                scored.append((-score, rank))
        scored.sort()
        return tuple(self._fz_names[rank] for _, rank in scored[:limit])

    def _split(self, called: str) -> tuple[str | None, str, str, bool]:
        """(server part, tool part, the name from the server part on, server part matched).

        Every delimiter is a possible split; the one whose preceding segment is closest to
        a server name wins, else the last one (so ``mcp__x__fs__read`` still splits at
        ``fs``). A name without delimiters has no server part.
        """
        splits: list[tuple[int, int, int]] = []  # (segment start, delimiter start, delimiter length)
        segment_start = 0
        for start, length in self._delimiter_positions(called):
            if start >= segment_start:
                splits.append((segment_start, start, length))
                segment_start = start + length
        if not splits:
            return None, called, called, False
        best, best_score = splits[-1], _SERVER_CUTOFF
        for split in splits:
            segment = normalize(called[split[0] : split[1]])
            match = process.extractOne(
                segment, self._fz_server_keys, scorer=fuzz.ratio, processor=None, score_cutoff=best_score
            )
            if segment and match is not None and match[1] > best_score:
                best, best_score = split, match[1]
        segment_start, start, length = best
        matched = best_score > _SERVER_CUTOFF
        return called[segment_start:start], called[start + length :], called[segment_start:], matched
