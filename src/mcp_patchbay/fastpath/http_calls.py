"""Tool calls to a streamable HTTP upstream past the SDK's client: the HTTP half of ``fastpath.pipe_calls``.

``HttpLane`` is a ``fastpath.pipe_calls.RawCalls`` (``Upstream._raw``: the same ``request``, and
through ``begin`` and ``end`` the same pending requests, ids and progress tokens) that POSTs a
request's JSON-RPC body itself, with the session's headers, on a keep-alive connection of its own
(``http1``), and reads
the answer, JSON or SSE, as it comes. The SDK's client stays the connection: it opened the
session, keeps the GET stream, and the lane learns from its requests (a response hook,
``learn``) the session id, the protocol version and the credential it sent.

What comes on a call's SSE stream goes where the SDK's path sends it: the answer and progress
for the call's own token stop here (``take``); anything else (requests the upstream sends
mid-call: sampling, elicitation, roots; log messages; progress of other requests) is handed to
the SDK's session (``inject``), whose callbacks answer through ``session.requests_back`` as for any
other request, and whose answer the SDK's client POSTs.

Errors are the SDK path's: an error status becomes the stand-in error that carries it
(``errors.foreign.HTTP_STATUS_KEY``) or the server's own JSON-RPC error; a stream that ends
early resumes with ``Last-Event-ID`` as the SDK does; a connection refused or dropped is a
``ConnectionError``, which ends the upstream's connection (it reconnects). An answer over
``max_message_bytes`` or nested past ``max_json_depth`` fails its call alone, as on stdio.

What the lane does not serve goes through the SDK's client (``RawCalls.request`` on a writer that
hands the request to the SDK's transport, its answer caught by ``take_sdk``), never sent twice:
before the session's headers are known; a 401 (the SDK's auth flow refreshes the credential or asks
for a sign-in), a 403 with a challenge (a step-up to more scope), a 404 (the SDK reads whether the
session is gone) and a 307 or 308, refused unprocessed (a 301-303 may come after the POST ran: an
error). An upstream reached through an HTTP proxy (``HTTP_PROXY`` and the like) gets no lane at all.

With ``patchbay.fast_path`` off (or ``$PATCHBAY_FAST_PATH=0``) no link gets a lane: every request
goes through the SDK's client (``upstreams.transports.http``).
"""

from __future__ import annotations

import asyncio
import logging
import urllib.request
from collections.abc import Awaitable, Callable, Mapping
from contextlib import suppress
from typing import Any, cast
from urllib.parse import urlsplit

import httpx2
import mcp_types as types
import pydantic_core
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_NAME_HEADER, encode_header_value
from mcp.shared.message import SessionMessage

from mcp_patchbay.calls.deadlines import ProgressFn
from mcp_patchbay.errors.foreign import HTTP_STATUS_KEY, RETRY_AFTER_KEY
from mcp_patchbay.errors.tree import ClientError, Code, refusal_data
from mcp_patchbay.fastpath.http1 import Connection, EventTooLarge, NotSent, Pool, ProtocolError, events
from mcp_patchbay.fastpath.pipe_calls import ID_PREFIX, RawCalls
from mcp_patchbay.wire.jsonrpc import Bounds, deeper_than

logger = logging.getLogger(__name__)

DRAIN_SECONDS = 0.25
"""How long, once a call's answer is in, the rest of its SSE body may take (else the
connection is dropped rather than reused)."""
MAX_RESUMES = 2
"""Times a call's SSE stream that ended before its answer is resumed (``Last-Event-ID``)."""
RESUME_DELAY_MS = 1000
"""The wait before resuming when the server named none (``retry:``): the SDK's default."""

Inject = Callable[[SessionMessage], Awaitable[None]]
"""Hands a message the upstream sent on a call's stream to the SDK's session."""
Spawn = Callable[..., object]
"""Starts a task in the link's task group (``TaskGroup.start_soon``)."""


class Fallback(Exception):
    """The lane cannot serve this request (the server refused it unprocessed): the SDK's client sends it."""


class _ToSdk:
    """``RawCalls``' writer on the SDK's transport: each line written becomes a message sent
    by the SDK's client (in a task: ``write`` cannot wait, as when a cancelled call says so)."""

    def __init__(self, send: Callable[[SessionMessage], Awaitable[None]], spawn: Spawn) -> None:
        self._send = send
        self._spawn = spawn

    def write(self, data: bytes) -> None:
        message = types.jsonrpc_message_adapter.validate_json(data, by_name=False)
        self._spawn(self._send, SessionMessage(message))

    async def drain(self) -> None:
        await asyncio.sleep(0)


