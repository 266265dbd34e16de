"""What the scan found, for a person: each finding one sentence saying what and where. Pure.

    found = Findings(checks)          # one definition's findings, at most one per pattern or check
    found.check("hidden-characters", "characters", "description", "3 hidden characters")
    finding.sentence()                # "description, at character 12: Its text holds ... ("...")"

``Finding`` is also what ``pins.json`` keeps of a held definition (``as_json``, ``from_json``), and
what ``check``, ``trust`` and the status page show (``sentence``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["EXCERPT", "Check", "Finding", "Findings", "Severity", "clip"]

Severity = Literal["hold", "note"]
EXCERPT = 80
"""The most characters of the matched text a finding quotes."""


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

    def reported(self) -> dict[str, Any]:
        """The finding as ``check --json`` and ``trust --list --json`` report it: its fields and its sentence."""
        return self.as_json() | {"sentence": self.sentence()}

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
class Check:
    """A finding made in code (``patterns.toml``'s ``[check.ID]``): its sentence and severity."""

    explain: str
    severity: Severity


class Findings(dict[str, Finding]):
    """One definition's findings by id, the first place each was found (a later one is dropped)."""

    def __init__(self, checks: Mapping[str, Check]) -> None:
        super().__init__()
        self.checks = checks

    def check(self, check: str, finding: str, where: str, excerpt: str, *, offset: int = -1) -> None:
        """A finding of the code's ``check``, explained by ``patterns.toml``'s ``[check.ID]``."""
        if check in self:
            return
        info = self.checks.get(check) or Check(check.replace("-", " "), "hold")
        self[check] = Finding(check, finding, where, excerpt, info.explain, info.severity, offset)


def clip(text: str) -> str:
    """``text`` as a finding quotes it: spaces collapsed, at most ``EXCERPT`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= EXCERPT else text[: EXCERPT - 1] + "…"
