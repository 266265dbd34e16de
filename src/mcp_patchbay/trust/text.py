"""The characters of a definition's text: hidden ones, direction changes, look-alikes. Pure.

Attackers hide instructions from the person reviewing a tool while the model still reads
them: characters that render as nothing (zero-width spaces, Unicode tags, which smuggle whole
ASCII sentences, variation selectors), controls that reverse the order text is shown in
(bidi overrides and isolates), a terminal's escape sequences and a bare carriage return (what
a terminal shows is not what was sent), and letters of another script that look like Latin
ones (a Cyrillic U+0430 for the ``a`` of ``read_file``), which also slip past patterns written
in ASCII.

Some of these characters are honest where they stand, and only there: a tag character inside a
flag emoji (England's is a black flag, ``gbeng`` in tags and a cancel tag), a zero-width joiner
or non-joiner between letters of a script that needs them (Persian ``می‌خواهم``, Devanagari), a
non-joiner in a word's transliteration beside it (``mi‌khāham``), one inside an emoji sequence, a
left-to-right or right-to-left mark in text that holds Arabic or Hebrew, one variation selector
after an emoji, a keycap's digit or a CJK ideograph. A second selector in a row is never honest:
that is how bytes are smuggled after an emoji.

``visible_text`` is what the scan's patterns read: NFKC-normalised (fullwidth and
ligature forms become plain letters), hidden characters removed, and within a word that
mixes Latin with look-alike letters, those letters made Latin. A word wholly in another script
is left alone, so the patterns written for other languages still read it.
"""

from __future__ import annotations

import html
import re
import unicodedata
from dataclasses import dataclass

__all__ = [
    "BIDI_CONTROLS",
    "HIDDEN",
    "Oddities",
    "name_lookalikes",
    "oddities",
    "only_colour_codes",
    "own_notation",
    "plain",
    "raw_offset",
    "read_through",
    "visible_styles_removed",
    "visible_text",
]

BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")
"""Embeddings, overrides, isolates and marks: they change the order text is displayed in."""

_MARKS = frozenset("\u200e\u200f\u061c\u2066\u2067\u2068\u2069")
"""Direction marks and isolates: honest in a text with right-to-left letters (an isolate keeps an
Arabic or Hebrew name in order inside English; overrides and embeddings, which reorder, are not)."""
"""Left-to-right, right-to-left and Arabic letter marks: honest in text that holds a right-to-left
script (they place punctuation and Latin names; they cannot reorder a word)."""

