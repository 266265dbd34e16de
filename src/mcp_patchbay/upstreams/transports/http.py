r"""Streamable HTTP and SSE upstreams as ``Link``\s, on the SDK's HTTP clients.

Both SDK clients turn an HTTP error status on a request's POST into something less
telling: streamable HTTP answers the request with a generic stand-in error
(``errors.foreign.HTTP_STAND_INS``); SSE raises in its writer, which ended the connection and left the
request waiting for an answer that never came. Here, the status reaches the one place
that translates errors (``errors.foreign.translate``) inside that very request's error answer
(``errors.foreign.HTTP_STATUS_KEY``): ``HttpStatuses`` ties the status to the request by its
JSON-RPC id for streamable HTTP; for SSE the response hook answers the request itself
and lets the POST pass as accepted.

Connections are kept: the SDK's streamable-HTTP client closes a POST's SSE answer as soon
as the JSON-RPC answer is in, before the body's last chunk is read, and httpcore then
drops the connection, so every call opened a new one (a TIME-WAIT socket per call).
``_DrainingTransport`` reads the rest of such a body on close (the server ends it right
after the answer; ``DRAIN_SECONDS`` at most), so the connection goes back to the pool.

Bounds (``wire.jsonrpc.Bounds``, the settings' ``max_message_bytes`` and ``max_json_depth``):
the SDK's streamable-HTTP client parses every answer itself, with pydantic-core, whose
JSON parser refuses nesting past about 200 levels (below Python's stack limit) and answers
that request alone with -32700; it caps one SSE event at ``max_sse_event_size`` (given
the setting here: its default of 1 MiB failed larger results) and answers that request
with its "SSE stream failed" stand-in, which reads as the connection's end, so
``oversized`` rewords it as the proxy's refusal of that one answer; a JSON body it reads
whole, without a cap: ``_DrainingTransport`` stops one past the setting
(``MessageTooLarge``, which the SDK answers as that request's -32700). The legacy SSE
transport is left as the SDK has it: events over 1 MiB end the connection.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from typing import Any

import anyio
import httpx2
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from mcp_patchbay.config import RemoteSpec
from mcp_patchbay.errors.foreign import HTTP_STAND_INS, HTTP_STATUS_KEY, RETRY_AFTER_KEY
from mcp_patchbay.errors.tree import Code, refusal_data
from mcp_patchbay.fastpath.http_calls import HttpLane, lane_allowed
from mcp_patchbay.redaction import redact
from mcp_patchbay.upstreams.transports.link import Link
from mcp_patchbay.wire.jsonrpc import UNTYPED_SCHEMAS, Bounds, first_names, request_id_in, untyped_tool_schemas

logger = logging.getLogger(__name__)

DRAIN_SECONDS = 0.25
"""How long closing a POST's SSE answer may wait for the rest of its body."""


class _DrainOnClose(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream) -> None:
        self._inner = inner

    async def __aiter__(self) -> AsyncGenerator[bytes]:
        async for part in self._inner:
            yield part

    async def aclose(self) -> None:
        with suppress(httpx2.HTTPError, anyio.ClosedResourceError):
            with anyio.move_on_after(DRAIN_SECONDS):
                async for _ in self._inner:
                    pass
        await self._inner.aclose()


class MessageTooLarge(httpx2.StreamError):
    """A JSON body past ``max_message_bytes``: the SDK's client answers its request with it."""


class _CappedBody(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, bounds: Bounds) -> None:
        self._inner = inner
        self._bounds = bounds

    async def __aiter__(self) -> AsyncGenerator[bytes]:
        size = 0
        async for part in self._inner:
            size += len(part)
            if size > self._bounds.max_bytes:
                raise MessageTooLarge(f"the proxy refused the server's answer: {self._bounds.too_long(size)}")
            yield part

    async def aclose(self) -> None:
        await self._inner.aclose()


_SSE_EVENT_TOO_LARGE = "SSE stream failed: Server-sent event exceeded"


