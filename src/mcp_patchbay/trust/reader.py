"""One scope of a definition as the patterns read it, and the matches found in it so far. Pure.

    read = Reading.of(units)                  # one text, one line per string, lower case
    read.found(expression)                    # every match that starts a word, once per scan
    read.first_in(expression, window)         # the first one inside a sentence
    read.sentence(start, end)                 # the sentence (or line) around a match

A match counts only where it starts a word (``skip`` in ``autoskip`` is none), so the patterns
need no leading ``\\b``, which would make ``re`` try every position instead of jumping to its
first letters; and each branch of an expression is searched only in a text that passes its gates.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from mcp_patchbay.trust.rules import Expression
from mcp_patchbay.trust.strings import Unit, joined, line_of

__all__ = ["BREAK", "Reading", "inside", "word_matches"]

BREAK = re.compile("(?<!e\\.g)(?<!i\\.e)(?<!etc)(?<!vs)[.!?] |[\u3002\uff01\uff1f]|\n")
"""Where a sentence ends: a full stop (or ! or ?) and a space, a CJK full stop, ! or ?, a line break."""

Span = tuple[int, int]


@dataclass
class Reading:
    """One scope of a definition as the patterns read it, and what was found in it so far."""

    text: str
    starts: list[tuple[int, int]]
    units: Sequence[Unit]
    breaks: list[int] | None = None
    matches: dict[str, list[Span]] = field(default_factory=dict[str, list[Span]])

    contains: dict[str, bool] = field(default_factory=dict[str, bool])
    ascii: bool = False
    passed: dict[tuple[str, ...], bool] = field(default_factory=dict[tuple[str, ...], bool])
    possible: dict[str, list[re.Pattern[str]]] = field(default_factory=dict[str, list[re.Pattern[str]]])

    windows: dict[tuple[str, int, int], Span | None] = field(default_factory=dict[tuple[str, int, int], Span | None])

    @classmethod
    def of(cls, units: Sequence[Unit], seen: dict[str, list[str]] | None = None) -> Reading:
        text, starts = joined(units, seen)
        return cls(text, starts, units, ascii=text.isascii())

    def found(self, expression: Expression) -> list[Span]:
        """Every match of ``expression`` that starts a word, as (start, end), in order (once per scan)."""
        spans = self.matches.get(expression.id)
        if spans is None:
            branches = self._possible(expression)
            spans = self.matches[expression.id] = word_matches(branches, self.text) if branches else []
        return spans

    def first_in(self, expression: Expression, window: Span) -> Span | None:
        """The first match of ``expression`` starting a word inside ``window``: what ``found`` would
        give there, searched for only there (to the end of the window's line, where a match ends)."""
        spans = self.matches.get(expression.id)
        if spans is not None:
            return inside(spans, window)
        key = (expression.id, *window)
        if key in self.windows:
            return self.windows[key]
        text = self.text
        line_end = text.find("\n", window[1])
        end = len(text) if line_end < 0 else line_end
        first: Span | None = None
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

    def _possible(self, expression: Expression) -> list[re.Pattern[str]]:
        """The branches of ``expression`` whose gates this text passes (once per text)."""
        known = self.possible.get(expression.id)
        if known is not None:
            return known
        contains, passed, text = self.contains, self.passed, self.text
        branches: list[re.Pattern[str]] = []
        every = expression.ascii_gates if self.ascii else expression.gates
        for index, gates in enumerate(every):
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
                branches.append(expression.branch(index))
        self.possible[expression.id] = branches
        return branches

    def sentence(self, start: int, end: int) -> Span:
        """The span of the sentence (or line) around a match: from after the last sentence end
        before it to the first one after it."""
        if self.breaks is None:
            self.breaks = [m.start() for m in BREAK.finditer(self.text)]  # once per text: linear
        breaks = self.breaks
        index = bisect.bisect_left(breaks, start)
        before = breaks[index - 1] + 1 if index > 0 else 0
        after = bisect.bisect_left(breaks, end)
        return before, breaks[after] if after < len(breaks) else len(self.text)

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


def inside(spans: list[Span], window: Span) -> Span | None:
    """The first span that starts inside ``window`` (``spans`` in order of start)."""
    index = bisect.bisect_left(spans, (window[0], -1))
    if index < len(spans) and spans[index][0] < window[1]:
        return spans[index]
    return None


def word_matches(branches: Sequence[re.Pattern[str]], text: str) -> list[Span]:
    """The matches of each branch that start a word (a match starting with a letter right after
    another is inside a word: ``skip`` in ``autoskip``), in order."""
    spans: list[Span] = []
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
