"""Who may connect to the gateway: ``build_auth`` (the sign-in of ``/mcp``).

Every credential is an ``Authorization: Bearer ...`` header, checked by ``GatewayVerifier``
(the SDK's ``TokenVerifier``) as one of two kinds:

- a static token of ``gateway.tokens`` (name -> token): its SHA-256 is compared in
  constant time with every configured token's (no early exit, no length leak); the
  caller is the token's name.
- a JWT, when ``gateway.oauth`` is set (OAuth 2.1, the gateway as a resource server):
  the algorithm must be on ``oauth.algorithms``; the signature is checked against the
  issuer's JWKS (``oauth.jwks_url``, or the ``jwks_uri`` of the issuer's metadata: RFC
  8414, then OpenID discovery); then ``iss``, ``aud`` (``oauth.audience``, else the
  gateway's URL: RFC 8707), ``exp`` and ``nbf`` (``LEEWAY`` seconds of clock skew). The
  caller is the ``oauth.identity_claim``. Keys are cached (``KEYS_MAX_AGE``); a token
  signed by an unknown ``kid`` refetches them at most once per ``REFETCH_INTERVAL``.

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

import hashlib
import hmac
import json
import logging
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast

import anyio
import httpx2
from mcp.server.auth.handlers.metadata import ProtectedResourceMetadataHandler
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend, RequireAuthMiddleware
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.routes import build_resource_metadata_url, cors_middleware
from mcp.shared.auth import ProtectedResourceMetadata
from pydantic import AnyHttpUrl, Field
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.routing import Route
from starlette.types import ASGIApp

from mcp_patchbay.config.gateway import GatewayOAuth, GatewaySettings

if TYPE_CHECKING:
    import jwt

__all__ = ["GatewayAuth", "GatewayVerifier", "PatchbayToken", "build_auth"]

logger = logging.getLogger(__name__)

LEEWAY = 30.0
"""Seconds of clock skew allowed on ``nbf`` and ``iat`` (the SDK checks ``exp`` again without any)."""

KEYS_MAX_AGE = 3600.0
"""Seconds after which the issuer's keys are fetched again (the old ones serve if that fails)."""

REFETCH_INTERVAL = 30.0
"""The least time between two fetches of the keys (a token with an unknown ``kid`` asks for one)."""

RETRY_AFTER_FAILURE = 5.0
"""The least time between two attempts while the keys cannot be fetched."""

FETCH_TIMEOUT = 5.0
"""Seconds one fetch (metadata and keys) may take; requests waiting on it wait that long at most."""

FETCH_MAX_BYTES = 1_048_576
"""The most of a metadata or key set document read: an issuer's is a few KB; a bigger one is refused."""

PRM_PATH = "/.well-known/oauth-protected-resource"


class PatchbayToken(AccessToken):
    """A caller the gateway admitted: a static token's name, or a JWT's identity and claims.

    ``client_id`` is the token's name (static) or the JWT's ``client_id``/``azp`` claim;
    ``claims`` is ``None`` for a static token (``access`` tells the kinds apart by it).
    """

    token: str = Field(repr=False)
    kind: Literal["token", "jwt"]
    identity: str
    """Who, for logs and rules: the static token's name, or the ``oauth.identity_claim``."""


def _refused(reason: str, *args: object) -> None:
    logger.info("gateway: bearer token refused: " + reason, *args)


# --- static tokens -------------------------------------------------------------------------


class _StaticTokens:
    """``gateway.tokens``, held as digests; a match costs one hash and one comparison per token."""

    def __init__(self, tokens: Mapping[str, str], scopes: list[str]) -> None:
        self._digests = [(name, hashlib.sha256(token.encode()).digest()) for name, token in tokens.items()]
        # One token object per name: admitting a caller allocates nothing. A static token is
        # trusted whole, so it carries the scopes a JWT must have.
        self._admitted = {
            name: PatchbayToken(token=token, client_id=name, subject=name, scopes=scopes, kind="token", identity=name)
            for name, token in tokens.items()
        }

    def match(self, token: str) -> PatchbayToken | None:
        digest = hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()
        found: str | None = None
        for name, expected in self._digests:  # every one, whatever matched: no timing tells which
            if hmac.compare_digest(digest, expected):
                found = name
        return None if found is None else self._admitted[found]


# --- JWTs ----------------------------------------------------------------------------------


class _KeysUnavailable(Exception):
    """Why the issuer's keys could not be fetched (said in the WARNING)."""


def metadata_urls(issuer: str) -> list[str]:
    """Where an issuer's metadata may be, in order: RFC 8414 (the well-known path inserted
    before the issuer's path), then OpenID Connect Discovery (inserted, then appended)."""
    parsed = urllib.parse.urlsplit(issuer)
    origin = f"{parsed.scheme}://{parsed.netloc}"
    path = parsed.path.rstrip("/")
    if not path:
        return [f"{origin}/.well-known/oauth-authorization-server", f"{origin}/.well-known/openid-configuration"]
    return [
        f"{origin}/.well-known/oauth-authorization-server{path}",
        f"{origin}/.well-known/openid-configuration{path}",
        f"{origin}{path}/.well-known/openid-configuration",
    ]


