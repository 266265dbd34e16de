"""The learned reading of a definition: a linear model over its words, word pairs and letter groups. Pure.

    model = Model.default()                        # learned_model.bin, read once per process (1 MB)
    model.probability(texts)                       # 0..1: how much the texts read as a poisoned tool's
    model.strongest(units)                         # the sentence that weighs most, and where it is

Why a model beside the patterns: the patterns read what a sentence asks, in the words their author
thought of; measured on sets written by other hands they miss a quarter of the attacks and hold a tenth
of the honest look-alikes, each new set in wordings none of the patterns has (``docs/TRUST.md``). A
logistic regression over every word, pair of words and group of two to four letters (hashed into
``buckets``, TF-IDF weighted, L2-normalised, as scikit-learn's ``TfidfVectorizer`` with
``sublinear_tf``) weighs all of a text at once: it learns that "bcc" and "do not mention" in one
tool's text count together, and letter groups carry it across inflections and into languages its
sets have few sentences of. It is trained by ``benchmarks/scan_train.py`` on the labelled sets
(``benchmarks/scan_data/``, the tune set and the real catalog), never on the blind sets it is
measured on; that script writes this file and the two thresholds the scan uses (``Thresholds``).

The file: ``PBLM`` and a 4-byte header length, a JSON header (``buckets``, ``intercept``,
``thresholds``, what it was trained on), then ``buckets`` float32 IDF weights and ``buckets``
float32 coefficients, little-endian. Read with the standard library only (``array``): no numpy on
the scan's path. Scoring a definition costs about as much as the patterns do (a hash a feature).
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import operator
import re
import struct
import sys
import unicodedata
import zlib
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from mcp_patchbay.trust.reader import BREAK
from mcp_patchbay.trust.strings import Unit

__all__ = ["MAGIC", "MODEL_FILE", "Model", "Thresholds", "counted", "features"]

MODEL_FILE = "learned_model.bin"
MAGIC = b"PBLM"
_WORD = re.compile(r"\w+")
MAX_WORD = 40
"""Letters of a word its letter groups are taken from (a base64 blob is one long word)."""
LETTER_GROUPS = (2, 3, 4)
WORD_CACHE = 4096
"""Words whose hashed features are kept (a word's some 30 buckets: about 5 MB at most): a catalog's
words recur from tool to tool."""
MAX_FEATURE_TEXT = 64 * 1024
"""Characters of a definition's text the model reads (the scan's own limits cut longer ones first)."""


def features(texts: Iterable[str], buckets: int) -> Counter[int]:
    """How often each hashed feature occurs in ``texts`` (each read on its own: no pair across two):
    words (``w``), adjacent pairs of words (``b``) and each word's groups of two to four letters with
    a space either side (``c``), after NFKC and lower case. The hash is CRC-32, stable across
    processes and platforms (``hash`` is salted per process). ``buckets`` is a power of two."""
    return counted(texts, buckets)[0]


def counted(texts: Iterable[str], buckets: int) -> tuple[Counter[int], int]:
    """``features``, and how many words the texts hold."""
    mask = buckets - 1
    found: list[int] = []
    words_seen = 0
    left = MAX_FEATURE_TEXT
    for text in texts:
        if left <= 0:
            break
        read = unicodedata.normalize("NFKC", text[:left]).lower()
        left -= len(read)
        words = _WORD.findall(read)
        words_seen += len(words)
        for word in words:
            found.extend(_word_buckets(word, mask))
        found.extend([_bucket(f"b {first} {second}", mask) for first, second in itertools.pairwise(words)])
    return Counter(found), words_seen


@functools.lru_cache(maxsize=WORD_CACHE)
def _word_buckets(word: str, mask: int) -> tuple[int, ...]:
    """A word's own feature and its letter groups', hashed: most words recur from tool to tool."""
    padded = " " + word[:MAX_WORD] + " "
    groups = [f"c {padded[start : start + size]}" for size in LETTER_GROUPS for start in range(len(padded) - size + 1)]
    return tuple(_bucket(feature, mask) for feature in (f"w {word}", *groups))


def _bucket(feature: str, mask: int) -> int:
    return zlib.crc32(feature.encode("utf-8", "surrogatepass")) & mask


@dataclass(frozen=True, slots=True)
class Thresholds:
    """How the scan uses the model's probability (chosen by ``benchmarks/scan_train.py`` on sets the
    patterns were not tuned on, so a pattern's worth is measured where it did not learn):

    - ``holds``: at or above it the model's reading holds the definition by itself;
    - ``clears``: below it a pattern's finding about what the text says (not its hidden characters,
      look-alike letters or length, which the model does not see) is shown as a note, not held: the
      text as a whole reads as an honest tool's that names what a pattern looks for."""

    holds: float
    clears: float
    words: int = 0
    """The fewest words a definition's texts must hold for the model to say either: on fewer, a few
    words weigh all (a short honest "Lists extra things." reads as poisoned to it) and the patterns decide."""


@dataclass(frozen=True, slots=True)
class Strongest:
    """The sentence that weighs most in the model's reading, where it is, and its probability read alone."""

    unit: Unit
    offset: int
    text: str
    probability: float


