"""The serving path's raw events made rows, in the writer's thread.

The hooks (``calls.path``, ``session.passthrough``, ``supervisor``) hand the log one tuple each, built in
well under a microsecond and queued as it is (``ActivityWriter.emit``); what costs (sizes as
JSON, names, the client, redaction) is done here, off the call path. Times are
``time.monotonic()``, made wall-clock time with one offset taken when the log starts. The tuples::

    ("tool_call", started, ended, request, called, target, server, error, arguments, result)
    ("resource_read" | "prompt_get", started, ended, request, name, server, upstream, error, arguments, result)
    ("upstream", at, name, state, error, restarts)
    ("held", at, {server: [Held, ...]})

``target`` is the ``CatalogTool`` the name resolved to (None before it did), ``error`` the
``PatchbayError`` (or, for a read or a prompt, the ``MCPError``) the request failed with,
``request`` what ``Events.client`` makes the client of. A failed request's ``bytes_out`` is the size of
the error as the client is answered by default (a tool call's ``isError`` result, a read's or a
prompt's JSON-RPC error). An upstream's changes of state become
starts, crashes (a failure to start too), restarts and sign-ins needed; the definitions held
become one ``definition_held`` row each, whichever proxy notices first (``store``'s unique index).
"""

from __future__ import annotations

import json
import json.encoder
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from mcp_patchbay.activity.rows import ActivityRow, Record, values_of
from mcp_patchbay.redaction import redact

__all__ = ["DETAIL_CHARS", "Events", "kept", "size_of"]

logger = logging.getLogger(__name__)

DETAIL_CHARS = 500
"""The longest ``detail`` kept (a person's words: an error's message, what was held and why)."""
CLIENT_CHARS = 120
_SECRET_KEYS = (
    "password",
    "passwd",
    "secret",
    "token",
    "apikey",
    "api_key",
    "api-key",
    "authorization",
    "cookie",
    "credential",
    "private_key",
    "privatekey",
    "access_key",
    "session",
)
"""An argument whose key holds one of these (any case) is kept as ``***``."""
_DEPTH = 32
_WHY = {
    "changed": "its definition changed since it was approved",
    "new": "it is new on a server whose definitions are pinned",
    "flagged": "the scan found text aimed at the model in it",
}
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str).encode
_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)
_c_encode: Any = (
    _make_encoder(None, str, json.encoder.encode_basestring, None, ":", ",", False, False, True)
    if _make_encoder is not None
    else None
)  # the C encoder made once (json.dumps makes one a call: three times the cost of a small value)

Client = Callable[[Any], "str | None"]


