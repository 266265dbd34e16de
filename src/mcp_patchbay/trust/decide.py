"""What to serve of a server's fresh listing, given its pins: pure, values in and out.

    decision = decide(record, tools, prompts, policy=Policy(...), now=time.time(), scan=...)
    decision.tools, decision.prompts     # what to serve (never a stored definition: the listing's own)
    decision.held                        # what is held back, each with why (changed, new, flagged)
    decision.flagged                     # what is served although the scan flagged it (scan: "warn")
    decision.record                      # the server's pins after this listing (store it when it differs)
    decision.events                      # what happened that a person should read once in the log

The rules, per tool (prompts alike), ``patchbay.pin`` / ``new_tools`` / ``scan`` as ``Policy``:

- its fingerprint is the approved one: served (scanned when it was approved or first seen);
- first sight of the server (no approved definition yet): pinned and served, unless the scan
  flags it and ``scan`` is ``"hold"``: then held until trusted;
- new on a pinned server: ``new_tools: "allow"`` scans it and pins it as at first sight;
  ``"hold"`` holds it until trusted;
- changed: ``pin: "hold"`` holds it (the old definition is never served in its place);
  ``"warn"`` serves the new one, pins it and logs the diff once (unless the scan holds it);
  ``"off"`` serves it (unless the scan holds it) and pins nothing;
- gone from the listing: nothing is held; its approved definition stays, so the same one
  coming back is served and another is a change.

A held definition is kept as pending with its findings and when it was first seen (kept while
the server lists the same one), so ``mcp-patchbay trust`` can show the diff and approve exactly
what was held: approving a fingerprint the server no longer lists approves nothing it serves.

A definition served although the scan flagged it (``scan: "warn"``) keeps its findings beside its
pin (``Pin.findings``; under ``pin: "off"``, beside its unheld pending record), in the pins file:
``check``, ``trust --list``, the status and the page show them (``Decision.flagged``) for as long
as that definition is served, across restarts, without scanning it again. A person's approval
(``approve``) keeps no findings: the person read them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, cast

import mcp_types as types

from mcp_patchbay.trust.fingerprint import Definition, Kind, definition_of, fingerprint
from mcp_patchbay.trust.scan import Finding
from mcp_patchbay.trust.wording import printable

__all__ = [
    "Decision",
    "Event",
    "Flagged",
    "Held",
    "Pending",
    "Pin",
    "Policy",
    "Reason",
    "Scan",
    "ServerPins",
    "approve",
    "decide",
    "flagging",
]

Reason = Literal["changed", "new", "flagged"]
_KINDS: tuple[Kind, ...] = ("tool", "prompt")
Mode = Literal["hold", "warn", "off"]
Scan = Callable[[Definition, Kind], Sequence[Finding]]
"""The scan of one definition in its catalog's context (``Scanner.scan`` with ``server`` and ``context`` bound)."""


@dataclass(frozen=True, slots=True)
class Policy:
    """The three settings, as ``Settings`` has them (``Policy.of(settings)``)."""

    pin: Mode = "hold"
    new_tools: Literal["hold", "allow"] = "allow"
    scan: Mode = "hold"

    @classmethod
    def of(cls, settings: Any) -> Policy:
        return cls(pin=settings.pin, new_tools=settings.new_tools, scan=settings.scan)


@dataclass(frozen=True, slots=True)
class Pin:
    """An approved definition, kept whole to show what changed."""

    definition: Definition
    fingerprint: str
    approved_at: float
    how: str
    """``first-sight``, ``new`` (allowed by ``new_tools``), ``warned`` (``pin: "warn"``), ``trusted``."""
    findings: tuple[Finding, ...] = ()
    """What the scan found that would have held it, when it was pinned served (``scan: "warn"``)."""

    def as_json(self) -> dict[str, Any]:
        values: dict[str, Any] = {"definition": self.definition, "fingerprint": self.fingerprint}
        values |= {"at": self.approved_at, "how": self.how}
        if self.findings:
            values["findings"] = [finding.as_json() for finding in self.findings]
        return values

    @classmethod
    def from_json(cls, values: Mapping[str, Any]) -> Pin:
        return cls(
            cast("Definition", values.get("definition") or {}),
            str(values["fingerprint"]),
            float(values.get("at", 0)),
            str(values.get("how", "")),
            tuple(Finding.from_json(f) for f in cast("list[dict[str, Any]]", values.get("findings") or [])),
        )


