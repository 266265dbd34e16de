"""The meaning score: which tools are nearest a query in meaning, for ``index`` to add to its score.

Pure once built: ``Nearest`` embeds every tool when the index is built (``meaning.Meaning``
gives the vectors) and, per search, embeds the query and scores the tools nearest it. Rules:

    Every tool is embedded from ``documents.meaning_text`` (its server's and name's words,
    title and the first ``documents.MEANING_CHARS`` characters of its description). A query
    is embedded only when it says a need: it has a word of at most ``MEANING_WORD`` letters,
    not a stop word, that the catalog uses or the model knows whole ("zzqx", "!!!" and "the a
    of" say none). The ``MEANING_DEPTH`` tools nearest the query (cosine) get a score from 0
    (the last of them; in a catalog no bigger than that, cosine 0) to 1 (the nearest). How
    much that weighs against the words is ``index``'s rule.
"""

from __future__ import annotations

from collections.abc import Container, Sequence
from typing import TYPE_CHECKING

from mcp_patchbay.search.documents import IndexedTool, meaning_text
from mcp_patchbay.search.meaning import Meaning
from mcp_patchbay.search.text import STOP_WORDS, fold, split_words

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["MEANING_DEPTH", "MEANING_WORD", "Nearest"]

MEANING_DEPTH = 20
"""The tools nearest in meaning that get a score (and can rank without any lexical match); the
cosine of the last of them is the score's zero."""
MEANING_WORD = 40
"""A query is searched by meaning only when it has a word (not a stop word) of at most this many
letters that the catalog uses or the model knows whole: a run of 1,000 letters says no need."""


class Nearest:
    """The tools' vectors, and the meaning score of the tools nearest a query."""

    def __init__(self, meaning: Meaning, tools: Sequence[IndexedTool], catalog_words: Container[str]) -> None:
        """``catalog_words``: the index's (folded) words, which say a need even when the model
        does not know them ("kubectl")."""
        self._meaning = meaning
        self._catalog_words = catalog_words
        self._vectors: NDArray[np.float32] = meaning.encode([meaning_text(tool) for tool in tools])

    def says_a_need(self, query: str) -> bool:
        """Whether the query has a word (not a stop word) that the catalog uses or the meaning
        model knows whole: "zzqx", "!!!" or "the a of" are searched by words and names only."""
        for word in split_words(query):
            if word in STOP_WORDS or not word.isalpha() or len(word) > MEANING_WORD:
                continue
            if fold(word) in self._catalog_words or self._meaning.knows(word):
                return True
        return False

    def scores(self, query: str, allowed: set[int] | None) -> dict[int, float]:
        """Doc -> meaning score (0 to 1) of the MEANING_DEPTH tools nearest the query (only
        ``allowed`` ones when given); nothing when the query says no need."""
        if not self.says_a_need(query):
            return {}
        import numpy as np

        # einsum, not @: numpy's BLAS spreads a product over 10,000 rows across threads that then spin,
        # and on two busy cores that took a 10,000-tool search from 2 ms to 8-12 ms median (1,000: no change).
        cosines = np.einsum("ij,j->i", self._vectors, self._meaning.encode([query])[0])
        if allowed is not None:
            docs = np.fromiter(allowed, dtype=np.intp, count=len(allowed))
        else:
            docs = np.arange(len(cosines))
        depth = min(MEANING_DEPTH, len(docs))
        if depth == 0:
            return {}
        nearest = docs[np.argpartition(-cosines[docs], depth - 1)[:depth]]
        values = cosines[nearest]
        # A catalog no bigger than the depth has no "far" tools to measure from: cosine 0 is the zero.
        best, floor = float(values.max()), float(values.min()) if len(docs) > depth else 0.0
        if best <= 0.0 or best <= floor:
            return {}
        span = best - floor
        return {int(doc): max(0.0, float(value) - floor) / span for doc, value in zip(nearest, values, strict=True)}