class Events:
    """Turns raw events into rows (``__call__``), remembering what each upstream was and what was
    held, so that a change of state becomes the one row it means."""

    def __init__(
        self,
        proxy: str,
        *,
        client: Client,
        keep_arguments: bool = False,
        argument_chars: int = 2000,
        offset: float | None = None,
    ) -> None:
        """``proxy``: the label every row carries; ``client``: the client of a request (its
        ``clientInfo``, or the gateway's member); ``keep_arguments``: keep arguments and results,
        cut to ``argument_chars`` and redacted; ``offset``: wall-clock minus monotonic time."""
        self.proxy = proxy
        self.client = client
        self.keep_arguments = keep_arguments
        self.argument_chars = argument_chars
        self.offset = time.time() - time.monotonic() if offset is None else offset
        self._states: dict[str, str] = {}
        self._errors: dict[str, object] = {}
        self._down: set[str] = set()
        self._held: set[tuple[str, str, str, str]] = set()

    def __call__(self, event: Sequence[Any]) -> list[Record]:
        kind = event[0]
        if kind == "tool_call":
            return [self._tool_call(event)]
        if kind in ("resource_read", "prompt_get"):
            return [self._request(event)]
        if kind == "upstream":
            return [values_of(row) for row in self._upstream(*event[1:])]
        if kind == "held":
            return [values_of(row) for row in self._held_now(*event[1:])]
        return []

    def batch(self, entries: Iterable[Any]) -> tuple[list[Record], int]:
        """A batch of the queue made rows, in order: (the rows, the entries that could not be made
        one). The writer's thread calls it once per batch: a tool call that succeeded (nearly every
        entry) is made its row inline, without a call per entry; rows made already are taken as
        they are; the rest go through ``__call__``."""
        rows: list[Record] = []
        append = rows.append
        offset, proxy, client, keep = self.offset, self.proxy, self.client, self.keep_arguments
        encode = size_of
        failed = 0
        for event in entries:
            try:
                if isinstance(event, ActivityRow):
                    append(values_of(event))
                    continue
                raw: Sequence[Any] = event
                if raw[0] == "tool_call" and raw[5] is not None and raw[7] is None and not keep:
                    _, started, ended, request, _, target, _, _, arguments, result = raw
                    append(
                        (
                            started + offset,
                            "tool_call",
                            proxy,
                            client(request),
                            target.server,
                            target.exposed,
                            target.upstream_name,
                            (ended - started) * 1000.0,
                            "tool_error" if result.__class__ is dict and result.get("isError") else "ok",
                            None,
                            None if arguments is None else encode(arguments),
                            None if result is None else encode(result),
                            None,
                            None,
                            None,
                        )
                    )
                else:
                    rows.extend(self(raw))
            except Exception:
                failed += 1
                logger.debug("an activity event could not be made a row", exc_info=True)
        return rows, failed

    # --- requests -------------------------------------------------------------------------------

    def _tool_call(self, event: Sequence[Any]) -> Record:
        # The one conversion made for every call: kept plain (no helper calls where a test will do).
        _, started, ended, request, called, target, server, error, arguments, result = event
        if target is not None:
            exposed, upstream, server = target.exposed, target.upstream_name, target.server
        else:
            exposed, upstream = called, getattr(error, "tool", None)
            server = server or getattr(error, "server", None)
        if error is None:
            outcome, code, detail = ("tool_error" if _is_error(result) else "ok"), None, None
        else:
            code = _code(error)
            outcome, detail = code, _words(_message(error))
        keep = self.keep_arguments
        return (
            started + self.offset,
            "tool_call",
            self.proxy,
            self.client(request),
            server,
            exposed,
            upstream,
            (ended - started) * 1000.0,
            outcome,
            code,
            None if arguments is None else size_of(arguments),
            size_of(result) if result is not None else (_error_result_size(error) if error is not None else None),
            detail,
            self._kept(arguments) if keep else None,
            self._kept(result) if keep else None,
        )

    def _request(self, event: Sequence[Any]) -> Record:
        kind, started, ended, request, name, server, upstream, error, arguments, result = event
        sent = {"uri": name} if kind == "resource_read" else {"name": name, "arguments": arguments}
        answer = result.model_dump(by_alias=True, mode="json", exclude_none=True) if result is not None else None
        code = _code(error) if error is not None else None
        return (
            started + self.offset,
            kind,
            self.proxy,
            self.client(request),
            server,
            name,
            upstream,
            round((ended - started) * 1000, 3),
            code or "ok",
            code,
            size_of(sent),
            size_of(answer) if answer is not None else (_error_size(error) if error is not None else None),
            _words(_message(error)) if error is not None else None,
            self._kept(arguments),
            self._kept(answer),
        )

    def _kept(self, value: Any) -> str | None:
        return kept(value, self.argument_chars) if self.keep_arguments and value is not None else None

    # --- upstreams --------------------------------------------------------------------------------

    def _upstream(self, at: float, name: str, state: str, error: Any, restarts: int) -> list[ActivityRow]:
        previous = self._states.get(name)
        self._states[name] = str(state)
        when = at + self.offset
        if state == "ready" and previous != "ready":
            if name in self._down:
                self._down.discard(name)
                detail = f"connected again (restart {restarts})" if restarts else "connected again"
                return [self._row("upstream_restart", when, name, detail=detail)]
            return [self._row("upstream_start", when, name)]
        if state in ("restarting", "failed") and error is not None and self._errors.get(name) is not error:
            self._errors[name] = error
            code = _code(error)
            if code == "AUTH_REQUIRED":
                return []  # not a failure: the sign-in row says it
            self._down.add(name)
            words = _message(error)
            extra = getattr(error, "detail", None)
            if extra:
                words = f"{words} ({extra})"
            if previous in (None, "starting") and state == "failed":
                words = f"failed to start: {words}"
            return [self._row("upstream_crash", when, name, outcome=code, error_code=code, detail=_words(words))]
        if state == "needs_sign_in" and previous != "needs_sign_in":
            detail = f"server '{name}' needs a sign-in: run mcp-patchbay login {name}"
            return [self._row("sign_in_needed", when, name, detail=_words(detail))]
        return []

    def _held_now(self, at: float, holding: Mapping[str, Sequence[Any]]) -> list[ActivityRow]:
        from mcp_patchbay.trust.wording import approve_command

        rows: list[ActivityRow] = []
        now: set[tuple[str, str, str, str]] = set()
        for server, items in holding.items():
            for held in items:
                key = (server, held.kind, held.name, held.fingerprint)
                now.add(key)
                if key in self._held:
                    continue
                why = _WHY.get(held.reason, str(held.reason))
                approve = approve_command(server, held.kind, held.name, held.fingerprint)
                detail = f"{held.kind} '{held.name}' held: {why}; approve: {approve}"
                first_seen = getattr(held, "first_seen", None)
                when = first_seen if isinstance(first_seen, int | float) else at + self.offset
                rows.append(self._row("definition_held", when, server, upstream=held.name, detail=_words(detail)))
        self._held = now
        return rows

    def _row(self, kind: str, at: float, server: str, **values: Any) -> ActivityRow:
        return ActivityRow(id=None, at=at, kind=kind, proxy=self.proxy, server=server, **values)


