"""The redirect URI of a sign-in: a one-page HTTP listener on 127.0.0.1 (RFC 8252 §7.3).

The browser comes back to ``http://127.0.0.1:PORT/callback?code=...&state=...`` once the
user has approved (or with ``error=access_denied`` if they refused). The listener takes
the first such request, shows a page saying what happened, and hands the result to the
SDK's flow, which checks the state and exchanges the code. It listens only while a
sign-in waits, on the loopback address only; every read is bounded.
"""

from __future__ import annotations

import html
import logging
import urllib.parse
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field

import anyio
from anyio.abc import SocketAttribute, SocketStream
from mcp.shared.auth import AuthorizationCodeResult

from mcp_patchbay.errors.tree import Code, UpstreamError

logger = logging.getLogger(__name__)

CALLBACK_PATH = "/callback"
_HEAD_LIMIT = 16_384
_READ_TIMEOUT = 10.0


@dataclass
class Loopback:
    """One sign-in's listener: ``redirect_uri`` to register, ``result()`` to wait for."""

    server: str
    port: int
    state: str | None = None
    """The ``state`` of the authorization request sent to the browser (``expect``): a callback
    with another one is answered 400 and the wait goes on, so no other page can end a sign-in."""
    _outcome: AuthorizationCodeResult | UpstreamError | None = None
    _arrived: anyio.Event = field(default_factory=anyio.Event)

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self.port}{CALLBACK_PATH}"

    def expect(self, authorization_url: str) -> None:
        """Note the ``state`` of the authorization URL about to be opened."""
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(authorization_url).query)
        self.state = query.get("state", [None])[0]

    async def result(self) -> AuthorizationCodeResult:
        """The redirect's parameters, once the browser brings them (the SDK's callback handler)."""
        await self._arrived.wait()
        outcome = self._outcome
        if isinstance(outcome, UpstreamError):
            raise outcome
        assert outcome is not None
        return outcome

    async def serve(self, stream: SocketStream) -> None:
        """Answer one connection to the listener."""
        async with stream:
            try:
                with anyio.fail_after(_READ_TIMEOUT):
                    head = await _read_head(stream)
            except (TimeoutError, anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                return
            status, page = self._answer(head)
            body = page.encode()
            reply = (
                f"HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {len(body)}\r\n"
                "Cache-Control: no-store\r\nConnection: close\r\n\r\n"
            ).encode() + body
            with suppress(anyio.BrokenResourceError, OSError):
                await stream.send(reply)

    def _answer(self, head: bytes) -> tuple[str, str]:
        line = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = line.split(" ")
        if len(parts) < 2 or parts[0] != "GET":
            return "405 Method Not Allowed", _page("Not here", "This address only receives a sign-in.")
        target = urllib.parse.urlsplit(parts[1])
        if target.path != CALLBACK_PATH:
            return "404 Not Found", _page("Not here", "This address only receives a sign-in.")
        if self._arrived.is_set():
            return "200 OK", _page("Already done", "This sign-in is already finished; you can close this tab.")
        query = {k: v[0] for k, v in urllib.parse.parse_qs(target.query).items()}
        if self.state is not None and query.get("state") != self.state:
            return "400 Bad Request", _page("Not this sign-in", "This is not the sign-in mcp-patchbay is waiting for.")
        name = html.escape(self.server)
        if "error" in query:
            self._outcome = refusal(self.server, query.get("error", ""), query.get("error_description"))
            self._arrived.set()
            return "200 OK", _page(
                "Sign-in not completed",
                f"Signing in to {name} did not succeed: {html.escape(self._outcome.message)} You can close this tab.",
            )
        code = query.get("code")
        if not code:
            return "400 Bad Request", _page("Sign-in not completed", "The redirect carried no authorization code.")
        self._outcome = AuthorizationCodeResult(code=code, state=query.get("state"), iss=query.get("iss"))
        self._arrived.set()
        return "200 OK", _page("Signed in", f"mcp-patchbay is signed in to {name}. You can close this tab.")


_ERROR_CODES = frozenset(
    {
        "invalid_request",
        "unauthorized_client",
        "unsupported_response_type",
        "invalid_scope",
        "server_error",
        "temporarily_unavailable",
    }
)
"""RFC 6749 §4.1.2.1's error codes; any other text from the redirect is not shown to the model."""


def refusal(server: str, error: str, description: str | None) -> UpstreamError:
    """The authorization server sent the browser back with an error (RFC 6749 §4.1.2.1)."""
    detail = f"authorization error {error[:100]!r}: {(description or '')[:300]}"
    if error == "access_denied":
        return UpstreamError(
            Code.AUTH_DENIED,
            f"Signing in to server '{server}' was declined in the browser, so its tools cannot be used. Ask "
            "the user whether to sign in; calling one of its tools again starts a new sign-in.",
            detail=detail,
            server=server,
        )
    return UpstreamError(
        Code.AUTH_TOKEN_ERROR,
        f"Signing in to server '{server}' failed: its authorization server answered "
        f"{repr(error) if error in _ERROR_CODES else 'with an error'}. Tell the user; the proxy's log has the details.",
        detail=detail,
        server=server,
    )


@asynccontextmanager
async def loopback(server: str, port: int | None) -> AsyncGenerator[Loopback, None]:
    """Listen on 127.0.0.1 (``port``, or one free now) for the browser's return."""
    try:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=port or 0)
    except OSError as exc:
        raise UpstreamError(
            Code.AUTH_REQUIRED,
            f"Signing in to server '{server}' could not start: the callback port {port} is in use. Tell the "
            "user to free it or change 'oauth.callback_port'.",
            detail=repr(exc),
            server=server,
        ) from exc
    async with listener:
        bound = listener.extra(SocketAttribute.local_port)
        site = Loopback(server, bound)
        async with anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, site.serve)
            try:
                yield site
            finally:
                tg.cancel_scope.cancel()


async def _read_head(stream: SocketStream) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data and len(data) < _HEAD_LIMIT:
        data += await stream.receive()
    return data


def _page(title: str, text: str) -> str:
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head>"
        f"<body style='font-family:sans-serif;margin:3em'><h1>{title}</h1><p>{text}</p></body></html>"
    )


__all__ = ["CALLBACK_PATH", "Loopback", "loopback", "refusal"]
