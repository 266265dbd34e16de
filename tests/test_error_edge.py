"""The error edge as a table: every foreign exception the proxy meets maps to the code the
README's error table promises, and each code carries the category and retryability that
table gives it; a sign-in's failures the same way (``sign_in_failure``). No I/O: ``errors.foreign``
is pure."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp.client.auth.exceptions import OAuthFlowError, OAuthRegistrationError, OAuthTokenError
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ValidationError

from mcp_patchbay.errors.exception_groups import most_telling
from mcp_patchbay.errors.foreign import (
    HTTP_STATUS_KEY,
    RETRY_AFTER_KEY,
    auth_server_trouble,
    sign_in_failure,
    translate,
    translated,
)
from mcp_patchbay.errors.tree import (
    ClientError,
    Code,
    NotDelivered,
    PatchbayError,
    SessionExpired,
    UpstreamError,
    refusal_data,
    result_values,
)
from mcp_patchbay.oauth.urls import RefusedUrl

README = Path(__file__).resolve().parent.parent / "README.md"

_REQUEST = httpx2.Request("POST", "https://upstream.example/mcp")


def _status(code: int, retry_after: str | None = None) -> httpx2.HTTPStatusError:
    headers = {"retry-after": retry_after} if retry_after is not None else {}
    response = httpx2.Response(code, request=_REQUEST, headers=headers)
    return httpx2.HTTPStatusError(f"HTTP {code}", request=_REQUEST, response=response)


def _stand_in(code: int, retry_after: str | None = None) -> MCPError:
    """The SDK's error for a POST that got an HTTP status, as our HTTP link marks it."""
    data: dict[str, Any] = {HTTP_STATUS_KEY: code}
    if retry_after is not None:
        data[RETRY_AFTER_KEY] = retry_after
    return MCPError(types.INTERNAL_ERROR, "Server returned an error response", data)


def _validation_error() -> ValidationError:
    class Result(BaseModel):
        content: list[Any]

    try:
        Result.model_validate({"content": 3})
    except ValidationError as exc:
        return exc
    raise AssertionError("unreachable")


FOREIGN: list[tuple[str, BaseException, Code]] = [
    # The operating system, starting a process or talking to it
    ("command not found", FileNotFoundError(2, "No such file or directory"), Code.SPAWN_FAILED),
    ("command not executable", PermissionError(13, "Permission denied"), Code.SPAWN_FAILED),
    ("cwd missing", NotADirectoryError(20, "Not a directory"), Code.SPAWN_FAILED),
    ("other OS refusal", OSError(7, "Argument list too long"), Code.SPAWN_FAILED),
    ("connection refused", ConnectionRefusedError(111, "Connection refused"), Code.CONNECTION_FAILED),
    ("connection reset", ConnectionResetError(104, "Connection reset by peer"), Code.CONNECTION_LOST),
    ("broken pipe", BrokenPipeError(32, "Broken pipe"), Code.CONNECTION_LOST),
    ("end of file", EOFError(), Code.CONNECTION_LOST),
    ("timeout", TimeoutError(), Code.TIMEOUT),
    # anyio's streams
    ("closed stream", anyio.ClosedResourceError(), Code.CONNECTION_LOST),
    ("broken stream", anyio.BrokenResourceError(), Code.CONNECTION_LOST),
    ("end of stream", anyio.EndOfStream(), Code.CONNECTION_LOST),
    # httpx2, the remote transports
    ("http connect refused", httpx2.ConnectError("refused", request=_REQUEST), Code.CONNECTION_FAILED),
    ("http read timeout", httpx2.ReadTimeout("slow", request=_REQUEST), Code.TIMEOUT),
    ("http connect timeout", httpx2.ConnectTimeout("slow", request=_REQUEST), Code.TIMEOUT),
    ("http read error", httpx2.ReadError("gone", request=_REQUEST), Code.CONNECTION_LOST),
    ("http protocol error", httpx2.RemoteProtocolError("peer closed", request=_REQUEST), Code.CONNECTION_LOST),
    ("http 401", _status(401), Code.AUTH_FAILED),
    ("http 403", _status(403), Code.AUTH_FAILED),
    ("http 404: session gone", _status(404), Code.CONNECTION_LOST),
    ("http 429", _status(429, "3"), Code.RATE_LIMITED),
    ("http 500", _status(500), Code.SERVER_ERROR),
    ("http 503", _status(503), Code.SERVER_ERROR),
    ("http 400", _status(400), Code.PROTOCOL_ERROR),
    ("http 410", _status(410), Code.PROTOCOL_ERROR),
    # The SDK's MCPError: the transport's own, the HTTP stand-ins, and an upstream's answers
    ("sdk connection closed", MCPError(types.CONNECTION_CLOSED, "Connection closed"), Code.CONNECTION_LOST),
    ("sdk sse stream broken", MCPError(types.CONNECTION_CLOSED, "SSE stream disconnected"), Code.CONNECTION_LOST),
    ("sdk request timeout", MCPError(types.REQUEST_TIMEOUT, "Request timed out"), Code.TIMEOUT),
    ("stand-in 401", _stand_in(401), Code.AUTH_FAILED),
    ("stand-in 404", _stand_in(404), Code.CONNECTION_LOST),
    ("stand-in 429", _stand_in(429, "2"), Code.RATE_LIMITED),
    ("stand-in 502", _stand_in(502), Code.SERVER_ERROR),
    ("upstream invalid params", MCPError(types.INVALID_PARAMS, "'path' is required"), Code.INVALID_ARGUMENTS),
    ("upstream unknown tool", MCPError(types.INVALID_PARAMS, "Unknown tool: search"), Code.TOOL_NOT_FOUND),
    ("upstream method not found", MCPError(types.METHOD_NOT_FOUND, "Method not found"), Code.SERVER_ERROR),
    ("upstream internal error", MCPError(types.INTERNAL_ERROR, "boom"), Code.SERVER_ERROR),
    ("upstream's own -32000", MCPError(-32000, "Connection closed", {"why": "its own"}), Code.SERVER_ERROR),
    (
        "answer too large",
        MCPError(types.INTERNAL_ERROR, "refused", refusal_data(Code.RESULT_TOO_LARGE)),
        Code.RESULT_TOO_LARGE,
    ),
    (
        "answer too deep",
        MCPError(types.INTERNAL_ERROR, "refused", refusal_data(Code.PROTOCOL_ERROR)),
        Code.PROTOCOL_ERROR,
    ),
    # pydantic: a tool result our models refuse is the server's fault
    ("malformed tool result", _validation_error(), Code.PROTOCOL_ERROR),
    # ExceptionGroups from the transports' task groups: the telling leaf decides
    ("group of one", ExceptionGroup("tg", [ConnectionRefusedError(111, "refused")]), Code.CONNECTION_FAILED),
    (
        "group: cancellation and a status",
        BaseExceptionGroup("tg", [asyncio.CancelledError(), _status(503)]),
        Code.SERVER_ERROR,
    ),
    (
        "nested group: a bug beside a connection loss",
        ExceptionGroup("outer", [RuntimeError("teardown"), ExceptionGroup("inner", [anyio.BrokenResourceError()])]),
        Code.CONNECTION_LOST,
    ),
    # A bug of ours, or anything unforeseen
    ("unforeseen", RuntimeError("bug"), Code.INTERNAL_ERROR),
    ("unforeseen value error", ValueError("bug"), Code.INTERNAL_ERROR),
]