# --- values ---------------------------------------------------------------------------------------


def size_of(value: Any) -> int:
    """Bytes of ``value`` as compact JSON in UTF-8."""
    text = "".join(_c_encode(value, 0)) if _c_encode is not None else _encode(value)
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _error_result_size(error: Any) -> int | None:
    """Bytes of the ``isError`` result a failed tool call is answered with (``errors.tree``)."""
    from mcp_patchbay.errors.tree import PatchbayError, result_values

    return size_of(result_values(error)) if isinstance(error, PatchbayError) else None


def _error_size(error: Any) -> int | None:
    """Bytes of the JSON-RPC error a failed read or prompt get is answered with."""
    from mcp_patchbay.errors.tree import PatchbayError, to_mcp_error

    if isinstance(error, PatchbayError):
        error = to_mcp_error(error)
    data = getattr(error, "error", None)
    dump = getattr(data, "model_dump", None)
    return size_of(dump(by_alias=True, mode="json", exclude_none=True)) if callable(dump) else None


def kept(value: Any, limit: int) -> str:
    """``value`` as JSON for the log, at most ``limit`` characters: values under keys that name a
    credential replaced by ``***``, and each string cleaned as log lines are (``redaction``)."""
    text = _encode(_masked(value, 0, limit))
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def client_text(name: object, version: object) -> str | None:
    """A client's ``clientInfo`` as the log keeps it: ``name version``, bounded."""
    if not isinstance(name, str):
        return None
    text = f"{name} {version}" if isinstance(version, str) and version else name
    return text[:CLIENT_CHARS]


def _masked(value: Any, depth: int, limit: int) -> Any:
    if isinstance(value, str):
        return redact(value[: limit + 100])  # cut first: the JSON is cut to the limit anyway
    if depth > _DEPTH:
        return "…"
    if isinstance(value, dict):
        items: dict[Any, Any] = value  # pyright: ignore[reportUnknownVariableType]
        pairs = list(items.items())  # at once: the serving path may still be trimming its result
        return {key: "***" if _secret_key(key) else _masked(inner, depth + 1, limit) for key, inner in pairs}
    if isinstance(value, list):
        inner_values: list[Any] = list(value)  # pyright: ignore[reportUnknownArgumentType]
        return [_masked(inner, depth + 1, limit) for inner in inner_values]
    return value


def _secret_key(key: object) -> bool:
    if not isinstance(key, str):
        return False
    lowered = key.lower()
    return any(word in lowered for word in _SECRET_KEYS)


def _is_error(result: Any) -> bool:
    try:
        return bool(result.get("isError"))
    except AttributeError:  # not a dict
        return False


def _code(error: Any) -> str:
    """The proxy's error code: a ``PatchbayError``'s, or the one an ``MCPError`` carries in its data."""
    code: object = getattr(error, "code", None)
    value = getattr(code, "value", None)
    if isinstance(value, str):
        return value
    data = getattr(getattr(error, "error", None), "data", None)
    if isinstance(data, dict):
        carried = data.get("code")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        if isinstance(carried, str):
            return carried
    return str(code) if code is not None else "ERROR"


def _message(error: Any) -> str:
    message = getattr(error, "message", None)
    return message if isinstance(message, str) else str(error)


def _words(text: str) -> str:
    text = redact(" ".join(text.split()))
    return text if len(text) <= DETAIL_CHARS else text[: DETAIL_CHARS - 1] + "…"