_JOINERS = frozenset("\u200c\u200d")
_SELECTORS = re.compile("[\ufe00-\ufe0f\U000e0100-\U000e01ef]")

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
controls, fillers and variation selectors (some honest in context: ``_honest``)."""

_NAMED: dict[str, tuple[str, ...]] = {
    "\u200b": ("zwsp", "200b", "zero-width space", "zero width space"),
    "\u200c": ("zwnj", "200c", "non-joiner"),
    "\u200d": ("zwj", "200d", "joiner"),
    "\u200e": ("lrm", "200e", "left-to-right mark"),
    "\u200f": ("rlm", "200f", "right-to-left mark"),
    "\u2060": ("wj", "2060", "word joiner"),
    "\ufeff": ("bom", "feff", "zwnbsp", "byte order mark"),
}
"""Invisible characters and the names a text gives them: one written beside its own name ("keeps
joiners \u200d(ZWJ)\u200d as they are") is shown, not hidden, in a text about such characters."""
_NAME_REACH = 12
"""How far from an invisible character its name may be written (a parenthesis and a space between)."""

_FLAG = re.compile("\U0001f3f4[\U000e0030-\U000e0039\U000e0061-\U000e007a]{2,7}\U000e007f")
"""A subdivision flag: a black flag, its region in tag letters, a cancel tag (RGI's are five)."""

LOOKALIKES: dict[str, str] = dict(
    zip(
        "аеорсухіјѕԁһӏԛԝгпАВЕКМНОРСТХІЈЅαεορντικχΑΒΕΖΗΙΚΜΝΟΡΤΥΧɑɡɩοᴜıȷ",
        "aeopcyxijsdhlqwrnABEKMHOPCTXIJSaeopvtikxABEZHIKMNOPTYXagiouij",
        strict=True,
    )
)
"""Cyrillic, Greek and IPA letters that look like Latin ones, and the Latin letter they pass
for (a subset of Unicode's confusables table: the ones seen in homoglyph attacks)."""

_CONFUSABLE_SCRIPTS = ("CYRILLIC", "GREEK", "ARMENIAN", "CHEROKEE", "COPTIC", "LISU", "CANADIAN")
"""Scripts with letters that pass for Latin ones: mixed into a Latin word of a name, a disguise."""
_CONFUSABLE_LATIN = ("DOTLESS", "SMALL CAPITAL", "SCRIPT", "TURNED", "LONG S", "OPEN O", "ALPHA")
"""Non-ASCII Latin letters that pass for ASCII ones (a dotless i, a Latin alpha, small capitals); a
letter with a diacritic (an e with an acute accent) is seen as what it is."""

_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
_NAME_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_ASCII_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]|\r(?=[^\n])")
"""The ASCII characters ``HIDDEN`` holds (DEL, escape, and the controls but tab and line breaks),
and a carriage return before anything but a line feed: a terminal writes what follows over the line."""
_BARE_CR = re.compile("\r(?=[^\n])")
_ANSI = re.compile("\x1b(?:\\[[0-?]*[ -/]*[@-~]|\\][^\x07\x1b]*(?:\x07|\x1b\\\\)?)")
"""A terminal's control sequence (``ESC [ 8 m`` conceals what follows; ``ESC ] 8`` a hyperlink's
hidden address): read as nothing, whole."""
_SPACES = re.compile(r"[^\S\n]+")
_ENTITY = re.compile(r"&(#\d{1,7}|#[xX][0-9a-fA-F]{1,6}|[a-zA-Z]{2,8});")


def _letter_of_joining_script(char: str) -> bool:
    """Arabic, Syriac, Thaana, N'Ko, the Indic scripts, Sinhala, Mongolian: scripts whose
    spelling uses zero-width joiners and non-joiners between letters."""
    code = ord(char)
    return (
        0x0600 <= code <= 0x0DFF
        or 0x1800 <= code <= 0x18AF
        or 0xA8E0 <= code <= 0xA8FF
        or 0xFB50 <= code <= 0xFDFF
        or 0xFE70 <= code <= 0xFEFF
    ) and unicodedata.category(char)[0] in "LM"


def _letter_of_unspaced_script(char: str) -> bool:
    """Thai, Lao, Tibetan, Myanmar and Khmer: scripts written without spaces between words, where a
    zero-width space marks where a line may break."""
    code = ord(char)
    return (0x0E00 <= code <= 0x0FFF or 0x1000 <= code <= 0x109F or 0x1780 <= code <= 0x17FF) and unicodedata.category(
        char
    )[0] in "LM"


def _right_to_left(text: str) -> bool:
    return any(0x0590 <= ord(c) <= 0x08FF or 0xFB1D <= ord(c) <= 0xFDFF or 0xFE70 <= ord(c) <= 0xFEFC for c in text)


def _takes_selector(char: str) -> bool:
    """A character a variation selector honestly follows: a symbol (emoji), a keycap's digit, ``#``
    or ``*``, or a CJK ideograph (Japanese place and family names are spelled with one)."""
    if char in "0123456789#*":
        return True
    category = unicodedata.category(char)
    if category in ("So", "Sk", "Sm", "Po"):
        return True
    code = ord(char)
    return 0x3400 <= code <= 0x9FFF or 0xF900 <= code <= 0xFAFF or 0x20000 <= code <= 0x3FFFF


def _emoji_side(char: str) -> bool:
    return unicodedata.category(char) in ("So", "Sk", "Me") or char == "\ufe0f"


