"""The proxy's errors: one tree, split by whose fault it is, mapped at the edges.

    PatchbayError                  code, category, retryable, retry_after_ms; text for the model
    ├── ClientError                the client asked for something wrong: fix the call, don't retry
    │                              (TOOL_NOT_FOUND, TOOL_AMBIGUOUS, TOOL_NOT_AVAILABLE, INVALID_ARGUMENTS, ...)
    └── UpstreamError              an upstream server failed, or the proxy protected it
        │                          (CONNECTION_LOST, TIMEOUT, SERVER_ERROR, RATE_LIMITED, CIRCUIT_OPEN, ...)
        └── NotDelivered           the request never reached the upstream: it is always safe to send again
            ├── SessionExpired     the upstream forgot our session: rebuild it, then send again
            └── SignedIn           the sign-in the call needed completed: send it again when ready

Configuration mistakes in the file are ``config.ConfigError``; at call time a server that is
disabled or misconfigured raises ``UpstreamError`` with code ``SERVER_UNAVAILABLE``.

Classes exist where code branches on them: the policies retry ``NotDelivered`` freely,
the upstream rebuilds its session on ``SessionExpired``, the tool path's edge logs a
``ClientError`` (the model's mistake) at INFO. Everything else is carried by ``code``: the
circuit breaker counts the codes the table marks ``trips_breaker``, the retry ``resend_when_safe``.

Foreign exceptions (OSError, anyio stream errors, httpx errors, the SDK's MCPError,
pydantic's ValidationError, ExceptionGroups from transports) are translated in one place,
``translate``, used as a boundary by ``translated`` (a ``with`` block, as httpx's
``map_httpcore_exceptions``); the leaf of an exception group that says what happened is
picked by one rule, ``most_telling``. The tool path's edge (``call_path.error_result``)
turns an error into a result exactly once, with ``to_result``.

One module on purpose, though past 450 lines: the tree, the table of what each code
means, and the translation into them are read together when a failure is added.
"""

from __future__ import annotations

import asyncio
import enum
import re
from collections.abc import Generator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, cast

import anyio
import httpx2
import mcp_types as types
from mcp.client.auth.exceptions import OAuthFlowError
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

MAX_MODEL_TEXT = 480
"""Errors shown to the model stay under 500 characters (the guides agree: longer wastes tokens)."""


class Category(enum.StrEnum):
    NOT_FOUND = "not_found"
    VALIDATION = "validation"
    TIMEOUT = "timeout"
    CONNECTION = "connection"
    SERVER_ERROR = "server_error"
    RATE_LIMIT = "rate_limit"
    CIRCUIT_OPEN = "circuit_open"
    BULKHEAD_FULL = "bulkhead_full"
    CANCELLED = "cancelled"
    CONFIGURATION = "configuration"
    SIGN_IN = "sign_in"


@dataclass(frozen=True, slots=True)
class _CodeInfo:
    category: Category
    retryable: bool
    """The default of ``PatchbayError.retryable``: whether the model may try again."""
    trips_breaker: bool = False
    """An upstream's own failure, counted by its circuit breaker (``policies.with_breaker``);
    the proxy's refusals (breaker, bulkhead) and a server not yet or no longer there are not."""
    resend_when_safe: bool = False
    """Sent again by ``policies.with_retry`` for a tool annotated read-only or idempotent
    (a ``NotDelivered`` error is sent again whatever the tool)."""


