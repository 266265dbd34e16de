"""The proxy's errors: one tree, split by whose fault it is, mapped at the edges.

    PatchbayError                  code, category, retryable, retry_after_ms; text for the model
    ├── ClientError                the client asked for something wrong: fix the call, don't retry
    │                              (TOOL_NOT_FOUND, TOOL_AMBIGUOUS, INVALID_ARGUMENTS, NOT_READ_ONLY, ...)
    ├── UpstreamError              an upstream server failed, or the proxy protected it
    │   │                          (CONNECTION_LOST, TIMEOUT, SERVER_ERROR, CIRCUIT_OPEN, TOOL_CHANGED, ...)
    │   └── NotDelivered           the request never reached the upstream: it is always safe to send again
    │       ├── SessionExpired     the upstream forgot our session: rebuild it, then send again
    │       └── SignedIn           the sign-in the call needed completed: send it again when ready
    └── ElicitationRequired        the upstream needs the user to open a URL first (its -32042 error)

Configuration mistakes in the file are ``config.ConfigError``; at call time a server that is
disabled or misconfigured raises ``UpstreamError`` with code ``SERVER_UNAVAILABLE``.

Classes exist where code branches on them: the policies retry ``NotDelivered`` freely,
the upstream rebuilds its session on ``SessionExpired``, the tool path's edge logs a
``ClientError`` (the model's mistake) at INFO and answers an ``ElicitationRequired`` as the JSON-RPC
error it was, for a client that takes URL elicitations. Everything else is carried by ``code``: the
circuit breaker counts the codes the table marks ``trips_breaker``, the retry ``resend_when_safe``.

Foreign exceptions (OSError, anyio stream errors, httpx errors, the SDK's MCPError,
pydantic's ValidationError, ExceptionGroups from transports) become these in one place,
``errors.foreign``. The tool path's edge (``calls.path.error_result``) turns an error into a
result exactly once, with ``to_result``.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError

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
    APPROVAL = "approval"


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
    USER_DECLINED = "USER_DECLINED"
    TOOL_CHANGED = "TOOL_CHANGED"
    NOT_READ_ONLY = "NOT_READ_ONLY"
    SERVER_UNAVAILABLE = "SERVER_UNAVAILABLE"
    CONFIG_INVALID = "CONFIG_INVALID"
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
    URL_ELICITATION_REQUIRED = "URL_ELICITATION_REQUIRED"
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
    # The user said no to a call through call_tool (patchbay.confirm): nothing was sent.
    Code.USER_DECLINED: _CodeInfo(_C.VALIDATION, False),
    # Held back until the user approves it (trust): changed since approved, new, or flagged by the scan.
    Code.TOOL_CHANGED: _CodeInfo(_C.APPROVAL, False),
    # The read route (call_read) was given a tool that does not say it only reads: nothing was sent.
    Code.NOT_READ_ONLY: _CodeInfo(_C.VALIDATION, False),
    Code.SERVER_UNAVAILABLE: _CodeInfo(_C.CONFIGURATION, False),
    # The proxy's own config could not be used at the start: no server was started (cli).
    Code.CONFIG_INVALID: _CodeInfo(_C.CONFIGURATION, False),
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
    # The upstream needs the user to open a URL (its own sign-in to a third party, a payment): not a failure.
    Code.URL_ELICITATION_REQUIRED: _CodeInfo(_C.SIGN_IN, True),
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


class ElicitationRequired(PatchbayError):
    """The upstream answered ``-32042`` (URLElicitationRequiredError): the user must open the URLs of
    ``data["elicitations"]`` before the call can succeed. A client that declared URL elicitation gets
    that JSON-RPC error itself (``to_mcp_error``); any other, ``message`` with the URLs in it."""

    def __init__(self, message: str, *, upstream_message: str, data: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(Code.URL_ELICITATION_REQUIRED, message, **kwargs)
        self.upstream_message = upstream_message
        self.data = data

    @property
    def elicitation_ids(self) -> list[str]:
        return [e["elicitationId"] for e in self.data["elicitations"]]

    def to_mcp_error(self) -> MCPError:
        return MCPError(code=types.URL_ELICITATION_REQUIRED, message=self.upstream_message, data=self.data)


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


HELD_WHY = {
    "changed": "changed since the user approved it",
    "new": "is new on that server and not yet approved",
    "flagged": "carries text that may be instructions to you rather than a description",
}
"""Why a definition is held (``trust.decide.Reason``), as the model is told."""


def tool_changed(
    server: str, name: str, reason: str = "changed", kind: str = "tool", fingerprint: str = ""
) -> UpstreamError:
    """What the model hears of a call to a tool (or a prompt) the proxy holds back until the user
    approves it (``trust``): nothing was run; the user approves it with ``mcp-patchbay trust``
    (the command shell-quoted, naming the held definition's fingerprint)."""
    from mcp_patchbay.trust.wording import approve_command, list_command, printable

    why = HELD_WHY.get(reason, HELD_WHY["changed"])
    command = approve_command(server, kind, name, fingerprint)
    if len(command) > 200:  # a name no real tool has (quoting can grow it): the list names it
        command = list_command(server)
    text = (
        f"The {kind} '{printable(name, 60)}' of server '{printable(server, 100)}' {why}, so the proxy holds it "
        f"back and nothing was run. Tell the user: they can review it and approve it with `{command}`."
    )
    return UpstreamError(Code.TOOL_CHANGED, text, detail=f"held: {reason}", server=server, tool=name)