def _honest_between(char: str, before: str, after: str, at: int) -> bool:
    """An invisible character honest for the characters either side of it (``at``: where it is)."""
    if char in _JOINERS:
        if before and _letter_of_joining_script(before):
            if after and _letter_of_joining_script(after):
                return True  # between letters of a script spelled with joiners
            if unicodedata.category(before) == "Mn" and not (after and after.isalpha()):
                return True  # after a virama ending a word (Malayalam's chillu: "\u0d33\u0d4d\u200d.")
        return bool(char == "\u200d" and before and after and _emoji_side(before)) and unicodedata.category(after) in (
            "So",
            "Sk",
        )
    if _SELECTORS.match(char):
        return bool(before) and not _SELECTORS.match(before) and _takes_selector(before)
    if char == "\u00ad":
        return before.isalpha() and after.isalpha()  # inside a word, where it may break ("Donau\u00addampf")
    if char == "\u200b":
        # between words of Thai, Lao, Khmer, Myanmar or Tibetan, which put no space there
        return bool(before and after) and _letter_of_unspaced_script(before) and _letter_of_unspaced_script(after)
    return char == "\ufeff" and at == 0  # a byte order mark a file's text began with


def hidden_positions(text: str) -> list[int]:
    """Where ``text`` holds a character that shows as nothing and is not honest where it stands."""
    flags: set[int] = set()
    if "\U0001f3f4" in text:
        for match in _FLAG.finditer(text):
            flags.update(range(match.start() + 1, match.end()))
    rtl: bool | None = None
    spelled_with_joiners: bool | None = None
    found: list[int] = []
    for match in HIDDEN.finditer(text):
        at = match.start()
        if at in flags:
            continue
        char = match[0]
        before = text[at - 1] if at > 0 else ""
        after = text[at + 1] if at + 1 < len(text) else ""
        if _honest_between(char, before, after, at):
            continue
        if char in _NAMED and _named_beside(text, at, _NAMED[char]):
            continue
        if char == "\u200c" and before.isalpha() and after.isalpha():
            if spelled_with_joiners is None:
                spelled_with_joiners = _joins_letters(text)
            if spelled_with_joiners:
                continue  # a transliteration beside a word that is spelled with it ("mi\u200ckhaham")
        if char in _MARKS:
            if rtl is None:
                rtl = _right_to_left(text)
            if rtl:
                continue
        found.append(at)
    found.extend(match.start() for match in _BARE_CR.finditer(text))
    return sorted(found)


def _joins_letters(text: str) -> bool:
    """``text`` holds a non-joiner between two letters of a script spelled with it (Persian)."""
    ends = range(1, len(text) - 1)
    return any(
        text[at] == "\u200c" and _letter_of_joining_script(text[at - 1]) and _letter_of_joining_script(text[at + 1])
        for at in ends
    )


def _named_beside(text: str, at: int, names: tuple[str, ...]) -> bool:
    """The invisible character at ``at`` has its name written beside it: a text about such characters."""
    near = text[max(0, at - _NAME_REACH) : at + _NAME_REACH + 1].lower()
    return any(name in near for name in names)


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


_COLOUR_CODE = re.compile("\x1b\\[(?:[0-9]{1,3}(?:;[0-9]{1,3})*)?m")
"""A terminal's colour or style sequence (SGR: ``ESC [ 1 ; 33 m``)."""


def only_colour_codes(text: str) -> bool:
    """``text`` is nothing but terminal colour or style sequences (an enum of colours a theme tool
    takes): there is no text in it to hide, and a colour alone changes no word a person reads."""
    return "\x1b" in text and not _COLOUR_CODE.sub("", text).strip()


_SGR = re.compile("\x1b(?:\\\\)?\\[([0-9;]*)m")
"""A style sequence, or one as a regular expression spells it (``ESC\\[31m``, a log filter's
pattern for red lines): there a terminal reads ESC and the backslash as a string terminator with
nothing to end, and shows ``[31m`` as it is, so it hides no more than the sequence would."""
_VISIBLE_STYLES = frozenset(
    {"", "0", "1", "3", "4", "22", "23", "24", "39", *map(str, range(31, 37)), *map(str, range(91, 97))}
)
"""Styles that leave every word seen: reset, bold, italic, underline, and the foreground colours but
black and white (which a terminal of that colour shows as nothing). Concealed text (8), a
background, faint text and cursor moves can hide words: not among them."""


