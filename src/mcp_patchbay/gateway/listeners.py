"""The gateway's listeners under uvicorn: the clients' one, and ``/metrics``' own.

Both run uvicorn with ``edge.guarded_protocol`` (its ``EdgeLimits``: request heads, header and
body timeouts, connections at once), lifespan off, no access log, and without uvicorn's signal
handlers: the gateway drains on signals itself (``app.Gateway``). ``/metrics`` is served alone,
behind the Host check of its bind address (``host_checks.metrics_security``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import anyio
import uvicorn
from mcp.server.transport_security import TransportSecurityMiddleware
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp

from mcp_patchbay.gateway.bind import is_loopback
from mcp_patchbay.gateway.edge import EdgeLimits, guarded_protocol
from mcp_patchbay.gateway.host_checks import metrics_security
from mcp_patchbay.gateway.metrics import CONTENT_TYPE

__all__ = ["METRICS_CONNECTIONS", "SHUTDOWN_GRACE", "bound_address", "listener", "metrics_app"]

logger = logging.getLogger(__name__)

SHUTDOWN_GRACE = 2
"""Seconds uvicorn gives open connections (GET streams) once draining is over."""
METRICS_CONNECTIONS = 64
"""Connections the metrics listener takes at once (a scraper or two; a count of its own)."""


def listener(app: ASGIApp, host: str, port: int, limits: EdgeLimits) -> uvicorn.Server:
    """A uvicorn server for ``app`` at ``host``:``port``, its connections bounded by ``limits``."""
    return _Server(
        uvicorn.Config(
            app,
            host=host,
            port=port,
            http=guarded_protocol(limits),
            ws="none",
            lifespan="off",
            log_config=None,
            access_log=False,
            server_header=False,
            timeout_graceful_shutdown=SHUTDOWN_GRACE,
        )
    )


def metrics_app(render: Callable[[], bytes], host: str, port: int) -> Starlette:
    """``/metrics`` alone (``render``: the page), for a listener of its own, behind the Host check
    of its bind address."""
    check = TransportSecurityMiddleware(metrics_security(host, port))

    async def metrics(request: Request) -> Response:
        refused = await check.validate_request(request)
        if refused is not None:
            return refused
        return Response(render(), media_type=CONTENT_TYPE)

    if not is_loopback(host):
        logger.info(
            "metrics on %s:%d, beyond this machine, without a token: every server and tool name and "
            "call outcomes are readable there (keep the port out of the Service, as deploy/kubernetes does)",
            host,
            port,
        )
    return Starlette(routes=[Route("/metrics", endpoint=metrics, methods=["GET"])])


async def bound_address(server: uvicorn.Server) -> tuple[str, int]:
    """The address a uvicorn server listens at, once it does."""
    while not server.started:  # uvicorn offers no event; its startup takes a few ms
        await anyio.sleep(0.005)
    sockname = server.servers[0].sockets[0].getsockname()
    return str(sockname[0]), int(sockname[1])


class _Server(uvicorn.Server):
    """uvicorn, minus its signal handlers: the gateway drains on signals itself."""

    def capture_signals(self) -> Any:
        return nullcontext()