@dataclass(frozen=True, slots=True)
class Pending:
    """A definition seen and not approved: held, or served under ``warn`` and recorded."""

    definition: Definition
    fingerprint: str
    first_seen: float
    reason: Reason
    findings: tuple[Finding, ...] = ()
    held: bool = True

    def as_json(self) -> dict[str, Any]:
        return {
            "definition": self.definition,
            "fingerprint": self.fingerprint,
            "first_seen": self.first_seen,
            "reason": self.reason,
            "findings": [finding.as_json() for finding in self.findings],
            "held": self.held,
        }

    @classmethod
    def from_json(cls, values: Mapping[str, Any]) -> Pending:
        reason = values.get("reason")
        return cls(
            cast("Definition", values.get("definition") or {}),
            str(values["fingerprint"]),
            float(values.get("first_seen", 0)),
            reason if reason in ("changed", "new", "flagged") else "changed",
            tuple(Finding.from_json(f) for f in cast("list[dict[str, Any]]", values.get("findings") or [])),
            bool(values.get("held", True)),
        )


def _empty_pins() -> dict[Kind, dict[str, Pin]]:
    return {"tool": {}, "prompt": {}}


def _empty_pending() -> dict[Kind, dict[str, Pending]]:
    return {"tool": {}, "prompt": {}}


@dataclass(frozen=True)
class ServerPins:
    """One server entry's pins: approved definitions and pending ones, tools and prompts apart."""

    server: str
    config: str = ""
    """The config file the entry is in, for a person (the store's key is a hash of it and ``server``)."""
    launch: str = ""
    """What launches it (the command, or the URL's scheme, host and port), for a person."""
    approved: Mapping[Kind, Mapping[str, Pin]] = field(default_factory=_empty_pins)
    pending: Mapping[Kind, Mapping[str, Pending]] = field(default_factory=_empty_pending)
    seen_at: float = 0.0

    def held(self) -> list[tuple[Kind, str, Pending]]:
        return [(kind, name, p) for kind in ("tool", "prompt") for name, p in self.pending[kind].items() if p.held]

    def served_flagged(self) -> list[Flagged]:
        """What this entry serves although the scan flagged it, by kind then name: an approved
        definition kept with its findings and no newer one pending, or one recorded unheld
        (``pin: "off"``) whose findings would hold it (``flagging``)."""
        served: list[Flagged] = []
        for kind in _KINDS:
            found = [
                Flagged(kind, name, pin.findings, pin.fingerprint, pin.approved_at)
                for name, pin in self.approved[kind].items()
                if pin.findings and name not in self.pending[kind]
            ]
            found += [
                Flagged(kind, name, pending.findings, pending.fingerprint, pending.first_seen)
                for name, pending in self.pending[kind].items()
                if not pending.held and flagging(pending.findings)
            ]
            served += sorted(found, key=lambda item: item.name)
        return served

    def same_pins(self, other: ServerPins | None) -> bool:
        """The same approvals and pending definitions (``seen_at`` aside): nothing to write."""
        return other is not None and (self.approved, self.pending, self.launch) == (
            other.approved,
            other.pending,
            other.launch,
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "config": self.config,
            "launch": self.launch,
            "seen_at": self.seen_at,
            **{
                f"{kind}s": {name: pin.as_json() for name, pin in sorted(self.approved[kind].items())}
                for kind in ("tool", "prompt")
            },
            **{
                f"pending_{kind}s": {name: p.as_json() for name, p in sorted(self.pending[kind].items())}
                for kind in ("tool", "prompt")
            },
        }

    @classmethod
    def from_json(cls, values: Mapping[str, Any]) -> ServerPins:
        approved: dict[Kind, Mapping[str, Pin]] = {}
        pending: dict[Kind, Mapping[str, Pending]] = {}
        for kind in _KINDS:
            pins = cast("dict[str, Any]", values.get(f"{kind}s") or {})
            approved[kind] = {name: Pin.from_json(v) for name, v in pins.items()}
            waiting = cast("dict[str, Any]", values.get(f"pending_{kind}s") or {})
            pending[kind] = {name: Pending.from_json(v) for name, v in waiting.items()}
        return cls(
            str(values.get("server", "")),
            str(values.get("config", "")),
            str(values.get("launch", "")),
            approved,
            pending,
            float(values.get("seen_at", 0)),
        )