def oversized(bounds: Bounds) -> Callable[[SessionMessage | Exception], SessionMessage | Exception]:
    """The SDK's answer to a request whose SSE event was over the cap, as the proxy's refusal
    of that one answer (with ``data``: not the transport's close, so the connection stays)."""

    def reword(message: SessionMessage | Exception) -> SessionMessage | Exception:
        if isinstance(message, Exception):
            return message
        answer = message.message
        if not isinstance(answer, types.JSONRPCError) or not answer.error.message.startswith(_SSE_EVENT_TOO_LARGE):
            return message
        text = f"the proxy refused the server's answer: it is over the limit of {bounds.max_bytes:,} bytes"
        error = types.ErrorData(code=types.INTERNAL_ERROR, message=text, data=refusal_data(Code.RESULT_TOO_LARGE))
        return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=answer.id, error=error), metadata=message.metadata)

    return reword


def capped(response: httpx2.Response, bounds: Bounds) -> httpx2.Response:
    """``response`` with a body read no further than ``bounds.max_bytes``, unless it is an SSE
    stream (whose events the SDK bounds one by one): a JSON answer, and every body a sign-in
    reads whole (metadata, registration and token answers, an error page)."""
    stream = response.stream
    if not response.headers.get("content-type", "").startswith("text/event-stream") and isinstance(
        stream, httpx2.AsyncByteStream
    ):
        response.stream = _CappedBody(stream, bounds)
    return response


class _CappedTransport(httpx2.AsyncHTTPTransport):
    """httpx2's transport, with every body but an SSE stream read no further than the bounds."""

    def __init__(self, bounds: Bounds) -> None:
        super().__init__()
        self._bounds = bounds

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        return capped(await super().handle_async_request(request), self._bounds)


class _DrainingTransport(_CappedTransport):
    """``_CappedTransport``; a POST's SSE answer is read to its end before it is closed."""

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await super().handle_async_request(request)
        stream = response.stream
        if (
            request.method == "POST"
            and response.headers.get("content-type", "").startswith("text/event-stream")
            and isinstance(stream, httpx2.AsyncByteStream)
        ):
            response.stream = _DrainOnClose(stream)
        return response


def typed_schemas(url: str) -> Callable[[SessionMessage | Exception], SessionMessage | Exception]:
    """A listing's tools whose inputSchema lacks its type, repaired (``wire.jsonrpc.untyped_tool_schemas``)."""
    where = redact(url.partition("?")[0])  # a query may carry a token

    def repair(message: SessionMessage | Exception) -> SessionMessage | Exception:
        if (
            not isinstance(message, Exception)
            and isinstance(message.message, types.JSONRPCResponse)
            and (repaired := untyped_tool_schemas(message.message.result))
        ):
            logger.warning(UNTYPED_SCHEMAS, where, len(repaired), first_names(repaired))
        return message

    return repair


class HttpStatuses:
    """Ties each HTTP error status to the request whose POST got it.

    The SDK's streamable-HTTP client answers a request whose POST got an error status with a
    generic stand-in (``errors.foreign.HTTP_STAND_INS``). The response hook notes the status under the
    JSON-RPC id of the request in the POST's body; ``stamp`` then puts it into that very
    request's stand-in answer (``errors.foreign.HTTP_STATUS_KEY``), where ``errors.foreign.translate`` reads
    it. Two calls in flight on one upstream each get their own status.
    """

    LIMIT = 256
    """Statuses kept for answers not yet seen; past that the oldest go (their request was abandoned)."""

    def __init__(self) -> None:
        self._by_id: dict[types.RequestId, tuple[int, str | None, bool]] = {}

    async def hook(self, response: httpx2.Response) -> None:
        # Only POSTs carry requests; a 405 on the optional GET stream or the closing DELETE says
        # nothing about a call.
        if response.status_code < 400 or response.request.method != "POST":
            return
        request_id = request_id_in(response.request.content)
        if request_id is None:
            return
        in_session = "mcp-session-id" in response.request.headers
        self._by_id[request_id] = (response.status_code, response.headers.get("retry-after"), in_session)
        while len(self._by_id) > self.LIMIT:
            del self._by_id[next(iter(self._by_id))]

    def stamp(self, message: SessionMessage | Exception) -> SessionMessage | Exception:
        """The message, with the status of its request put into a stand-in error answer."""
        if not self._by_id or isinstance(message, Exception):
            return message
        answer = message.message
        if not isinstance(answer, types.JSONRPCError) or answer.id is None:
            return message
        seen = self._by_id.pop(answer.id, None)
        if seen is None:
            return message
        status, retry_after, in_session = seen
        if status == 404 and in_session and _about_the_session(answer.error):
            # The server forgot the session and said so in a JSON-RPC error of its own, which the
            # SDK passes on: as the SDK's stand-in, so the proxy reconnects and sends again.
            answer = types.JSONRPCError(
                jsonrpc="2.0", id=answer.id, error=types.ErrorData(code=answer.error.code, message="Session terminated")
            )
        elif answer.error.data is not None or answer.error.message not in HTTP_STAND_INS:
            return message
        return SessionMessage(
            types.JSONRPCError(jsonrpc="2.0", id=answer.id, error=http_error_data(answer.error, status, retry_after)),
            metadata=message.metadata,
        )


