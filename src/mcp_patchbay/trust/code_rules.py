"""The scan's rules that cannot be patterns, each saying why beside it. Pure.

- ``characters``: hidden characters, direction controls, look-alike letters (``text``): a pattern
  reads the text after they are removed and folded, so it cannot see them.
- ``decoded``: text spelled in base64 or ROT13: a pattern cannot decode.
- ``mentions``: another server's tool or another server named: which names are another server's
  is known only from the catalog (``ScanContext``), as the scan runs.
- ``fixed_destinations``: a parameter whose default is an address data leaves by and whose
  text says to keep it, a recipient parameter whose default is an outside address, a schema
  ``pattern`` that makes every value start with an outside URL's query: each joins fields of one
  parameter (its name, default, description or pattern), and a pattern reads one string at a time.
- ``OwnPurpose``: what a definition says it is for, and whether a name is its own: the
  definition's own name, parameters and server's tools are known only as the scan runs.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Collection, Iterator, Sequence
from typing import cast

from mcp_patchbay.trust.context import ScanContext, ascii_skeleton, name_words, server_key
from mcp_patchbay.trust.findings import Findings, clip
from mcp_patchbay.trust.fingerprint import Definition
from mcp_patchbay.trust.reader import BREAK, Reading
from mcp_patchbay.trust.rules import Expression
from mcp_patchbay.trust.strings import Unit
from mcp_patchbay.trust.text import (
    name_lookalikes,
    oddities,
    only_colour_codes,
    own_notation,
    plain,
    raw_offset,
    visible_styles_removed,
)

__all__ = [
    "DECODED",
    "MAX_TOKEN_CHARS",
    "OwnPurpose",
    "characters",
    "decoded",
    "fixed_destinations",
    "mentions",
    "near_name",
]

PURPOSE_CHARS = 300
"""The most characters of a description read as what the tool says it is for (its first sentence)."""
MIN_ENCODED = 24
"""The shortest run of base64 decoded (16 bytes: a short sentence)."""
MAX_TOKEN_CHARS = 256
"""The longest word looked up as another server's tool (MCP names have at most 128 characters)."""
_IDENTIFIER = re.compile(r"[a-z0-9][a-z0-9_.:/-]{4,}[a-z0-9]")
"""Words that could name a tool (six characters or more: shorter names are never distinctive)."""
_BASE64 = re.compile(r"[A-Za-z0-9+/]{24,}={0,2}")
_NAMES_THE_TRICK = re.compile(r"homoglyph|look-?alike|confusable|cyrillic|greek|spoof|punycode|\bidn\b|impersonat")
"""Words of a text about look-alike letters (a phishing checker, a scanner of tool names)."""
_TOOL_NAME = re.compile(r"[a-z][a-z0-9]*(?:(?:_|__|\.)[a-z0-9]+)+")


def characters(units: Sequence[Unit], found: Findings, session_tools: Collection[str] | None = None) -> None:
    """Hidden characters, direction controls, look-alike names and mixed-script words (``session_tools``:
    the session's distinctive tool names, lower case, ``ScanContext.tools_by_name``). In code: the patterns read
    the text with these removed and folded, and whether an invisible character is honest depends on the
    characters around it (a joiner inside Persian, a flag's tags)."""
    ascii_lookalike_name(units, found, session_tools or ())
    for unit in units:
        if plain(unit.text) or unit.scope == "name-parameter":
            continue
        if unit.scope == "name":
            why = name_lookalikes(unit.text)
            if why is not None and not own_notation(unit.text, _own_text(units)):
                found.check("lookalike-name", "characters", unit.where, why)
        if only_colour_codes(unit.text):
            continue  # a value that is only a terminal colour code (an enum of colours) hides no text
        text = visible_styles_removed(unit.text)  # a recording's colours around words it shows
        if plain(text):
            continue
        odd = oddities(text)
        if odd.bidi:
            found.check("direction-controls", "characters", unit.where, f"{odd.bidi} direction controls")
        if odd.hidden > odd.bidi:
            said = f'hidden text: "{clip(odd.tags)}"' if odd.tags else f"{odd.hidden - odd.bidi} hidden characters"
            found.check("hidden-characters", "characters", unit.where, said)
        if odd.mixed_words and unit.scope != "name":
            check = "mixed-script-named" if _explained(unit.text, odd.mixed_words) else "mixed-script"
            found.check(check, "characters", unit.where, ", ".join(odd.mixed_words[:3]))