@dataclass(frozen=True, slots=True)
class Held:
    """A definition held back, and why: what the call path answers and ``trust --list`` shows."""

    kind: Kind
    name: str
    reason: Reason
    findings: tuple[Finding, ...]
    first_seen: float
    definition: Definition
    approved: Definition | None
    """The approved definition it differs from (``None`` when new or first seen)."""
    fingerprint: str = ""
    """The held definition's: the command that approves it names it (``wording.approve_command``)."""


@dataclass(frozen=True, slots=True)
class Flagged:
    """A definition served although the scan flagged it (``patchbay.scan: "warn"``): what the
    scan found, for ``check``, ``trust --list``, the status and the page."""

    kind: Kind
    name: str
    findings: tuple[Finding, ...]
    fingerprint: str
    since: float
    """When it was first served with these findings."""


def flagging(findings: Sequence[Finding]) -> tuple[Finding, ...]:
    """``findings`` worth keeping beside a served definition: all of them when one would hold it
    (the notes with them), else none (a note alone, a long description, flags nothing)."""
    return tuple(findings) if any(f.holds for f in findings) else ()


@dataclass(frozen=True, slots=True)
class Event:
    """Something a person should read once in the log (logged by the caller, not here)."""

    level: Literal["info", "warning"]
    kind: Kind
    name: str
    text: str


@dataclass(frozen=True)
class Decision:
    tools: tuple[types.Tool, ...]
    prompts: tuple[types.Prompt, ...]
    held: tuple[Held, ...]
    events: tuple[Event, ...]
    record: ServerPins | None
    """The server's pins after this listing; ``None`` while nothing is pinned or pending."""
    flagged: tuple[Flagged, ...] = ()
    """What is served although the scan flagged it, with its findings."""


# Long on purpose: what to serve of a listing: each case of pin, change and scan in one table-like flow.
def decide(  # noqa: PLR0912, PLR0915
    record: ServerPins | None,
    tools: Sequence[types.Tool],
    prompts: Sequence[types.Prompt] = (),
    *,
    policy: Policy,
    now: float,
    scan: Scan | None = None,
    server: str = "",
    hold_unpinned: bool = False,
) -> Decision:
    """What to serve of one server's listing, and its pins after it (see the module's rules).
    ``hold_unpinned``: hold everything not approved, first sight or not (the pins file has no
    room for this server: nothing more of it can be pinned)."""
    base = record or ServerPins(server)
    first_sight = not hold_unpinned and not any(base.approved[kind] for kind in ("tool", "prompt"))
    if hold_unpinned:
        policy = replace(policy, pin="hold", new_tools="hold")
    approved = {kind: dict(base.approved[kind]) for kind in _KINDS}
    pending: dict[Kind, dict[str, Pending]] = {"tool": {}, "prompt": {}}
    held: list[Held] = []
    events: list[Event] = []
    served: dict[Kind, list[Any]] = {"tool": [], "prompt": []}
    shown: list[Flagged] = []
    listed: list[tuple[Kind, types.Tool | types.Prompt]] = [("tool", t) for t in tools]
    listed.extend(("prompt", p) for p in prompts)
    for kind, item in listed:
        definition = definition_of(item)
        name = str(definition.get("name", ""))
        stamp = fingerprint(definition)
        pin = approved[kind].get(name)
        if pin is not None and pin.fingerprint == stamp:
            served[kind].append(item)
            if pin.findings:
                shown.append(Flagged(kind, name, pin.findings, stamp, pin.approved_at))
            continue
        findings = tuple(scan(definition, kind)) if scan is not None and policy.scan != "off" else ()
        flagged = policy.scan == "hold" and any(f.holds for f in findings)
        before = base.pending[kind].get(name)
        told = before is not None and before.fingerprint == stamp
        first_seen = before.first_seen if told and before is not None else now
        reason: Reason
        if pin is None:
            reason = "new"
            hold = flagged or (not first_sight and policy.pin != "off" and policy.new_tools == "hold")
            if flagged:
                reason = "flagged"
        else:
            reason = "changed"
            hold = flagged or policy.pin == "hold"
        if hold:
            pending[kind][name] = Pending(definition, stamp, first_seen, reason, findings)
            before_def = pin.definition if pin else None
            held.append(Held(kind, name, reason, findings, first_seen, definition, before_def, stamp))
            if not told:
                events.append(Event("warning", kind, name, _held_text(kind, name, reason, findings)))
            continue
        served[kind].append(item)
        kept = flagging(findings)
        if kept:
            shown.append(Flagged(kind, name, kept, stamp, first_seen if policy.pin == "off" else now))
        if policy.pin == "off":
            if findings:  # recorded, so that it is logged once, and shown by trust --list
                pending[kind][name] = Pending(definition, stamp, first_seen, reason, findings, held=False)
                if not told:
                    events.append(Event("warning", kind, name, _served_text(kind, name, reason, findings)))
            continue
        how = "first-sight" if first_sight else ("new" if pin is None else "warned")
        approved[kind][name] = Pin(definition, stamp, now, how, kept)
        if pin is not None or findings:
            # a note that holds nothing (a long description) is not a warning at a healthy start
            level = "warning" if pin is not None or any(f.holds for f in findings) else "info"
            events.append(Event(level, kind, name, _served_text(kind, name, reason, findings)))
    result = replace(base, approved=approved, pending=pending, seen_at=now)
    if record is None and not any(approved[k] or pending[k] for k in ("tool", "prompt")):
        result_record = None
    else:
        result_record = result
    if first_sight and any(approved[k] for k in ("tool", "prompt")):
        count = sum(len(approved[k]) for k in ("tool", "prompt"))
        events.insert(0, Event("info", "tool", "", f"pinned {count} definitions on first sight"))
    decision = Decision(tuple(served["tool"]), tuple(served["prompt"]), tuple(held), tuple(events), result_record)
    return replace(decision, flagged=tuple(shown)) if shown else decision


