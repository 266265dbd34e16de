"""JWTs, when ``gateway.oauth`` is set (OAuth 2.1, the gateway as a resource server).

The algorithm must be on ``oauth.algorithms``; the signature is checked against the issuer's
JWKS (``oauth.jwks_url``, or the ``jwks_uri`` of the issuer's metadata: RFC 8414, then OpenID
discovery); then ``iss``, ``aud`` (``oauth.audience``, else the gateway's URL: RFC 8707), ``exp``
and ``nbf`` (``LEEWAY`` seconds of clock skew). The caller is the ``oauth.identity_claim``. Keys
are cached (``KEYS_MAX_AGE``); a token signed by an unknown ``kid`` refetches them at most once
per ``REFETCH_INTERVAL``. PyJWT is imported only when a verifier is made (``gateway.auth``).
"""

from __future__ import annotations

import json
import logging
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

import anyio
import httpx2

from mcp_patchbay.config.gateway import GatewayOAuth
from mcp_patchbay.gateway.tokens import PatchbayToken, refused

if TYPE_CHECKING:
    import jwt

__all__ = ["JwtVerifier", "metadata_urls"]

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


class JwtVerifier:
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
            refused("not a JWT (%s)", exc)
            return None
        algorithm, kid = header.get("alg"), header.get("kid")
        if not isinstance(algorithm, str) or algorithm not in self._oauth.algorithms:
            refused("algorithm %r is not in oauth.algorithms", algorithm)
            return None
        try:
            key = await self._keys.key(kid, algorithm)
            if key is None:
                if kid is None:
                    refused("it names no key (kid)")
                else:
                    refused("the issuer has no key %r", kid)
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
            refused("%s", exc)
            return None
        if claims["exp"] <= time.time():  # within LEEWAY: the SDK refuses it anyway, without a word
            refused("it expired %d s ago", int(time.time() - claims["exp"]))
            return None
        identity = claims.get(self._oauth.identity_claim)
        if not isinstance(identity, str | int) or isinstance(identity, bool) or identity == "":
            refused("no %r claim (oauth.identity_claim)", self._oauth.identity_claim)
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