def _own_text(units: Sequence[Unit]) -> str:
    """The definition's title and description: what a name's own notation is read against."""
    return "\n".join(u.text for u in units if u.where in ("title", "description"))


_ASCII_TWINS = re.compile(r"I|[01|]|rn|vv")
"""ASCII that passes for other ASCII letters in a name: a capital I or a 1 or | for an l, a 0 for an o,
rn for m, vv for w."""
_NAMED_TOOL = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[_.-][A-Za-z0-9]+)+")


def ascii_lookalike_name(units: Sequence[Unit], found: Findings, session_tools: Collection[str]) -> None:
    """A name spelled in ASCII that reads as another tool's name, one of the session's or one its own
    text names (``read_fiIe``, a capital I for the l, beside "a drop-in for read_file"; ``post_rnessage``
    beside Slack's ``post_message``): it passes for the tool the user trusts. In code: two names are
    compared letter by letter once the look-alikes are folded, which no pattern over one string can do."""
    name = next((u.text for u in units if u.scope == "name"), "")
    if not name.isascii() or _ASCII_TWINS.search(name) is None:
        return  # the common case: nothing in the name passes for another letter
    skeleton, lowered = ascii_skeleton(name), name.lower()
    if skeleton != lowered and skeleton in session_tools:
        found.check("ascii-lookalike-name", "characters", "name", f"'{name}' reads as '{skeleton}'")
        return
    for unit in units:
        if unit.scope not in ("text", "parameter"):
            continue
        for other in _NAMED_TOOL.findall(unit.text):
            if other.lower() != lowered and ascii_skeleton(other) == skeleton:
                found.check("ascii-lookalike-name", "characters", "name", f"'{name}' reads as '{other}'")
                return


NEAR_NAME_CHARS = 10
"""The shortest name compared with the session's for a one-letter slip (``brave_web_seach``): shorter
names are one letter apart by chance (``get_user``, ``get_uses``)."""


def near_name(name: str, server: str, context: ScanContext, found: Findings) -> None:
    """A name one letter off another server's tool (a letter dropped, added, changed or two swapped:
    ``run_qurey`` beside ``run_query``), not a plural or a version of it: it passes for the tool the user trusts
    when the model or the person picks by eye. In code: it compares the name with every name of the
    session (rapidfuzz's optimal string alignment, in C)."""
    lowered = name.lower()
    if len(lowered) < NEAR_NAME_CHARS:
        return
    from rapidfuzz import process  # noqa: PLC0415 - the scan runs off the event loop, after start
    from rapidfuzz.distance import OSA  # noqa: PLC0415

    for other, distance, _ in process.extract(lowered, context.names, scorer=OSA.distance, score_cutoff=1, limit=4):
        if distance == 0 or server in context.tools_by_name[other] or _variant_of(lowered, other):
            continue
        found.check("near-name", "characters", "name", f"'{name}' is one letter off '{other}'")
        return


def _variant_of(one: str, other: str) -> bool:
    """``one`` and ``other`` differ by a plural or a version's digit (``list_repo``, ``create_issue2``)."""
    short, long = sorted((one, other), key=len)
    return long in (short + "s", short + "es") or (long.startswith(short) and long[len(short) :].isdigit())


def _explained(text: str, words: Sequence[str]) -> bool:
    """Every mixed word is quoted, in a text that names look-alike letters as what it is about (a
    phishing checker's example: "a Cyrillic 'a' in 'paypal.com'", its a in Cyrillic): a note, not held. In code: a
    pattern reads the text after look-alikes are folded, so it cannot see which word mixed them."""
    if _NAMES_THE_TRICK.search(text.lower()) is None:
        return False
    return all(_quoted(text, word) for word in words)


def _quoted(text: str, word: str) -> bool:
    at = text.find(word)
    return at > 0 and text[at - 1] in "'\"`\u2018\u201c"


DECODED = " (decoded from "
"""How the ``where`` of a decoded string reads ("description (decoded from base64)")."""
_ROT13 = str.maketrans(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", "nopqrstuvwxyzabcdefghijklmNOPQRSTUVWXYZABCDEFGHIJKLM"
)
_ROT13_WORDS = (" gur ", " naq ", " lbh ", " hfre ", " bs ", " jvgu ", " guvf ", " gung ")
"""Common English words in ROT13 (the, and, you, user, of, with, this, that): two of them, and the
text is decoded and read. English holds none of them as words."""


