"""JSON-RPC 2.0 as JSON values: the framing and the id rules both lanes share.

The client-side lane (``fastpath.stdio_calls``), the upstream raw lane (``fastpath.pipe_calls``), the client's stdio
wire (``wire.stdio``) and the HTTP links (``transports.http``) read and write messages as
plain dicts, past the SDK's models. What a message looks like on a line, what counts as a
request id, and how a line that is not a message is answered are decided here, once; and
the one repair made to what an upstream lists (``untyped_tool_schemas``, in place, before the
SDK reads it). Otherwise pure: values in, values (or bytes) out.

Bounds come before parsing (``Bounds``: ``patchbay.max_message_bytes`` and
``max_json_depth``). Python's ``json`` recurses once per level of nesting, and so do
pydantic's and jsonschema's walks: a line of a few KB nested a thousand deep raised
``RecursionError`` wherever it was first parsed. So a line is first split off the pipe
by ``LineSplitter``, which keeps no more than the limit of a line it will refuse, and a
kept line is checked by ``deeper_than`` (two ``bytes.count`` calls for almost every
line) before ``json.loads`` sees it. What is refused is answered by its id, read
without parsing by ``peek_envelope`` (the first and last few KB of the line).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import accumulate
from typing import TYPE_CHECKING, Any, cast

import mcp_types as types
import pydantic_core

if TYPE_CHECKING:
    from mcp_patchbay.config import Settings
RequestId = str | int
"""JSON-RPC allows numbers and strings; booleans (a JSON number in Python's eyes) are not ids."""


def is_request_id(value: object) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)


def encode(message: dict[str, Any]) -> bytes:
    """One message as a line of compact UTF-8 JSON (the stdio framing).

    Written by pydantic-core (0.6 us for a small call's answer against 3.4 us with ``json``;
    the same bytes for JSON values); what it cannot write (a lone surrogate) ``json`` writes,
    or fails on, as before."""
    try:
        return pydantic_core.to_json(message) + b"\n"
    except ValueError:
        return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def loads(data: bytes) -> Any:
    """A JSON text read by pydantic-core (0.7 us for a tool call against 2.5 us with ``json``);
    what it refuses (a lone surrogate, a BOM, deep nesting, anything malformed) ``json`` reads,
    or refuses, as before: the result is always ``json.loads``'s."""
    try:
        return pydantic_core.from_json(data)
    except ValueError:
        return json.loads(data)


def request_id_in(body: bytes) -> RequestId | None:
    """The id of the request in a serialized message; None for a notification, an answer,
    or anything that is not a message."""
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or "method" not in message:
        return None
    request_id = cast("dict[str, Any]", message).get("id")
    return cast("RequestId", request_id) if is_request_id(request_id) else None


NOT_JSON = object()
"""What a line that does not parse as JSON reads as (``answer_to_invalid``)."""


BATCH_REFUSED = (
    "Invalid request: JSON-RPC batches (arrays) are not supported; MCP removed them in its "
    "2025-06-18 revision. Send each message as a line of its own."
)
BAD_ID = "Invalid request: a request's id must be a string or an integer."


def answer_to_invalid(value: Any) -> bytes:
    """JSON-RPC's answer to a line that is not a message: a parse error (id null), or an
    invalid request naming the id when one can be read, so the sender's request never hangs."""
    if value is NOT_JSON:
        return error_line(None, types.PARSE_ERROR, "Parse error: the line is not valid JSON")
    if isinstance(value, list) and value:
        return error_line(None, types.INVALID_REQUEST, BATCH_REFUSED)
    request_id = cast("dict[str, Any]", value).get("id") if isinstance(value, dict) else None
    return error_line(
        cast("RequestId", request_id) if is_request_id(request_id) else None,
        types.INVALID_REQUEST,
        "Invalid request: not a valid JSON-RPC 2.0 message",
    )


