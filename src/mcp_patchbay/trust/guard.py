"""``Guard``: what the serving path asks of trust (the wiring round calls these; I/O: the pins file).

    guard = Guard(config.path, config.settings)                # one per Supervisor
    context = guard.context({name: (tools, prompts), ...})     # every server's fresh listing, once per rebuild
    decision = guard.review(entry, listing.tools, listing.prompts, context)
    Source(entry.name, tools=decision.tools, prompts=decision.prompts, ...)   # held ones are not listed
    guard.held_call(server, tool)   # a PatchbayError (TOOL_CHANGED) for a held one, else None
    guard.find_held(called, "__")   # a name the catalog does not know, that a held tool would have had
    if guard.changed(): rebuild    # poll (a stat): ``trust`` in another process approved; list_changed follows
    guard.flagged()                # what is served although the scan flagged it (scan: "warn"), per server

The serving path splits ``review`` in three (``serving``), so that no scan, no wait for the
lock and no read or write of the file happens on the event loop:

    guard.answer(server, listing)        # the loop: a decision from memory, or None (work to do)
    guard.decide_all({server: listing})  # a worker thread: the scans, and one locked write for all
    guard.settle(server, listing, verdict)   # the loop again: logged, remembered, held

``answer`` decides from the server's record as last read or written here, while the file has
not changed (a ``stat``), and only when the decision needs no scan (every definition approved
and unchanged) and changes nothing in the record. A listing it has already reviewed (the same
tool objects; the same context, unless the verdict took no scan; the file unchanged since, or
the server's record the very one the verdict left while the file is this process's own) is
answered from memory, so catalog rebuilds for other reasons, and other servers' first sights,
cost a ``stat`` or two per server. ``decide_all`` reads the file when it changed,
scans each new or changed definition once, and writes every record its decisions change under
one lock (``PinStore.update_many``), deciding again on what the file holds then if another
process wrote it meanwhile. ``settle`` logs what happened once (pinned on first sight, held and
why, served with a warning). When the pins file cannot be used (unreadable, its lock not had in
``locking.WAIT``), the error is logged once and the listings are decided in memory as under
``pin: "off"`` (the scan still holds), the file left as it is.
"""

from __future__ import annotations

import logging
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import mcp_types as types

from mcp_patchbay.errors.tree import PatchbayError, tool_changed
from mcp_patchbay.trust.decide import Decision, Flagged, Held, Policy, Scan, ServerPins, decide
from mcp_patchbay.trust.fingerprint import Definition, Kind, definition_of, fingerprint
from mcp_patchbay.trust.scan import Finding, ScanContext, Scanner
from mcp_patchbay.trust.store import Change, PinsFull, PinStore, PinsUnreadable, entry_key

logger = logging.getLogger(__name__)

__all__ = ["Guard", "Listing", "Verdict", "launch_of"]


def launch_of(spec: Any) -> str:
    """What launches a server, for a person reading the pins: the command, or the URL's scheme,
    host and port only (its user info, path and query may each carry a credential: some
    services put the key in the path)."""
    command = getattr(spec, "command", None)
    if isinstance(command, str):
        return command
    url = getattr(spec, "url", None)
    if isinstance(url, str):
        parts = urllib.parse.urlsplit(url)
        try:
            port = parts.port
        except ValueError:
            port = None
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        return urllib.parse.urlunsplit((parts.scheme, f"{host}:{port}" if port else host, "", "", ""))
    return ""


@dataclass(frozen=True, slots=True)
class Listing:
    """One server's fresh listing to review, in its catalog's context."""

    tools: Sequence[types.Tool]
    prompts: Sequence[types.Prompt] = ()
    context: ScanContext | None = None
    launch: str = ""
    """What launches the server, recorded for a person (``launch_of``)."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """A decision on one listing, and what it stands on."""

    decision: Decision
    version: Any
    """The pins file's version after it (a ``stat``)."""
    record: ServerPins | None
    """The server's record as the store holds it after it (compared by identity: the store keeps
    its record objects while the file is the one it last read or wrote)."""
    scanned: bool
    """The scan took part: the decision holds in its context only. Without it (every definition
    approved and unchanged), it holds in any."""


