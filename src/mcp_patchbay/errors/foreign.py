"""Where foreign exceptions become the proxy's own (``errors``' tree): the one translator, used as a boundary.

``translate`` maps anything raised while talking to an upstream (OSError, anyio stream
errors, httpx errors, the SDK's ``MCPError``, pydantic's ``ValidationError``, exception
groups from transports) to a ``PatchbayError``, most specific match first; ``translated`` is
the ``with`` block that applies it at a boundary, as httpx's ``map_httpcore_exceptions``
does. ``sign_in_failure`` is the same for a sign-in (``oauth.signin``): the SDK's OAuth errors,
a refused address, a timeout, an authorization server out of reach (``auth_server_trouble``,
which the sign-in gate asks too); what no sign-in rule matches is ``translate``'s. Two parts
of it live beside it: ``exception_groups.most_telling``, the one rule for the leaf of a group
that says what happened, and ``http_status.from_http_status``, what an upstream's HTTP status
means. The HTTP links' statuses (``HTTP_STATUS_KEY``) are read back here (``http_status_of``).
``tests/test_error_edge.py`` holds every foreign exception the proxy meets against the code the
README promises for it.

Pure: no I/O, no logging.
"""

from __future__ import annotations

import re
from collections.abc import Generator
from contextlib import contextmanager
from typing import Any, cast

import anyio
import httpx2
import mcp_types as types
from mcp.client.auth.exceptions import OAuthFlowError, OAuthRegistrationError, OAuthTokenError
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from mcp_patchbay.errors.exception_groups import most_telling
from mcp_patchbay.errors.http_status import from_http_status
from mcp_patchbay.errors.tree import (
    REFUSED_KEY,
    ClientError,
    Code,
    ElicitationRequired,
    NotDelivered,
    PatchbayError,
    UpstreamError,
    clip,
    refused_answer,
)
from mcp_patchbay.oauth.urls import RefusedUrl
from mcp_patchbay.redaction import redact

__all__ = [
    "HTTP_STAND_INS",
    "HTTP_STATUS_KEY",
    "RETRY_AFTER_KEY",
    "auth_server_trouble",
    "http_status_of",
    "sign_in_failure",
    "translate",
    "translated",
]


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
    if exc.code == types.URL_ELICITATION_REQUIRED:
        required = _elicitation_required(exc, server=server, tool=tool)
        if required is not None:
            return required
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


def _elicitation_required(exc: MCPError, *, server: str, tool: str | None) -> ElicitationRequired | None:
    """A ``-32042`` error whose ``data.elicitations`` are URL elicitations, as the spec has them;
    None for anything else under that code (then it is the server's error like any other)."""
    data: Any = exc.data
    listed: Any = cast("dict[str, Any]", data).get("elicitations") if isinstance(data, dict) else None
    if not isinstance(listed, list) or not listed:
        return None
    try:
        wanted = [
            types.ElicitRequestURLParams.model_validate(item, by_name=False) for item in cast("list[Any]", listed)
        ]
    except ValidationError:
        return None
    if not all(e.elicitation_id for e in wanted):
        return None
    pages = "; ".join(f"{clip(_without_stack(e.message), 120)} {e.url}" for e in wanted)
    text = (
        f"Server '{server}' needs the user to open a page before this call can succeed: {pages}. Ask the user to "
        "open it, then call the tool again."
    )
    return ElicitationRequired(
        clip(text),
        upstream_message=exc.message or "This request requires more information.",
        data=cast("dict[str, Any]", data),
        detail=f"MCPError {exc.code}: {exc.message} data={exc.data!r}",
        server=server,
        tool=tool,
    )


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


# --- a sign-in's failure ---------------------------------------------------------------------