def refusal(value: Any) -> bytes | None:
    """The answer to a parsed line that must not go on even though the SDK's models would take
    it, else None: a batch (no MCP revision since 2025-06-18 has them), and a request whose id
    is not a string or an integer (the SDK reads ``{"id": {}, "method": "ping"}`` as a
    notification, so the client would wait forever for its answer)."""
    if isinstance(value, list):
        return answer_to_invalid(value)
    message = cast("dict[str, Any]", value) if isinstance(value, dict) else {}
    if "method" in message and "id" in message and not is_request_id(message["id"]):
        return error_line(None, types.INVALID_REQUEST, BAD_ID)
    return None


def error_line(request_id: RequestId | None, code: int, message: str) -> bytes:
    return encode({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})


# --- bounds, before anything parses ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Bounds:
    """The limits on one message, from ``Settings`` (``max_message_bytes``, ``max_json_depth``);
    the defaults are the settings' defaults."""

    max_bytes: int = 33_554_432
    max_depth: int = 100

    @classmethod
    def of(cls, settings: Settings) -> Bounds:
        return cls(settings.max_message_bytes, settings.max_json_depth)

    def too_long(self, size: int) -> str:
        """Why a line of ``size`` bytes was refused (for messages and logs)."""
        return f"it is {_size(size)} long, over the limit of {_size(self.max_bytes)} (patchbay.max_message_bytes)"

    def too_deep(self) -> str:
        return f"it nests arrays and objects more than {self.max_depth} deep (patchbay.max_json_depth)"


def _size(size: int) -> str:
    return f"{size / 2**20:.1f} MiB" if size >= 2**20 else f"{size:,} bytes"


_ALL_BUT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = [0] * 256
for _opener in b"[{":
    _STEP[_opener] = 1
for _closer in b"]}":
    _STEP[_closer] = -1


def deeper_than(line: bytes, limit: int) -> bool:
    """Whether ``line`` nests arrays and objects more than ``limit`` deep.

    A line cannot nest deeper than it has ``[`` and ``{``: two ``bytes.count`` calls settle
    almost every line (about 0.3 us for a tool call). Only a line with more openers than
    the limit is measured, at C speed: escaped backslashes, then escaped quotes, are cut,
    so every ``"`` left opens or closes a string; the strings' insides are dropped
    (brackets there do not nest), the brackets kept, and their running sum's maximum taken.
    """
    if line.count(b"[") + line.count(b"{") <= limit:
        return False
    bare = line
    if b'"' in bare:
        if b"\\" in bare:
            bare = bare.replace(b"\\\\", b"").replace(b'\\"', b"")
        bare = b"".join(bare.split(b'"')[::2])
    brackets = bare.translate(None, _ALL_BUT_BRACKETS)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0) > limit


PEEK_WINDOW = 8192
"""How much of each end of a refused line is kept and searched for its id."""


class Overlong:
    """A line longer than the limit, skipped: only its first and last ``window`` bytes were kept."""

    __slots__ = ("head", "size", "tail")

    def __init__(self, head: bytes, tail: bytes, size: int) -> None:
        self.head = head
        self.tail = tail
        self.size = size


class LineSplitter:
    """Bytes off a pipe, as lines (without their newline) of at most ``limit`` bytes.

    A longer line is skipped as it streams in: once past the limit, only its first and last
    ``window`` bytes are kept (where ``peek_envelope`` looks for its id), and it comes out
    as one ``Overlong`` when its newline arrives. Memory stays under the limit plus a chunk,
    and every byte is copied a bounded number of times (no ``buffer += chunk``).
    """

    def __init__(self, limit: int, window: int = PEEK_WINDOW) -> None:
        self.limit = limit
        self.window = window
        self._parts: list[bytes] = []
        self._size = 0
        self._head: bytes | None = None
        """Set while skipping a line over the limit: its first ``window`` bytes."""
        self._tail = b""

    @property
    def skipping(self) -> bool:
        return self._head is not None

    def feed(self, chunk: bytes) -> list[bytes | Overlong]:
        """The lines ``chunk`` completes, in order."""
        out: list[bytes | Overlong] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            self._add(piece)
            if end < 0:
                return out
            out.append(self._finish())
            start = end + 1

    def _add(self, piece: bytes) -> None:
        if not piece:
            return
        self._size += len(piece)
        if self._head is not None:
            self._tail = (self._tail + piece)[-self.window :]
        elif self._size > self.limit:  # its ends only: joining it whole would double the memory
            parts, self._parts = [*self._parts, piece], []
            self._head = b"".join(_ends(parts, self.window))[: self.window]
            self._tail = b"".join(reversed(_ends(reversed(parts), self.window)))[-self.window :]
        else:
            self._parts.append(piece)

    def _finish(self) -> bytes | Overlong:
        if self._head is not None:
            line: bytes | Overlong = Overlong(self._head, self._tail, self._size)
        else:
            line = self._parts[0] if len(self._parts) == 1 else b"".join(self._parts)
        self._parts, self._size, self._head, self._tail = [], 0, None, b""
        return line