@dataclass(frozen=True, slots=True)
class _Reviewed:
    listing: Listing
    """The listing reviewed (its tools, prompts and context kept, so they are compared by
    identity, never by a reused ``id``)."""
    verdict: Verdict

    def answers(self, listing: Listing, version: Any, record: tuple[bool, ServerPins | None]) -> bool:
        mine, verdict = self.listing, self.verdict
        current, now = record
        return (
            mine.tools is listing.tools
            and mine.prompts is listing.prompts
            and (mine.context is listing.context or not verdict.scanned)
            and (verdict.version == version or (current and now is not None and now is verdict.record))
        )


class _ScanNeeded(Exception):
    """``answer`` came to a definition that needs the scan: the worker's to decide."""


def _no_scan(definition: Definition, kind: Kind) -> tuple[Finding, ...]:
    raise _ScanNeeded


def _unguarded(listing: Listing) -> Decision:
    return Decision(tuple(listing.tools), tuple(listing.prompts), (), (), None)


def _stamps(decision: Decision) -> dict[tuple[Kind, str], str]:
    """What ``decision`` served: each definition's fingerprint by kind and name."""
    stamps: dict[tuple[Kind, str], str] = {}
    listed: list[tuple[Kind, types.Tool | types.Prompt]] = [("tool", t) for t in decision.tools]
    listed.extend(("prompt", p) for p in decision.prompts)
    for kind, item in listed:
        definition = definition_of(item)
        stamps[(kind, str(definition.get("name", "")))] = fingerprint(definition)
    return stamps