@pytest.mark.parametrize(("exc", "code"), [(exc, code) for _, exc, code in FOREIGN], ids=[n for n, _, _ in FOREIGN])
def test_every_foreign_exception_maps_to_the_code_the_readme_promises(exc: BaseException, code: Code) -> None:
    error = translate(exc, server="files", tool="read")
    assert error.code is code, f"{exc!r} became {error!r}"
    assert error.server == "files"
    promised = _readme_table()[code.value]
    assert error.to_dict()["category"] == promised[0]


def test_a_timeout_of_another_request_names_it() -> None:
    error = translate(TimeoutError(), server="files", what="resources/read")
    assert error.code is Code.TIMEOUT
    assert "resources/read" in error.message


def test_the_classes_code_branches_on() -> None:
    assert isinstance(translate(_status(404), server="s"), SessionExpired)
    assert isinstance(translate(ConnectionRefusedError(), server="s"), NotDelivered)
    assert isinstance(translate(MCPError(types.INVALID_PARAMS, "bad"), server="s", tool="t"), ClientError)
    assert isinstance(translate(RuntimeError(), server="s"), UpstreamError)


def test_retry_after_is_carried() -> None:
    assert translate(_status(429, "3"), server="s").retry_after_ms == 3000
    assert translate(_stand_in(429, "2"), server="s").retry_after_ms == 2000


def test_our_own_errors_pass_through_unchanged() -> None:
    ours = ClientError(Code.INVALID_ARGUMENTS, "fix it")
    assert translate(ours, server="s") is ours
    assert translate(ExceptionGroup("tg", [ValueError(), ours]), server="s") is ours


def test_the_boundary_raises_ours_from_the_original() -> None:
    original = ConnectionResetError(104, "reset")
    with pytest.raises(UpstreamError) as caught, translated(server="files", tool="read"):
        raise original
    assert caught.value.code is Code.CONNECTION_LOST
    assert caught.value.__cause__ is original
    ours = ClientError(Code.INVALID_ARGUMENTS, "fix it")
    with pytest.raises(ClientError) as kept, translated(server="files"):
        raise ours
    assert kept.value is ours and kept.value.__cause__ is None


def test_the_telling_leaf_is_one_rule() -> None:
    """The sign-in's failure and the call's translation read the same leaf of a group."""
    token = OAuthTokenError("invalid_grant")
    group = BaseExceptionGroup("tg", [asyncio.CancelledError(), RuntimeError("teardown"), token])
    assert most_telling(group) is token
    only_cancelled = BaseExceptionGroup("tg", [asyncio.CancelledError()])
    assert most_telling(only_cancelled) is only_cancelled
    plain = ValueError()
    assert most_telling(plain) is plain


