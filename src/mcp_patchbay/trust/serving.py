"""Trust in the serving path: each server's own listing reviewed before the catalog is built.

    trust = ServingTrust(config.path, settings)              # one per Supervisor
    served = trust.review({name: Listed(tools, prompts, entry_filter, launch), ...})   # each rebuild
    Source(name, tools=listing.tools, prompts=served[name].prompts, tool_filter=served[name].tool_filter)
    if trust.waiting: await trust.settle(); rebuild          # a task of the supervisor's
    trust.held_error(called, server=..., permits=...)        # the call path, for a name it cannot run
    if trust.guard.changed(): rebuild                         # the poll: ``trust`` approved something

A rebuild's review runs on the event loop and costs a ``stat`` per server while nothing is new
(``Guard.answer``). A listing that takes a scan or a write (a first sight, a change, a new
tool, the pins file changed by another process) waits: ``settle`` reviews every listing waiting
at once in a worker thread (``Guard.decide_all``: the scans, then one read-modify-write of the
file under its lock for all of them), and the supervisor rebuilds with the verdicts. While a
listing waits, what it served before and what its record approved are served, each unchanged;
a new or changed definition is not, before its verdict.

What the supervisor reviews is the upstream's own listing (a lazy server's kept listing alike),
before the entry's overrides: the user's overrides are not the server's change. A held tool stays
in the catalog's source and is denied by its filter, as a tool the config turns off: never listed,
never found by a search, never run, and a loose rule never runs another tool in its place (the
resolver matches hidden tools too, ``naming``). A call that names it (its exposed name, a name
that would have resolved to it, through ``call_tool``/``call_read``) is then answered with
``TOOL_CHANGED`` (``held_error``). A held prompt is left out of the listing.

I/O through ``guard`` (the pins file), off the event loop: the wait for another process's lock
is bounded by ``locking.WAIT``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio.to_thread
import mcp_types as types

from mcp_patchbay.catalog.naming import build_names
from mcp_patchbay.catalog.resolution import NameEntry, Resolver
from mcp_patchbay.catalog.restriction import Permits
from mcp_patchbay.config import ToolFilter
from mcp_patchbay.errors.tree import PatchbayError
from mcp_patchbay.trust.decide import Flagged, Held
from mcp_patchbay.trust.fingerprint import Kind
from mcp_patchbay.trust.guard import Guard, Listing, Verdict
from mcp_patchbay.trust.scan import ScanContext
from mcp_patchbay.trust.store import MemoryPinStore, PinStore

__all__ = ["Listed", "Served", "ServingTrust", "held_filter"]

_GLOB = re.compile(r"([*?\[])")
_UNMADE = ScanContext()
"""Stands for a context not made yet: never scanned with, and no verdict that took the scan has it."""


@dataclass(frozen=True, slots=True)
class Listed:
    """One server's own listing, as the supervisor has it (live, or kept for a lazy server)."""

    tools: Sequence[types.Tool]
    prompts: Sequence[types.Prompt]
    tool_filter: ToolFilter | None
    """The entry's filter (``tools``), overrides included."""
    launch: str = ""


@dataclass(frozen=True, slots=True)
class Served:
    """What the catalog is built from: the entry's filter with the held tools denied, the prompts served."""

    tool_filter: ToolFilter | None
    prompts: Sequence[types.Prompt]
    held: tuple[Held, ...] = ()


def held_filter(tool_filter: ToolFilter | None, held: Sequence[str]) -> ToolFilter | None:
    """``tool_filter`` with the tools named in ``held`` denied too (each name matched whole)."""
    if not held:
        return tool_filter
    denied = tuple(_GLOB.sub(r"[\1]", name) for name in sorted(held))
    if tool_filter is None:
        return ToolFilter(deny=denied)
    return ToolFilter(
        allow=tool_filter.allow,
        deny=(*tool_filter.deny, *denied),
        always_list=tool_filter.always_list,
        overrides=tool_filter.overrides,
    )