def _rot13(unit: Unit) -> str | None:
    """``unit``'s text decoded from ROT13 if it holds English in ROT13, else None."""
    if " gur " not in unit.text and " naq " not in unit.text and " lbh " not in unit.text:
        return None  # the common case, decided without lowering the text
    text = unit.text.lower()
    encoded = sum(word in text for word in _ROT13_WORDS)
    if encoded < 2:
        return None
    decoded = text.translate(_ROT13)
    if sum(word in decoded for word in _ROT13_WORDS) >= encoded:
        return None  # as much "ROT13" decoded as before: not English in ROT13
    return decoded


def decoded(units: Sequence[Unit], found: Findings) -> Iterator[Unit]:
    """Text spelled in base64 or ROT13 inside a string, decoded, as one more string of the same
    field (a note says so): a person sees letters, the model can decode them. In code, not a
    pattern: a pattern cannot decode."""
    for unit in units:
        if unit.scope not in ("text", "parameter") or len(unit.text) < MIN_ENCODED:
            continue
        rotated = _rot13(unit)
        if rotated is not None:
            found.check("encoded-text", "characters", unit.where, "ROT13: " + clip(rotated))
            yield Unit(f"{unit.where}{DECODED}ROT13)", rotated, unit.scope)
        if max(map(len, unit.text.split()), default=0) < MIN_ENCODED:
            continue  # no word long enough: the common case, decided without a search
        for match in _BASE64.finditer(unit.text):
            words = _words_in_base64(match[0])
            if words is not None:
                found.check("encoded-text", "characters", unit.where, clip(words))
                yield Unit(f"{unit.where}{DECODED}base64)", words, unit.scope)


def _words_in_base64(candidate: str) -> str | None:
    """``candidate`` decoded, if it is base64 of readable text (words and spaces), else None."""
    try:
        raw = base64.b64decode(candidate + "=" * (-len(candidate) % 4), validate=True)
        text = raw.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    letters = sum(char.isalpha() for char in text)
    if text.count(" ") < 2 or letters < 0.6 * len(text) or not text.isprintable():
        return None
    return text


def mentions(
    read: Reading,
    server: str,
    context: ScanContext,
    order: Expression | None,
    found: Findings,
    *,
    pointer: Expression | None = None,
) -> None:
    """Another server's tool, or another server, named in ``server``'s text: held when the sentence
    gives the model an order, else a note. In code: which names are another server's is known only
    from the catalog, as the scan runs."""
    seen: set[str] = set()
    for match in _IDENTIFIER.finditer(read.text):
        token = match[0]
        if token in seen or len(token) > MAX_TOKEN_CHARS:
            continue
        seen.add(token)
        named = context.other_tool(token, server)
        if named is not None:
            owners = ", ".join(sorted(context.tools_by_name[named]))
            check = _ordered(read, order, match.span(), "other-server-tool", pointer)
            _check_at(read, match.start(), found, check, f"{named} (a tool of {owners})")
        prefix = context.other_server_prefix(token, server)
        if prefix is not None:
            check = _ordered(read, order, match.span(), "other-server", pointer)
            _check_at(read, match.start(), found, check, token)
    if context.server_phrase is not None:
        own = server_key(server).replace("_", "")
        for match in context.server_phrase.finditer(read.text):
            named = server_key(match[1] or match[2] or "").replace(" ", "").replace("_", "")
            if named != own:
                check = _ordered(read, order, match.span(), "other-server", pointer)
                _check_at(read, match.start(), found, check, clip(match[0]))
                break


def _ordered(
    read: Reading, order: Expression | None, span: tuple[int, int], check: str, pointer: Expression | None
) -> str:
    """``check`` when the sentence naming another server or its tool gives the model an order
    (``Call mail__send_email first``), else its note (``-named``: "use after github's
    create_pull_request" names a tool and steers nothing; so does a workflow pointer, ``pointer``:
    "To open a pull request, use github's create_pull_request", adding or changing nothing)."""
    if order is None:
        return check
    sentence = read.sentence(*span)
    if read.first_in(order, sentence) is None:
        return f"{check}-named"
    if pointer is not None and read.first_in(pointer, sentence) is not None:
        return f"{check}-named"
    return check