def _ends(parts: Iterable[bytes], window: int) -> list[bytes]:
    """The first of ``parts`` that hold ``window`` bytes together."""
    kept: list[bytes] = []
    size = 0
    for part in parts:
        kept.append(part)
        size += len(part)
        if size >= window:
            break
    return kept


# --- the id of a line that is not parsed -------------------------------------------------


@dataclass(frozen=True, slots=True)
class Envelope:
    """What could be read of a refused line's top level without parsing it."""

    request_id: RequestId | None = None
    keys: frozenset[str] = frozenset()
    """Which of ``id``, ``method``, ``result``, ``error`` were seen at the top level."""

    @property
    def is_answer(self) -> bool:
        """An answer to a request (its id is the request's), not a request or notification."""
        return "method" not in self.keys and bool(self.keys & {"result", "error"})


_TOKEN = re.compile(
    rb'\s*(?:("[^"\\]*(?:\\.[^"\\]*)*")|([\[\]{}:,])|(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null))',
    re.DOTALL,
)
_ENVELOPE_KEYS = frozenset({"id", "method", "result", "error"})
_KEY_IN_TAIL = re.compile(rb'"(id|method|result|error)"\s*:')
_TAIL_TRIES = 16


def envelope_of(line: bytes) -> Envelope:
    """``peek_envelope`` of a whole line that is refused unparsed (too deep): its two ends."""
    return peek_envelope(line[:PEEK_WINDOW], line[-PEEK_WINDOW:].rstrip())


def peek_envelope(head: bytes, tail: bytes) -> Envelope:
    """The top-level ``id`` (and which envelope keys there are) of a JSON-RPC line seen only by
    its first bytes (``head``) and last bytes (``tail``): servers write the id first (the
    Python SDK) or last (``JSON.stringify`` of the TypeScript SDK's objects). The head is
    read token by token from the line's start, so nesting is known exactly; in the tail, a
    key counts only where what follows it closes the line's outermost object exactly."""
    found: dict[str, bytes] = {}
    _scan_head(head, found)
    if "id" not in found or len(found) < 2:
        _scan_tail(tail, found)
    raw_id = found.get("id")
    request_id: RequestId | None = None
    if raw_id is not None and raw_id[:1] not in (b"{", b"["):
        try:
            value = json.loads(raw_id)
        except ValueError:
            value = None
        request_id = cast("RequestId", value) if is_request_id(value) else None
    return Envelope(request_id, frozenset(found))


# Long on purpose: a byte scanner: one branch per token, kept flat for speed.
def _scan_head(head: bytes, found: dict[str, bytes]) -> None:  # noqa: PLR0912
    depth, pos, expect = 0, 0, "open"
    key: str | None = None
    while (match := _TOKEN.match(head, pos)) is not None:
        pos = match.end()
        string, punct, scalar = match.groups()
        if expect == "open":
            if punct != b"{":
                return  # not an object (a batch, a scalar): no envelope
            depth, expect = 1, "key"
            continue
        if depth == 1 and expect == "key":
            if string is None:
                return
            key, expect = _text(string), "colon"
        elif depth == 1 and expect == "colon":
            if punct != b":":
                return
            expect = "value"
        elif depth == 1 and expect == "value":
            if key is not None and key in _ENVELOPE_KEYS:
                found.setdefault(key, string or scalar or punct or b"")
            expect = "comma"
            if punct in (b"{", b"["):
                depth += 1
        elif punct in (b"{", b"["):
            depth += 1
        elif punct in (b"}", b"]"):
            depth -= 1
            if depth == 0:
                return
        elif depth == 1 and punct == b",":
            expect = "key"


