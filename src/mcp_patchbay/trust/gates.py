"""How a pattern's expression is split and gated so most texts are passed over cheaply. Pure.

An expression is compiled as its top-level alternatives (``split``): ``re`` tries every
alternative at every position, while one word-led alternative jumps to its first letters. Each
branch gets gates: sets of strings such that every match of it holds one string of each set,
read off its parse tree (``required``). A text that holds no string of a gate cannot match the
branch, which is then not searched: a substring test is some 200 times cheaper than ``re`` over
the same text, and most texts fail. In code, not data: it reads the expressions themselves.
"""

from __future__ import annotations

import functools
import importlib
import re
from typing import Any, cast

__all__ = ["FLAGS", "required", "split"]

FLAGS = re.MULTILINE
"""Patterns are written in lower case and read lower-cased text: ``re.IGNORECASE`` costs three times as much."""
_SRE_PARSE: Any = importlib.import_module("re._parser")
_SRE: Any = importlib.import_module("re._constants")
"""The standard library's regular-expression parser (``re`` compiles with it): its tree gives
each branch's gate. Private, and stable across the versions this runs on (3.11 to 3.13)."""

_COMMON_WORDS = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "in", "is", "it", "not", "of",
    "on", "or", "the", "this", "that", "to", "use", "with", "you", "your",
})  # fmt: skip
"""Words nearly every description holds: a gate made of one of them lets nearly every text through."""
_COMMON_MARKS = frozenset(" .,;:!?'\"`()-/_*=\n")
_LENGTH_COST = {1: 30.0, 2: 8.0, 3: 3.0, 4: 1.0}
"""How likely a string of so many letters is to be in a text, roughly (longer: 0.5)."""


def required(expression: str) -> tuple[tuple[str, ...], ...]:
    """Sets of strings such that every match of ``expression`` holds one string of each, read off
    its parse tree: a run of literal characters in its top-level sequence is a set of one; a group
    every match goes through gives its own best set, an alternation the union of its alternatives'
    (when each has one). The two least common sets, judged by their strings' length (each tried
    shortest string first: the commonest, so a text holding one passes soonest); none when nothing
    is worth testing."""
    best = _candidates(list(_SRE_PARSE.parse(expression, FLAGS)))[:2]
    return tuple(tuple(sorted(strings, key=lambda string: (len(string), string))) for strings in best)


def _candidates(items: list[tuple[Any, Any]]) -> list[frozenset[str]]:
    """The sets every match of a parsed sequence has one string of, the best first."""
    found: list[frozenset[str]] = []
    run: list[str] = []
    for op, value in items:
        if op is _SRE.LITERAL:
            run.append(chr(value))
            continue
        if run:
            found.append(frozenset({"".join(run)}))
            run = []
        found.extend(_inner(op, value))
    if run:
        found.append(frozenset({"".join(run)}))
    useful = [strings for strings in found if _cost(strings) < 40]
    return sorted(set(useful), key=lambda strings: (_cost(strings), sorted(strings)))  # the same in every process


def _inner(op: Any, value: Any) -> list[frozenset[str]]:
    """What one parsed item that is not a literal requires of every match: its best set, or none."""
    if op is _SRE.SUBPATTERN:
        return _candidates(list(value[3]))[:1]
    if op is _SRE.BRANCH:
        each = [_candidates(list(alternative))[:1] for alternative in value[1]]
        return [frozenset[str]().union(*(best[0] for best in each))] if each and all(each) else []
    if (op is _SRE.MAX_REPEAT or op is _SRE.MIN_REPEAT) and value[0] >= 1:
        return _candidates(list(value[2]))[:1]
    members = cast("list[tuple[Any, int]]", value) if op is _SRE.IN else []
    if members and len(members) <= 4 and all(member is _SRE.LITERAL for member, _ in members):
        return [frozenset(chr(code) for _, code in members)]
    return []


@functools.cache
def _cost(strings: frozenset[str]) -> float:
    """How often a text is likely to hold one of ``strings``: short and common strings cost most."""
    total = 0.0
    for text in strings:
        stripped = text.strip()
        if not stripped or stripped in _COMMON_WORDS or (len(stripped) == 1 and stripped in _COMMON_MARKS):
            return 100.0
        if not stripped.isascii():
            total += 0.5  # nearly every description is written in English
        else:
            total += _LENGTH_COST.get(len(stripped), 0.5) if stripped.isalnum() or len(stripped) > 1 else 1.0
    return total


def split(expression: str) -> tuple[str, ...]:
    """``expression``'s top-level alternatives, each one that compiles (the whole, if it cannot be
    split); ``(a|b|c)\\b``, one group of alternatives, is split as ``a\\b|b\\b|c\\b``. Each is compiled
    here to be sure of it (``re.error``: a mistake in the file, reported as the file has it); the
    scan compiles a branch again only when a text passes its gates (``rules.Expression.branch``)."""
    whole = _ONE_GROUP.fullmatch(expression)
    if whole is not None and not _BACKREFERENCE.search(expression):
        inner = _alternatives(whole[1])
        if len(inner) > 1:
            parts = tuple(f"(?:{part}){whole[2] or ''}" for part in inner)
            if _all_compile(parts):
                return parts
    parts = tuple(_alternatives(expression))
    if _all_compile(parts):
        return parts
    re.compile(expression, FLAGS)  # a mistake in the file raises here, as the file has it
    return (expression,)


def _all_compile(parts: tuple[str, ...]) -> bool:
    try:
        for part in parts:
            re.compile(part, FLAGS)
    except re.error:
        return False
    return True


_ONE_GROUP = re.compile(r"\((?!\?)(.*)\)(\\b)?", re.DOTALL)
_BACKREFERENCE = re.compile(r"\\[1-9]")


def _alternatives(expression: str) -> list[str]:
    """The top-level alternatives of an expression (split at ``|`` outside groups and classes);
    for ``_ONE_GROUP``'s inner text, only if the group closes at the end (``(a)|(b)`` is two groups)."""
    parts: list[str] = []
    depth, start, i = 0, 0, 0
    while i < len(expression):
        char = expression[i]
        if char == "\\":
            i += 2
            continue
        if char == "[":
            i = expression.index("]", i + 2 if expression[i + 1 : i + 2] in ("]", "^") else i + 1)
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            parts.append(expression[start:i])
            start = i + 1
        if depth < 0:
            return [expression]  # ``(a)|(b)`` read as one group's inner text: not one group
        i += 1
    parts.append(expression[start:])
    return parts
