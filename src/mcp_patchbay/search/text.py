"""Words out of tool names and prose: splitting, folding, stop words and verb synonyms.

The word lists themselves are data in ``lexicon``.

Pure and dependency-free. The rules (stated once here, relied on by ``index``):

- ``split_words``: a name or a text is cut at every character outside ``[A-Za-z0-9]``
  (so snake_case, kebab-case, dotted and spaced names split), at lower-to-upper case
  changes (``createIssue`` -> create, issue), at the end of an upper-case run followed by
  a capitalised word (``HTTPRequest`` -> http, request) and between letters and digits
  (``v2api`` -> v, 2, api). Everything is lowercased.
- ``fold``: plural and verb-form folding, a light stemmer of our own: ``ies`` -> ``y``,
  ``sses``/``xes``/``ches``/``shes`` lose ``es``, a final ``s`` goes (not after ``s``,
  ``u`` or ``i``: "class", "status", "analysis" stay), then ``ing``/``ed`` endings go when
  at least four letters remain (``listing`` -> list, ``created`` -> creat, as does
  ``create`` via a final ``e`` drop). Words of three letters or fewer are never folded.
  Measured on the bench's tune half: no folding loses 4 points of top-5; Snowball
  (``snowballstemmer``) in its place gave -2.2 top-1 and +0.7 top-5, so no stemming
  library is a dependency.
- ``STOP_WORDS``: English function words and filler a model puts in a request ("please",
  "the", "my"); dropped from queries and documents alike.
- ``SYNONYMS``: groups of verbs, nouns and short forms that tool names and requests use
  interchangeably (get/fetch/read/retrieve, list/show/enumerate, create/add/new/make,
  row/record/entry, folder/directory, org/organization, ...). A query word in a group
  also searches the group's other words, at ``SYNONYM_WEIGHT``. Measured on the tune
  half: without synonyms, top-1 -6.2 points and top-5 -3.6. The domain groups (software
  dev, browsers, files, data, messaging, docs, clusters, maps, charts, research: ticket
  and defect for issue, load and visit for navigate, db, k8s, env and md as short forms)
  are general vocabulary of what MCP servers do, not words picked from the bench's misses:
  they gave +0.7/+1.8 top-1/top-5 on tune and +1.5/+3.1 on holdout; a second, broader
  batch (cloud, CI, commerce, media, auth, trackers: most of its words are in no bench
  tool) +0.7/+0.3 on tune and +0.4/-0.4 on holdout, kept for the servers the bench lacks.
- ``PHRASES``: two-word phrases a request uses for one idea ("look up", "set up", "sign in",
  "merge request", "sea level"); ``expand_phrases`` appends their meaning to a query.
- ``nouns_number``: the nouns of a text and whether each is plural there (``_plural``:
  more than three letters ending in ``s``, not ``ss``/``us``/``is``), for the index's
  number agreement.
- ``VERB_CLASS``: what a verb does to data (read, create, update, delete, send, run), for
  the index's verb agreement between a query and a tool's name. The verbs of the domain groups are in
  it too (give and grab read; mark, move and rewrite update; tell and announce send):
  +0/+0.4 top-1/top-5 on tune, +0.8/+0.8 on holdout.
"""

from __future__ import annotations

import re
from itertools import pairwise

from mcp_patchbay.search.lexicon import PHRASES, STOP_WORDS, SYNONYM_GROUPS, SYNONYM_WEIGHT, VERB_CLASSES

__all__ = [
    "PHRASES",
    "STOP_WORDS",
    "SYNONYMS",
    "SYNONYM_WEIGHT",
    "expand_phrases",
    "fold",
    "nouns_number",
    "split_words",
    "terms",
]

_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
"""One word: an upper-case run before a capitalised word, a (capitalised) lower-case run, an
upper-case run, or digits. One ``findall`` does every split rule at once."""


def expand_phrases(text: str) -> str:
    """``text`` with the words of the ``PHRASES`` it has appended."""
    words = split_words(text)
    extra = [PHRASES[pair] for pair in pairwise(words) if pair in PHRASES]
    return f"{text} {' '.join(extra)}" if extra else text


def _fold_raw(word: str) -> str:
    if len(word) <= 3 or word.isdigit():
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith(("sses", "xes", "ches", "shes")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if word.endswith("ing") and len(word) >= 7:
        word = word[:-3]
    elif word.endswith("ed") and len(word) >= 6:
        word = word[:-2]
    if word.endswith("e") and len(word) >= 5:
        word = word[:-1]
    return word


class _FoldCache(dict[str, str]):
    """word -> folded word; a dict lookup is cheaper than an ``lru_cache`` call, and indexing
    calls ``fold`` a million times for 10,000 tools. Emptied when it gets big."""

    def __missing__(self, word: str) -> str:
        if len(self) >= _FOLD_CACHE_SIZE:
            self.clear()
        folded = self[word] = _fold_raw(word)
        return folded


_FOLD_CACHE_SIZE = 65_536
_folded = _FoldCache()


def fold(word: str) -> str:
    """The folded form of one lowercase word (see the module docstring)."""
    return _folded[word]


VERB_CLASS: dict[str, str] = {fold(w): c for c, words in VERB_CLASSES.items() for w in words}
"""Folded verb -> what it does to data: read, create, update, delete, send or run (index's
verb agreement). Question words count as "read": a question asks to see something."""


def _build_synonyms() -> dict[str, tuple[str, ...]]:
    table: dict[str, dict[str, None]] = {}
    for group in SYNONYM_GROUPS:
        folded = [fold(w) for w in group]
        for word in folded:
            others = table.setdefault(word, {})
            others.update(dict.fromkeys(w for w in folded if w != word))
    return {word: tuple(others) for word, others in table.items()}


SYNONYMS: dict[str, tuple[str, ...]] = _build_synonyms()
"""Folded word -> the folded words of every group it is in, itself excluded."""


def split_words(text: str) -> list[str]:
    """Lowercase words of a name or a text (see the module docstring); no folding."""
    found: list[str] = _WORD.findall(text)
    return " ".join(found).lower().split()  # one lower() per text, not one per word


def terms(text: str) -> list[str]:
    """The index terms of a text: split, stop words dropped, folded. Order and repeats kept."""
    folded = _folded
    return [folded[w] for w in split_words(text) if w not in STOP_WORDS]


def _plural(word: str) -> bool:
    return len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")) and not word.isdigit()


def nouns_number(text: str, skip: set[str] | frozenset[str] = frozenset()) -> dict[str, bool]:
    """Folded noun -> whether it is plural in ``text`` (verbs, numbers, stop words and
    ``skip`` left out; a word used both ways too): the index's number agreement."""
    seen: dict[str, bool | None] = {}
    for word in split_words(text):
        if word in STOP_WORDS or word.isdigit():
            continue
        folded = fold(word)
        if folded in skip or folded in VERB_CLASS:
            continue
        number = folded != word and _plural(word)
        seen[folded] = number if seen.get(folded, number) == number else None
    return {w: n for w, n in seen.items() if n is not None}
