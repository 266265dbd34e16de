"""The gateway's HTTP checks before MCP: Host and Origin (DNS rebinding), and CORS.

``security_settings`` is what the SDK's transport checks on ``/mcp`` (the bind address, the public
``url``, loopback names on a loopback bind, and what the config adds); ``metrics_security`` the
``/metrics`` listener's own (never a browser); ``cors`` answers ``gateway.cors_origins``.
"""

from __future__ import annotations

import logging

from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp

from mcp_patchbay.config.gateway import GatewaySettings
from mcp_patchbay.gateway.bind import is_loopback

__all__ = ["cors", "metrics_security", "security_settings", "url_host"]

logger = logging.getLogger(__name__)

CORS_EXPOSED = ("Mcp-Session-Id", "Mcp-Protocol-Version", "WWW-Authenticate", "Retry-After")
"""Response headers a page on an allowed origin may read (a session's id, the version, a sign-in challenge)."""


def cors(app: ASGIApp, origins: tuple[str, ...]) -> ASGIApp:
    """``/mcp`` answering CORS for ``gateway.cors_origins`` (preflights included). Request headers
    are echoed back as allowed: a 2026-07-28 call names its own ``Mcp-Param-*`` headers."""
    from starlette.middleware.cors import CORSMiddleware

    return CORSMiddleware(
        app,
        allow_origins=list(origins),
        allow_methods=["GET", "POST", "DELETE"],
        allow_headers=["*"],
        expose_headers=list(CORS_EXPOSED),
        max_age=600,
    )


def url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def security_settings(settings: GatewaySettings, host: str, port: int) -> TransportSecuritySettings:
    """Host and Origin checks against DNS rebinding: the bind address, the public ``url``,
    loopback names on a loopback bind, and what the config adds."""
    hosts: list[str] = list(settings.allowed_hosts)
    origins: list[str] = [*settings.allowed_origins, *settings.cors_origins]
    if is_loopback(host):
        hosts += ["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]"]
        origins += ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
    elif host not in ("0.0.0.0", "::"):
        hosts += [f"{url_host(host)}:{port}", url_host(host)]
    if settings.url is not None:
        from urllib.parse import urlsplit

        parsed = urlsplit(settings.url)
        hosts.append(parsed.netloc)
        origins.append(f"{parsed.scheme}://{parsed.netloc}")
    checked = is_loopback(host) or settings.url is not None or bool(settings.allowed_hosts)
    if not checked:
        logger.warning(
            "Host checks are off: bound to %s with neither gateway.url nor gateway.allowed_hosts; "
            "callers still need a sign-in",
            host,
        )
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=checked, allowed_hosts=hosts, allowed_origins=origins
    )


def metrics_security(host: str, port: int) -> TransportSecuritySettings:
    """The metrics listener's Host check: loopback names on a loopback bind, the bind address
    otherwise, none on a wildcard bind (Prometheus scrapes a pod by its IP); never a browser."""
    if is_loopback(host):
        hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]"]
    elif host in ("0.0.0.0", "::", ""):
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    else:
        hosts = [f"{url_host(host)}:*", url_host(host)]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=[])