def _text(string: bytes) -> str | None:
    try:
        return cast("str", json.loads(string))
    except ValueError:
        return None


def _scan_tail(tail: bytes, found: dict[str, bytes]) -> None:
    candidates = list(_KEY_IN_TAIL.finditer(tail))[-_TAIL_TRIES:]
    for match in reversed(candidates):
        key = match.group(1).decode()
        if key in found:
            continue
        before = tail[: match.start()].rstrip()
        if before[-1:] not in (b"{", b","):
            continue
        value = _TOKEN.match(tail, match.end())
        if value is None:
            continue
        if _closes_the_line(tail, match.end()):
            found[key] = value.group(1) or value.group(3) or value.group(2) or b""


def _closes_the_line(tail: bytes, pos: int) -> bool:
    """Whether the tokens from ``pos`` (a member's value) close exactly one more object than
    they open, with that object's ``}`` the line's last token: the member is at the top level."""
    depth = 0
    end = len(tail.rstrip())
    while (match := _TOKEN.match(tail, pos)) is not None and pos < end:
        pos = match.end()
        punct = match.group(2)
        if punct in (b"{", b"["):
            depth += 1
        elif punct in (b"}", b"]"):
            depth -= 1
            if depth < 0:
                return punct == b"}" and pos == end
    return False


UNTYPED_SCHEMAS = (
    "server '%s' listed %d tools whose inputSchema has no \"type\" (%s): served as taking an object, which "
    "the MCP spec says every tool does"
)
"""The log line of a listing ``untyped_tool_schemas`` repaired: the server, the count, ``first_names``."""


def first_names(names: list[str], count: int = 5, width: int = 80) -> str:
    """The first ``count`` of an upstream's tool names for a log line, each cut to ``width`` and
    escaped (a name is the upstream's text: any length, any character)."""
    return ", ".join(repr(name[:width]) for name in names[:count])


def untyped_tool_schemas(result: object) -> list[str]:
    """The tools of a ``tools/list`` result whose ``inputSchema`` lacks its root ``"type"``, given
    ``"type": "object"`` in place (and an absent schema ``{"type": "object"}``); their names.

    Some servers in use send such schemas (``@modelcontextprotocol/server-gitlab`` sends
    ``{"$schema": ...}`` alone for every tool), and the SDK refuses the whole listing for one of
    them, so none of the server's tools would be served. A schema whose type is something else
    is left as it is (refused): that one says what it is, wrongly."""
    if not isinstance(result, dict) or "content" in result:
        return []
    tools = cast("dict[str, Any]", result).get("tools")
    if not isinstance(tools, list):
        return []
    repaired: list[str] = []
    for tool in cast("list[Any]", tools):
        if not isinstance(tool, dict):
            continue
        entry = cast("dict[str, Any]", tool)
        schema = entry.get("inputSchema")
        if schema is None:
            entry["inputSchema"] = {"type": "object"}
        elif isinstance(schema, dict) and "type" not in schema:
            schema["type"] = "object"
        else:
            continue
        repaired.append(str(entry.get("name")))
    return repaired


__all__ = [
    "NOT_JSON",
    "PEEK_WINDOW",
    "UNTYPED_SCHEMAS",
    "Bounds",
    "Envelope",
    "LineSplitter",
    "Overlong",
    "RequestId",
    "answer_to_invalid",
    "deeper_than",
    "encode",
    "envelope_of",
    "error_line",
    "first_names",
    "is_request_id",
    "peek_envelope",
    "refusal",
    "request_id_in",
    "untyped_tool_schemas",
]