def _check_at(read: Reading, position: int, found: Findings, check: str, excerpt: str) -> None:
    if check.endswith("-named") and check.removesuffix("-named") in found:
        return
    unit, offset = read.unit_at(position)
    where = unit.where if unit is not None else ""
    found.check(check, "shadowing", where, excerpt, offset=raw_offset(unit.text, offset) if unit else -1)


class OwnPurpose:
    """What a definition says it is for: its name as words, its title and the first sentence of its
    description (what a tool is comes first; a long description's later sentences may be anything),
    read once and only when a pattern's ``unless_tool`` asks. In code: the definition's own name,
    parameters and server's tools are known only as the scan runs."""

    def __init__(
        self, definition: Definition, read: Sequence[Unit] = (), server_names: frozenset[str] = frozenset()
    ) -> None:
        self.definition = definition
        self.text: str | None = None
        self.read = read
        self.server_names = server_names

    def names_another(self, text: str) -> bool:
        """``text`` names a tool that is not this one: an identifier that is neither this
        definition's name, nor a parameter's, nor a tool of the same server."""
        own = {str(self.definition.get("name", "")).lower(), *self.server_names}
        own.update(unit.text.lower() for unit in self.read if unit.scope == "name-parameter")
        return any(
            token not in own and token.rpartition(".")[2] not in own and token.rpartition("__")[2] not in own
            for token in _TOOL_NAME.findall(text)
        )

    def matches(self, expression: re.Pattern[str]) -> bool:
        if self.text is None:
            description = str(self.definition.get("description") or "")[:PURPOSE_CHARS]
            first = BREAK.search(description)
            parts = [name_words(str(self.definition.get("name", ""))), str(self.definition.get("title") or "")]
            parts.append(description[: first.start()] if first else description)
            self.text = "\n".join(parts).lower()
        return expression.search(self.text) is not None


_ADDRESS = re.compile(
    r"(https?|s3|gs|ftps?|sftp|wss?)://[^\s'\"]+|[\w.+-]+@[\w-]+(\.[\w-]+)*\.[a-z]{2,}", re.IGNORECASE
)
"""An address data can leave by: a URL of a network scheme, a bucket, an email address."""
_KEEP = re.compile(
    r"keep (the |this |it as )?(default|as is)|leave (it |this |the default |the value )?(as is|unchanged|alone)"
    r"|(always|only) use (this|the) default|(do not|don't|never) (change|modify|edit|alter|override|replace)"
    r"|(must|should) not be (changed|modified|edited|altered|overridden)|\bas is\b|keep the default"
)
"""Words telling the model to keep a value as the server set it."""
_LEAVES = re.compile(
    r"bcc|\bcc\b|cop(y|ies)|mirror|backup|audit|export|destination|forward|webhook|callback|upload|\bput\b|\bpost\b"
    r"|sink|relay|collector|report|\blog|archive|sync|dump|notify|recipient|send"
)
"""What says data goes to the address: a copy, a mirror, a destination, a webhook."""


_RECIPIENTS = re.compile(
    r"(to|cc|bcc|recipients?|attendees?|guests?|invitees?|participants?|watchers?|reviewers?|members?"
    r"|share_?with|notify|subscribers?|collaborators?|assignees?|followers?)(_?(list|emails?|addresses))?"
)
"""Parameter names whose values are who receives or sees what the call makes."""
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(\.[\w-]+)*\.[a-z]{2,}", re.IGNORECASE)
_PLACEHOLDER = re.compile(r"@(example|test|domain|company|acme|email|yourcompany|your-domain)\.", re.IGNORECASE)
_URL_PREFIX = re.compile(r"\^\(?(\?:)?https?:(//|\\/\\/)[^()\[\]*+|]*=")
"""A schema ``pattern`` making every value start with a URL whose query ends the fixed part
(``^https://host/r[?]u=.*$``): the value is wrapped into another site's address."""


def _default_recipient(name: str, default: object) -> str | None:
    """An outside address a recipient parameter holds by default (one value or a list), else None."""
    if _RECIPIENTS.fullmatch(name.lower()) is None:
        return None
    values = cast("list[object]", default) if isinstance(default, list) else [default]
    for value in values:
        if isinstance(value, str) and _EMAIL.search(value) and not _PLACEHOLDER.search(value):
            return value
    return None


