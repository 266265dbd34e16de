"""Exposed names for upstream items: how ``server__tool`` is built.

Pure: values in, values out. No I/O, no awaits, no logging. Building names and resolving them
are two halves of one contract: every rule here is an assumption of ``catalog.resolution``
(which resolves the names a client got wrong) and ``catalog.suggestions`` (its typo suggestions).

Building names (``build_names``)
    An upstream item (a tool or a prompt) of server ``S`` named ``T`` is exposed as
    ``S<sep>T`` (``sep`` defaults to ``__``). Every exposed name matches ``NAME_CHARS``,
    is unique, at most ``max_length`` long, and depends only on the set of pairs, never
    on their order, so it is stable across restarts.

    - Characters outside ``[A-Za-z0-9_-]`` become ``_`` (``sanitize``); hyphens are kept.
    - A name that would be too long becomes a readable head plus ``_`` and six hex digits
      of sha256 over the raw ``server\\0item`` (``filesystem__read_multi_3f2a9c``).
    - Pairs whose names collide: one whose raw name already is its exposed form keeps the
      plain name (the smallest ``(server, item)`` if there are several), the others get
      the hash suffix. Plain names are claimed before any hashed one, and a hashed name
      that is taken gets a longer hash. So adding a pair never renames a pair whose raw
      name is already its exposed form; it can rename a *sanitized* one that now collides
      with it (``my.server``/``x`` is ``my_server__x`` until a ``my_server``/``x`` arrives).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

__all__ = [
    "CLIENT_SEPARATOR",
    "MIN_MAX_LENGTH",
    "NAME_CHARS",
    "OwnTools",
    "build_names",
    "check_separator",
    "delimiter_positions",
    "normalize",
    "sanitize",
]

NAME_CHARS: re.Pattern[str] = re.compile(r"^[A-Za-z0-9_-]+\Z")
"""What an exposed name (and a separator) is made of. ``\\Z``, so a trailing newline fails."""

MIN_MAX_LENGTH = 16
"""The smallest ``max_length`` accepted: room for a readable head and a hash suffix."""

CLIENT_SEPARATOR = "__"
"""What clients put between their own prefix and a name (``mcp__patchbay__``): a separator too."""

_BAD_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_NORM_DROP = str.maketrans("", "", "_-./: ")
_HASH_HEX = 6


def sanitize(name: str) -> str:
    """Replace every character outside ``[A-Za-z0-9_-]`` with ``_``; ``""`` becomes ``"_"``."""
    return _BAD_CHARS.sub("_", name) or "_"


def normalize(name: str) -> str:
    """Lowercase and drop ``_ - . / :`` and spaces: the key of the "normalized" rule."""
    return name.translate(_NORM_DROP).lower()


@dataclass(frozen=True, slots=True)
class OwnTools:
    """The names of the proxy's own tools (search mode's ``find_tools`` and ``call_tool``) for a separator."""

    find_tools: str
    call_tool: str

    @classmethod
    def for_separator(cls, separator: str) -> OwnTools:
        return cls(f"patchbay{separator}find_tools", f"patchbay{separator}call_tool")


def check_separator(separator: str) -> None:
    if not NAME_CHARS.match(separator):
        raise ValueError(f"separator must match {NAME_CHARS.pattern}, got {separator!r}")


def delimiter_positions(called: str, delimiters: Iterable[str]) -> list[tuple[int, int]]:
    """Every (start, length) where one of ``delimiters`` (a separator, the clients' ``__``) occurs."""
    positions: set[tuple[int, int]] = set()
    for delimiter in delimiters:
        start = called.find(delimiter)
        while start != -1:
            positions.add((start, len(delimiter)))
            start = called.find(delimiter, start + 1)
    return sorted(positions)


# --- building names -----------------------------------------------------------------


def _digest(server: str, item: str) -> str:
    return hashlib.sha256(f"{server}\0{item}".encode()).hexdigest()


def _with_suffix(base: str, suffix: str, max_length: int) -> str:
    if len(base) + len(suffix) <= max_length:
        return base + suffix
    head = base[: max_length - len(suffix)]
    return (head.rstrip("_-") or head) + suffix


def _hashed_names(base: str, digest: str, max_length: int) -> Iterator[str]:
    """Ever longer hash suffixes, then numbered ones: the first free one is taken."""
    for hex_len in range(_HASH_HEX, min(len(digest), max_length - 2) + 1):
        yield _with_suffix(base, "_" + digest[:hex_len], max_length)
    number = 2
    while True:
        yield _with_suffix(base, f"_{digest[:_HASH_HEX]}{number}", max_length)
        number += 1


def build_names(pairs: Iterable[tuple[str, str]], *, separator: str, max_length: int) -> dict[tuple[str, str], str]:
    """Map each ``(server, item)`` to its exposed name (see the module docstring).

    Duplicate pairs are merged; the result keeps the first-seen order of the pairs, and
    its values do not depend on that order.
    """
    check_separator(separator)
    if max_length < MIN_MAX_LENGTH:
        raise ValueError(f"max_length must be at least {MIN_MAX_LENGTH}, got {max_length}")
    unique = list(dict.fromkeys(pairs))
    plain: dict[tuple[str, str], str] = {}
    groups: dict[str, list[tuple[str, str]]] = {}
    for server, item in unique:
        plain[server, item] = sanitize(server) + separator + sanitize(item)
        groups.setdefault(plain[server, item], []).append((server, item))

    names: dict[tuple[str, str], str] = {}
    taken: set[str] = set()
    for name, members in groups.items():
        if len(name) > max_length:
            continue
        clean = [(s, i) for s, i in members if s + separator + i == name]
        if len(members) == 1 or clean:
            keeper = min(clean) if clean else members[0]
            names[keeper] = name
            taken.add(name)

    for pair in sorted(p for p in unique if p not in names):
        for candidate in _hashed_names(plain[pair], _digest(*pair), max_length):
            if candidate not in taken:
                names[pair] = candidate
                taken.add(candidate)
                break
    return {pair: names[pair] for pair in unique}
