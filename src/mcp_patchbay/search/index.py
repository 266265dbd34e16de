"""The ranked index: BM25F over a tool's fields, fused with meaning, plus name similarity for name-like queries.

Pure: built once per catalog change, searched per call (the meaning model's vectors are values
too; the first build in a process reads its files, ``meaning.Meaning.load``). Every ranking
rule below adds to one score, and their weights were measured together, so they stay in this
one module; what a tool and a query are made of is ``documents``', what a text means is
``meaning``'s. Rules (see ``text`` for words):

Fields and weights (BM25F)
    Every tool is one document with fields, each of weight ``w`` and length normalisation
    ``b`` (``FIELDS``): the upstream tool name's words (3.0), its title (2.0), description
    (1.0), parameter names (1.0), parameter descriptions (0.4), the server name's words
    (1.5) and the server's instructions (0.3); a field's text is indexed up to
    ``FIELD_CHARS`` characters. A term's pseudo frequency in a document is
    ``sum(w * tf / (1 - b + b * len / avg_len))`` over the fields, and its value is
    ``idf * f * (k1 + 1) / (f + k1)`` with ``k1 = 1.2`` and the usual BM25 idf
    ``ln(1 + (N - df + 0.5) / (df + 0.5))``, computed at build time: a search only looks
    up and adds precomputed values. Measured on the bench's tune half, other weights
    (name 2-4, server 3-5, description 1.5, k1 2-8) did no better.

Query groups
    The words of two-word phrases the query has (``text.PHRASES``: "look up", "set up",
    "sign in", "merge request") are added to it (measured: +0.4/+0.8 top-1/top-5 on
    holdout, tune unchanged). One group per distinct query term (``text.terms``): the
    term itself at weight 1 (with the index words the query spells otherwise: "file
    system" finds filesystem, "sitemap" site and map; +0.4 top-5 on holdout), its
    synonyms (``text.SYNONYMS``) at ``SYNONYM_WEIGHT``, and, for a term of at least
    ``MIN_PREFIX`` letters, up to ``PREFIX_MAX`` index words it begins at ``PREFIX_WEIGHT``
    ("mongo" finds "mongodb"). A group gives a tool the best of its members' weighted
    values (a tool saying "fetch" and "retrieve" is not counted twice for "get").

Lexical score
    The sum of the groups' values; multiplied by ``SERVER_MENTION`` for the tools of a
    server the query names (a query word, not a number, or its folded form is a word of the
    server's name, folded or not, its whole name, or a prefix of one of at least
    ``MIN_PREFIX`` letters: "my saved memories" names ``memory``); divided by
    the best such score of the query (0 to 1). The ``COVER_DEPTH`` best then get
    ``NAME_COVER`` times the share of their tool name's words (the server's own words
    left out, as in ``slack_post_message``) that the query has, a synonym counting at its
    weight: of two tools the description matches alike, the one whose name says what
    was asked comes first. They also get ``VERB_AGREE`` when the first verb of their
    name (``text.VERB_CLASS``: read, create, update, delete, send, run) is of a class the
    query has, and lose ``VERB_CONFLICT`` when the query has verbs (question words count
    as "read") but none of that class: "show the latest messages" is no ``post_message``.
    And they get ``NUMBER_AGREE`` when the nouns their name shares with the query (verbs,
    numbers and the server's words left out) all have the query's number (singular or
    plural), and lose it when none does: "which issues are open" is ``list_issues``,
    "look at issue 12" is ``get_issue`` (measured: +1.4/+0 top-1/top-5 on tune, +0.8/+0
    on holdout; 0.1 and a plural-only rule did no better).
    A name counts each query group once. Only the ``RESCORE`` best candidates by a cheaper score (every
    member's weighted value summed, not the best per group) are scored exactly. Every tool
    with a query word is a candidate while no word is in more than ``WEAK_ADMIT`` tools;
    in bigger catalogs a word in more than ``ADMIT_CAP`` tools admits only the
    ``ADMIT_CAP`` where it weighs most, and a synonym in more than ``WEAK_ADMIT`` none.

Meaning
    When the meaning model loads (``meaning.Meaning``; ``build(meaning=False)`` leaves it
    out), the ``nearest.MEANING_DEPTH`` tools nearest the query in meaning get a score from 0
    to 1 (``nearest``: what is embedded, which queries say a need), and ``MEANING_WEIGHT``
    times it is added to their score above (0 lexical for a tool no query word finds: a need
    said in words no part of the tool uses can still rank). A weighted sum, not rank fusion:
    the lexical score keeps its margins, meaning breaks its near ties and brings tools it
    cannot see. Tuned on the tune half by mean reciprocal rank at 20 (flatter than
    top-1/top-5 counts): with the trained table (``meaning``), weight 0.4 and depth 20 (0.804
    vs 0.799 with WordLlama's table at 0.2, 0.790 without meaning; 0.2-0.5 and depth 40 did no
    better). With WordLlama's table 0.2 was best, and 0.1-0.8, depth 40, description heads of
    150-700 characters, a weight that grows with the query terms the lexical best lacks, query
    stop words left out of the embedding, the name, parameters or description embedded apart,
    token weights by the catalog's idf and the nearest catalog words as extra query terms did
    no better. Reciprocal rank fusion (k 60) cost 4-8 points of top-1. Figures: docs/TOOLS.md.

Name similarity
    A short query is also compared as a name (``name_match``: exposed and upstream names,
    normalised, exact or within rapidfuzz's ``NAME_CUTOFF``). A tool at or above the cutoff
    gets a bonus of ``1 + NAME_COVER + MEANING_WEIGHT + (score - NAME_CUTOFF) / (100 -
    NAME_CUTOFF)``, more than name cover and meaning can add. So an exact name ranks first,
    a close typo ranks above every lexical or meaning match, and the lexical and meaning
    scores break ties.

Result
    The ``limit`` (clamped to 1..``MAX_LIMIT``) best tools, best first; equal scores keep
    catalog order. Only the first ``MAX_QUERY_CHARS`` of a query are searched. ``server``
    keeps one server's tools (its name, or its ``normalize``-d name); an unknown server
    gives no hits. A query with no terms and no name match gives the server's first tools
    when ``server`` is given, else nothing.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import pairwise

from mcp_patchbay.catalog.naming import normalize
from mcp_patchbay.search.documents import Hit, IndexedTool, fields
from mcp_patchbay.search.meaning import Meaning
from mcp_patchbay.search.name_match import NAME_CUTOFF, NameMatch
from mcp_patchbay.search.nearest import Nearest
from mcp_patchbay.search.text import (
    STOP_WORDS,
    SYNONYM_WEIGHT,
    SYNONYMS,
    VERB_CLASS,
    expand_phrases,
    fold,
    nouns_number,
    split_words,
    terms,
)

__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "ToolIndex", "clamp_limit"]

DEFAULT_LIMIT = 5
MAX_LIMIT = 20
MAX_QUERY_CHARS = 1_000
"""Only this much of a query is searched: a need fits in far less, and a hostile 100 KB query
must cost what a normal one does."""
NAME_COVER = 0.3
"""Added (in units of the best lexical score) times the share of a tool's name words the query has."""
VERB_AGREE = 0.1
VERB_CONFLICT = 0.2
"""Added to / taken from a tool whose name's first verb is of a class the query has / has not,
when the query has any (``text.VERB_CLASS``): "show the messages" is not ``post_message``."""
NUMBER_AGREE = 0.05
"""Added to / taken from a tool whose name has the query's nouns in the same / the other number."""
COVER_DEPTH = 25
"""The lexical best that get the name-cover bonus (more than MAX_LIMIT: the bonus only adds)."""
RESCORE = 100
WEAK_ADMIT = 256
ADMIT_CAP = 500
"""Candidate generation (see "Lexical score" above): what keeps a search at 10,000 tools in a few ms."""
SERVER_MENTION = 1.5
"""A tool's lexical score is multiplied by this when the query names its server."""
MIN_PREFIX = 4
PREFIX_WEIGHT = 0.3
PREFIX_MAX = 5
K1 = 1.2
MEANING_WEIGHT = 0.4
"""The most the meaning score adds (in units of the best lexical score): the best cosine of a query gets it all."""
FIELDS: dict[str, tuple[float, float]] = {
    # field: (weight, b)
    "name": (3.0, 0.3),
    "title": (2.0, 0.3),
    "description": (1.0, 0.75),
    "params": (1.0, 0.5),
    "param_text": (0.4, 0.75),
    "server": (1.5, 0.0),
    "instructions": (0.3, 0.75),
}


