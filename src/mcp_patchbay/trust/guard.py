"""``Guard``: what the serving path asks of trust (the wiring round calls these; I/O: the pins file).

    guard = Guard(config.path, config.settings)                # one per Supervisor
    context = guard.context({name: (tools, prompts), ...})     # every server's fresh listing, once per rebuild
    decision = guard.review(entry, listing.tools, listing.prompts, context)
    Source(entry.name, tools=decision.tools, prompts=decision.prompts, ...)   # held ones are not listed
    guard.held_call(server, tool)   # a PatchbayError (TOOL_CHANGED) for a held one, else None
    guard.find_held(called, "__")   # a name the catalog does not know, that a held tool would have had
    if guard.changed(): rebuild    # poll (a stat): ``trust`` in another process approved; list_changed follows

``review`` decides from the server's record as last read (read again only when the file
changed: a ``stat``); only when the decision changes the record (a first sight, a change held,
a new tool pinned) is it a read-modify-write under the pins file's lock, decided again on what
the file holds then. It logs what happened once (pinned on first sight, held and why, served
with a warning). A listing the guard has already reviewed (the same tool objects, the same
context, the file unchanged since) is answered from memory, so catalog rebuilds for other
reasons cost a ``stat``. When the pins file cannot be used (unreadable, its lock not had in
``locking.WAIT``), the error is logged once and the listing is decided in memory as under
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

from mcp_patchbay.errors import PatchbayError, tool_changed
from mcp_patchbay.trust.decide import Decision, Held, Policy, ServerPins, decide
from mcp_patchbay.trust.fingerprint import Definition, Kind, definition_of
from mcp_patchbay.trust.scan import ScanContext, Scanner
from mcp_patchbay.trust.store import PinsFull, PinStore, PinsUnreadable, entry_key

logger = logging.getLogger("mcp_patchbay.trust")

__all__ = ["Guard", "launch_of"]


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


@dataclass
class _Reviewed:
    tools: Sequence[types.Tool]
    prompts: Sequence[types.Prompt]
    context: ScanContext | None
    """The listing and the context reviewed (kept, so they are compared by identity, never by a
    reused ``id``)."""
    version: Any
    """The pins file's version when reviewed."""
    decision: Decision

    def answers(
        self, tools: Sequence[types.Tool], prompts: Sequence[types.Prompt], context: ScanContext | None, version: Any
    ) -> bool:
        return self.tools is tools and self.prompts is prompts and self.context is context and self.version == version


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
        self._told_unusable = False
        self._polled: Any = self.store.version()

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
        """The scan's context from every server's listing (the other servers' names and tools)."""
        definitions: dict[str, list[Definition]] = {
            server: [definition_of(item) for item in (*tools, *prompts)]
            for server, (tools, prompts) in listings.items()
        }
        return ScanContext.of(definitions)

    def review(
        self,
        server: str,
        tools: Sequence[types.Tool],
        prompts: Sequence[types.Prompt] = (),
        context: ScanContext | None = None,
        *,
        launch: str = "",
    ) -> Decision:
        """What to serve of ``server``'s fresh listing (see ``trust.decide``), its record updated."""
        if not self.active:
            return Decision(tuple(tools), tuple(prompts), (), (), None)
        version = self.store.version()
        cached = self._reviewed.get(server)
        if cached is not None and cached.answers(tools, prompts, context, version):
            return cached.decision
        now = self._clock()
        key = entry_key(self.config_path, server)

        def scan(definition: Definition, kind: Kind) -> Any:
            return self.scanner.scan(definition, kind, server=server, context=context)

        def decided_on(record: ServerPins | None) -> Decision:
            decision = decide(record, tools, prompts, policy=self.policy, now=now, scan=scan, server=server)
            if decision.record is None:
                return decision
            return replace(decision, record=replace(decision.record, config=str(self.config_path), launch=launch))

        try:
            before = self.store.record(key)
            decision = decided_on(before)
            if decision.record is not None and not decision.record.same_pins(before):
                decided: list[Decision] = []

                def change(record: ServerPins | None) -> ServerPins | None:  # the file as it is under the lock
                    decided[:] = [decided_on(record)]
                    return decided[0].record

                self.store.update(key, change)
                decision = decided[0]
        except PinsFull as exc:
            logger.error("server '%s': %s; its changed and new definitions are held", server, exc)
            kept = self._kept(key)
            decision = decide(kept, tools, prompts, policy=self.policy, now=now, scan=scan, hold_unpinned=True)
        except (PinsUnreadable, TimeoutError, OSError) as exc:
            if not self._told_unusable:
                logger.error("pins are not kept: %s; serving as with patchbay.pin off (the scan still holds)", exc)
                self._told_unusable = True
            off = replace(self.policy, pin="off")
            decision = decide(None, tools, prompts, policy=off, now=now, scan=scan, server=server)
        for event in decision.events:
            log = logger.warning if event.level == "warning" else logger.info
            log("server '%s': %s", server, event.text)
        self._reviewed[server] = _Reviewed(tools, prompts, context, self.store.version(), decision)
        self._held[server] = {(held.kind, held.name): held for held in decision.held}
        return decision

    def _kept(self, key: str) -> ServerPins | None:
        try:
            return self.store.record(key)
        except (PinsUnreadable, OSError):
            return None

    def forget(self, server: str) -> None:
        """A server stopped or removed: nothing of it is held any more (its pins stay on disk)."""
        self._reviewed.pop(server, None)
        self._held.pop(server, None)

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