class Guard:
    """Trust for one config: its pins, its policy, the scan, and what each server has held."""

    def __init__(
        self,
        config_path: Path,
        settings: Any,
        *,
        store: PinStore | None = None,
        scanner: Scanner | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config_path = config_path
        self.policy = Policy.of(settings)
        self.store = store or PinStore()
        self._scanner = scanner
        self._clock = clock
        self._reviewed: dict[str, _Reviewed] = {}
        self._held: dict[str, dict[tuple[Kind, str], Held]] = {}
        self._flagged: dict[str, tuple[Flagged, ...]] = {}
        self._told_unusable = False
        self._polled: Any = self.store.version()
        self._definitions: dict[str, tuple[Sequence[types.Tool], Sequence[types.Prompt], list[Definition]]] = {}

    @property
    def active(self) -> bool:
        """Anything to do: ``pin`` and ``scan`` are not both ``"off"``."""
        return self.policy.pin != "off" or self.policy.scan != "off"

    @property
    def scanner(self) -> Scanner:
        if self._scanner is None:
            self._scanner = Scanner.default()
        return self._scanner

    def context(self, listings: Mapping[str, tuple[Sequence[types.Tool], Sequence[types.Prompt]]]) -> ScanContext:
        """The scan's context from every server's listing (the other servers' names and tools).
        Each listing's definitions are made once (kept while its tools and prompts are the same
        objects): servers coming up one by one made every listing's definitions again at each."""
        made: dict[str, tuple[Sequence[types.Tool], Sequence[types.Prompt], list[Definition]]] = {}
        for server, (tools, prompts) in listings.items():
            known = self._definitions.get(server)
            if known is not None and known[0] is tools and known[1] is prompts:
                made[server] = known
            else:
                made[server] = (tools, prompts, [definition_of(item) for item in (*tools, *prompts)])
        self._definitions = made
        return ScanContext.of({server: definitions for server, (_, _, definitions) in made.items()})

    def review(
        self,
        server: str,
        tools: Sequence[types.Tool],
        prompts: Sequence[types.Prompt] = (),
        context: ScanContext | None = None,
        *,
        launch: str = "",
    ) -> Decision:
        """What to serve of ``server``'s fresh listing (see ``trust.decide``), its record updated:
        ``answer``, else ``decide_all`` and ``settle``, in the caller's thread."""
        listing = Listing(tools, prompts, context, launch)
        answered = self.answer(server, listing)
        if answered is not None:
            return answered
        verdict = self.decide_all({server: listing})[server]
        self.settle(server, listing, verdict)
        return verdict.decision

    def answer(self, server: str, listing: Listing) -> Decision | None:
        """The decision on ``listing`` when it takes no scan, no read of the file and no write
        (remembered, or every definition approved and unchanged); else None: ``decide_all``'s.
        For the event loop: a ``stat`` of the file at most."""
        if not self.active:
            return _unguarded(listing)
        version = self.store.version()
        known = self.store.last_record(entry_key(self.config_path, server))
        cached = self._reviewed.get(server)
        if cached is not None and cached.answers(listing, version, known):
            return cached.verdict.decision
        current, record = known
        if not current:
            return None
        try:
            decision = self._decided(server, listing, record, _no_scan)
        except _ScanNeeded:
            return None
        if decision.record is not None and not decision.record.same_pins(record):
            return None
        self.settle(server, listing, Verdict(decision, version, record, scanned=False))
        return decision

    def unreviewed(self, server: str, listing: Listing) -> Decision:
        """What to serve of ``listing`` while its review is under way: what its record (as last
        known here) approved, and what the last decision served, each unchanged; nothing new or
        changed before its verdict. (A definition served a moment ago stays while it is reviewed
        again in another context: no client sees it leave and come back.)"""
        _, record = self.store.last_record(entry_key(self.config_path, server))
        last = self._reviewed.get(server)
        before = last.verdict.decision if last is not None else None
        if record is None and before is None:
            return Decision((), (), (), (), None)
        served_before = {id(item) for item in (*before.tools, *before.prompts)} if before else set[int]()
        stamps_before: dict[tuple[Kind, str], str] | None = None

        def unchanged(kind: Kind, item: types.Tool | types.Prompt) -> bool:
            nonlocal stamps_before
            if id(item) in served_before:  # the very object served, kept alive by ``last``
                return True
            definition = definition_of(item)
            name, stamp = str(definition.get("name", "")), fingerprint(definition)
            pin = record.approved[kind].get(name) if record is not None else None
            if pin is not None and pin.fingerprint == stamp:
                return True
            if before is None:
                return False
            if stamps_before is None:
                stamps_before = _stamps(before)
            return stamps_before.get((kind, name)) == stamp

        tools = tuple(t for t in listing.tools if unchanged("tool", t))
        prompts = tuple(p for p in listing.prompts if unchanged("prompt", p))
        return Decision(tools, prompts, (), (), None)

    def decide_all(self, listings: Mapping[str, Listing]) -> dict[str, Verdict]:
        """Each listing decided, and the records they change written under one lock with one
        write. Runs in a worker thread: it touches the store and the scanner, nothing the event
        loop reads of the guard."""
        if not self.active:
            return {server: Verdict(_unguarded(listing), None, None, False) for server, listing in listings.items()}
        scans = _Scans(self)
        keys = {server: entry_key(self.config_path, server) for server in listings}
        decided: dict[str, Decision] = {}
        try:
            before = {server: self.store.record(key) for server, key in keys.items()}
            for server, listing in listings.items():
                decided[server] = self._decided(server, listing, before[server], scans.of(server, listing))
            changes: dict[str, Change] = {}
            for server, decision in decided.items():
                if decision.record is not None and not decision.record.same_pins(before[server]):
                    changes[keys[server]] = self._change(server, listings[server], before[server], decided, scans)
            if changes:
                try:
                    self.store.update_many(changes)
                except PinsFull:
                    self._one_by_one(listings, keys, changes, decided, scans)
        except (PinsUnreadable, TimeoutError, OSError) as exc:
            if not self._told_unusable:
                logger.error("pins are not kept: %s; serving as with patchbay.pin off (the scan still holds)", exc)
                self._told_unusable = True
            off = replace(self.policy, pin="off")
            for server, listing in listings.items():
                decided[server] = decide(
                    None,
                    listing.tools,
                    listing.prompts,
                    policy=off,
                    now=self._clock(),
                    scan=scans.of(server, listing),
                    server=server,
                )
        version = self.store.version()
        return {
            server: Verdict(decision, version, self.store.last_record(keys[server])[1], server in scans.used)
            for server, decision in decided.items()
        }

    def settle(self, server: str, listing: Listing, verdict: Verdict) -> None:
        """``verdict`` on ``listing`` made the one this guard serves and remembers (the event
        loop's, after ``decide_all``); what happened logged once."""
        decision = verdict.decision
        for event in decision.events:
            log = logger.warning if event.level == "warning" else logger.info
            log("server '%s': %s", server, event.text)
        self._reviewed[server] = _Reviewed(listing, verdict)
        self._held[server] = {(held.kind, held.name): held for held in decision.held}
        self._flagged[server] = decision.flagged

    def _decided(self, server: str, listing: Listing, record: ServerPins | None, scan: Scan) -> Decision:
        decision = decide(
            record, listing.tools, listing.prompts, policy=self.policy, now=self._clock(), scan=scan, server=server
        )
        if decision.record is None:
            return decision
        return replace(decision, record=replace(decision.record, config=str(self.config_path), launch=listing.launch))

    def _change(
        self,
        server: str,
        listing: Listing,
        before: ServerPins | None,
        decided: dict[str, Decision],
        scans: _Scans,
    ) -> Change:
        """The record's change under the lock: the decision made already while the file holds the
        same record, else decided again on what it holds now (another process wrote it since)."""

        def change(record: ServerPins | None) -> ServerPins | None:
            if record is not before:
                decided[server] = self._decided(server, listing, record, scans.of(server, listing))
            return decided[server].record

        return change

    def _one_by_one(
        self,
        listings: Mapping[str, Listing],
        keys: Mapping[str, str],
        changes: Mapping[str, Change],
        decided: dict[str, Decision],
        scans: _Scans,
    ) -> None:
        """The records did not all fit in the file: each written alone, and a server whose record
        has no room has its changed and new definitions held (``PinsFull``)."""
        for server, key in keys.items():
            if key not in changes:
                continue
            try:
                self.store.update(key, changes[key])
            except PinsFull as exc:
                logger.error("server '%s': %s; its changed and new definitions are held", server, exc)
                listing = listings[server]
                decided[server] = decide(
                    self._kept(key),
                    listing.tools,
                    listing.prompts,
                    policy=self.policy,
                    now=self._clock(),
                    scan=scans.of(server, listing),
                    hold_unpinned=True,
                )

    def _kept(self, key: str) -> ServerPins | None:
        try:
            return self.store.record(key)
        except (PinsUnreadable, OSError):
            return None

    def forget(self, server: str) -> None:
        """A server stopped or removed: nothing of it is held any more (its pins stay on disk)."""
        self._reviewed.pop(server, None)
        self._held.pop(server, None)
        self._flagged.pop(server, None)

    def reviewed(self) -> set[str]:
        """The servers this guard remembers a review of."""
        return set(self._reviewed) | set(self._held)

    def held(self, server: str) -> list[Held]:
        return list(self._held.get(server, {}).values())

    def held_call(self, server: str, name: str, kind: Kind = "tool") -> PatchbayError | None:
        """The answer to a call (or a prompts/get) of a held definition: ``TOOL_CHANGED``; else None."""
        held = self._held.get(server, {}).get((kind, name))
        return None if held is None else tool_changed(server, name, held.reason, kind, held.fingerprint)

    def find_held(self, called: str, separator: str, kind: Kind = "tool") -> tuple[str, Held] | None:
        """The held definition a name the catalog does not know stands for: ``server{separator}name``
        or a bare name only one server holds."""
        matches: list[tuple[str, Held]] = []
        for server, held in self._held.items():
            for (held_kind, name), item in held.items():
                if held_kind != kind:
                    continue
                if called == f"{server}{separator}{name}":
                    return server, item
                if called == name:
                    matches.append((server, item))
        return matches[0] if len(matches) == 1 else None

    def changed(self) -> bool:
        """The pins file changed since it was last read here (``trust`` approved something, or
        another replica pinned): review every server's last listing again. True once per change
        of the file (a poll that finds it changed again says so again)."""
        version = self.store.version()
        if version == self._polled:
            return False
        self._polled = version
        return self.store.changed()

    def holding(self) -> dict[str, list[Held]]:
        """What each server holds now (servers holding nothing left out)."""
        return {server: list(held.values()) for server, held in self._held.items() if held}

    def flagged(self) -> dict[str, list[Flagged]]:
        """What each server serves although the scan flagged it (``scan: "warn"``), with the
        findings (servers serving none left out)."""
        return {server: list(items) for server, items in self._flagged.items() if items}


class _Scans:
    """The scan of one ``decide_all``, each definition scanned once (a decision made again under
    the lock scans nothing again)."""

    def __init__(self, guard: Guard) -> None:
        self._guard = guard
        self._found: dict[tuple[str, Kind, str], tuple[Finding, ...]] = {}
        self.used: set[str] = set()
        """The servers some definition of which was scanned."""

    def of(self, server: str, listing: Listing) -> Callable[[Definition, Kind], tuple[Finding, ...]]:
        def scan(definition: Definition, kind: Kind) -> tuple[Finding, ...]:
            self.used.add(server)
            key = (server, kind, fingerprint(definition))
            found = self._found.get(key)
            if found is None:
                found = self._guard.scanner.scan(definition, kind, server=server, context=listing.context)
                self._found[key] = found
            return found

        return scan