class ServingTrust:
    """The supervisor's trust: its ``Guard``, the scan's context and the held tools' names."""

    def __init__(
        self,
        config_path: Path,
        settings: Any,
        *,
        max_length: int,
        store: PinStore | None = None,
    ) -> None:
        if store is None:
            store = PinStore() if config_path.is_file() else MemoryPinStore()
        self.guard = Guard(config_path, settings, store=store)
        self.separator: str = settings.separator
        self.max_length = max_length
        self._context: tuple[tuple[tuple[str, object, object], ...], ScanContext] | None = None
        """The listings' identities and the scan's context over them (``_UNMADE`` until a scan needs it)."""
        self._sources: dict[str, tuple[Sequence[types.Tool], Sequence[types.Prompt]]] = {}
        """The listings the context is made of."""
        self._filters: dict[str, tuple[ToolFilter | None, tuple[str, ...], ToolFilter | None]] = {}
        self._names: dict[Kind, Resolver] = {}
        self._permitted: dict[str, ToolFilter | None] = {}
        self._waiting: dict[str, Listing] = {}

    def review(self, listings: Mapping[str, Listed]) -> dict[str, Served]:
        """Each server's listing reviewed (``Guard.answer``): what its catalog source serves. A
        listing whose review takes a scan or a write waits for ``settle``, its new and changed
        definitions denied meanwhile. Servers not in ``listings`` (stopped, removed, signing in)
        hold nothing."""
        for server in self.guard.reviewed() - set(listings):
            self.guard.forget(server)
        if not self.guard.active:
            self._names, self._waiting = {}, {}
            return {name: Served(listed.tool_filter, listed.prompts) for name, listed in listings.items()}
        context = self._context_of(listings)
        served: dict[str, Served] = {}
        waiting: dict[str, Listing] = {}
        for name, listed in listings.items():
            listing = Listing(listed.tools, listed.prompts, context, listed.launch)
            decision = self.guard.answer(name, listing)
            if decision is None:
                waiting[name] = listing
                decision = self.guard.unreviewed(name, listing)
            denied: tuple[str, ...] = ()
            if len(decision.tools) != len(listed.tools):  # held, or waiting for its verdict
                denied = tuple(sorted({t.name for t in listed.tools} - {t.name for t in decision.tools}))
            served[name] = Served(self._filter(name, listed.tool_filter, denied), decision.prompts, decision.held)
        self._waiting = waiting
        self._permitted = {name: listed.tool_filter for name, listed in listings.items()}
        self._names = self._held_names()
        return served

    @property
    def waiting(self) -> bool:
        """Listings of the last ``review`` wait for ``settle``."""
        return bool(self._waiting)

    async def settle(self) -> None:
        """Every listing waiting reviewed at once in a worker thread (``Guard.decide_all``: the
        scans, one locked write), the verdicts then made the guard's; rebuild after it, so that the
        catalog serves them."""
        batch = self._waiting
        if not batch or self._context is None:
            return
        key, context = self._context
        sources = self._sources

        def review() -> tuple[ScanContext, dict[str, Listing], dict[str, Verdict]]:
            made = self.guard.context(sources) if context is _UNMADE else context
            listings = {name: replace(listing, context=made) for name, listing in batch.items()}
            return made, listings, self.guard.decide_all(listings)

        made, listings, verdicts = await anyio.to_thread.run_sync(review)
        if self._context[0] is key:  # no listing changed meanwhile: the context made is this one
            self._context = (key, made)
        for name, listing in listings.items():
            self.guard.settle(name, listing, verdicts[name])
        if self._waiting is batch:
            self._waiting = {}

    def holding(self) -> dict[str, list[Held]]:
        """What each server holds now (servers holding nothing left out)."""
        return self.guard.holding()

    def flagged(self) -> dict[str, list[Flagged]]:
        """What each server serves although the scan flagged it (``scan: "warn"``), with its findings."""
        return self.guard.flagged()

    def flagged_sentences(self) -> dict[str, list[tuple[str, str, tuple[str, ...]]]]:
        """``flagged`` as the status keeps it: per server, (kind, name, each finding's sentence)."""
        return {
            server: [(item.kind, item.name, tuple(f.sentence() for f in item.findings)) for item in items]
            for server, items in self.guard.flagged().items()
        }

    def held_error(
        self,
        called: str,
        *,
        server: str | None = None,
        kind: Kind = "tool",
        permits: Permits | None = None,
    ) -> PatchbayError | None:
        """``TOOL_CHANGED`` for a name that stands for a held tool (or prompt), else None: its exact
        exposed name, or (``server`` given: the catalog matched a hidden item of that server) a
        name that resolves to one of that server's held items. ``permits``: what the caller may use."""
        resolver = self._names.get(kind)
        if resolver is None:
            return None
        resolution = resolver.resolve(called)
        entry = resolution.entry
        if entry is None:
            return None
        if not (resolution.kind == "exact" or (resolution.kind == "resolved" and entry.server == server)):
            return None
        if permits is not None and not permits.permits(entry.server, entry.item):
            return None
        return self.guard.held_call(entry.server, entry.item, kind)

    # --- inside -------------------------------------------------------------------------------

    def _context_of(self, listings: Mapping[str, Listed]) -> ScanContext:
        """The scan's context, the same object while no listing changed (the guard answers a
        listing it reviewed in the same context from memory). When one did, ``_UNMADE`` stands for
        it: it is made in the worker thread, by ``settle``, only when a listing needs the scan."""
        key = tuple((name, listed.tools, listed.prompts) for name, listed in listings.items())
        known = self._context
        if (
            known is not None
            and len(known[0]) == len(key)
            and all(_same(a, b) for a, b in zip(known[0], key, strict=True))
        ):
            return known[1]
        self._context = (key, _UNMADE)
        self._sources = {name: (listed.tools, listed.prompts) for name, listed in listings.items()}
        return _UNMADE

    def _filter(self, server: str, tool_filter: ToolFilter | None, held: tuple[str, ...]) -> ToolFilter | None:
        """The entry's filter with ``held`` denied: the same object while neither changed (the
        catalog keeps compiled patterns by filter)."""
        known = self._filters.get(server)
        if known is not None and known[0] is tool_filter and known[1] == held:
            return known[2]
        made = held_filter(tool_filter, held)
        self._filters[server] = (tool_filter, held, made)
        return made

    def _held_names(self) -> dict[Kind, Resolver]:
        """A resolver per kind over the held items (those the entry's filter would serve), under
        the names they would be exposed by: their upstream name and, for a tool an override
        renamed, the override's name too (the name the model knew it by)."""
        resolvers: dict[Kind, Resolver] = {}
        holding = self.guard.holding()
        for kind in ("tool", "prompt"):
            named: dict[tuple[str, str], str] = {}  # (server, name it is exposed by) -> its upstream name
            for server, items in holding.items():
                f = self._permitted.get(server)
                for held in items:
                    if held.kind != kind or (kind == "tool" and f is not None and not f.permits(held.name)):
                        continue
                    named.setdefault((server, held.name), held.name)
                    override = f.overrides.get(held.name) if kind == "tool" and f is not None else None
                    if override is not None and override.name is not None:
                        named.setdefault((server, override.name), held.name)
            if not named:
                continue
            names = build_names(list(named), separator=self.separator, max_length=self.max_length)
            entries = [NameEntry(names[pair], pair[0], item) for pair, item in named.items()]
            resolvers[kind] = Resolver(entries, separator=self.separator)
        return resolvers


def _same(a: tuple[str, object, object], b: tuple[str, object, object]) -> bool:
    return a[0] == b[0] and a[1] is b[1] and a[2] is b[2]