class HttpLane(RawCalls):
    """``tools/call`` to one streamable HTTP upstream, POSTed past the SDK's client."""

    def __init__(
        self,
        url: str,
        headers: Mapping[str, str],
        bounds: Bounds,
        connect_timeout: float,
        *,
        send: Callable[[SessionMessage], Awaitable[None]],
        inject: Inject,
        spawn: Spawn,
    ) -> None:
        super().__init__(_ToSdk(send, spawn))
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        port = parts.port or (443 if scheme == "https" else 80)
        host = parts.hostname or "localhost"
        self._pool = Pool(scheme, host, port, connect_timeout)
        self._target = ((parts.path or "/") + (f"?{parts.query}" if parts.query else "")).encode("latin-1")
        default_port = port == (443 if scheme == "https" else 80)
        authority = f"[{host}]" if ":" in host else host
        self._host = (authority if default_port else f"{authority}:{port}").encode("latin-1")
        self._static = {name.lower(): value for name, value in headers.items()}
        self._learnt: dict[str, str] = {}
        """mcp-session-id, mcp-protocol-version, authorization: as the SDK's client last sent them."""
        self._head: bytes | None = None
        self._bounds = bounds
        self._inject = inject
        self.served = 0
        """Calls the lane answered itself (tests read it: the lane was taken)."""
        self.fell_back = 0
        """Calls it handed to the SDK's client."""

    # --- what the SDK's client tells us ------------------------------------------------------

    async def learn(self, response: httpx2.Response) -> None:
        """The SDK's client's response hook: a POST it got through carries the session's headers."""
        request = response.request
        if request.method != "POST" or response.status_code >= 400:
            return
        headers = request.headers
        learnt = dict(self._learnt)
        session_id = response.headers.get("mcp-session-id") or headers.get("mcp-session-id")
        for name, value in (
            ("mcp-session-id", session_id),
            ("mcp-protocol-version", headers.get("mcp-protocol-version")),
            ("authorization", headers.get("authorization")),
        ):
            if value is not None:
                learnt[name] = value
        if learnt != self._learnt:
            self._learnt = learnt
            self._head = None

    def _request_head(self, name: str | None, size: int) -> bytes | None:
        """The request's head (None while the session's protocol version is not known)."""
        head = self._head
        if head is None:
            if "mcp-protocol-version" not in self._learnt:
                return None
            fields = {
                **self._static,
                **self._learnt,
                "accept": "application/json, text/event-stream",
                "content-type": "application/json",
            }
            lines = [f"{key}: {value}\r\n" for key, value in fields.items() if key not in ("host", "content-length")]
            head = b"POST " + self._target + b" HTTP/1.1\r\nhost: " + self._host + b"\r\n"
            head = self._head = head + "".join(lines).encode("latin-1")
        named = f"{MCP_NAME_HEADER}: {encode_header_value(name)}\r\n".encode("latin-1") if name is not None else b""
        return head + named + b"content-length: " + str(size).encode() + b"\r\n\r\n"

    async def take_sdk(self, message: SessionMessage | Exception) -> bool:
        """A message the SDK's client read: whether it was for us (the answer to, or progress of,
        a request the lane handed to the SDK's client)."""
        if isinstance(message, Exception) or not self.pending:
            return False
        inner = message.message
        if isinstance(inner, types.JSONRPCResponse | types.JSONRPCError):
            if not (isinstance(inner.id, str) and inner.id.startswith(ID_PREFIX)):
                return False
        elif not (isinstance(inner, types.JSONRPCNotification) and inner.method == "notifications/progress"):
            return False
        return await self.take(inner.model_dump(by_alias=True, mode="json", exclude_unset=True))

    # --- the call ---------------------------------------------------------------------------

    async def request(
        self, method: str, params: dict[str, Any], on_progress: ProgressFn | None = None
    ) -> dict[str, Any]:
        name = params.get("name") if method == "tools/call" else None
        call = self.begin(params, on_progress)
        try:
            try:
                body = pydantic_core.to_json({"jsonrpc": "2.0", "id": call.id, "method": method, "params": call.params})
            except ValueError:  # a lone surrogate the client's JSON carried: not the server's failure
                raise ClientError(
                    Code.INVALID_ARGUMENTS,
                    "The request holds text that is not valid Unicode (a lone surrogate escape); send valid text.",
                ) from None
            head = self._request_head(name if isinstance(name, str) else None, len(body))
            if head is not None:
                future = call.future
                await self._exchange(call.id, head, body, future)
                self.served += 1
                if not future.done():  # a JSON body that was a message, not the answer
                    raise MCPError(types.INTERNAL_ERROR, "The server's answer held no response to the request")
                return future.result()
        except Fallback:
            pass
        except asyncio.CancelledError:
            self.tell_cancelled(call)
            raise
        finally:
            self.end(call)
        self.fell_back += 1  # not sent (its headers not known yet), or refused unprocessed
        return await super().request(method, params, on_progress)

    async def _exchange(self, request_id: str, head: bytes, body: bytes, future: asyncio.Future[Any]) -> None:
        """POST the request, read its answer into ``future`` (or raise ``Fallback``)."""
        pool = self._pool
        while True:
            connection = await pool.acquire()
            reused = connection.used
            try:
                status, headers = await connection.request(head, body)
                break
            except NotSent:
                connection.close()
                if not reused:
                    raise
                # A kept connection the server had closed (its idle timeout) before the request
                # was written: it never left, so once more on another. Once written, a failure
                # (a ConnectionError: the connection is lost) is not resent: the server may have run it.
            except BaseException:
                connection.close()
                raise
        try:
            await self._answer(connection, status, headers, request_id, future)
        except BaseException:
            connection.close()
            raise
        pool.release(connection)

    async def _answer(
        self,
        connection: Connection,
        status: int,
        headers: dict[bytes, bytes],
        request_id: str,
        future: asyncio.Future[Any],
    ) -> None:
        content_type = headers.get(b"content-type", b"").lower()
        if status in (401, 404, 307, 308) or (status == 403 and b"www-authenticate" in headers):
            # 403 with a challenge: the SDK's auth flow asks for more scope (step-up) and sends it again
            await _discard(connection)
            raise Fallback
        if status >= 300:  # 301-303 included: the server may have run it, so the SDK must not send it again
            future.set_exception(await self._error_status(connection, status, headers, content_type, request_id))
            return
        if status == 202:
            await _discard(connection)
            raise MCPError(types.INVALID_REQUEST, "server answered a request with 202 Accepted")
        if content_type.startswith(b"application/json"):
            await self._json_answer(connection, request_id)
        elif content_type.startswith(b"text/event-stream"):
            await self._sse_answer(connection, request_id, future)
        else:
            await _discard(connection)
            raise MCPError(types.INVALID_REQUEST, f"Unexpected content type: {content_type.decode('latin-1')}")

    async def _error_status(
        self, connection: Connection, status: int, headers: dict[bytes, bytes], content_type: bytes, request_id: str
    ) -> MCPError:
        """What the SDK's path makes of an error status: the server's JSON-RPC error, else the
        stand-in carrying the status (``transports.http.HttpStatuses``)."""
        body = b""
        try:
            body = await connection.read_body(self._bounds.max_bytes)
        except EventTooLarge:
            connection.close()
        if content_type.startswith(b"application/json") and body:
            try:
                parsed = _loads(body)
            except ValueError:
                parsed = None
            error = cast("dict[str, Any]", parsed).get("error") if isinstance(parsed, dict) else None
            if isinstance(error, dict):
                with suppress(ValueError):
                    return MCPError.from_error_data(types.ErrorData.model_validate(error))
        data: dict[str, Any] = {HTTP_STATUS_KEY: status}
        if (retry_after := headers.get(b"retry-after")) is not None:
            data[RETRY_AFTER_KEY] = retry_after.decode("latin-1")
        logger.debug("HTTP %d for %s", status, request_id)
        return MCPError(types.INTERNAL_ERROR, "Server returned an error response", data)

    async def _json_answer(self, connection: Connection, request_id: str) -> None:
        try:
            body = await connection.read_body(self._bounds.max_bytes)
        except EventTooLarge as too_large:
            raise self._too_large(too_large.size) from None
        await self._message(body, request_id)

    async def _sse_answer(self, connection: Connection, request_id: str, future: asyncio.Future[Any]) -> None:
        last_id: str | None = None
        retry: int | None = None
        parts = connection.body()
        resumed: Connection | None = None  # the caller releases the first connection; this one is ours
        try:
            for attempt in range(MAX_RESUMES + 1):
                try:
                    async for event in events(parts, self._bounds.max_bytes):
                        last_id = event.id or last_id
                        retry = event.retry if event.retry is not None else retry
                        if event.data:
                            await self._message(event.data.encode(), request_id)
                        if future.done():
                            await _drain(parts)
                            return
                except EventTooLarge as too_large:
                    raise self._too_large(too_large.size) from None
                except ProtocolError:
                    logger.debug("SSE stream of %s ended mid-answer", request_id, exc_info=True)
                if last_id is None or attempt == MAX_RESUMES:
                    break
                connection.close()
                await asyncio.sleep((retry if retry is not None else RESUME_DELAY_MS) / 1000)
                connection = resumed = await self._resume(last_id)
                parts = connection.body()
        finally:
            if resumed is not None:
                self._pool.release(resumed)  # kept when its stream ended whole, else closed
        connection.close()
        message = (
            "SSE stream ended without a response"
            if last_id is None
            else "SSE stream ended and reconnection attempts were exhausted"
        )
        raise MCPError(types.CONNECTION_CLOSED, message)

    async def _resume(self, last_id: str) -> Connection:
        """The call's stream again, from after ``last_id`` (a GET, as the SDK's client resumes)."""
        fields = {**self._static, **self._learnt, "accept": "text/event-stream", "last-event-id": last_id}
        lines = "".join(f"{key}: {value}\r\n" for key, value in fields.items() if key not in ("host", "content-length"))
        head = (
            b"GET " + self._target + b" HTTP/1.1\r\nhost: " + self._host + b"\r\n" + lines.encode("latin-1") + b"\r\n"
        )
        connection = await self._pool.acquire()
        status, headers = await connection.request(head, b"")
        if status >= 400 or not headers.get(b"content-type", b"").lower().startswith(b"text/event-stream"):
            connection.close()
            raise MCPError(types.CONNECTION_CLOSED, f"SSE stream failed: resuming it got HTTP {status}")
        return connection

    async def _message(self, data: bytes, request_id: str) -> None:
        """One message of the call's answer: ours (its answer, its progress), else the SDK session's."""
        if deeper_than(data, self._bounds.max_depth):
            raise MCPError(
                types.INTERNAL_ERROR,
                f"The proxy refused the server's answer: {self._bounds.too_deep()}.",
                refusal_data(Code.PROTOCOL_ERROR),
            )
        try:
            message = _loads(data)
        except ValueError as exc:
            raise MCPError(types.PARSE_ERROR, f"Failed to parse JSON response: {exc}") from None
        if not isinstance(message, dict):
            raise MCPError(types.PARSE_ERROR, "Failed to parse JSON response: not a JSON-RPC message")
        values = cast("dict[str, Any]", message)
        if "method" not in values and values.get("id") != request_id and ("result" in values or "error" in values):
            values = {**values, "id": request_id}  # the SDK's client, too, takes a POST's answer as its request's
        if await self.take(values):
            return
        try:
            parsed = types.jsonrpc_message_adapter.validate_python(values, by_name=False)
        except ValueError:
            logger.warning("dropped a malformed message on the SSE stream of %s", request_id)
            return
        await self._inject(SessionMessage(parsed))

    def _too_large(self, size: int) -> MCPError:
        return MCPError(
            types.INTERNAL_ERROR,
            f"The proxy refused the server's answer: {self._bounds.too_long(size)}.",
            refusal_data(Code.RESULT_TOO_LARGE),
        )

    def close(self) -> None:
        super().close()
        self._pool.close()


def _loads(data: bytes) -> Any:
    """JSON as the SDK's client reads it (pydantic-core): what it refuses (a lone surrogate escape,
    whose text nothing could write on) is refused here too."""
    return pydantic_core.from_json(data)


async def _discard(connection: Connection) -> None:
    """Read a small answer's body so the connection can be kept; drop it if it is not small."""
    try:
        await connection.read_body(65_536)
    except (EventTooLarge, ProtocolError):
        connection.close()


async def _drain(parts: Any) -> None:
    """The rest of a stream whose answer is in: the server ends it at once; if it does not, the
    connection is not reused."""
    try:
        async with asyncio.timeout(DRAIN_SECONDS):
            async for _ in parts:
                pass
    except (TimeoutError, ProtocolError):
        pass


def lane_allowed(url: str) -> bool:
    """Whether an upstream at ``url`` may have the lane: no HTTP proxy stands between (the SDK's
    client honours ``HTTP(S)_PROXY``; the lane does not)."""
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return False
    proxies = urllib.request.getproxies()
    if parts.scheme.lower() in proxies or "all" in proxies:
        return bool(urllib.request.proxy_bypass(parts.hostname))
    return True


__all__ = ["HttpLane", "lane_allowed"]