def _about_the_session(error: types.ErrorData) -> bool:
    """A 404's JSON-RPC error that says the session is unknown (-32600 or -32001, or the word),
    not one that says the method or the tool is (servers may answer those with 404 too)."""
    if error.code in (types.METHOD_NOT_FOUND, types.INVALID_PARAMS):
        return False
    return error.code in (types.INVALID_REQUEST, -32001) or "session" in error.message.lower()


def http_error_data(error: types.ErrorData, status: int, retry_after: str | None) -> types.ErrorData:
    """A stand-in error answer carrying the HTTP status that caused it."""
    data: dict[str, Any] = {HTTP_STATUS_KEY: status}
    if retry_after is not None:
        data[RETRY_AFTER_KEY] = retry_after
    return types.ErrorData(code=error.code, message=error.message, data=data)


@asynccontextmanager
async def streamable_http_link(
    spec: RemoteSpec,
    connect_timeout: float,
    auth: httpx2.Auth | None = None,
    bounds: Bounds | None = None,
    *,
    fast_path: bool = True,
) -> AsyncGenerator[Link, None]:
    """The SDK's streamable HTTP client, and beside it, with ``fast_path``, its lane
    (``fastpath.http_calls``): tool calls POSTed past it."""
    bounds = bounds or Bounds()
    statuses = HttpStatuses()  # one per connection: request ids start again with each
    lane: HttpLane | None = None

    async def learn(response: httpx2.Response) -> None:
        if lane is not None:
            await lane.learn(response)

    hooks: dict[str, list[Callable[[httpx2.Response], Awaitable[None]]]] = {"response": [statuses.hook, learn]}
    timeout = httpx2.Timeout(connect_timeout, read=300.0)
    client = httpx2.AsyncClient(
        headers=dict(spec.headers),
        timeout=timeout,
        event_hooks=hooks,
        auth=auth,
        transport=_DrainingTransport(bounds),
    )
    reword, repair = oversized(bounds), typed_schemas(spec.url)

    def transform(message: SessionMessage | Exception) -> SessionMessage | Exception:
        return repair(reword(statuses.stamp(message)))

    transport = _client_then_transport(client, spec.url, bounds)
    if not fast_path or not lane_allowed(spec.url):  # the SDK's client only
        async with _streams_link(transport, transform=transform) as link:
            yield link
        return

    async def take(message: SessionMessage | Exception) -> bool:
        return lane is not None and await lane.take_sdk(message)

    def ended() -> None:
        if lane is not None:
            lane.close()

    injected, to_session = anyio.create_memory_object_stream[SessionMessage](64)
    async with injected, anyio.create_task_group() as tg:
        async with _streams_link(transport, to_session, transform, take=take, ended=ended) as link:
            lane = HttpLane(
                spec.url,
                spec.headers,
                bounds,
                connect_timeout,
                send=link.write.send,
                inject=injected.send,
                spawn=tg.start_soon,
            )
            try:
                yield Link(link.read, link.write, raw=lane)
            finally:
                lane.close()
        tg.cancel_scope.cancel()


