"""Who may connect to the gateway: ``build_auth`` (the sign-in of ``/mcp``).

Every credential is an ``Authorization: Bearer ...`` header, checked by ``GatewayVerifier``
(the SDK's ``TokenVerifier``) as one of two kinds: a static token of ``gateway.tokens``
(checked in the module of that name: the caller is the token's name), or a JWT when
``gateway.oauth`` is set (checked in ``gateway.jwts``: the caller is its ``oauth.identity_claim``).

Either way the verifier answers a ``PatchbayToken`` (an ``AccessToken`` that says which
kind, who, and for a JWT its claims, which ``access`` rules read) or ``None``: it never
raises, so an issuer that cannot be reached means 401s (logged at WARNING), not a crash.

The HTTP side is the SDK's: ``BearerAuthBackend`` runs the verifier on every request,
``AuthContextMiddleware`` makes the token ``get_access_token()`` inside MCP handlers, and
``RequireAuthMiddleware`` answers a request to ``/mcp`` without valid credentials with a
401 and ``WWW-Authenticate: Bearer`` (naming the Protected Resource Metadata, RFC 9728,
with ``oauth``), or a 403 ``insufficient_scope`` when a JWT lacks an ``oauth.scopes``
scope, before anything reaches MCP.

Nothing here logs a token: a refusal is logged with its reason only.
"""

from __future__ import annotations

import logging
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx2
from mcp.server.auth.handlers.metadata import ProtectedResourceMetadataHandler
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend, RequireAuthMiddleware
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.routes import build_resource_metadata_url, cors_middleware
from mcp.shared.auth import ProtectedResourceMetadata
from pydantic import AnyHttpUrl
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.routing import Route
from starlette.types import ASGIApp

from mcp_patchbay.config.gateway import GatewayOAuth, GatewaySettings
from mcp_patchbay.gateway.jwts import JwtVerifier
from mcp_patchbay.gateway.tokens import StaticTokens, refused

__all__ = ["GatewayAuth", "GatewayVerifier", "build_auth"]

logger = logging.getLogger(__name__)

PRM_PATH = "/.well-known/oauth-protected-resource"


class GatewayVerifier:
    """The SDK's ``TokenVerifier`` for the gateway: static tokens first, then JWTs."""

    def __init__(self, static: StaticTokens | None, jwts: JwtVerifier | None) -> None:
        self._static = static
        self._jwts = jwts

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            admitted = self._static.match(token) if self._static is not None else None
            if admitted is not None:
                return admitted
            if self._jwts is not None and token.count(".") == 2:
                return await self._jwts.verify(token)
            refused("it is none of gateway.tokens" + ("" if self._jwts is None else " and not a JWT"))
            return None
        except Exception as exc:  # a 401 for this request, whatever went wrong; never a 500
            logger.warning("gateway: a bearer token could not be checked: %s: %s", type(exc).__name__, exc)
            return None


@dataclass(frozen=True)
class GatewayAuth:
    """The sign-in of the gateway, as pieces the app puts together."""

    verifier: GatewayVerifier
    required_scopes: tuple[str, ...]
    resource_metadata_url: str | None
    """Where Protected Resource Metadata is (named in the 401's challenge); ``None`` without ``oauth``."""
    middleware: list[Middleware] = field(default_factory=list[Middleware])
    """For the whole app: who the caller is (``scope["user"]``, ``get_access_token()``); refuses nothing."""
    routes: list[Route] = field(default_factory=list[Route])
    """Protected Resource Metadata (with ``oauth``), served to anyone."""

    def protect(self, app: ASGIApp) -> ASGIApp:
        """``app`` (the ``/mcp`` endpoint) behind the 401/403 gate."""
        metadata_url = AnyHttpUrl(self.resource_metadata_url) if self.resource_metadata_url else None
        return RequireAuthMiddleware(app, list(self.required_scopes), metadata_url)


def build_auth(
    settings: GatewaySettings,
    resource_url: str,
    *,
    transport: httpx2.AsyncBaseTransport | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> GatewayAuth | None:
    """The gateway's sign-in from its settings, ``None`` when it has none (no ``tokens``, no ``oauth``).

    ``resource_url`` is where clients reach ``/mcp`` (``gateway.url``): the audience JWTs
    must carry unless ``oauth.audience`` says otherwise, and the resource metadata names.
    ``transport`` and ``clock`` are for tests (the issuer's HTTP, the keys' cache). No I/O
    here: the issuer is first asked for its keys when a JWT arrives.
    """
    if not settings.signs_in:
        return None
    oauth = settings.oauth
    scopes = list(oauth.scopes) if oauth is not None else []
    static = StaticTokens(settings.tokens, scopes) if settings.tokens else None
    jwts = None
    if oauth is not None:
        jwts = JwtVerifier(oauth, oauth.audience or resource_url, transport, clock)
    verifier = GatewayVerifier(static, jwts)
    middleware = [
        Middleware(AuthenticationMiddleware, backend=BearerAuthBackend(verifier)),
        Middleware(AuthContextMiddleware),
    ]
    if oauth is None:
        return GatewayAuth(verifier, (), None, middleware)
    metadata_url = str(build_resource_metadata_url(AnyHttpUrl(resource_url)))
    return GatewayAuth(
        verifier, tuple(scopes), metadata_url, middleware, _metadata_routes(oauth, resource_url, metadata_url)
    )


def _metadata_routes(oauth: GatewayOAuth, resource_url: str, metadata_url: str) -> list[Route]:
    """Protected Resource Metadata at the root form, the ``/mcp`` form and ``resource_url``'s own."""
    metadata = ProtectedResourceMetadata.model_validate(
        {
            "resource": resource_url,
            "authorization_servers": [oauth.issuer],
            "scopes_supported": list(oauth.scopes) or None,
            "resource_name": "mcp-patchbay",
        }
    )
    endpoint = cors_middleware(ProtectedResourceMetadataHandler(metadata).handle, ["GET", "OPTIONS"])
    paths = dict.fromkeys((PRM_PATH, PRM_PATH + "/mcp", urllib.parse.urlsplit(metadata_url).path))
    return [Route(path, endpoint=endpoint, methods=["GET", "OPTIONS"]) for path in paths]