class Code(enum.StrEnum):
    """Machine-readable error codes; each has one category and a default retryability."""

    TOOL_NOT_FOUND = "TOOL_NOT_FOUND"
    TOOL_AMBIGUOUS = "TOOL_AMBIGUOUS"
    TOOL_NOT_AVAILABLE = "TOOL_NOT_AVAILABLE"
    PROMPT_NOT_FOUND = "PROMPT_NOT_FOUND"
    RESOURCE_NOT_FOUND = "RESOURCE_NOT_FOUND"
    INVALID_ARGUMENTS = "INVALID_ARGUMENTS"
    SERVER_UNAVAILABLE = "SERVER_UNAVAILABLE"
    SERVER_STARTING = "SERVER_STARTING"
    SPAWN_FAILED = "SPAWN_FAILED"
    CONNECTION_FAILED = "CONNECTION_FAILED"
    CONNECTION_LOST = "CONNECTION_LOST"
    AUTH_FAILED = "AUTH_FAILED"
    AUTH_REQUIRED = "AUTH_REQUIRED"
    AUTH_SERVER_UNREACHABLE = "AUTH_SERVER_UNREACHABLE"
    AUTH_REGISTRATION_REFUSED = "AUTH_REGISTRATION_REFUSED"
    AUTH_DENIED = "AUTH_DENIED"
    AUTH_STATE_MISMATCH = "AUTH_STATE_MISMATCH"
    AUTH_TOKEN_ERROR = "AUTH_TOKEN_ERROR"
    TIMEOUT = "TIMEOUT"
    SERVER_ERROR = "SERVER_ERROR"
    PROTOCOL_ERROR = "PROTOCOL_ERROR"
    RESULT_TOO_LARGE = "RESULT_TOO_LARGE"
    RATE_LIMITED = "RATE_LIMITED"
    CIRCUIT_OPEN = "CIRCUIT_OPEN"
    BULKHEAD_FULL = "BULKHEAD_FULL"
    INTERNAL_ERROR = "INTERNAL_ERROR"

    @property
    def info(self) -> _CodeInfo:
        return _CODE_INFO[self]


_C = Category
_FAILS = {"trips_breaker": True}
_FAILS_RESEND = {"trips_breaker": True, "resend_when_safe": True}
_CODE_INFO: dict[Code, _CodeInfo] = {
    # The one table of what each code means: read by the error tree, the breaker and the retry.
    Code.TOOL_NOT_FOUND: _CodeInfo(_C.NOT_FOUND, False),
    Code.TOOL_AMBIGUOUS: _CodeInfo(_C.NOT_FOUND, False),
    Code.TOOL_NOT_AVAILABLE: _CodeInfo(_C.NOT_FOUND, False),
    Code.PROMPT_NOT_FOUND: _CodeInfo(_C.NOT_FOUND, False),
    Code.RESOURCE_NOT_FOUND: _CodeInfo(_C.NOT_FOUND, False),
    Code.INVALID_ARGUMENTS: _CodeInfo(_C.VALIDATION, False),
    Code.SERVER_UNAVAILABLE: _CodeInfo(_C.CONFIGURATION, False),
    Code.SERVER_STARTING: _CodeInfo(_C.CONNECTION, True),
    Code.SPAWN_FAILED: _CodeInfo(_C.CONFIGURATION, False, **_FAILS),
    Code.CONNECTION_FAILED: _CodeInfo(_C.CONNECTION, True, **_FAILS_RESEND),
    Code.CONNECTION_LOST: _CodeInfo(_C.CONNECTION, True, **_FAILS_RESEND),
    Code.AUTH_FAILED: _CodeInfo(_C.CONFIGURATION, False, **_FAILS),
    # A sign-in the user has to finish, or one that failed (oauth.signin): the server is fine.
    Code.AUTH_REQUIRED: _CodeInfo(_C.SIGN_IN, True),
    Code.AUTH_SERVER_UNREACHABLE: _CodeInfo(_C.SIGN_IN, True),
    Code.AUTH_REGISTRATION_REFUSED: _CodeInfo(_C.SIGN_IN, False),
    Code.AUTH_DENIED: _CodeInfo(_C.SIGN_IN, True),
    Code.AUTH_STATE_MISMATCH: _CodeInfo(_C.SIGN_IN, True),
    Code.AUTH_TOKEN_ERROR: _CodeInfo(_C.SIGN_IN, True),
    Code.TIMEOUT: _CodeInfo(_C.TIMEOUT, True, **_FAILS),
    Code.SERVER_ERROR: _CodeInfo(_C.SERVER_ERROR, True, **_FAILS_RESEND),
    Code.PROTOCOL_ERROR: _CodeInfo(_C.SERVER_ERROR, False, **_FAILS),
    Code.RESULT_TOO_LARGE: _CodeInfo(_C.VALIDATION, False),  # raised after the chain: no breaker sees it
    Code.RATE_LIMITED: _CodeInfo(_C.RATE_LIMIT, True, **_FAILS_RESEND),
    Code.CIRCUIT_OPEN: _CodeInfo(_C.CIRCUIT_OPEN, True),
    Code.BULKHEAD_FULL: _CodeInfo(_C.BULKHEAD_FULL, True),
    Code.INTERNAL_ERROR: _CodeInfo(_C.SERVER_ERROR, False, **_FAILS),
}