class Model:
    """The weights, read once; ``probability`` and ``strongest`` are pure and thread-safe."""

    def __init__(
        self, idf: Sequence[float], coef: Sequence[float], intercept: float, thresholds: Thresholds, about: str = ""
    ) -> None:
        if len(idf) != len(coef) or len(idf) & (len(idf) - 1):
            raise ValueError("the model's weights are not two arrays of the same power-of-two length")
        self.buckets = len(idf)
        self.idf = idf
        self.coef = coef
        self._weight = array("d", map(operator.mul, idf, coef))
        self._square = array("d", map(operator.mul, idf, idf))
        """Each bucket's IDF times its coefficient, and its IDF squared: what a feature seen once
        adds to the score and to the norm (most are seen once), summed in C by ``weigh``."""
        self.intercept = intercept
        self.thresholds = thresholds
        self.about = about

    @classmethod
    @functools.cache
    def default(cls) -> Model:
        """The model shipped in the package, read by the first caller (the scan's worker thread)."""
        data = resources.files("mcp_patchbay.trust").joinpath(MODEL_FILE).read_bytes()
        return cls.from_bytes(data)

    @classmethod
    def from_bytes(cls, data: bytes) -> Model:
        if data[:4] != MAGIC or len(data) < 8:
            raise ValueError(f"{MODEL_FILE} is not a model file (no {MAGIC!r} header)")
        (size,) = struct.unpack("<I", data[4:8])
        header: dict[str, Any] = json.loads(data[8 : 8 + size].decode("utf-8"))
        buckets = int(header["buckets"])
        body = data[8 + size :]
        if len(body) != 8 * buckets:
            raise ValueError(f"{MODEL_FILE} holds {len(body)} bytes of weights, not {8 * buckets}")
        idf, coef = array("f"), array("f")
        idf.frombytes(body[: 4 * buckets])
        coef.frombytes(body[4 * buckets :])
        if sys.byteorder != "little":
            idf.byteswap()
            coef.byteswap()
        limits = header["thresholds"]
        thresholds = Thresholds(float(limits["holds"]), float(limits["clears"]), int(limits.get("words", 0)))
        return cls(idf, coef, float(header["intercept"]), thresholds, str(header.get("about", "")))

    def to_bytes(self, header: dict[str, Any]) -> bytes:
        """The file ``from_bytes`` reads: ``header`` (what it was trained on) with the weights' own fields."""
        fields = header | {
            "buckets": self.buckets,
            "intercept": self.intercept,
            "thresholds": {
                "holds": self.thresholds.holds,
                "clears": self.thresholds.clears,
                "words": self.thresholds.words,
            },
        }
        encoded = json.dumps(fields, sort_keys=True).encode("utf-8")
        idf, coef = array("f", self.idf), array("f", self.coef)
        if sys.byteorder != "little":
            idf.byteswap()
            coef.byteswap()
        return MAGIC + struct.pack("<I", len(encoded)) + encoded + idf.tobytes() + coef.tobytes()

    def probability(self, texts: Iterable[str]) -> float:
        """How much ``texts`` (one definition's strings) read as a poisoned tool's, 0 to 1."""
        return self.weigh(texts)[0]

    def weigh(self, texts: Iterable[str]) -> tuple[float, int]:
        """``probability``, and how many words it was read from (``Thresholds.words``)."""
        found, words = counted(texts, self.buckets)
        once = [bucket for bucket, count in found.items() if count == 1]
        weighted = math.fsum(map(self._weight.__getitem__, once))
        norm = math.fsum(map(self._square.__getitem__, once))
        for bucket, count in [item for item in found.items() if item[1] > 1]:
            value = 1.0 + math.log(count)
            norm += value * value * self._square[bucket]
            weighted += value * self._weight[bucket]
        logit = self.intercept + (weighted / math.sqrt(norm) if norm else 0.0)
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, logit)))), words

    def strongest(self, units: Sequence[Unit]) -> Strongest | None:
        """The sentence (or line) of ``units`` that adds the most to the whole text's reading as a
        poisoned tool's (its features' weights, summed without the whole text's normalisation: the
        sentence's share of the evidence): where a finding of the whole points a person to."""
        best: Strongest | None = None
        best_weight = 0.0
        for unit in units:
            start = 0
            for end in [*(m.end() for m in BREAK.finditer(unit.text)), len(unit.text)]:
                piece = unit.text[start:end]
                sentence = piece.strip()
                if sentence:
                    weight = self._evidence(sentence)
                    if best is None or weight > best_weight:
                        offset = start + len(piece) - len(piece.lstrip())
                        best, best_weight = Strongest(unit, offset, sentence, self.probability([sentence])), weight
                start = end
        return best

    def sentence_reads_poisoned(self, units: Sequence[Unit], where: str, offset: int) -> bool:
        """The sentence of ``where``'s unit at ``offset`` (-1: the whole unit), read alone, is at or above
        ``holds``: an order a long honest document dilutes in the whole text's reading."""
        for unit in units:
            if unit.where != where:
                continue
            text = unit.text
            if offset >= 0:
                start = 0
                for match in BREAK.finditer(text, 0, offset):
                    start = match.end()
                after = BREAK.search(text, offset)
                text = text[start : after.end() if after else len(text)]
            return self.probability([text.strip()]) >= self.thresholds.holds
        return False

    def _evidence(self, sentence: str) -> float:
        idf, coef = self.idf, self.coef
        return sum(
            (1.0 + math.log(count)) * idf[bucket] * coef[bucket]
            for bucket, count in counted([sentence], self.buckets)[0].items()
        )
