"""Held definitions as the page shows them, and approving exactly the one shown.

``held_items`` reads the pins file (``trust.store``) for the servers of each config the page
knows, as ``mcp-patchbay trust --list`` does: each held tool or prompt with the diff against the
approved definition (``trust.diff``), the scan's sentences and its full fingerprint.
``approve_exactly`` approves one held definition only while it is still the fingerprint the
person read (``trust.decide.approve`` under the store's lock); a server that changed it again
since leaves it held, and says so. The serving proxies see the file change within their
``patchbay.trust_poll`` and list what was approved.

``flagged_items``: what the proxies serve although the scan flagged it (``patchbay.scan:
"warn"``), from the same file: each definition's findings, one sentence each saying what and where.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from mcp_patchbay.trust.store import PinStore
__all__ = ["Approval", "FlaggedItem", "HeldItem", "approve_exactly", "flagged_items", "held_items"]

WHY = {
    "changed": "its definition changed since it was approved",
    "new": 'it is new on a server whose definitions are pinned (patchbay.new_tools is "hold")',
    "flagged": "the scan found text aimed at the model in it",
}


@dataclass(frozen=True)
class HeldItem:
    config: Path
    server: str
    kind: str
    name: str
    why: str
    first_seen: float
    diff: str
    findings: tuple[str, ...]
    fingerprint: str
    command: str


@dataclass(frozen=True)
class FlaggedItem:
    config: Path
    server: str
    kind: str
    name: str
    since: float
    findings: tuple[str, ...]
    fingerprint: str


@dataclass(frozen=True)
class Approval:
    outcome: Literal["approved", "moved", "gone"]
    now_fingerprint: str | None = None


def held_items(configs: Iterable[tuple[Path, Iterable[str]]], store: PinStore | None = None) -> list[HeldItem]:
    """What is held for the servers of each ``(config path, server names)``; raises
    ``trust.store.PinsUnreadable`` when the pins file is not pins."""
    from mcp_patchbay.trust.diff import definition_diff
    from mcp_patchbay.trust.store import PinStore, entry_key
    from mcp_patchbay.trust.wording import approve_command

    pins = (store or PinStore()).load()
    items: list[HeldItem] = []
    for path, servers in configs:
        for server in servers:
            record = pins.get(entry_key(path, server))
            if record is None:
                continue
            for kind, name, pending in sorted(record.held(), key=lambda held: (held[0], held[1])):
                approved = record.approved[kind].get(name)
                items.append(
                    HeldItem(
                        config=path,
                        server=server,
                        kind=kind,
                        name=name,
                        why=WHY.get(pending.reason, pending.reason),
                        first_seen=pending.first_seen,
                        diff=definition_diff(approved.definition if approved else None, pending.definition),
                        findings=tuple(finding.sentence() for finding in pending.findings),
                        fingerprint=pending.fingerprint,
                        command=approve_command(server, kind, name, pending.fingerprint),
                    )
                )
    return items


def flagged_items(configs: Iterable[tuple[Path, Iterable[str]]], store: PinStore | None = None) -> list[FlaggedItem]:
    """What is served although the scan flagged it, for the servers of each ``(config path,
    server names)``: pinned with findings (``pin`` on), or recorded unheld (``pin: "off"``).
    Raises ``trust.store.PinsUnreadable`` when the pins file is not pins."""
    from mcp_patchbay.trust.store import PinStore, entry_key

    pins = (store or PinStore()).load()
    items: list[FlaggedItem] = []
    for path, servers in configs:
        for server in servers:
            record = pins.get(entry_key(path, server))
            if record is None:
                continue
            for item in record.served_flagged():
                sentences = tuple(finding.sentence() for finding in item.findings)
                items.append(FlaggedItem(path, server, item.kind, item.name, item.since, sentences, item.fingerprint))
    return items


def approve_exactly(
    config: Path, server: str, kind: str, name: str, *, fingerprint: str, store: PinStore | None = None
) -> Approval:
    """Approve ``kind`` ``name`` of ``server`` if the definition held is still ``fingerprint``
    (whole, as the page showed it). Raises ``PinsUnreadable`` or TimeoutError (the lock)."""
    from mcp_patchbay.trust.decide import ServerPins, approve
    from mcp_patchbay.trust.store import PinStore, entry_key

    if kind not in ("tool", "prompt") or len(fingerprint) < 16:
        return Approval("gone")
    outcome: list[Approval] = []

    def change(current: ServerPins | None) -> ServerPins | None:
        pending = current.pending[kind].get(name) if current is not None else None  # pyright: ignore[reportArgumentType]
        if current is None or pending is None or not pending.held:
            outcome.append(Approval("gone"))
            return current
        if pending.fingerprint != fingerprint:
            outcome.append(Approval("moved", pending.fingerprint))
            return current
        outcome.append(Approval("approved"))
        return approve(current, kind, name, now=time.time(), fingerprint=fingerprint)[0]  # pyright: ignore[reportArgumentType]

    (store or PinStore()).update(entry_key(config, server), change)
    return outcome[-1] if outcome else Approval("gone")