_SERVER_URL = "https://upstream.example/mcp"
_AUTH_REQUEST = httpx2.Request("POST", "https://auth.example/token")

SIGN_IN: list[tuple[str, BaseException, Code]] = [
    ("not finished in time", TimeoutError(), Code.AUTH_REQUIRED),
    ("registration refused", OAuthRegistrationError("registration failed: 400"), Code.AUTH_REGISTRATION_REFUSED),
    ("token refused", OAuthTokenError("token exchange failed: 400"), Code.AUTH_TOKEN_ERROR),
    ("state mismatch", OAuthFlowError("State parameter mismatch"), Code.AUTH_STATE_MISMATCH),
    ("other flow error", OAuthFlowError("no metadata"), Code.AUTH_FAILED),
    ("refused address", RefusedUrl("authorization endpoint", "http://evil.example/", "not https"), Code.AUTH_FAILED),
    ("ours passes", UpstreamError(Code.AUTH_SERVER_UNREACHABLE, "down", server="s"), Code.AUTH_SERVER_UNREACHABLE),
    ("auth server out of reach", httpx2.ConnectError("refused", request=_AUTH_REQUEST), Code.AUTH_SERVER_UNREACHABLE),
    ("the server itself out of reach", httpx2.ConnectError("refused", request=_REQUEST), Code.CONNECTION_FAILED),
    (
        "group: the token's leaf",
        BaseExceptionGroup("tg", [RuntimeError("x"), OAuthTokenError("t")]),
        Code.AUTH_TOKEN_ERROR,
    ),
    ("anything else: translate's", _status(503), Code.SERVER_ERROR),
]


@pytest.mark.parametrize(("exc", "code"), [(exc, code) for _, exc, code in SIGN_IN], ids=[n for n, _, _ in SIGN_IN])
def test_a_sign_in_failure_maps_to_its_code(exc: BaseException, code: Code) -> None:
    """A sign-in's failure is translated where every other foreign exception is (``errors.foreign``)."""
    error = sign_in_failure(exc, "s", _SERVER_URL, timeout=300)
    assert isinstance(error, UpstreamError) and error.code is code
    assert error.server == "s"


def test_a_sign_in_failure_says_what_the_model_can_do() -> None:
    timed_out = sign_in_failure(TimeoutError(), "s", _SERVER_URL, timeout=300)
    assert "within 5 minutes" in timed_out.message and "'s'" in timed_out.message
    refused = sign_in_failure(_status(401), "s", _SERVER_URL, timeout=300, signed_in=True)
    assert refused.code is Code.AUTH_FAILED and "signing in again is unlikely to help" in refused.message
    token = OAuthTokenError("bad: input_value={'access_token': 'secret-value'}, input_type=dict")
    assert "secret-value" not in (sign_in_failure(token, "s", _SERVER_URL, timeout=300).detail or "")


def test_the_authorization_server_out_of_reach_is_told_apart() -> None:
    """The gate asks the same rule of a refresh's connection failure."""
    assert auth_server_trouble(httpx2.ConnectError("x", request=_REQUEST), "s", _SERVER_URL) is None
    assert auth_server_trouble(ValueError(), "s", _SERVER_URL) is None
    trouble = auth_server_trouble(httpx2.ConnectError("x", request=_AUTH_REQUEST), "s", _SERVER_URL)
    assert trouble is not None and trouble.code is Code.AUTH_SERVER_UNREACHABLE


def test_every_code_has_the_category_and_retryability_the_readme_gives() -> None:
    table = _readme_table()
    assert set(table) == {code.value for code in Code}
    for code in Code:
        category, retryable = table[code.value]
        values = result_values(UpstreamError(code, "text"))["structuredContent"]["error"]
        assert values["category"] == category, code
        assert values["retryable"] is retryable, code


def test_an_error_result_is_what_the_model_is_told() -> None:
    values = result_values(ClientError(Code.TOOL_NOT_FOUND, "No tool 'x'.", suggestions=["y"]))
    assert values["isError"] is True
    assert values["content"] == [{"type": "text", "text": "No tool 'x'."}]
    assert values["structuredContent"]["error"]["code"] == "TOOL_NOT_FOUND"
    assert "resultType" not in values


def _readme_table() -> dict[str, tuple[str, bool]]:
    """README's "## Errors" table: code to (category, retryable by default)."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Errors") :]
    rows = re.findall(r"^\| `([A-Z_]+)` \| (\w+) \| (yes|no)\b", section, flags=re.MULTILINE)
    return {code: (category, answer == "yes") for code, category, answer in rows}


def test_readme_table_is_read() -> None:
    assert len(_readme_table()) >= 20


def test_error_text_is_clipped_for_the_model() -> None:
    error: PatchbayError = UpstreamError(Code.SERVER_ERROR, "word " * 200)
    assert len(result_values(error)["content"][0]["text"]) <= 480