def _same_issuers(issuer: str) -> frozenset[str]:
    """``issuer`` and, for a bare origin, its spelling with or without the trailing slash."""
    parsed = urllib.parse.urlsplit(issuer)
    if parsed.path.strip("/"):
        return frozenset((issuer,))
    origin = f"{parsed.scheme}://{parsed.netloc}"
    return frozenset((origin, origin + "/"))


class _Keys:
    """The issuer's signing keys by ``kid``: fetched on demand, one fetch at a time, rate limited."""

    def __init__(
        self, oauth: GatewayOAuth, transport: httpx2.AsyncBaseTransport | None, clock: Callable[[], float]
    ) -> None:
        import jwt

        self._jwt = jwt
        self._issuer = oauth.issuer
        self._jwks_url = oauth.jwks_url
        self._transport = transport
        self._clock = clock
        self._jwks: dict[str | None, dict[str, Any]] = {}
        self._prepared: dict[tuple[str | None, str], jwt.PyJWK] = {}
        self._loaded_at: float | None = None
        self._attempted_at: float | None = None
        self._failing = False
        self._lock = anyio.Lock()

    async def key(self, kid: str | None, algorithm: str) -> jwt.PyJWK | None:
        """The key that signed a token with this header; raises ``jwt.PyJWKError`` when the
        key cannot verify ``algorithm``."""
        if self._find(kid) is None or self._stale():
            async with self._lock:  # a fetch under way serves every request waiting on it
                if (self._find(kid) is None or self._stale()) and self._may_fetch():
                    await self._fetch()
        jwk = self._find(kid)
        if jwk is None:
            return None
        prepared = self._prepared.get((kid, algorithm))
        if prepared is None:
            if jwk.get("alg") not in (None, algorithm):
                raise self._jwt.PyJWKError(f"key {kid!r} is for {jwk['alg']}, not {algorithm}")
            prepared = self._prepared[(kid, algorithm)] = self._jwt.PyJWK(jwk, algorithm)
        return prepared

    def _find(self, kid: str | None) -> dict[str, Any] | None:
        if kid is None and len(self._jwks) == 1:  # a token without kid, a set of one key
            return next(iter(self._jwks.values()))
        return self._jwks.get(kid)

    def _stale(self) -> bool:
        return self._loaded_at is not None and self._clock() - self._loaded_at >= KEYS_MAX_AGE

    def _may_fetch(self) -> bool:
        if self._attempted_at is None:
            return True
        wait = RETRY_AFTER_FAILURE if self._failing else REFETCH_INTERVAL
        return self._clock() - self._attempted_at >= wait

    async def _fetch(self) -> None:
        self._attempted_at = self._clock()
        try:
            with anyio.fail_after(FETCH_TIMEOUT):
                async with httpx2.AsyncClient(
                    transport=self._transport, timeout=FETCH_TIMEOUT, follow_redirects=True
                ) as client:
                    if self._jwks_url is None:
                        self._jwks_url = await self._discover(client)
                    jwks = self._usable(await _get_json(client, self._jwks_url))
        except (_KeysUnavailable, httpx2.HTTPError, OSError, TimeoutError, ValueError) as exc:
            self._failing = True
            held = "the keys fetched before still serve" if self._jwks else "every JWT is refused"
            logger.warning("gateway: the signing keys of %s cannot be fetched (%s); %s", self._issuer, exc, held)
            return
        self._failing = False
        self._jwks, self._prepared, self._loaded_at = jwks, {}, self._clock()
        logger.debug("gateway: %d signing keys of %s fetched", len(jwks), self._issuer)

    async def _discover(self, client: httpx2.AsyncClient) -> str:
        """The ``jwks_uri`` of the issuer's metadata (which must name the same issuer)."""
        tried: list[str] = []
        for url in metadata_urls(self._issuer):
            try:
                metadata = await _get_json(client, url)
            except (_KeysUnavailable, httpx2.HTTPError, ValueError) as exc:
                tried.append(f"{url}: {exc}")
                continue
            if metadata.get("issuer") not in _same_issuers(self._issuer):
                raise _KeysUnavailable(f"the metadata at {url} is for another issuer (set oauth.jwks_url)")
            jwks_uri = metadata.get("jwks_uri")
            if not isinstance(jwks_uri, str) or not jwks_uri.startswith(("https://", "http://")):
                raise _KeysUnavailable(f"the metadata at {url} has no jwks_uri (set oauth.jwks_url)")
            return jwks_uri
        raise _KeysUnavailable("no issuer metadata found (set oauth.jwks_url): " + "; ".join(tried))

    @staticmethod
    def _usable(jwks: dict[str, Any]) -> dict[str | None, dict[str, Any]]:
        """The public signing keys of a JWK set, by ``kid`` (``oct`` keys and ``enc`` keys left out)."""
        entries = jwks.get("keys")
        if not isinstance(entries, list):
            raise _KeysUnavailable("the JWK set has no 'keys' list")
        keys: dict[str | None, dict[str, Any]] = {}
        for entry in cast("list[object]", entries):
            if not isinstance(entry, dict):
                continue
            jwk = cast("dict[str, Any]", entry)
            kid = jwk.get("kid")
            if (
                jwk.get("kty") in ("RSA", "EC", "OKP")
                and jwk.get("use", "sig") == "sig"
                and isinstance(kid, str | None)
            ):
                keys[kid] = jwk
        if not keys:
            raise _KeysUnavailable("the JWK set holds no public signing key")
        return keys