def clamp_limit(limit: int | None) -> int:
    """``limit`` into 1..MAX_LIMIT; None (or anything not an int) is the default. Never refused."""
    if not isinstance(limit, int) or isinstance(limit, bool):
        return DEFAULT_LIMIT
    return max(1, min(MAX_LIMIT, limit))


def _best_of(group: Sequence[tuple[dict[int, float], float]], doc: int) -> float:
    best = 0.0
    for posting, weight in group:
        value = posting.get(doc)
        if value is not None and value * weight > best:
            best = value * weight
    return best


class ToolIndex:
    """A search index over one catalog's tools. Build it when the catalog changes; search per call."""

    def __init__(self, tools: Sequence[IndexedTool], meaning: Meaning | None = None) -> None:
        self.tools: tuple[IndexedTool, ...] = tuple(tools)
        self._meaning = meaning
        self._nearest: Nearest | None = None
        self._postings: dict[str, dict[int, float]] = {}
        self._server_docs: dict[str, list[int]] = {}
        self._server_keys: dict[str, str] = {}
        self._server_word_docs: dict[str, list[int]] = {}
        self._server_vocabulary: list[str] = []
        self._name_words: list[frozenset[str]] = []
        self._verbs: list[str | None] = []
        self._numbers: list[dict[str, bool]] = []  # name's folded word -> it is plural there
        self._vocabulary: list[str] = []
        self._heads: dict[str, dict[int, float]] = {}  # word of a long posting -> its ADMIT_CAP best
        self._names = NameMatch(self.tools, per_upstream=MAX_LIMIT)
        self._build()

    @classmethod
    def build(cls, tools: Iterable[IndexedTool], *, meaning: bool = True) -> ToolIndex:
        """The index of ``tools`` (their order is the tie-break order), with the meaning model
        when ``meaning`` and it loads (``meaning.Meaning.load``: the first build loads it)."""
        return cls(list(tools), Meaning.load() if meaning else None)

    @property
    def uses_meaning(self) -> bool:
        """Whether searches fuse the meaning score in (the model loaded)."""
        return self._nearest is not None

    def __len__(self) -> int:
        return len(self.tools)

    @property
    def servers(self) -> list[str]:
        """The servers with at least one indexed tool, in first-seen order."""
        return list(self._server_docs)

    # Long on purpose: the index's fields built in one pass over the tools.
    def _build(self) -> None:  # noqa: PLR0912
        shared: dict[tuple[str, str | None], tuple[list[str], list[str]]] = {}
        docs = [fields(tool, shared) for tool in self.tools]
        for tool, doc in zip(self.tools, docs, strict=True):
            own = set(doc["server"])
            self._name_words.append(frozenset(w for w in doc["name"] if w not in own) or frozenset(doc["name"]))
            verbs = [VERB_CLASS[w] for w in doc["name"] if w not in own and w in VERB_CLASS]
            self._verbs.append(verbs[0] if verbs else None)
            self._numbers.append(nouns_number(tool.tool, own))
        count = len(docs)
        avg = {f: (sum(len(d[f]) for d in docs) / count if count else 0.0) or 1.0 for f in FIELDS}
        per_term: dict[str, dict[int, float]] = {}
        for number, doc in enumerate(docs):
            pseudo: dict[str, float] = {}
            for name, words in doc.items():
                if not words:
                    continue
                weight, b = FIELDS[name]
                norm = weight / (1.0 - b + b * len(words) / avg[name])
                for word, tf in Counter(words).items():
                    pseudo[word] = pseudo.get(word, 0.0) + norm * tf
            for word, f in pseudo.items():
                posting = per_term.get(word)
                if posting is None:
                    per_term[word] = {number: f}
                else:
                    posting[number] = f
        k1 = K1
        for word, postings in per_term.items():
            idf = math.log(1.0 + (count - len(postings) + 0.5) / (len(postings) + 0.5)) * (k1 + 1.0)
            self._postings[word] = {doc: idf * f / (f + k1) for doc, f in postings.items()}
            if len(postings) > ADMIT_CAP:
                posting = self._postings[word]
                head = heapq.nlargest(ADMIT_CAP, posting, key=posting.__getitem__)
                self._heads[word] = {doc: posting[doc] for doc in sorted(head)}

        self._vocabulary = sorted(self._postings)
        server_docs: dict[str, list[int]] = {}
        for number, tool in enumerate(self.tools):
            server_docs.setdefault(tool.server, []).append(number)
        self._server_docs = dict(server_docs)
        for server, numbers in server_docs.items():
            words = split_words(server)
            for word in {*words, *(fold(w) for w in words if not w.isdigit()), normalize(server)}:
                self._server_word_docs.setdefault(word, []).extend(numbers)
        self._server_vocabulary = sorted(self._server_word_docs)
        for server in server_docs:
            self._server_keys.setdefault(normalize(server), server)
        if self._meaning is not None and self.tools:
            self._nearest = Nearest(self._meaning, self.tools, self._postings)

    # -- search -------------------------------------------------------------------------

    def _server_filter(self, server: str | None) -> set[int] | None:
        if server is None:
            return None
        docs = self._server_docs.get(server)
        if docs is None:
            real = self._server_keys.get(normalize(server))
            docs = self._server_docs.get(real, []) if real is not None else []
        return set(docs)

    def _compounds(self, query: str) -> list[str]:
        """Index words the query has in another spelling: two adjacent words written as one
        ("file system" -> filesystem), one word written as two ("sitemap" -> site, map; only
        for a word of 6 letters or more that the index lacks)."""
        postings = self._postings
        found: list[str] = []
        words = [w for w in split_words(query) if w not in STOP_WORDS]
        for first, second in pairwise(words):
            joined = fold(first + second)
            if joined in postings:
                found.append(joined)
        for word in words:
            term = fold(word)
            if term in postings or len(term) < 6 or not term.isalpha():
                continue
            for cut in range(3, len(term) - 2):
                head, tail = fold(term[:cut]), fold(term[cut:])
                if head in postings and tail in postings:
                    found.extend((head, tail))
                    break
        return found

    def _members(self, query: str) -> list[dict[str, float]]:
        """One group per own query term: word -> weight, the term itself at 1, its synonyms at
        SYNONYM_WEIGHT and, for a term of MIN_PREFIX letters or more, up to PREFIX_MAX index
        words it begins ("mongo" -> "mongodb") at PREFIX_WEIGHT."""
        groups: list[dict[str, float]] = []
        own = terms(query) + self._compounds(query)
        for term in dict.fromkeys(own):
            members: dict[str, float] = {term: 1.0}
            for synonym in SYNONYMS.get(term, ()):
                members.setdefault(synonym, SYNONYM_WEIGHT)
            if PREFIX_WEIGHT and len(term) >= MIN_PREFIX:
                start = bisect.bisect_right(self._vocabulary, term)
                for word in self._vocabulary[start : start + PREFIX_MAX]:
                    if not word.startswith(term):
                        break
                    members.setdefault(word, PREFIX_WEIGHT)
            groups.append(members)
        return groups

    def _lexical(self, members: list[dict[str, float]], allowed: set[int] | None) -> dict[int, float]:
        """Doc -> lexical score for the docs that can rank (see ``_members`` for groups).

        A group adds, per doc, the best of its members' weighted values: a tool that says
        both "fetch" and "retrieve" is not counted twice for "get". Two phases keep a search
        cheap in a big catalog, where a common word's posting is thousands long:

        1. Candidates: every group's own term and short members (at most ``WEAK_ADMIT``
           docs) admit docs, each through the ``ADMIT_CAP`` docs where it weighs most
           (impact-ordered heads, cut at build time), weighted values summed.
        2. The ``RESCORE`` best candidates are scored exactly, every member looked up.

        In a catalog where no posting is longer than ``WEAK_ADMIT`` (a few hundred tools)
        this is exactly the full sum; in bigger ones a tool that only a very common word or
        a common synonym would find cannot be a candidate.
        """
        postings, heads = self._postings, self._heads
        candidates: dict[int, float] = {}
        get = candidates.get
        for group in members:
            for word, weight in group.items():
                posting = postings.get(word)
                if posting is None or (weight < 1.0 and len(posting) > WEAK_ADMIT):
                    continue
                for doc, value in heads.get(word, posting).items():
                    candidates[doc] = get(doc, 0.0) + weight * value
        if allowed is not None:
            candidates = {d: v for d, v in candidates.items() if d in allowed}
        if len(candidates) > RESCORE:
            chosen: Iterable[int] = heapq.nlargest(RESCORE, candidates, key=candidates.__getitem__)
        else:
            chosen = candidates
        groups = [g for m in members if (g := [(postings[w], weight) for w, weight in m.items() if w in postings])]
        return {doc: sum(_best_of(group, doc) for group in groups) for doc in chosen}

    def _mentioned_servers(self, query: str) -> set[int]:
        """Docs of the servers the query names: a query word (not a number) is a word of the
        server's name (or its whole name), or a prefix of one at least MIN_PREFIX long."""
        docs: set[int] = set()
        vocabulary = self._server_vocabulary
        for word in split_words(query):
            if word in STOP_WORDS or word.isdigit():
                continue
            docs.update(self._server_word_docs.get(word, ()))
            docs.update(self._server_word_docs.get(fold(word), ()))
            if len(word) >= MIN_PREFIX:
                start = bisect.bisect_right(vocabulary, word)
                while start < len(vocabulary) and vocabulary[start].startswith(word):
                    docs.update(self._server_word_docs[vocabulary[start]])
                    start += 1
        return docs

    def search(self, query: str, *, limit: int | None = DEFAULT_LIMIT, server: str | None = None) -> list[Hit]:
        """The best tools for ``query``, best first (see the module docstring)."""
        limit = clamp_limit(limit)
        query = query[:MAX_QUERY_CHARS]
        allowed = self._server_filter(server)
        if allowed is not None and not allowed:
            return []
        mentioned = self._mentioned_servers(query)
        raw, query = query, expand_phrases(query)
        members = self._members(query)
        lexical = self._lexical(members, allowed)
        for doc in mentioned if len(mentioned) < len(lexical) else list(lexical):
            if doc in lexical and doc in mentioned:
                lexical[doc] *= SERVER_MENTION
        names = self._names.scores(raw, allowed)
        # Only the COVER_DEPTH lexical best (more than MAX_LIMIT) and name matches can rank.
        depth = heapq.nlargest(COVER_DEPTH, lexical, key=lexical.__getitem__)
        top_lexical = lexical[depth[0]] if depth else 1.0
        combined: dict[int, float] = {}
        classes: set[str] = (
            {VERB_CLASS[f] for w in split_words(query) if (f := fold(w)) in VERB_CLASS} if depth else set()
        )
        numbers = nouns_number(query) if depth and NUMBER_AGREE else {}
        for doc in depth:
            score = lexical[doc] / top_lexical
            words = self._name_words[doc]
            if words:
                covered = sum(max((m.get(w, 0.0) for w in words), default=0.0) for m in members)
                score += NAME_COVER * min(covered, len(words)) / len(words)
            verb = self._verbs[doc]
            if verb is not None and classes:
                score += VERB_AGREE if verb in classes else -VERB_CONFLICT
            if numbers:
                names_number = self._numbers[doc]
                agree = [n == names_number[w] for w, n in numbers.items() if w in names_number]
                if agree:
                    score += NUMBER_AGREE if all(agree) else -NUMBER_AGREE if not any(agree) else 0.0
            combined[doc] = score
        for doc, value in (self._nearest.scores(raw, allowed) if self._nearest is not None else {}).items():
            base = combined.get(doc, lexical.get(doc, 0.0) / top_lexical)
            combined[doc] = base + MEANING_WEIGHT * value
        for doc, similarity in names.items():
            bonus = 1.0 + NAME_COVER + MEANING_WEIGHT + (similarity - NAME_CUTOFF) / (100.0 - NAME_CUTOFF)
            base = combined.get(doc, lexical.get(doc, 0.0) / top_lexical)
            combined[doc] = base + bonus
        if not combined:
            if allowed is None:
                return []
            return [Hit(self.tools[d], 0.0) for d in sorted(allowed)[:limit]]
        best = heapq.nsmallest(limit, combined.items(), key=lambda item: (-item[1], item[0]))
        return [Hit(self.tools[doc], score) for doc, score in best]
