"""A fake OAuth issuer for the gateway's tests: signing keys (RSA, EC, Ed25519), its JWK set
and metadata served over an ``httpx2.MockTransport``, and access tokens minted on demand."""

from __future__ import annotations

import functools
import json
import time
from typing import Any, Literal

import httpx2
import jwt
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

KeyKind = Literal["rsa", "ec", "ed"]
_ALGORITHMS: dict[KeyKind, str] = {"rsa": "RS256", "ec": "ES256", "ed": "EdDSA"}
_PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey


@functools.cache
def private_key(kind: KeyKind, number: int = 0) -> _PrivateKey:
    """One key per kind and number for the whole test run (RSA keys take a while to make)."""
    del number  # only part of the cache key
    if kind == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    if kind == "ec":
        return ec.generate_private_key(ec.SECP256R1())
    return ed25519.Ed25519PrivateKey.generate()


def public_jwk(key: _PrivateKey, kid: str | None, alg: str | None) -> dict[str, Any]:
    if isinstance(key, rsa.RSAPrivateKey):
        jwk = RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
    elif isinstance(key, ec.EllipticCurvePrivateKey):
        jwk = ECAlgorithm.to_jwk(key.public_key(), as_dict=True)
    else:
        jwk = OKPAlgorithm.to_jwk(key.public_key(), as_dict=True)
    if kid is not None:
        jwk["kid"] = kid
    if alg is not None:
        jwk["alg"] = alg
    jwk["use"] = "sig"
    return jwk


class FakeIssuer:
    """An authorization server as far as a resource server sees it: metadata and a JWK set.

    ``metadata`` picks where its metadata is found (RFC 8414's path, OpenID's, or nowhere);
    ``down`` makes every request fail to connect; ``requests`` lists the URLs asked for.
    """

    def __init__(
        self,
        issuer: str = "https://id.example.com",
        *,
        audience: str = "https://mcp.example.com/mcp",
        jwks_url: str = "https://id.example.com/keys.json",
        metadata: Literal["oauth", "openid", "openid-appended", "none"] = "oauth",
        metadata_issuer: str | None = None,
    ) -> None:
        self.issuer = issuer
        self.audience = audience
        self.jwks_url = jwks_url
        self.metadata = metadata
        self.metadata_issuer = metadata_issuer or issuer
        self.keys: dict[str, tuple[_PrivateKey, str]] = {}
        self.published: list[str] = []
        self.publish_alg = True
        self.down = False
        self.requests: list[str] = []
        self.transport = httpx2.MockTransport(self._answer)

    def add_key(self, kid: str, kind: KeyKind = "rsa", *, number: int = 0, publish: bool = True) -> None:
        self.keys[kid] = (private_key(kind, number), _ALGORITHMS[kind])
        if publish:
            self.published.append(kid)

    def jwks(self) -> dict[str, Any]:
        return {
            "keys": [
                public_jwk(self.keys[kid][0], kid, self.keys[kid][1] if self.publish_alg else None)
                for kid in self.published
            ]
        }

    def claims(self, **claims: Any) -> dict[str, Any]:
        now = int(time.time())
        base: dict[str, Any] = {
            "iss": self.issuer,
            "aud": self.audience,
            "sub": "user-1",
            "iat": now,
            "exp": now + 300,
            "scope": "mcp:use",
        }
        base.update(claims)
        return {name: value for name, value in base.items() if value is not None}

    def mint(
        self, kid: str = "rsa-1", *, alg: str | None = None, headers: dict[str, Any] | None = None, **claims: Any
    ) -> str:
        """A token signed by key ``kid`` with the default claims, ``claims`` changing them (None drops one)."""
        key, default_alg = self.keys[kid]
        return jwt.encode(
            self.claims(**claims), key, algorithm=alg or default_alg, headers={"kid": kid, **(headers or {})}
        )

    def _answer(self, request: httpx2.Request) -> httpx2.Response:
        url = str(request.url)
        self.requests.append(url)
        if self.down:
            raise httpx2.ConnectError("connection refused", request=request)
        if url == self.jwks_url:
            return httpx2.Response(200, json=self.jwks())
        if url in self.metadata_urls():
            document = {"issuer": self.metadata_issuer, "jwks_uri": self.jwks_url, "token_endpoint": "x"}
            return httpx2.Response(200, content=json.dumps(document).encode())
        return httpx2.Response(404)

    def metadata_urls(self) -> list[str]:
        parsed = httpx2.URL(self.issuer)
        origin, path = f"{parsed.scheme}://{parsed.netloc.decode()}", parsed.path.rstrip("/")
        return {
            "oauth": [f"{origin}/.well-known/oauth-authorization-server{path}"],
            "openid": [f"{origin}/.well-known/openid-configuration{path}"],
            "openid-appended": [f"{origin}{path}/.well-known/openid-configuration"],
            "none": [],
        }[self.metadata]


class Clock:
    """A monotonic clock tests move by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