def approve(
    record: ServerPins, kind: Kind | None = None, name: str | None = None, *, now: float, fingerprint: str = ""
) -> tuple[ServerPins, list[tuple[Kind, str]]]:
    """Pending definitions made approved (all of them, or those of ``kind``/``name``; with
    ``fingerprint``, only one whose fingerprint starts with it): the new record and what was
    approved. The approved definition is the one that was held, exactly."""
    approved = {k: dict(record.approved[k]) for k in _KINDS}
    pending = {k: dict(record.pending[k]) for k in _KINDS}
    done: list[tuple[Kind, str]] = []
    for k in _KINDS:
        if kind is not None and k != kind:
            continue
        for item_name, waiting in list(pending[k].items()):
            if name is not None and item_name != name:
                continue
            if fingerprint and not waiting.fingerprint.startswith(fingerprint.lower()):
                continue
            approved[k][item_name] = Pin(waiting.definition, waiting.fingerprint, now, "trusted")
            del pending[k][item_name]
            done.append((k, item_name))
    return replace(record, approved=approved, pending=pending), done


def _findings_text(findings: Sequence[Finding]) -> str:
    holding = [f for f in findings if f.holds] or list(findings)
    return "; ".join(printable(f.sentence(), 300) for f in holding[:3])


def _held_text(kind: Kind, name: str, reason: Reason, findings: Sequence[Finding]) -> str:
    why = {
        "changed": "its definition changed since it was approved",
        "new": "it is new on a server whose tools are pinned (patchbay.new_tools is hold)",
        "flagged": "the scan flagged what it tells the model",
    }[reason]
    said = f" ({_findings_text(findings)})" if findings else ""
    return f"{kind} '{printable(name)}' is held: {why}{said}; approve it with mcp-patchbay trust"


def _served_text(kind: Kind, name: str, reason: Reason, findings: Sequence[Finding]) -> str:
    what = "changed and is served (patchbay.pin is warn)" if reason == "changed" else "is served"
    said = f"; the scan found: {_findings_text(findings)}" if findings else ""
    return f"{kind} '{printable(name)}' {what}{said}"