def visible_styles_removed(text: str) -> str:
    """``text`` without its terminal style sequences that leave every word seen (a recording's
    ``ESC[32mPASS ESC[0m``): what is left is what can hide text. In code: whether a sequence hides
    anything depends on its parameters, read one by one."""
    if "\x1b" not in text:
        return text
    return _SGR.sub(lambda m: "" if set(m[1].split(";")) <= _VISIBLE_STYLES else m[0], text)


def plain(text: str) -> bool:
    """``text`` is ASCII without a control but tab and line breaks: nothing in it is hidden,
    nothing to fold (nearly all real definitions: the fast path)."""
    return text.isascii() and _ASCII_CONTROLS.search(text) is None


def oddities(text: str) -> Oddities:
    """Hidden characters, direction changes and mixed-script words in ``text`` (fast when the
    text is ``plain``, as nearly all real definitions are)."""
    if plain(text):
        return Oddities()
    found = [text[at] for at in hidden_positions(text)]
    bidi = sum(char in BIDI_CONTROLS for char in found)
    tags = "".join(chr(ord(char) - 0xE0000) for char in found if 0xE0020 <= ord(char) <= 0xE007E)
    mixed = tuple(word for word in _WORD.findall(text) if _mixes_scripts(word))
    if mixed and _latin_alphabet_beyond_ascii(text):
        mixed = tuple(word for word in mixed if not _latin_lookalikes_only(word))
    return Oddities(len(found), bidi, tags, mixed[:5])


def _latin_alphabet_beyond_ascii(text: str) -> bool:
    """``text`` holds Latin letters outside ASCII that pass for none (Turkish ``ş``, ``ö``, ``ç``):
    it is written in an alphabet whose letters may include one that does (Turkish's dotless i, U+0131)."""
    return any(
        not char.isascii()
        and char.isalpha()
        and char not in LOOKALIKES
        and unicodedata.name(char, "").startswith("LATIN")
        for char in text
    )


def _latin_lookalikes_only(word: str) -> bool:
    """Every letter of ``word`` outside ASCII is a Latin letter (a dotless i): a word of a Latin
    alphabet, not one mixing scripts."""
    return all(char.isascii() or unicodedata.name(char, "").startswith("LATIN") for char in word)


def _mixes_scripts(word: str) -> bool:
    if word.isascii():
        return False
    latin = any(char.isascii() for char in word)
    return latin and any(char in LOOKALIKES for char in word)


def _folds_to_ascii(char: str) -> bool:
    """A compatibility form NFKC makes an ASCII letter or digit (fullwidth, mathematical letters);
    a Thai or Korean letter NFKC spells otherwise is no disguise."""
    if char.isascii():
        return False
    folded = unicodedata.normalize("NFKC", char)
    return folded != char and folded.isascii() and folded.isalnum()


def _confusable(char: str) -> bool:
    if char in LOOKALIKES:
        return True
    name = unicodedata.name(char, "")
    if name.startswith("LATIN"):
        return any(part in name for part in _CONFUSABLE_LATIN)
    return name.startswith(_CONFUSABLE_SCRIPTS)


def own_notation(name: str, text: str) -> bool:
    """Every letter of ``name`` that could pass for another is one its own ``text`` (the description) writes too, and
    each is either a Latin letter of an alphabet beyond ASCII that text is written in (Turkish
    ``\u015fifre_s\u0131f\u0131rla`` described in Turkish) or a Greek letter with no Latin twin used as a
    symbol (``compute_\u0394v`` beside "\u0394v = Isp \u00b7 g\u2080 \u00b7 ln(m\u2080/m_f)", ``\u03bcs``): the name is
    spelled as the tool's own text is, not disguised as a Latin name. A Cyrillic or Greek letter
    that passes for a Latin one never is."""
    odd = {char for char in name if not char.isascii() and char.isalpha() and _confusable(char)}
    if not odd or not text:
        return False
    for char in odd:
        if char not in text:
            return False
        label = unicodedata.name(char, "")
        if label.startswith("GREEK") and char not in LOOKALIKES:
            continue
        if not (label.startswith("LATIN") and _latin_alphabet_beyond_ascii(text)):
            return False
    return True


