"""The channel back to the client: what upstreams ask of the client on the proxy's far side.

An upstream may send requests to its client (sampling, elicitation, roots) and
notifications (log messages, resource updates). The proxy stands in for the client
towards every upstream, so those travel on through the session of the one client the
proxy serves. ``ClientChannel`` is what an upstream may ask (``upstream.Upstream`` takes
one); ``SessionChannel`` is its implementation over the client's SDK session, which it
learns from the client's first request (``meet``).

Requests an upstream sends before the client spoke, or that the client cannot answer,
get a JSON-RPC error back, never an exception: an upstream's own call must not fail
because its question could not be asked.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Protocol

import anyio
import mcp_types as types
from mcp.client.session import ClientRequestContext
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourceUpdated
from mcp.shared.exceptions import MCPError

logger = logging.getLogger("mcp_patchbay.client_channel")

CLIENT_HELLO_WAIT = 2.0
"""Upstreams start once the client's first request arrives (it names the client's
features) or after this long, whichever comes first."""


class ClientChannel(Protocol):
    """What an upstream may ask of the client on the other side of the proxy."""

    def client_capabilities(self) -> types.ClientCapabilities | None: ...

    async def create_message(
        self, server: str, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData: ...

    async def elicit(self, server: str, params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData: ...

    async def list_roots(self, server: str) -> types.ListRootsResult | types.ErrorData: ...

    async def notify(self, server: str, notification: types.ServerNotification) -> None: ...


PauseDeadlines = Callable[[str], AbstractContextManager[None]]
"""The calls in flight of a server, paused while a person answers its elicitation."""


def _no_pause(server: str) -> AbstractContextManager[None]:
    return nullcontext()


class SessionChannel:
    """``ClientChannel`` over the client's session, as captured from its first request."""

    def __init__(self, bus: InMemorySubscriptionBus, pause_deadlines: PauseDeadlines | None = None) -> None:
        self._bus = bus
        self._pause: PauseDeadlines = pause_deadlines or _no_pause
        self.session: ServerSession | None = None
        self._caps: types.ClientCapabilities | None = None
        self.hello = anyio.Event()
        """Set once the client's first request arrived."""

    def meet(self, ctx: ServerRequestContext[Any, Any]) -> None:
        """Learn who the client is from its first request (later ones change nothing)."""
        if self.hello.is_set() or ctx.request_id is None:
            return
        self.session = ctx.session
        if ctx.method == "initialize":
            try:
                init = types.InitializeRequestParams.model_validate(ctx.params or {}, by_name=False)
                self._caps = init.capabilities
                logger.info(
                    "client %s %s connected (protocol %s)",
                    init.client_info.name,
                    init.client_info.version,
                    init.protocol_version,
                )
            except Exception:
                logger.debug("could not read the client's initialize params", exc_info=True)
        else:
            self._caps = ctx.session.client_capabilities
        self.hello.set()

    async def wait_for_client(self) -> None:
        with anyio.move_on_after(CLIENT_HELLO_WAIT):
            await self.hello.wait()

    def client_capabilities(self) -> types.ClientCapabilities | None:
        return self._caps

    async def create_message(
        self, server: str, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData:
        return await self._ask(server, types.CreateMessageRequest(params=params), types.CreateMessageResult)

    async def elicit(self, server: str, params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
        with self._pause(server):
            return await self._ask(server, types.ElicitRequest(params=params), types.ElicitResult)

    async def list_roots(self, server: str) -> types.ListRootsResult | types.ErrorData:
        return await self._ask(server, types.ListRootsRequest(), types.ListRootsResult)

    async def _ask(self, server: str, request: Any, result_type: type[Any]) -> Any:
        session = self.session
        if session is None:
            return types.ErrorData(code=types.INVALID_REQUEST, message="The client is not connected yet.")
        try:
            return await session.send_request(request, result_type)
        except MCPError as exc:
            return exc.error
        except Exception as exc:
            logger.warning("forwarding %s from '%s' to the client failed: %r", request.method, server, exc)
            return types.ErrorData(
                code=types.INTERNAL_ERROR, message=f"The client could not answer {request.method} through the proxy."
            )

    async def notify(self, server: str, notification: types.ServerNotification) -> None:
        session = self.session
        if session is None:
            return
        match notification:
            case types.LoggingMessageNotification(params=p):
                logger_name = f"{server}/{p.logger}" if p.logger else server
                await session.send_notification(
                    types.LoggingMessageNotification(
                        params=types.LoggingMessageNotificationParams(level=p.level, logger=logger_name, data=p.data)
                    )
                )
            case types.ResourceUpdatedNotification(params=p):
                await self._bus.publish(ResourceUpdated(uri=str(p.uri)))
                await session.send_notification(notification)
            case _:
                pass


def session_callbacks(client: ClientChannel | None, name: str) -> dict[str, Any]:
    """The SDK session's callbacks for an upstream: it is offered only what the client on
    the other side can do (sampling, elicitation, roots), each answered through ``client``."""
    if client is None:
        return {}
    caps = client.client_capabilities()
    if caps is None:
        return {}
    callbacks: dict[str, Any] = {}
    if caps.sampling is not None:

        async def sampling(
            ctx: ClientRequestContext, params: types.CreateMessageRequestParams
        ) -> types.CreateMessageResult | types.ErrorData:
            return await client.create_message(name, params)

        callbacks["sampling_callback"] = sampling
        callbacks["sampling_capabilities"] = caps.sampling
    if caps.elicitation is not None:

        async def elicitation(
            ctx: ClientRequestContext, params: types.ElicitRequestParams
        ) -> types.ElicitResult | types.ErrorData:
            return await client.elicit(name, params)

        callbacks["elicitation_callback"] = elicitation
    if caps.roots is not None:

        async def roots(ctx: ClientRequestContext) -> types.ListRootsResult | types.ErrorData:
            return await client.list_roots(name)

        callbacks["list_roots_callback"] = roots
    return callbacks


__all__ = ["CLIENT_HELLO_WAIT", "ClientChannel", "SessionChannel", "session_callbacks"]