class PatchbayError(Exception):
    """Base of the tree. ``message`` is for the model: short, what happened, why, what next.

    ``detail`` is for the developer's log and may hold anything (it never reaches the
    model). ``retryable`` defaults to the code's; an instance may override it (a
    server that is restarting is retryable, one that is disabled is not).
    """

    def __init__(
        self,
        code: Code,
        message: str,
        *,
        detail: str | None = None,
        retryable: bool | None = None,
        retry_after_ms: int | None = None,
        server: str | None = None,
        tool: str | None = None,
        suggestions: Sequence[str] = (),
        category: Category | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.detail = detail
        self.category = category or code.info.category
        self.retryable = code.info.retryable if retryable is None else retryable
        self.retry_after_ms = retry_after_ms
        self.server = server
        self.tool = tool
        self.suggestions = tuple(suggestions)

    def to_dict(self) -> dict[str, Any]:
        """The structured error a program can act on; same form for every proxy error."""
        data: dict[str, Any] = {
            "code": self.code.value,
            "category": self.category.value,
            "message": self.message,
            "retryable": self.retryable,
        }
        if self.retry_after_ms is not None:
            data["retry_after_ms"] = self.retry_after_ms
        if self.server is not None:
            data["server"] = self.server
        if self.tool is not None:
            data["tool"] = self.tool
        if self.suggestions:
            data["suggestions"] = list(self.suggestions)
        return data

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code.value}: {self.message!r}, detail={self.detail!r})"


class ClientError(PatchbayError):
    """The client asked for something wrong (unknown tool, bad arguments)."""


class UpstreamError(PatchbayError):
    """An upstream failed, or the proxy refused to load it further (breaker, bulkhead)."""


class NotDelivered(UpstreamError):
    """The request never reached the upstream; sending it again cannot run anything twice."""


class SessionExpired(NotDelivered):
    """The upstream answered 404 for our session id: rebuild the session and send again."""


class SignedIn(NotDelivered):
    """A sign-in the call was waiting for completed (``oauth.gate``): send it again once the
    server is ready."""


def clip(text: str, limit: int = MAX_MODEL_TEXT) -> str:
    """Bound a text for the model, cutting at a word where it can."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:") + "…"


def to_result(error: PatchbayError) -> types.CallToolResult:
    """The one conversion from an error to what the model sees."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=clip(error.message))],
        structured_content={"error": error.to_dict()},
        is_error=True,
    )


def result_values(error: PatchbayError) -> dict[str, Any]:
    """``to_result`` as JSON values, without the 2026-07-28 ``resultType`` (the SDK's to add)."""
    return to_result(error).model_dump(by_alias=True, mode="json", exclude_none=True, exclude={"result_type"})


def to_mcp_error(error: PatchbayError, code: int = types.INVALID_PARAMS) -> MCPError:
    """For requests that have no isError form (prompts, resources, strict unknown-tool mode)."""
    return MCPError(code=code, message=clip(error.message), data=error.to_dict())


# --- translation of foreign exceptions ------------------------------------------------

_UNKNOWN_TOOL_HINTS = ("unknown tool", "tool not found", "not found: tool", "no such tool")


@contextmanager
def translated(*, server: str, tool: str | None = None, what: str | None = None) -> Generator[None, None, None]:
    """The boundary: anything foreign raised inside leaves as one of ours, chained to the original."""
    try:
        yield
    except PatchbayError:
        raise
    except Exception as exc:
        raise translate(exc, server=server, tool=tool, what=what) from exc


