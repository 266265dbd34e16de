"""The gateway's ASGI application and its life: ``mcp-patchbay serve --http [HOST:]PORT``.

Routes:

- ``/mcp``: MCP over streamable HTTP, the SDK's transport (``http_sessions.SessionManager``) in
  front of the one ``server.Proxy`` every client shares: 2025-11-25 sessions
  (``Mcp-Session-Id``, the GET stream, resumable SSE with event ids) and stateless
  2026-07-28 requests. Host and Origin are checked (DNS rebinding: ``host_checks``); with sign-in
  configured, a request without valid credentials gets 401 and nothing else.
- ``/healthz``: 200 while the process serves. ``/readyz``: 200 once startup is done
  (every server up or given up on), 503 before, 404 while draining (not ready, as any
  status from 400 is to Kubernetes; HAProxy's ``http-check disable-on-404`` then keeps a
  draining replica's sessions on it, and sends it nothing new).
- ``/.well-known/oauth-protected-resource[/mcp]`` with ``gateway.oauth`` (``auth``).

``/metrics`` (Prometheus) is never on the clients' listener: it names every server, tool
and outcome, and takes no token. With ``gateway.metrics`` (``[HOST:]PORT``) a second
uvicorn server in the same process serves it alone there; without, there are no metrics.

Both listeners (``listeners``) run uvicorn with ``edge.guarded_protocol``: request heads of at most
``gateway.max_header_bytes`` (431), ``header_timeout`` and ``body_timeout`` (408), at most
``max_connections`` at once (503 at once beyond).

SIGTERM (or SIGINT) drains: readiness goes false, new sessions get 503, calls in flight
get ``gateway.drain_grace`` seconds to finish; then the listener closes, the upstreams
stop, and the process exits 0. A second signal stops at once.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import sys
from typing import Any

import anyio
import anyio.abc
import uvicorn
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_patchbay import __version__
from mcp_patchbay.catalog.restriction import Permits
from mcp_patchbay.config import Config
from mcp_patchbay.config.gateway import GatewaySettings
from mcp_patchbay.fastpath.gateway_calls import FastPath
from mcp_patchbay.gateway.access import AccessPolicy
from mcp_patchbay.gateway.auth import build_auth
from mcp_patchbay.gateway.edge import EdgeLimits, Refusals, connection_cap
from mcp_patchbay.gateway.event_store import MemoryEventStore
from mcp_patchbay.gateway.host_checks import cors, security_settings, url_host
from mcp_patchbay.gateway.identity import request_identity, scope_identity
from mcp_patchbay.gateway.listeners import METRICS_CONNECTIONS, SHUTDOWN_GRACE, bound_address, listener, metrics_app
from mcp_patchbay.gateway.metrics import Metrics
from mcp_patchbay.session.http_sessions import SessionManager
from mcp_patchbay.session.proxy import Proxy
from mcp_patchbay.session.sdk import connection_of
from mcp_patchbay.upstreams.spawn import Prespawned
from mcp_patchbay.upstreams.transports import Connector

logger = logging.getLogger(__name__)

MCP_PATH = "/mcp"
SESSION_HEADER = b"mcp-session-id"


class Gateway:
    """The proxy served over HTTP to many clients."""

    def __init__(
        self,
        config: Config,
        host: str,
        port: int,
        *,
        prespawned: Prespawned | None = None,
        connector: Connector | None = None,
    ) -> None:
        self.config = config
        self.settings = config.gateway or GatewaySettings()
        self.host, self.port = host, port
        self.resource_url = self.settings.url or f"http://{url_host(host)}:{port}{MCP_PATH}"
        self.auth = build_auth(self.settings, self.resource_url)
        self.policy = AccessPolicy(self.settings)
        restricted = self.settings.access is not None
        self.proxy = Proxy(
            config,
            prespawned=prespawned,
            connector=connector,
            access_for=self._access if restricted else None,
            shared=True,
            request_state_keys=self.settings.request_state_keys,
            identity_of=lambda ctx: request_identity(ctx.request),
            end_session=lambda session_id: self.manager.end_session(session_id),
        )
        self.manager = SessionManager(
            self.proxy.server,
            event_stores=MemoryEventStore,
            json_response=self.settings.json_response,
            security_settings=security_settings(self.settings, host, port),
            session_idle_timeout=self.settings.session_idle_timeout,
            max_sessions=self.settings.max_sessions,
            member=scope_identity,
            max_sessions_per_member=self.settings.max_sessions_per_identity,
            max_json_depth=config.settings.max_json_depth,
        )
        self.ready = False
        self.draining = False
        self._idle = anyio.Event()
        self._server: uvicorn.Server | None = None
        self._metrics_server: uvicorn.Server | None = None
        self.metrics_bound: tuple[str, int] | None = None
        """Where ``/metrics`` is served once started (``gateway.metrics``), else None."""
        self.refusals = Refusals()
        """Connections the edge refused (header size, timeouts, connections at once)."""
        self.metrics = Metrics(
            self.proxy,
            sessions=lambda: self.manager.sessions,
            ready=lambda: self.ready,
            draining=lambda: self.draining,
            refusals=self.refusals.counts,
        )
        self.proxy.on_call = self.metrics.observe_call
        self.fast = FastPath(self.proxy, self.manager, config.settings.max_json_depth)
        """``tools/call`` of known sessions answered past the SDK's server (``fastpath``)."""
        self.manager.fast = self.fast
        self.proxy.server.middleware.insert(0, self._remember_connection)
        self.app = self._build_app()

    async def _remember_connection(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Middleware: a 2025-era session's connection, learnt from a request of it the SDK's
        server handles, for the fast path's calls of that session."""
        connection = connection_of(ctx.session)
        if connection.session_id is not None:  # 2025-era sessions only; initialize is the first
            self.manager.remember_connection(connection.session_id, connection)
        return await call_next(ctx)

    def _access(self) -> Permits | None:
        return self.policy.for_token(get_access_token())

    def _build_app(self) -> Starlette:
        mcp = _Asgi(self._mcp)
        endpoint: ASGIApp = self.auth.protect(mcp) if self.auth else mcp
        methods = ["GET", "POST", "DELETE"]
        if self.settings.cors_origins:  # outside the sign-in check: a preflight carries no token
            endpoint, methods = cors(endpoint, self.settings.cors_origins), [*methods, "OPTIONS"]
        routes = [
            Route(MCP_PATH, endpoint=endpoint, methods=methods),
            Route("/healthz", endpoint=self._healthz, methods=["GET"]),
            Route("/readyz", endpoint=self._readyz, methods=["GET"]),
        ]
        if self.auth is not None:
            routes += self.auth.routes
        if any(rule.admin for rule in self.settings.access or ()):  # the page at /ui, for admins only
            from mcp_patchbay.ui.gateway import ui_routes

            routes += ui_routes(self)
        return Starlette(routes=routes, middleware=self.auth.middleware if self.auth else None)

    async def _mcp(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] == "GET":  # the standalone stream: open for the session's life
            await self.manager.handle_request(scope, receive, send)
            return
        if self.draining and _opens_session(scope):
            await Response("draining: connect again (another replica will answer)", 503, headers={"Retry-After": "1"})(
                scope, receive, send
            )
            return
        self.metrics.in_flight += 1
        try:
            await self.manager.handle_request(scope, receive, send)
        finally:
            self.metrics.in_flight -= 1
            if self.draining and self.metrics.in_flight == 0:
                self._idle.set()

    async def _healthz(self, request: Request) -> Response:
        return JSONResponse({"status": "alive", "version": __version__})

    async def _readyz(self, request: Request) -> Response:
        if self.draining:  # not ready for new clients; 404 lets HAProxy keep sessions here ("disable-on-404")
            return JSONResponse({"status": "draining"}, 404)
        if not self.ready:
            return JSONResponse({"status": "starting"}, 503)
        return JSONResponse({"status": "ready"})

    def _uvicorn(self, app: ASGIApp, host: str, port: int, *, max_connections: int | None) -> uvicorn.Server:
        limits = EdgeLimits(
            max_header_bytes=self.settings.max_header_bytes,
            header_timeout=self.settings.header_timeout,
            body_timeout=self.settings.body_timeout,
            max_connections=max_connections,
            refusals=self.refusals,
        )
        return listener(app, host, port, limits)

    async def _become_ready(self) -> None:
        await self.proxy.supervisor.wait_startup()
        self.ready = True
        logger.info(
            "ready: %d servers, %d tools",
            len(self.proxy.supervisor.upstreams),
            len(self.proxy.supervisor.catalog.tools),
        )

    async def drain(self) -> None:
        """Readiness off, no new sessions, calls in flight finish (``drain_grace`` at most), then stop."""
        self.draining = True
        grace = self.settings.drain_grace
        notice_over = anyio.current_time() + self.settings.drain_notice
        logger.warning("draining: %d request(s) in flight, up to %g s", self.metrics.in_flight, grace)
        if self.metrics.in_flight:
            with anyio.move_on_after(grace) as scope:
                await self._idle.wait()
            if scope.cancelled_caught:
                logger.warning("drain grace over with %d request(s) still in flight", self.metrics.in_flight)
        # The load balancer learns from /readyz that this replica drains; until it has, new
        # requests still arrive, and are served rather than refused (gateway.drain_notice).
        await anyio.sleep_until(notice_over)
        # Sessions end before the listener closes: their GET streams finish instead of being
        # cut by uvicorn's shutdown timeout (an ERROR and a traceback in the log).
        with anyio.move_on_after(SHUTDOWN_GRACE):
            await self.manager.close_sessions()
        self.stop()

    def stop(self) -> None:
        """Close the listeners and end ``serve`` (at once: no drain)."""
        for server in (self._server, self._metrics_server):
            if server is not None:
                server.should_exit = True

    async def serve(
        self,
        *,
        signals: bool = True,
        task_status: anyio.abc.TaskStatus[tuple[str, int]] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve until a signal has drained the gateway (``drain``), or the task is
        cancelled; started, it gives the address bound (a port of 0 picks one)."""
        reserved = self.settings.reserved_files + (METRICS_CONNECTIONS if self.settings.metrics_address else 0)
        max_connections = connection_cap(self.settings.max_connections, reserved)
        server = self._uvicorn(self.app, self.host, self.port, max_connections=max_connections)
        self._server = server
        metrics_address = self.settings.metrics_address
        if metrics_address is not None:
            page = metrics_app(self.metrics.render, *metrics_address)
            self._metrics_server = self._uvicorn(page, *metrics_address, max_connections=METRICS_CONNECTIONS)
        async with anyio.create_task_group() as tg:
            await tg.start(self.proxy.run)
            tg.start_soon(self._become_ready)
            async with self.manager.run():
                if signals:
                    tg.start_soon(self._on_signals, server)
                tg.start_soon(self._announce, server, task_status)
                try:
                    async with anyio.create_task_group() as listeners:
                        if self._metrics_server is not None:
                            listeners.start_soon(self._metrics_server.serve)
                        await server.serve()
                        if self._metrics_server is not None:
                            self._metrics_server.should_exit = True
                finally:  # cancelled, uvicorn leaves its listening sockets open
                    for listener in (server, self._metrics_server):
                        for bound in listener.servers if listener is not None else ():
                            bound.close()
            tg.cancel_scope.cancel()

    async def _announce(self, server: uvicorn.Server, task_status: anyio.abc.TaskStatus[tuple[str, int]]) -> None:
        bound = await bound_address(server)
        logger.info("serving MCP at http://%s:%d%s", url_host(bound[0]), bound[1], MCP_PATH)
        if self._metrics_server is not None:
            host, port = self.metrics_bound = await bound_address(self._metrics_server)
            logger.info("serving metrics at http://%s:%d/metrics", url_host(host), port)
        task_status.started(bound)

    async def _on_signals(self, server: uvicorn.Server) -> None:
        if sys.platform == "win32":
            return
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with anyio.create_task_group() as tg:
                async for signum in signals:
                    if self.draining:
                        logger.warning("received %s again: stopping now", signal.Signals(signum).name)
                        server.force_exit = server.should_exit = True
                        tg.cancel_scope.cancel()
                        return
                    logger.warning("received %s: draining", signal.Signals(signum).name)
                    tg.start_soon(self.drain)


class _Asgi:
    """An ASGI callable as a route's endpoint (starlette takes functions and methods for
    request handlers)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


def _opens_session(scope: Scope) -> bool:
    """A POST without a session id on the handshake era: it would open a session."""
    headers = dict(scope["headers"])
    if SESSION_HEADER in headers:
        return False
    version = headers.get(MCP_PROTOCOL_VERSION_HEADER.encode("ascii"))
    return version is None or version.decode("latin-1") in HANDSHAKE_PROTOCOL_VERSIONS


async def serve_http(config: Config, prespawned: Prespawned, host: str, port: int) -> None:
    """``mcp-patchbay serve --http``: serve until drained, then stop every upstream."""
    from mcp_patchbay.config.watch import reload_on_sighup, watch_config
    from mcp_patchbay.upstreams.transports.stdio import shutdown

    gateway = Gateway(config, host, port, prespawned=prespawned)
    logger.info("mcp-patchbay %s gateway for %d servers from %s", __version__, len(config.servers), config.path)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(reload_on_sighup, config.path, gateway.proxy.supervisor.apply)
            if config.settings.watch:
                tg.start_soon(watch_config, config.path, gateway.proxy.supervisor.apply)
            if config.settings.activity:  # the activity log, each call's member read on its request's path
                from mcp_patchbay.activity.wiring import gateway_member, keep_log

                label = f"gateway {host}:{port} pid {os.getpid()}"
                await tg.start(functools.partial(keep_log, gateway.proxy, label, member=gateway_member))

            async def serve_then_stop(*, task_status: anyio.abc.TaskStatus[tuple[str, int]]) -> None:
                await gateway.serve(task_status=task_status)
                tg.cancel_scope.cancel()

            host, port = await tg.start(serve_then_stop)
            print(f"mcp-patchbay: serving MCP at http://{url_host(host)}:{port}{MCP_PATH}", file=sys.stderr)
    finally:
        shutdown()