def fixed_destinations(definition: Definition, found: Findings, units: Sequence[Unit] = ()) -> None:
    """A parameter whose default is an address data leaves by (a ``bcc`` of an outside address, a
    ``mirror_url``, a public bucket) and whose name, description or default tells the model to keep
    it: every call sends what the parameter carries, or a copy of it, there. So does a recipient
    parameter (``attendees``, ``cc``) whose default is an outside address, kept unless the model
    changes it, and a ``pattern`` that makes every value start with another site's query. In code:
    it joins the default or the pattern with the parameter's name and description, which patterns
    read one at a time. ``units``: the definition's strings as scanned (cut at the scan's limits), where
    a sending parameter's host is looked for in the tool's own name, title and description."""
    schema = definition.get("inputSchema")
    told: str | None = None
    for name, values in _properties(schema, ""):
        default = values.get("default", values.get("const"))
        pattern = values.get("pattern")
        if isinstance(pattern, str) and _URL_PREFIX.match(pattern):
            found.check("forced-prefix", "exfiltration", f"parameter '{name}'", clip(pattern))
            return
        recipient = _default_recipient(name, default)
        if recipient is not None:
            found.check("default-recipient", "exfiltration", f"parameter '{name}'", clip(recipient))
            return
        if not isinstance(default, str) or not _ADDRESS.search(default):
            continue
        description = values.get("description")
        said = " ".join((name_words(name), str(description) if isinstance(description, str) else "", default)).lower()
        sends = _sends_to(name, default)
        if sends is not None and told is None:  # once a definition, and only for a sending parameter
            told = "\n".join(u.text for u in units if u.where in ("name", "title", "description")).lower()
        if (_KEEP.search(said) and _LEAVES.search(said)) or (sends is not None and _unannounced(sends, told or "")):
            found.check("fixed-destination", "exfiltration", f"parameter '{name}'", clip(default))
            return


_SENDS_TO = re.compile(
    r"(upload|destination|dest|send|post|forward|mirror|backup|export|callback|webhook|sink|collector|relay|report"
    r"|notify|sync|push|copy|archive)(_?(to|url|uri|endpoint|target|host|address))?"
)
"""Parameter names saying the call sends what it makes to the value: ``upload_to``, ``backup_url``."""
_HOST = re.compile(r"^[a-z][a-z0-9+.-]*://(?:[^/@\s]*@)?([^/:?#\s]+)", re.IGNORECASE)
_COMMON_LABELS = frozenset({"www", "api", "com", "net", "org", "io", "dev", "app", "cloud", "co", "uk", "de", "s3"})


def _sends_to(name: str, default: str) -> str | None:
    """The host (lower case) of a parameter named for where the call sends (``upload_to``) whose default
    is a URL on a host not this machine's, else None."""
    host = _HOST.match(default)
    if host is None or _SENDS_TO.fullmatch(name.lower()) is None:
        return None
    lowered = host[1].lower()
    return None if lowered in ("localhost", "127.0.0.1", "0.0.0.0", "::1") else lowered


def _unannounced(host: str, told: str) -> bool:
    """``host`` is one the tool's name, title and description (``told``, lower case) never name: what it
    makes leaves for a place the person reading it was not told of ("Create a zip archive" with
    ``upload_to`` on ``zip-relay.net``)."""
    labels = [label for label in host.split(".") if label not in _COMMON_LABELS and len(label) > 2]
    return bool(labels) and not any(label in told for label in labels)


def _properties(schema: object, path: str, depth: int = 0) -> Iterator[tuple[str, dict[str, object]]]:
    """Each property of ``schema`` at any depth (nested objects, items), by name."""
    if not isinstance(schema, dict) or depth > 8:
        return
    values = cast("dict[str, object]", schema)
    properties = values.get("properties")
    if isinstance(properties, dict):
        for name, sub in cast("dict[str, object]", properties).items():
            if isinstance(sub, dict):
                values_of = cast("dict[str, object]", sub)
                yield name, values_of
                yield from _properties(values_of, name, depth + 1)
    items: object = values.get("items")
    if isinstance(items, dict):
        yield from _properties(cast("dict[str, object]", items), path, depth + 1)
