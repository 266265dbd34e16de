"""The scan's rules as data: ``patterns.toml`` read and compiled into expressions and patterns. Pure.

    rules = Rules.from_toml(text)     # once per process, in the worker thread that scans first

The file's ``[words]`` are lists shared by expressions (``{{name}}``); each ``[[signal]]`` a
named expression that finds nothing on its own; each ``[[pattern]]`` one expression or signals
found together in one window, with what cancels it; each ``[check.ID]`` the sentence of a
finding made in code. What each key means is said at the top of the file.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from mcp_patchbay.trust.findings import Check, Severity
from mcp_patchbay.trust.gates import FLAGS, required, split

__all__ = ["GATES_FILE", "Expression", "Gates", "Pattern", "Rules", "Scope", "Window", "gates_key", "gates_of"]

Scope = Literal["text", "parameter", "switched"]
Window = Literal["sentence", "match"]
_WORDS = re.compile(r"\{\{([a-z_]+)\}\}")


Gates = tuple[tuple[tuple[str, ...], ...], ...]
"""Per branch, sets of strings such that every match of it holds one string of each set."""


@dataclass(frozen=True, slots=True)
class Expression:
    """A named regular expression: a ``[[signal]]`` of the file, or a pattern's own ``match``."""

    id: str
    scope: Scope
    branches: tuple[str, ...]
    """The top-level alternatives, apart (``gates.split``), each compiled the first time a text
    passes its gates (``branch``): a start that scans a few definitions compiles a few of them."""
    gates: Gates = ()
    """Per branch, sets of strings such that every match of it holds one string of each set
    (``gates.required``; none: nothing worth testing): a branch a text fails a set of is not searched."""
    ascii_gates: Gates = ()
    """The same gates for a text in ASCII (nearly every description): their strings outside ASCII
    left out, so a branch written in another script is passed over with no test at all."""
    source: str = ""
    """The expression as the file spells it (``[words]`` spelled out): what ``GATES_FILE`` is keyed by."""
    compiled: list[re.Pattern[str] | None] = field(default_factory=list[re.Pattern[str] | None], compare=False)

    @classmethod
    def of(
        cls, expression_id: str, scope: Scope, expression: str, known: Mapping[str, Any] | None = None
    ) -> Expression:
        """``known``: the gates shipped beside the patterns (``GATES_FILE``), by ``gates_key``; an
        expression not in it is split and read here (most of the patterns' reading time)."""
        shipped = (known or {}).get(gates_key(expression))
        if shipped is not None:
            parts = tuple(str(branch) for branch, _ in shipped)
            gates: Gates = tuple(tuple(tuple(str(s) for s in gate) for gate in each) for _, each in shipped)
        else:
            parts = split(expression)
            gates = tuple(required(branch) for branch in parts)
        ascii_gates = tuple(tuple(tuple(t for t in gate if t.isascii()) for gate in each) for each in gates)
        return cls(expression_id, scope, parts, gates, ascii_gates, expression, [None] * len(parts))

    def branch(self, index: int) -> re.Pattern[str]:
        """Branch ``index``, compiled (once: a race between two scanning threads compiles it twice)."""
        compiled = self.compiled[index]
        if compiled is None:
            compiled = self.compiled[index] = re.compile(self.branches[index], FLAGS)
        return compiled


GATES_FILE = "patterns.gates.json"
"""Each expression's branches and gates, as ``gates`` reads them off ``patterns.toml``: shipped so a
start does not parse some 900 branches (``python -m mcp_patchbay.trust.rules`` writes it again;
``tests/test_scan.py`` fails when it is stale, and a stale entry is only unused: its key is the text)."""


def gates_key(expression: str) -> str:
    return hashlib.sha256(expression.encode("utf-8")).hexdigest()[:24]