@asynccontextmanager
async def sse_link(
    spec: RemoteSpec, connect_timeout: float, auth: httpx2.Auth | None = None, bounds: Bounds | None = None
) -> AsyncGenerator[Link, None]:
    bounds = bounds or Bounds()
    answers, answered = anyio.create_memory_object_stream[SessionMessage](64)

    async def refused(response: httpx2.Response) -> None:
        # The SDK's SSE client raises on an error status of a POST: that ends its writer (and so
        # the connection) and leaves the request waiting for an answer that never comes. Answer
        # it here with the stand-in that _failure maps to the status, and let the POST pass.
        if response.status_code < 400 or response.request.method != "POST":
            return
        request_id = request_id_in(response.request.content)
        if request_id is None:
            return  # not a JSON-RPC request (a notification, or a sign-in's own POST): left as it is
        stand_in = types.ErrorData(code=types.INTERNAL_ERROR, message="Server returned an error response")
        error = http_error_data(stand_in, response.status_code, response.headers.get("retry-after"))
        answer = SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))
        with suppress(anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
            answers.send_nowait(answer)
        response.status_code = 202

    # With a sign-in, the refusal is judged once the auth flow is done with it (a 401 may be
    # refreshed and sent again); a hook would see, and answer, each response on the way.
    hooks: dict[str, list[Callable[[httpx2.Response], Awaitable[None]]]] = {"response": [] if auth else [refused]}
    if auth is not None:
        auth = _RefusalsAfter(auth, refused)

    def factory(
        headers: dict[str, str] | None = None,
        timeout: httpx2.Timeout | None = None,
        auth: httpx2.Auth | None = None,
    ) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(
            headers=headers, timeout=timeout, auth=auth, event_hooks=hooks, transport=_CappedTransport(bounds)
        )

    transport = sse_client(
        spec.url, headers=dict(spec.headers), timeout=connect_timeout, httpx_client_factory=factory, auth=auth
    )
    async with answers, answered, _streams_link(transport, answered, typed_schemas(spec.url)) as link:
        yield link


class _RefusalsAfter(httpx2.Auth):
    """An auth flow, then ``refused`` on the answer it leaves for the request it signed."""

    requires_response_body = True

    def __init__(self, inner: httpx2.Auth, refused: Callable[[httpx2.Response], Awaitable[None]]) -> None:
        self.inner = inner
        self.refused = refused

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        flow = self.inner.async_auth_flow(request)
        try:
            outgoing = await flow.__anext__()
            while True:
                response = yield outgoing
                try:
                    outgoing = await flow.asend(response)
                except StopAsyncIteration:
                    if response.request is request:
                        await self.refused(response)
                    return
        finally:
            await flow.aclose()


@asynccontextmanager
async def _client_then_transport(client: httpx2.AsyncClient, url: str, bounds: Bounds) -> AsyncGenerator[Any, None]:
    async with client, streamable_http_client(url, http_client=client, max_sse_event_size=bounds.max_bytes) as streams:
        yield streams


@asynccontextmanager
async def _streams_link(
    transport: AbstractAsyncContextManager[Any],
    answers: MemoryObjectReceiveStream[SessionMessage] | None = None,
    transform: Callable[[SessionMessage | Exception], SessionMessage | Exception] | None = None,
    *,
    take: Callable[[SessionMessage | Exception], Awaitable[bool]] | None = None,
    ended: Callable[[], None] | None = None,
) -> AsyncGenerator[Link, None]:
    """A transport's streams as a link; ``answers`` are messages made up by the proxy, merged in;
    ``transform`` sees every message the transport reads, then ``take`` (True: it was the raw
    lane's, the session does not see it); ``ended`` is told when the transport's stream ends."""
    async with transport as (read, write):
        if answers is None and transform is None:
            yield Link(read, write)
            return
        send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        extra_send = send.clone()
        made_up = anyio.CancelScope()

        async def from_transport() -> None:
            try:
                async with send:
                    async for read_message in read:
                        message = read_message if transform is None else transform(read_message)
                        if take is None or not await take(message):
                            await send.send(message)
            finally:
                if ended is not None:
                    ended()
                made_up.cancel()  # the transport ended: so does the link, whatever the proxy had to add

        async def from_proxy() -> None:
            with made_up, suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                async with extra_send:
                    if answers is None:
                        return
                    async with answers:
                        async for message in answers:
                            await extra_send.send(message)

        async with anyio.create_task_group() as tg, receive:
            tg.start_soon(from_transport)
            tg.start_soon(from_proxy)
            try:
                yield Link(receive, write)
            finally:
                tg.cancel_scope.cancel()


__all__ = ["HttpStatuses", "MessageTooLarge", "capped", "http_error_data", "sse_link", "streamable_http_link"]