def translate(
    exc: BaseException,
    *,
    server: str,
    tool: str | None = None,
    timeout: float | None = None,
    what: str | None = None,
) -> PatchbayError:
    """Map any exception raised while talking to ``server`` into the tree, most specific match
    first; the caller raises it ``from`` the original (or uses ``translated``). ``what``: the
    request that timed out, when it was not a tool call (``resources/read``, ...)."""
    if isinstance(exc, PatchbayError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        return translate(most_telling(cast("BaseException", exc)), server=server, tool=tool, timeout=timeout, what=what)
    where = f"'{server}'"
    if isinstance(exc, ValidationError) and tool is not None:  # a tool result our models refuse: the server's fault
        return UpstreamError(
            Code.PROTOCOL_ERROR,
            "The server answered with a malformed tool result. Retry once; if it persists, tell the user.",
            detail=f"not a valid CallToolResult: {exc}",
            server=server,
            tool=tool,
        )
    if isinstance(exc, MCPError):
        status = http_status_of(exc)
        if status is not None:
            error = from_http_status(status[0], status[1], server=server)
            error.tool = tool
            return error
        return _translate_mcp_error(exc, server=server, tool=tool, timeout=timeout)
    if isinstance(exc, httpx2.HTTPStatusError):
        return from_http_status(exc.response.status_code, exc.response.headers.get("retry-after"), server=server)
    if isinstance(exc, httpx2.ConnectError | ConnectionRefusedError):
        return NotDelivered(
            Code.CONNECTION_FAILED,
            f"Could not connect to server {where}: the connection was refused. Retry later or tell the user "
            "the server is down.",
            detail=repr(exc),
            server=server,
        )
    if isinstance(exc, httpx2.TimeoutException | TimeoutError):
        advice = "in time. Retry later, or try a smaller request."
        text = f"the {what} request in time. Retry later." if what else advice
        return UpstreamError(
            Code.TIMEOUT,
            f"Server {where} did not answer {text}",
            detail=repr(exc),
            server=server,
            tool=tool,
        )
    if isinstance(exc, NotADirectoryError):
        return UpstreamError(
            Code.SPAWN_FAILED,
            f"Server {where} could not start: its working directory ('cwd') does not exist. Tell the user to fix "
            "the server's 'cwd' in the patchbay config.",
            detail=repr(exc),
            server=server,
        )
    if isinstance(exc, FileNotFoundError | PermissionError):
        what = "was not found" if isinstance(exc, FileNotFoundError) else "is not executable"
        return UpstreamError(
            Code.SPAWN_FAILED,
            f"Server {where} could not start: its command {what}. Tell the user to fix the server's "
            "'command' in the patchbay config.",
            detail=repr(exc),
            server=server,
        )
    if isinstance(
        exc,
        anyio.ClosedResourceError
        | anyio.BrokenResourceError
        | anyio.EndOfStream
        | httpx2.TransportError
        | ConnectionError
        | EOFError,
    ):
        return UpstreamError(
            Code.CONNECTION_LOST,
            f"The connection to server {where} was lost. It is being restored; retry in a few seconds.",
            detail=repr(exc),
            server=server,
            tool=tool,
        )
    if isinstance(exc, OSError):
        return UpstreamError(
            Code.SPAWN_FAILED,
            f"Server {where} could not start ({exc.strerror or 'operating system error'}). Tell the user to check "
            "the server's config.",
            detail=repr(exc),
            server=server,
        )
    return UpstreamError(
        Code.INTERNAL_ERROR,
        f"An unexpected error occurred while talking to server {where}. Retry once; if it persists, tell the user.",
        detail=repr(exc),
        server=server,
        tool=tool,
    )


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions at the leaves of (nested) ExceptionGroups, in order; ``exc`` itself if not a group."""
    if not isinstance(exc, BaseExceptionGroup):
        return [exc]
    found: list[BaseException] = []
    for inner in cast("BaseExceptionGroup[BaseException]", exc).exceptions:
        found.extend(leaves(inner))
    return found


_TELLING: tuple[type[BaseException], ...] = (
    PatchbayError,
    OAuthFlowError,
    httpx2.HTTPStatusError,
    MCPError,
    httpx2.HTTPError,
    OSError,  # TimeoutError and ConnectionError among them
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
    anyio.EndOfStream,
)
"""The kinds of leaf that say what happened, most telling first (``most_telling``)."""


def most_telling(exc: BaseException) -> BaseException:
    """The one rule for the leaf of (nested) ExceptionGroups that says what happened: of the leaves
    not cancelled (asyncio's: the proxy runs on it), the first of the most telling kind, else the first."""
    if not isinstance(exc, BaseExceptionGroup):
        return exc
    group = cast("BaseExceptionGroup[BaseException]", exc)
    found = [leaf for leaf in leaves(group) if not isinstance(leaf, asyncio.CancelledError)]
    for kind in _TELLING:
        for leaf in found:
            if isinstance(leaf, kind):
                return leaf
    return found[0] if found else group


_JS_FRAME = re.compile(r"^\s*at\s.*:\d+(:\d+)?\)?\s*$")


def _without_stack(message: str) -> str:
    """An upstream's error text without a stack trace: the model needs the error, not the
    server's source paths. A Python traceback shrinks to its last line (the exception)."""
    text = message.strip()
    if "Traceback (most recent call last)" in text:
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return lines[-1] if lines else text
    kept = [line for line in text.splitlines() if not _JS_FRAME.match(line)]
    return "\n".join(kept).strip() or text


def _is_transport_close(exc: MCPError) -> bool:
    """The SDK's own "connection closed" (stdio EOF, a broken SSE stream), not an upstream's reply.

    -32000 is also the first code of JSON-RPC's "server error" range, which servers use for
    their own failures: those are the upstream's errors, its connection is fine.
    """
    message = exc.message or ""
    return exc.data is None and (message == "Connection closed" or message.startswith("SSE stream "))


REFUSED_KEY = "patchbay/refused"
"""In the ``data`` of the error answer the proxy hands the SDK's session in place of an
upstream answer it refused unparsed (too long, nested too deeply): the code to report."""


def refused_answer(server: str, code: Code, why: str, tool: str | None = None) -> UpstreamError:
    """What the model hears of a call whose answer the proxy refused unparsed: ``code`` is
    ``RESULT_TOO_LARGE`` (over ``max_message_bytes``) or ``PROTOCOL_ERROR`` (too deep)."""
    where = f"'{server}'"
    if code is Code.RESULT_TOO_LARGE:
        text = (
            f"Server {where} answered with more data than the proxy accepts in one message, so the answer was "
            "dropped. Ask for less (a smaller page, range or file), or tell the user."
        )
    else:
        text = (
            f"Server {where} answered with data nested too deeply for the proxy, so the answer was dropped. "
            "Retry with other arguments, or tell the user."
        )
    return UpstreamError(code, text, detail=f"the answer was refused: {why}", server=server, tool=tool)


def refusal_data(code: Code) -> dict[str, str]:
    """The ``data`` of an error answer standing for a refused one (``refused_answer`` reads it back)."""
    return {REFUSED_KEY: code.value}


def _translate_mcp_error(exc: MCPError, *, server: str, tool: str | None, timeout: float | None) -> PatchbayError:
    where = f"'{server}'"
    message = exc.message or ""
    data: Any = exc.data
    refused = cast("dict[str, Any]", data).get(REFUSED_KEY) if isinstance(data, dict) else None
    if refused in (Code.RESULT_TOO_LARGE.value, Code.PROTOCOL_ERROR.value):
        return refused_answer(server, Code(refused), message, tool)
    if exc.code == types.CONNECTION_CLOSED and _is_transport_close(exc):
        return UpstreamError(
            Code.CONNECTION_LOST,
            f"Server {where} closed the connection while handling this call (it may have crashed). It is being "
            "restarted; retry in a few seconds.",
            detail=f"MCPError {exc.code}: {message}",
            server=server,
            tool=tool,
        )
    if exc.code == types.REQUEST_TIMEOUT:
        after = f" after {timeout:g}s" if timeout else ""
        return UpstreamError(
            Code.TIMEOUT,
            f"Server {where} did not answer{after}; the call was cancelled. Retry with a smaller request, or "
            "tell the user the server is slow.",
            detail=f"MCPError {exc.code}: {message}",
            server=server,
            tool=tool,
        )
    upstream_text = clip(_without_stack(message), 300)
    if exc.code == types.INVALID_PARAMS:
        lowered = message.lower()
        if tool is not None and any(hint in lowered for hint in _UNKNOWN_TOOL_HINTS):
            return ClientError(
                Code.TOOL_NOT_FOUND,
                f"Server {where} does not have a tool '{tool}' (any more). List the tools again and pick one "
                "from the list.",
                detail=f"MCPError {exc.code}: {message}",
                server=server,
                tool=tool,
            )
        return ClientError(
            Code.INVALID_ARGUMENTS,
            f"Server {where} rejected the arguments: {upstream_text}. Fix the arguments and call again.",
            detail=f"MCPError {exc.code}: {message} data={exc.data!r}",
            server=server,
            tool=tool,
        )
    if exc.code == types.METHOD_NOT_FOUND:
        return UpstreamError(
            Code.SERVER_ERROR,
            f"Server {where} does not support this request. Use another tool.",
            detail=f"MCPError {exc.code}: {message}",
            server=server,
            tool=tool,
            retryable=False,
        )
    return UpstreamError(
        Code.SERVER_ERROR,
        f"Server {where} reported an error: {upstream_text}. Retry once; if it persists, try another approach "
        "or tell the user.",
        detail=f"MCPError {exc.code}: {message} data={exc.data!r}",
        server=server,
        tool=tool,
    )


def parse_retry_after(value: str | None) -> int | None:
    """Retry-After in seconds (the HTTP-date form is rare for APIs; treated as absent)."""
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return max(0, int(seconds * 1000))


HTTP_STATUS_KEY = "patchbay/httpStatus"
RETRY_AFTER_KEY = "patchbay/retryAfter"
"""Where the proxy's HTTP links put the status (and Retry-After) behind the SDK's stand-in error
for a request (``transports.http.HttpStatuses``): keys of the error's ``data``."""

HTTP_STAND_INS = frozenset({"Server returned an error response", "Session terminated", "Not Found"})
"""What the SDK's HTTP clients answer a request with when its POST got an HTTP error status; a
status is read only from these, so no upstream can pose as an HTTP status with its own error."""


def http_status_of(exc: MCPError) -> tuple[int, str | None] | None:
    """The HTTP status (and Retry-After) an HTTP link tied to this error, if any."""
    data = exc.data
    if not isinstance(data, dict) or exc.message not in HTTP_STAND_INS:
        return None
    values = cast("dict[str, Any]", data)
    status = values.get(HTTP_STATUS_KEY)
    if not isinstance(status, int) or isinstance(status, bool):
        return None
    retry_after = values.get(RETRY_AFTER_KEY)
    return status, retry_after if isinstance(retry_after, str) else None


def from_http_status(status: int, retry_after: str | None, *, server: str) -> PatchbayError:
    """An HTTP status seen on an upstream's transport, as an error."""
    where = f"'{server}'"
    if status in (401, 403):
        return UpstreamError(
            Code.AUTH_FAILED,
            f"Server {where} refused the proxy's credentials (HTTP {status}). Tell the user to check the "
            "server's headers or token in the patchbay config.",
            detail=f"HTTP {status}",
            server=server,
        )
    if status == 404:
        return SessionExpired(
            Code.CONNECTION_LOST,
            f"Server {where} ended the session. Retry the call.",
            detail="HTTP 404 on a request carrying a session id",
            server=server,
        )
    if status == 429:
        after = parse_retry_after(retry_after)
        wait = f" Wait {max(1, round(after / 1000))}s, then retry." if after is not None else " Wait, then retry."
        return UpstreamError(
            Code.RATE_LIMITED,
            f"Server {where} is rate limiting requests (HTTP 429).{wait}",
            detail=f"HTTP 429 retry-after={retry_after!r}",
            server=server,
            retry_after_ms=after,
        )
    if status >= 500:
        return UpstreamError(
            Code.SERVER_ERROR,
            f"Server {where} had an internal error (HTTP {status}). Retry in a little while.",
            detail=f"HTTP {status}",
            server=server,
            retry_after_ms=parse_retry_after(retry_after),
        )
    return UpstreamError(
        Code.PROTOCOL_ERROR,
        f"Server {where} answered with HTTP {status}. Tell the user to check the server's url.",
        detail=f"HTTP {status}",
        server=server,
    )