def name_lookalikes(name: str) -> str | None:
    """Why a name (a tool's, a prompt's, a parameter's) may pass for another, or None: a hidden
    character, a form NFKC makes ASCII (fullwidth, mathematical letters), a word mixing ASCII
    letters with letters that pass for Latin ones, or a word spelled wholly in such letters.
    A name in another script (``날씨_조회``, ``погода``) passes for no Latin name and is left alone."""
    if name.isascii() and plain(name):
        return None
    folded = "".join(LOOKALIKES.get(char, char) for char in unicodedata.normalize("NFKC", name))
    suspicious = bool(hidden_positions(name)) or any(_folds_to_ascii(char) for char in name)
    if not suspicious:
        for word in _NAME_WORD.findall(name):
            if word.isascii():
                continue
            letters = [char for char in word if not char.isdigit()]
            if any(char.isascii() for char in letters) and any(_confusable(char) for char in letters):
                suspicious = True  # Latin letters with a look-alike among them: "read" with a Cyrillic a
            elif letters and all(char in LOOKALIKES or char.isascii() for char in letters):
                suspicious = True  # every letter passes for a Latin one: "sep" spelled in Cyrillic
            if suspicious:
                break
    if not suspicious:
        return None
    odd = [char for char in name if not char.isascii()]
    shown = ", ".join(f"U+{ord(char):04X} {unicodedata.name(char, 'unnamed')}" for char in odd[:3])
    visible = "".join(char for at, char in enumerate(folded) if at not in set(hidden_positions(folded)))
    passes = f" (reads as '{visible}')" if visible.isascii() and visible != name else ""
    return f"{shown}{passes}"


def read_through(text: str) -> set[int]:
    """Where ``text`` holds what the patterns read past: its hidden characters, and every soft hyphen,
    honest or not (one splitting "ig\u00adnore" hides nothing, yet would break the word for a pattern)."""
    found = set(hidden_positions(text))
    if "\u00ad" in text:
        found.update(at for at, char in enumerate(text) if char == "\u00ad")
    return found


def visible_text(text: str) -> str:
    """``text`` as the patterns read it: HTML character references decoded (``&#73;gnore``), NFKC,
    hidden characters out, look-alikes in mixed words made Latin, runs of spaces made one (line
    breaks kept: patterns stop at them; a carriage return that starts a line over is one)."""
    if "&" in text and _ENTITY.search(text):
        text = html.unescape(text)
    if not plain(text):
        text = _ANSI.sub("", unicodedata.normalize("NFKC", text))
        drop = read_through(text)
        if drop:
            text = "".join(("\n" if char == "\r" else "") if at in drop else char for at, char in enumerate(text))
        text = _WORD.sub(_fold_word, text)
    return _SPACES.sub(" ", text).strip()


def _fold_word(match: re.Match[str]) -> str:
    word = match[0]
    return "".join(LOOKALIKES.get(char, char) for char in word) if _mixes_scripts(word) else word


def raw_offset(text: str, visible: int) -> int:
    """Where in ``text`` (as the server wrote it) the character at ``visible`` of its
    ``visible_text`` is: exact for plain text, close otherwise (a compatibility form NFKC spells
    with several letters counts as its first)."""
    if plain(text):
        kept = list(range(len(text)))
    else:
        removed: set[int] = set()
        for match in _ANSI.finditer(text):
            removed.update(range(match.start(), match.end()))
        removed.update(at for at in read_through(text) if text[at] != "\r")
        kept: list[int] = []
        for at, char in enumerate(text):
            if at not in removed:
                kept.extend([at] * len(unicodedata.normalize("NFKC", char)))
    # Spaces as visible_text collapses them: a run of white space (not a line break) is one.
    mapped: list[int] = []
    previous_space = False
    for at in kept:
        char = text[at]
        space = char.isspace() and char != "\n" and not (char == "\r" and at + 1 < len(text) and text[at + 1] != "\n")
        if space and previous_space:
            continue
        mapped.append(at)
        previous_space = space
    start = next((i for i, at in enumerate(mapped) if not text[at].isspace()), 0)
    mapped = mapped[start:]
    if not mapped:
        return 0
    return mapped[min(max(visible, 0), len(mapped) - 1)]
