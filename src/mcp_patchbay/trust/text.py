"""The characters of a definition's text: hidden ones, direction changes, look-alikes. Pure.

Attackers hide instructions from the person reviewing a tool while the model still reads
them: characters that render as nothing (zero-width spaces, Unicode tags, which smuggle whole
ASCII sentences, variation selectors), controls that reverse the order text is shown in
(bidi overrides and isolates), and letters of another script that look like Latin ones
(a Cyrillic U+0430 for the ``a`` of ``read_file``), which also slip past patterns written in ASCII.

``visible_text`` is what the scan's patterns read: NFKC-normalised (fullwidth and
ligature forms become plain letters), hidden characters removed, and within a word that
mixes Latin with look-alike letters, those letters made Latin. A word wholly in another script
is left alone, so the patterns written for other languages still read it.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

__all__ = ["BIDI_CONTROLS", "HIDDEN", "Oddities", "name_lookalikes", "oddities", "plain", "visible_text"]

BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")
"""Embeddings, overrides, isolates and marks: they change the order text is displayed in."""

_EMOJI_JOINERS = frozenset("\u200d\ufe0e\ufe0f")
"""Zero-width joiner and the text/emoji variation selectors: real descriptions use them inside
emoji (``👨‍💻``, ``✔️``); they are hidden only when they follow no symbol."""

HIDDEN = re.compile(
    "["
    "\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f"  # controls, but tab and line breaks
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180e"  # soft hyphen, joiners, fillers, vowel separator
    "\u0600-\u0605\u06dd\u070f\u0890\u0891\u08e2"  # Arabic and Syriac format characters
    "\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f"  # zero-width, bidi, invisible operators
    "\u2800\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb"  # braille blank, filler, selectors, BOM
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0001-\U000e007f"  # tags: invisible ASCII ("ASCII smuggling")
    "\U000e0100-\U000e01ef"  # variation selectors supplement (bytes hidden as selectors)
    "]"
)
"""Characters that render as nothing or as a plain space: Unicode's format characters (Cf),
controls, fillers and variation selectors."""

LOOKALIKES: dict[str, str] = dict(
    zip(
        "аеорсухіјѕԁһӏԛԝгпАВЕКМНОРСТХІЈЅαεορντικχΑΒΕΖΗΙΚΜΝΟΡΤΥΧɑɡɩοᴜ",
        "aeopcyxijsdhlqwrnABEKMHOPCTXIJSaeopvtikxABEZHIKMNOPTYXagiou",
        strict=True,
    )
)
"""Cyrillic, Greek and IPA letters that look like Latin ones, and the Latin letter they pass
for (a subset of Unicode's confusables table: the ones seen in homoglyph attacks)."""

_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
_ASCII_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
"""The ASCII characters ``HIDDEN`` holds (DEL, escape, and the controls but tab and line breaks)."""
_ANSI = re.compile("\x1b\\[[0-?]*[ -/]*[@-~]")
"""A terminal's control sequence (``ESC [ 8 m`` conceals what follows): read as nothing, whole."""
_SPACES = re.compile(r"[^\S\n]+")


def _hidden(match: re.Match[str]) -> bool:
    char = match[0]
    if char in _EMOJI_JOINERS and match.start() > 0:
        return unicodedata.category(match.string[match.start() - 1]) not in ("So", "Sk", "Mn")
    return True


@dataclass(frozen=True, slots=True)
class Oddities:
    """What one text holds that a person reading it would not see as the model does."""

    hidden: int = 0
    """Characters that render as nothing (bidi controls included)."""
    bidi: int = 0
    """Of those, the ones that change the direction text is shown in."""
    tags: str = ""
    """Text spelled in Unicode tag characters, decoded (what a person cannot see at all)."""
    mixed_words: tuple[str, ...] = ()
    """Words that mix Latin letters with look-alike letters of another script."""


def plain(text: str) -> bool:
    """``text`` is ASCII without a control but tab and line breaks: nothing in it is hidden,
    nothing to fold (nearly all real definitions: the fast path)."""
    return text.isascii() and _ASCII_CONTROLS.search(text) is None


def oddities(text: str) -> Oddities:
    """Hidden characters, direction changes and mixed-script words in ``text`` (fast when the
    text is ``plain``, as nearly all real definitions are)."""
    if plain(text):
        return Oddities()
    found = [match[0] for match in HIDDEN.finditer(text) if _hidden(match)]
    bidi = sum(char in BIDI_CONTROLS for char in found)
    tags = "".join(chr(ord(char) - 0xE0000) for char in found if 0xE0020 <= ord(char) <= 0xE007E)
    mixed = tuple(word for word in _WORD.findall(text) if _mixes_scripts(word))
    return Oddities(len(found), bidi, tags, mixed[:5])


def _mixes_scripts(word: str) -> bool:
    if word.isascii():
        return False
    latin = any(char.isascii() for char in word)
    return latin and any(char in LOOKALIKES for char in word)


def name_lookalikes(name: str) -> str | None:
    """Why a name (a tool's, a prompt's, a parameter's) may pass for another, or None: a letter
    outside ASCII, a fullwidth form or a hidden character. MCP names are ASCII
    (``[A-Za-z0-9_.-]``), so any of these is a look-alike of a name a person would trust."""
    if name.isascii():
        return None
    odd = [char for char in name if not char.isascii()]
    shown = ", ".join(f"U+{ord(char):04X} {unicodedata.name(char, 'unnamed')}" for char in odd[:3])
    folded = "".join(LOOKALIKES.get(char, char) for char in unicodedata.normalize("NFKC", name))
    passes = f" (reads as '{folded}')" if folded.isascii() and folded != name else ""
    return f"{shown}{passes}"


def visible_text(text: str) -> str:
    """``text`` as the patterns read it: NFKC, hidden characters out, look-alikes in mixed words
    made Latin, runs of spaces made one (line breaks kept: patterns stop at them)."""
    if not plain(text):
        text = _ANSI.sub("", unicodedata.normalize("NFKC", text))
        text = HIDDEN.sub(lambda match: "" if _hidden(match) else match[0], text)
        text = _WORD.sub(_fold_word, text)
    return _SPACES.sub(" ", text).strip()


def _fold_word(match: re.Match[str]) -> str:
    word = match[0]
    return "".join(LOOKALIKES.get(char, char) for char in word) if _mixes_scripts(word) else word