_STATE_MISMATCH = "state parameter mismatch"
_SIGN_IN_FAILURES: tuple[tuple[type[BaseException], Code, str], ...] = (
    (
        TimeoutError,
        Code.AUTH_REQUIRED,
        "Signing in to server {where} was not finished within {minutes:g} minutes. Calling one of its tools "
        "again starts a new sign-in; ask the user to complete it in the browser.",
    ),
    (
        OAuthRegistrationError,
        Code.AUTH_REGISTRATION_REFUSED,
        "The authorization server of server {where} refused to register the proxy as a client. Tell the user "
        "to register a client with it and put its ID in the server's 'oauth.client_id' in the patchbay config.",
    ),
    (
        OAuthTokenError,
        Code.AUTH_TOKEN_ERROR,
        "The authorization server of server {where} refused to issue a token, so the sign-in failed. Retry "
        "once; if it persists, tell the user (the proxy's log has the details).",
    ),
    (
        OAuthFlowError,
        Code.AUTH_STATE_MISMATCH,  # only when its text says so (``_STATE_MISMATCH``)
        "Signing in to server {where} was stopped: the browser came back from a different sign-in attempt "
        "(state mismatch). Calling one of its tools again starts a new sign-in.",
    ),
    (
        OAuthFlowError,
        Code.AUTH_FAILED,
        "Signing in to server {where} failed: its sign-in setup could not be used. Tell the user (the "
        "proxy's log has the details).",
    ),
)
"""What a sign-in's failures say to the model, by the kind of leaf, first match wins; the SDK's
registration and token errors are its flow errors too, so they come before them."""


def sign_in_failure(
    exc: BaseException, server: str, server_url: str, *, timeout: float, signed_in: bool = False
) -> UpstreamError:
    """A failed sign-in (``oauth.signin.sign_in``, which gave the person ``timeout`` seconds) as a
    short error for the model, the full story in ``detail``; ``signed_in``: the tokens were had,
    and the server refused them all the same. What no sign-in rule matches is ``translate``'s."""
    leaf = most_telling(exc)
    where = f"'{server}'"
    detail = _clean(f"{type(leaf).__name__}: {leaf}")
    if isinstance(leaf, RefusedUrl):
        return UpstreamError(
            Code.AUTH_FAILED,
            f"Signing in to server {where} was refused: its authorization server named {leaf.article} the proxy "
            f"will not use ({leaf.reason}). Nothing was opened in the browser. Tell the user.",
            detail=leaf.detail,
            server=server,
        )
    if isinstance(leaf, UpstreamError):
        return leaf
    for kind, code, words in _SIGN_IN_FAILURES:
        if isinstance(leaf, kind) and (code is not Code.AUTH_STATE_MISMATCH or _STATE_MISMATCH in str(leaf).lower()):
            return UpstreamError(code, words.format(where=where, minutes=timeout / 60), detail=detail, server=server)
    if (trouble := auth_server_trouble(leaf, server, server_url)) is not None:
        return trouble
    error = translate(leaf, server=server)
    if signed_in and error.code is Code.AUTH_FAILED:
        error.message = (
            f"The sign-in to server {where} worked, but the server still refuses the proxy's requests. Tell the "
            "user; signing in again is unlikely to help."
        )
    return error if isinstance(error, UpstreamError) else UpstreamError(error.code, error.message, detail=detail)


def auth_server_trouble(exc: BaseException, server: str, server_url: str) -> UpstreamError | None:
    """A connection failure that was the authorization server's (not the MCP server's at
    ``server_url``) as ``AUTH_SERVER_UNREACHABLE``; None for any other."""
    leaf = most_telling(exc)
    if not isinstance(leaf, httpx2.TransportError) or _same_origin(leaf, server_url):
        return None
    return UpstreamError(
        Code.AUTH_SERVER_UNREACHABLE,
        f"The authorization server of server '{server}' could not be reached, so the proxy cannot sign in to it "
        "now. Retry later; if it persists, tell the user.",
        detail=_clean(f"{type(leaf).__name__}: {leaf}"),
        server=server,
    )


def _same_origin(exc: httpx2.TransportError, server_url: str) -> bool:
    try:
        url = exc.request.url
    except RuntimeError:
        return True
    server = httpx2.URL(server_url)
    return (url.scheme, url.host, url.port) == (server.scheme, server.host, server.port)


_PYDANTIC_INPUT = re.compile(r"input_value=.*?(?=, input_type=)", re.DOTALL)


def _clean(detail: str) -> str:
    """A failure's text for the log: without the answer pydantic quotes (a token endpoint's body
    may hold a token) and with credential-like values redacted."""
    return redact(_PYDANTIC_INPUT.sub("input_value=...", detail))[:2000]