async def _get_json(client: httpx2.AsyncClient, url: str) -> dict[str, Any]:
    async with client.stream("GET", url, headers={"Accept": "application/json"}) as response:
        if response.status_code != 200:
            raise _KeysUnavailable(f"{url} answered {response.status_code}")
        body = bytearray()
        async for part in response.aiter_bytes():
            body += part
            if len(body) > FETCH_MAX_BYTES:
                raise _KeysUnavailable(f"{url} answered more than {FETCH_MAX_BYTES:,} bytes")
    data = json.loads(body)
    if not isinstance(data, dict):
        raise _KeysUnavailable(f"{url} answered something other than a JSON object")
    return cast("dict[str, Any]", data)


class _JwtVerifier:
    """JWTs of ``gateway.oauth``: header, key, signature, then claims."""

    def __init__(
        self,
        oauth: GatewayOAuth,
        audience: str,
        transport: httpx2.AsyncBaseTransport | None,
        clock: Callable[[], float],
    ) -> None:
        import jwt

        self._jwt = jwt
        self._oauth = oauth
        self._keys = _Keys(oauth, transport, clock)
        self._audience = audience
        base = audience.rstrip("/")  # a trailing slash aside, as the SDK compares resources
        self._audiences = list(dict.fromkeys((audience, base, base + "/")))
        self._issuers = _same_issuers(oauth.issuer)

    async def verify(self, token: str) -> PatchbayToken | None:
        jwt = self._jwt
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            _refused("not a JWT (%s)", exc)
            return None
        algorithm, kid = header.get("alg"), header.get("kid")
        if not isinstance(algorithm, str) or algorithm not in self._oauth.algorithms:
            _refused("algorithm %r is not in oauth.algorithms", algorithm)
            return None
        try:
            key = await self._keys.key(kid, algorithm)
            if key is None:
                if kid is None:
                    _refused("it names no key (kid)")
                else:
                    _refused("the issuer has no key %r", kid)
                return None
            claims = jwt.decode(
                token,
                key,
                algorithms=[algorithm],
                audience=self._audiences,
                issuer=self._issuers,
                leeway=LEEWAY,
                options={"require": ["exp", "iss", "aud"], "enforce_minimum_key_length": True},
            )
        except jwt.PyJWTError as exc:
            _refused("%s", exc)
            return None
        if claims["exp"] <= time.time():  # within LEEWAY: the SDK refuses it anyway, without a word
            _refused("it expired %d s ago", int(time.time() - claims["exp"]))
            return None
        identity = claims.get(self._oauth.identity_claim)
        if not isinstance(identity, str | int) or isinstance(identity, bool) or identity == "":
            _refused("no %r claim (oauth.identity_claim)", self._oauth.identity_claim)
            return None
        client_id = next((v for v in (claims.get("client_id"), claims.get("azp")) if isinstance(v, str)), str(identity))
        subject = claims.get("sub")
        return PatchbayToken(
            token=token,
            client_id=client_id,
            scopes=_scopes(claims),
            expires_at=int(claims["exp"]),
            resource=self._audience,
            subject=subject if isinstance(subject, str) else None,
            claims=claims,
            kind="jwt",
            identity=str(identity),
        )


def _scopes(claims: Mapping[str, Any]) -> list[str]:
    """A JWT's scopes: ``scope`` (space-separated, RFC 9068) or ``scp`` (a list, or a string)."""
    value = claims.get("scope", claims.get("scp"))
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list):
        return [s for s in cast("list[object]", value) if isinstance(s, str)]
    return []


# --- the verifier and the HTTP pieces -------------------------------------------------------


class GatewayVerifier:
    """The SDK's ``TokenVerifier`` for the gateway: static tokens first, then JWTs."""

    def __init__(self, static: _StaticTokens | None, jwts: _JwtVerifier | None) -> None:
        self._static = static
        self._jwts = jwts

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            admitted = self._static.match(token) if self._static is not None else None
            if admitted is not None:
                return admitted
            if self._jwts is not None and token.count(".") == 2:
                return await self._jwts.verify(token)
            _refused("it is none of gateway.tokens" + ("" if self._jwts is None else " and not a JWT"))
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
    static = _StaticTokens(settings.tokens, scopes) if settings.tokens else None
    jwts = None
    if oauth is not None:
        jwts = _JwtVerifier(oauth, oauth.audience or resource_url, transport, clock)
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
