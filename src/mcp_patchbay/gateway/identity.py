"""Who is calling the gateway, as one string per member: what quotas are counted by.

A member is a static token's name, a JWT's identity (``oauth.identity_claim``) under its
issuer, or, on a gateway without sign-in, the client's address. Pure: values in, a
string out; the token comes from the SDK's auth context, the address from the request.
"""

from __future__ import annotations

from typing import Any, cast

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.types import Scope

ANONYMOUS = "anonymous"
"""A caller with neither a token nor an address (in-process tests)."""


def identity_of(token: AccessToken | None, client: Any) -> str:
    """The member behind a token, else behind a client address (``(host, port)``): ``alice
    (token)``, ``alice@example.com (https://id.example.com)`` (a JWT's identity and issuer),
    ``203.0.113.7 (address)``. Readable in a log line, and never shaped like a secret (the log
    redaction cuts what follows ``token:``)."""
    if token is not None:
        who = getattr(token, "identity", None) or token.client_id
        if getattr(token, "kind", "token") == "jwt":
            claims = token.claims or {}
            return f"{who} ({claims.get('iss', '')})"
        return f"{who} (token)"
    if isinstance(client, tuple | list) and client:
        return f"{client[0]} (address)"  # pyright: ignore[reportUnknownArgumentType]
    return ANONYMOUS


def scope_identity(scope: Scope) -> str:
    """The member making an HTTP request (after the sign-in middleware ran)."""
    user = scope.get("user")
    token = user.access_token if isinstance(user, AuthenticatedUser) else None
    return identity_of(token, scope.get("client"))


def request_identity(request: Any | None) -> str:
    """The member behind an MCP request being handled (``ctx.request``: the starlette
    request that carried it, or None off HTTP)."""
    scope: Any = getattr(request, "scope", None)
    client = cast("dict[str, Any]", scope).get("client") if isinstance(scope, dict) else None
    return identity_of(get_access_token(), client)


__all__ = ["ANONYMOUS", "identity_of", "request_identity", "scope_identity"]
