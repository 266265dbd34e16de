"""The resolution of names a client got wrong: which tool a called name means, if any.

Pure: values in, values out. No I/O, no awaits, no logging. It assumes the rules by which
``catalog.naming`` builds exposed names; suggestions for a name that names nothing come
from ``catalog.suggestions``.

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
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from mcp_patchbay.catalog.naming import CLIENT_SEPARATOR, check_separator, delimiter_positions, normalize, sanitize
from mcp_patchbay.catalog.suggestions import Suggester

__all__ = ["MAX_CALLED_LENGTH", "NameEntry", "Resolution", "ResolutionKind", "Resolver"]

MAX_CALLED_LENGTH = 512
"""Longer called names get no loose matching, only suggestions for their head. No real
name comes near it (the clients' own limit is 64), and the loose rules grow with the
number of separators in a name: a hostile name must cost what a normal one does."""

_MAX_PART = 160
"""Leading parts longer than this are never tried as server names (none is that long)."""

ResolutionKind = Literal["exact", "resolved", "ambiguous", "hidden", "server_unavailable", "unknown"]


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
        check_separator(separator)
        self._separator = separator
        self._delimiters = tuple(dict.fromkeys((separator, CLIENT_SEPARATOR)))
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

        # Suggestions rank the visible tools a model may be offered, never hidden or app-only ones.
        offered = (t.entry for t in self._targets[:visible_count] if t.entry is not None and not t.entry.app_only)
        self._suggester = Suggester([(e.exposed, e.server, e.item) for e in offered], self._delimiters)

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

        positions = delimiter_positions(called, self._delimiters)
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

    def _unavailable_server(self, called: str) -> str | None:
        """The unavailable server a leading part of ``called`` names, if any.

        Parts are the text between delimiters (so ``mcp__patchbay__down__tool`` names
        ``down``), or the whole name. A name whose leading part names an available server
        is about that server, whatever follows.
        """
        if not self._unavailable:
            return None
        positions = delimiter_positions(called, self._delimiters)
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

    def suggest(self, called: str, limit: int = 5) -> tuple[str, ...]:
        """Up to ``limit`` exposed names close to ``called``, best first (``catalog.suggestions``)."""
        return self._suggester.suggest(called, limit)
