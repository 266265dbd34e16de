"""A real MCP server protected by OAuth, for the end-to-end sign-in tests.

    python mcp_server.py --issuer http://127.0.0.1:PORT [--events FILE]

Streamable HTTP on 127.0.0.1, a port free at that moment, at ``/mcp``. It is an OAuth
resource server built on the installed SDK's own pieces (``mcp.server.auth``): every request
to ``/mcp`` needs a bearer token, otherwise ``401`` with ``WWW-Authenticate: Bearer ...,
resource_metadata="…/.well-known/oauth-protected-resource/mcp"``, and the protected resource
metadata (RFC 9728) names the issuer as its authorization server and ``mcp:tools`` as its scope.

Tokens are JWT access tokens (RFC 9068) checked locally: RS256 signature against the
authorization server's JWKS (found through its OpenID discovery document), ``iss`` the issuer,
``aud`` this server's URL (the RFC 8707 resource), ``exp`` in the future, scope ``mcp:tools``.

Tools: ``whoami`` (who the token says is calling, and which token: its ``jti``, never the
token), ``echo``. Prints one line on stdout once it accepts connections:
``{"url": "http://127.0.0.1:PORT/mcp"}``. Stops on SIGTERM or SIGINT.

``--events FILE`` gets one JSON line per request to ``/mcp`` (method, status, whether a
bearer token came with it; never the token), so a test can see what the proxy sent.
"""

from __future__ import annotations

import argparse
import json
import logging
import socket
import sys
import time
from pathlib import Path
from typing import Any

import anyio.to_thread
import httpx2
import jwt
import uvicorn
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from starlette.types import ASGIApp, Message, Receive, Scope, Send

SCOPE = "mcp:tools"
log = logging.getLogger("oauth-world.mcp")


class JwtVerifier(TokenVerifier):
    """JWT access tokens from ``issuer`` for ``audience``, keys from the issuer's JWKS."""

    def __init__(self, issuer: str, audience: str) -> None:
        self.issuer = issuer
        self.audience = audience
        self._keys: jwt.PyJWKClient | None = None

    async def _jwks(self) -> jwt.PyJWKClient:
        if self._keys is None:
            async with httpx2.AsyncClient(timeout=5) as http:
                discovery = await http.get(f"{self.issuer}/.well-known/openid-configuration")
                discovery.raise_for_status()
            self._keys = jwt.PyJWKClient(discovery.json()["jwks_uri"], timeout=5)
        return self._keys

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            keys = await self._jwks()
            key = await anyio.to_thread.run_sync(keys.get_signing_key_from_jwt, token)
            claims: dict[str, Any] = jwt.decode(
                token,
                key.key,
                algorithms=["RS256"],
                audience=self.audience,
                issuer=self.issuer,
                options={"require": ["exp", "iat", "iss", "aud", "sub", "jti"]},
            )
        except (jwt.PyJWTError, httpx2.HTTPError, KeyError, ValueError) as exc:
            log.warning("token refused: %s", type(exc).__name__)
            return None
        audience = claims["aud"]
        return AccessToken(
            token=token,
            client_id=claims.get("client_id", ""),
            scopes=str(claims.get("scope", "")).split(),
            expires_at=int(claims["exp"]),
            resource=audience if isinstance(audience, str) else self.audience,
            subject=claims["sub"],
            claims=claims,
        )


class RequestLog:
    """ASGI middleware: one JSON line per request to ``/mcp`` in the events file."""

    def __init__(self, app: ASGIApp, path: Path) -> None:
        self.app = app
        self.path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/mcp"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        bearer = headers.get("authorization", "").lower().startswith("bearer ")
        status = 0

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                event = {"at": time.time(), "event": "mcp", "method": scope["method"], "status": status}
                with self.path.open("a") as out:
                    out.write(json.dumps({**event, "bearer": bearer}) + "\n")
            await send(message)

        await self.app(scope, receive, sending)


def build(issuer: str, url: str) -> MCPServer:
    auth = AuthSettings(
        issuer_url=issuer,  # pyright: ignore[reportArgumentType] - validated into AnyHttpUrl
        resource_server_url=url,  # pyright: ignore[reportArgumentType]
        required_scopes=[SCOPE],
        validate_token_resource=True,
    )
    server = MCPServer("oauth-world", token_verifier=JwtVerifier(issuer, url), auth=auth, log_level="WARNING")

    @server.tool()
    def whoami() -> dict[str, Any]:
        """Who the access token says is calling: subject, client, scopes, audience, token id and times."""
        token = get_access_token()
        assert token is not None  # the bearer middleware let no request in without one
        claims = token.claims or {}
        return {
            "subject": token.subject,
            "client_id": token.client_id,
            "scopes": token.scopes,
            "audience": claims.get("aud"),
            "token_id": claims.get("jti"),
            "issued_at": claims.get("iat"),
            "expires_at": token.expires_at,
        }

    @server.tool(structured_output=False)  # no outputSchema: the proxy's errors for it are structured
    def echo(text: str) -> str:
        """Answers with the text it was given."""
        return text

    return server


class Server(uvicorn.Server):
    """uvicorn that says where it listens once it accepts connections."""

    announce: str = ""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            sys.stdout.write(self.announce + "\n")
            sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--issuer", required=True)
    parser.add_argument("--events", type=Path)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    app: ASGIApp = build(args.issuer.rstrip("/"), url).streamable_http_app()
    if args.events is not None:
        app = RequestLog(app, args.events)
    server = Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    server.announce = json.dumps({"url": url})
    server.run(sockets=[sock])


if __name__ == "__main__":
    main()