@dataclass(frozen=True, slots=True)
class Pattern:
    id: str
    finding: str
    scope: Scope
    parts: tuple[Expression, ...]
    """Found together in one window; the first is where the finding is (its anchor)."""
    window: Window
    """``sentence``: the anchor's sentence (or line); ``match``: inside the anchor's own match
    (a hidden element and what it holds)."""
    none: tuple[Expression, ...]
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
class Rules:
    """Everything ``patterns.toml`` says, compiled."""

    patterns: tuple[Pattern, ...]
    checks: Mapping[str, Check]
    signals: Mapping[str, Expression]

    @classmethod
    def from_toml(cls, text: str, known: Mapping[str, Any] | None = None) -> Rules:
        """``known``: the shipped gates (``GATES_FILE``), which spare reading each expression's."""
        data = tomllib.loads(text)
        words = {str(key): str(value) for key, value in cast("dict[str, Any]", data.get("words", {})).items()}

        def spelled(expression: Any) -> str:
            """``{{name}}`` in an expression stands for the ``[words]`` list of that name."""
            return _WORDS.sub(lambda m: f"(?:{words[m[1]]})", str(expression))

        signals: dict[str, Expression] = {}
        for raw in cast("list[dict[str, Any]]", data.get("signal", [])):
            signals[str(raw["id"])] = Expression.of(str(raw["id"]), _scope(raw), spelled(raw["match"]), known)
        patterns = [
            _pattern(raw, signals, spelled, known) for raw in cast("list[dict[str, Any]]", data.get("pattern", []))
        ]
        checks = {
            str(key): Check(str(value["explain"]), "note" if value.get("severity") == "note" else "hold")
            for key, value in cast("dict[str, dict[str, Any]]", data.get("check", {})).items()
        }
        return cls(tuple(patterns), checks, signals)


def _pattern(
    raw: Mapping[str, Any], signals: Mapping[str, Expression], spelled: Any, known: Mapping[str, Any] | None
) -> Pattern:
    pattern_id = str(raw["id"])
    scope = _scope(raw)
    parts: list[Expression] = []
    if "match" in raw:
        parts.append(Expression.of(f"pattern:{pattern_id}", scope, spelled(raw["match"]), known))
    parts.extend(_signals(signals, raw.get("all", []), scope, pattern_id))
    if not parts:
        raise ValueError(f"pattern {pattern_id!r}: needs a 'match' or signals in 'all'")
    window = raw.get("window", "sentence")
    if window not in ("sentence", "match"):
        raise ValueError(f"pattern {pattern_id!r}: window must be 'sentence' or 'match'")
    return Pattern(
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


def _scope(raw: Mapping[str, Any]) -> Scope:
    scope = raw.get("scope", "text")
    if scope not in ("text", "parameter", "switched"):
        raise ValueError(f"{raw.get('id')!r}: scope must be 'text', 'parameter' or 'switched'")
    return scope


def _signals(signals: Mapping[str, Expression], ids: Sequence[str], scope: str, pattern_id: str) -> list[Expression]:
    chosen: list[Expression] = []
    for signal_id in ids:
        signal = signals.get(signal_id)
        if signal is None:
            raise ValueError(f"pattern {pattern_id!r}: no signal {signal_id!r}")
        if signal.scope != scope:
            raise ValueError(f"pattern {pattern_id!r}: signal {signal_id!r} reads another scope")
        chosen.append(signal)
    return chosen


def _other_tool(raw: Mapping[str, Any], parts: Sequence[Expression]) -> str | None:
    """The signal ``other_tool`` names, which must be one of the pattern's parts."""
    signal = raw.get("other_tool")
    if signal is None:
        return None
    if signal not in {part.id for part in parts}:
        raise ValueError(f"pattern {raw.get('id')!r}: other_tool names no signal of 'all'")
    return str(signal)


def _compiled(expression: Any) -> re.Pattern[str] | None:
    return re.compile(str(expression), FLAGS) if expression else None


def gates_of(rules: Rules) -> dict[str, list[list[object]]]:
    """What ``GATES_FILE`` holds for ``rules``: each expression's branches and their gates, by key."""
    expressions = [*rules.signals.values(), *(part for pattern in rules.patterns for part in pattern.parts)]
    return {
        gates_key(e.source): [
            [branch, [list(gate) for gate in gates]] for branch, gates in zip(e.branches, e.gates, strict=True)
        ]
        for e in expressions
    }


if __name__ == "__main__":  # python -m mcp_patchbay.trust.rules: write GATES_FILE for the shipped patterns
    from importlib import resources
    from pathlib import Path

    here = Path(str(resources.files("mcp_patchbay.trust")))
    rules = Rules.from_toml((here / "patterns.toml").read_text(encoding="utf-8"))
    (here / GATES_FILE).write_text(
        json.dumps(gates_of(rules), ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8"
    )
    print(f"wrote {here / GATES_FILE}")
