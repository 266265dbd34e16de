"""Name similarity: how closely a short query spells a tool's name, for ``index`` to rank first.

Pure: ``NameMatch`` is built with the index, once per catalog, and asked per search. Rules:

    A query of at most ``NAME_MAX_WORDS`` words is compared as a name. Keys are
    ``naming.normalize``-d (lowercase, ``_ - . / :`` and spaces removed), so case, wrong
    separators and spaces do not matter. It is compared with each tool's exposed name
    (also with every tail of the query after a separator, so client prefixes such as
    ``mcp__patchbay__`` do not matter) at full score, and with upstream tool names at
    ``UPSTREAM_DISCOUNT`` of the score (a right tool name with a missing or wrong server
    ranks below the tool whose exposed name it is). rapidfuzz ``ratio`` scores 0-100; only
    scores at or above ``NAME_CUTOFF`` count. An exact key (the exposed name, or the server's
    and tool's names run together) scores 100 and stops the search: near names add nothing
    worth 10,000 comparisons. What a score is worth in the ranking is ``index``'s rule.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rapidfuzz import fuzz, process

from mcp_patchbay.catalog.naming import normalize
from mcp_patchbay.search.documents import IndexedTool

__all__ = ["NAME_CUTOFF", "NAME_MAX_WORDS", "UPSTREAM_DISCOUNT", "NameMatch"]

NAME_CUTOFF = 80.0
NAME_MAX_WORDS = 3
UPSTREAM_DISCOUNT = 0.95
_NAME_SPLIT = re.compile(r"__|[./:\s]+")
_MAX_NAME_QUERY = 200
_FUZZY_LIMIT = 10
"""The closest names rapidfuzz gives per key: a typo has one or two near names, not dozens."""


class NameMatch:
    """The catalog's names, keyed for exact and near matches (see the module docstring)."""

    def __init__(self, tools: Sequence[IndexedTool], *, per_upstream: int) -> None:
        """``per_upstream``: how many of the tools sharing one upstream tool name a near match offers."""
        self._per_upstream = per_upstream
        self._exposed_keys: list[str] = []
        self._exact: dict[str, list[int]] = {}
        upstream: dict[str, list[int]] = {}
        for number, tool in enumerate(tools):
            exposed_key = normalize(tool.name)
            self._exposed_keys.append(exposed_key)
            for key in dict.fromkeys((exposed_key, normalize(tool.server) + normalize(tool.tool))):
                self._exact.setdefault(key, []).append(number)
            upstream.setdefault(normalize(tool.tool), []).append(number)
        self._upstream_keys = list(upstream)
        self._upstream_docs = list(upstream.values())

    def scores(self, query: str, allowed: set[int] | None) -> dict[int, float]:
        """Doc -> name similarity (0-100) for docs at or above NAME_CUTOFF (only ``allowed`` ones
        when given)."""
        query = query.strip()
        if not query or len(query) > _MAX_NAME_QUERY or len(query.split()) > NAME_MAX_WORDS:
            return {}
        keys = [normalize(query)]
        for match in _NAME_SPLIT.finditer(query):
            tail = normalize(query[match.end() :])
            if tail:
                keys.append(tail)
        keys = [k for k in dict.fromkeys(keys) if k]
        found: dict[int, float] = {}

        def offer(doc: int, score: float) -> None:
            if (allowed is None or doc in allowed) and score > found.get(doc, 0.0):
                found[doc] = score

        for key in keys:
            for doc in self._exact.get(key, ()):
                offer(doc, 100.0)
        if found and max(found.values()) >= 100.0:
            return found
        for position, key in enumerate(keys):
            if position == 0:  # typos in the server part: the whole query against exposed names
                for _, score, doc in process.extract(
                    key,
                    self._exposed_keys,
                    scorer=fuzz.ratio,
                    processor=None,
                    score_cutoff=NAME_CUTOFF,
                    limit=_FUZZY_LIMIT,
                ):
                    offer(doc, score)
            for _, score, i in process.extract(
                key,
                self._upstream_keys,
                scorer=fuzz.ratio,
                processor=None,
                score_cutoff=NAME_CUTOFF / UPSTREAM_DISCOUNT,
                limit=_FUZZY_LIMIT,
            ):
                for doc in self._upstream_docs[i][: self._per_upstream]:
                    offer(doc, score * UPSTREAM_DISCOUNT)
        return {d: s for d, s in found.items() if s >= NAME_CUTOFF}
