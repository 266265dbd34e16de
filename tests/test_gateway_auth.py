"""Who may connect to the gateway: static tokens, JWTs against a fake issuer's JWK set
(``tests/jwt_util``, over ``httpx2.MockTransport``), and the HTTP gate around a dummy
``/mcp`` endpoint driven through ``httpx2.ASGITransport``. All in memory, no network."""

from __future__ import annotations

import hmac
import logging
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import jwt
import pytest
from mcp.server.auth.middleware.auth_context import get_access_token
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from mcp_patchbay.config import parse_config
from mcp_patchbay.config.gateway import GatewaySettings
from mcp_patchbay.gateway import jwts as auth_module
from mcp_patchbay.gateway.auth import GatewayAuth, build_auth
from mcp_patchbay.gateway.bind import is_loopback
from mcp_patchbay.gateway.jwts import metadata_urls
from mcp_patchbay.gateway.tokens import PatchbayToken
from tests.jwt_util import Clock, FakeIssuer

pytestmark = pytest.mark.anyio

RESOURCE = "https://mcp.example.com/mcp"
ALICE = "alice-0123456789abcdef"
CI = "ci-0123456789abcdef0123"


def settings(*, tokens: bool = True, oauth: dict[str, Any] | None = None) -> GatewaySettings:
    data: dict[str, Any] = {"url": RESOURCE}
    if tokens:
        data["tokens"] = {"alice": ALICE, "ci": CI}
    if oauth is not None:
        data["oauth"] = oauth
    return GatewaySettings.model_validate(data)


def built(issuer: FakeIssuer | None = None, clock: Clock | None = None, **oauth: Any) -> GatewayAuth:
    oauth_settings = None if issuer is None else {"issuer": issuer.issuer, **oauth}
    auth = build_auth(
        settings(oauth=oauth_settings),
        RESOURCE,
        transport=None if issuer is None else issuer.transport,
        clock=clock or Clock(),
    )
    assert auth is not None
    return auth


@pytest.fixture
def issuer() -> FakeIssuer:
    issuer = FakeIssuer()
    issuer.add_key("rsa-1", "rsa")
    issuer.add_key("ec-1", "ec")
    issuer.add_key("ed-1", "ed")
    return issuer


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG, logger="mcp_patchbay.gateway")
    return caplog


def assert_no_secret_logged(caplog: pytest.LogCaptureFixture, *secrets: str) -> None:
    for secret in secrets:
        for part in secret.split("."):  # not the whole token, nor any segment of a JWT
            assert part not in caplog.text


# --- is_loopback ---------------------------------------------------------------------------


def test_only_loopback_addresses_count_as_loopback() -> None:
    for host in ("127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost", "LOCALHOST.", "::ffff:127.0.0.1"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "::", "192.168.1.2", "10.0.0.1", "example.com", "localhost.example.com", "", "[::]"):
        assert not is_loopback(host), host


# --- static tokens -------------------------------------------------------------------------


async def test_a_static_token_is_admitted_by_name_and_others_are_not(logs: pytest.LogCaptureFixture) -> None:
    verifier = built().verifier
    admitted = await verifier.verify_token(CI)
    assert isinstance(admitted, PatchbayToken)
    assert (admitted.kind, admitted.identity, admitted.client_id, admitted.claims) == ("token", "ci", "ci", None)
    assert CI not in repr(admitted)
    for wrong in (ALICE + "x", ALICE[:-1], "", "x" * 200, "a.b.c", "ünïcode-token-value"):
        assert await verifier.verify_token(wrong) is None
    assert "refused: it is none of gateway.tokens" in logs.text
    assert_no_secret_logged(logs, ALICE[:-1], "x" * 200)


async def test_static_tokens_are_compared_with_every_configured_one(monkeypatch: pytest.MonkeyPatch) -> None:
    verifier = built().verifier
    compared: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", counting)
    for token in (ALICE, CI, "no-such-token-0123456789", "short"):
        compared.clear()
        await verifier.verify_token(token)
        # One comparison per configured token, whichever matched, of fixed-length digests.
        assert len(compared) == 2 and {len(a) for a, _ in compared} == {32}


def test_no_tokens_and_no_oauth_means_no_sign_in() -> None:
    assert build_auth(settings(tokens=False), RESOURCE) is None
    assert build_auth(GatewaySettings(), "http://127.0.0.1:8080/mcp") is None


# --- JWTs ----------------------------------------------------------------------------------


async def test_jwts_signed_by_rsa_ec_and_ed25519_keys_are_admitted(issuer: FakeIssuer) -> None:
    verifier = built(issuer).verifier
    for kid in ("rsa-1", "ec-1", "ed-1"):
        token = issuer.mint(kid, groups=["eng"], azp="claude-code")
        admitted = await verifier.verify_token(token)
        assert isinstance(admitted, PatchbayToken), kid
        assert (admitted.kind, admitted.identity, admitted.subject, admitted.client_id) == (
            "jwt",
            "user-1",
            "user-1",
            "claude-code",
        )
        assert admitted.scopes == ["mcp:use"] and admitted.resource == RESOURCE
        assert admitted.claims is not None and admitted.claims["groups"] == ["eng"]
        assert token not in repr(admitted)
    assert issuer.requests.count(issuer.jwks_url) == 1  # the keys are cached


async def test_the_identity_and_scopes_come_from_the_configured_claims(issuer: FakeIssuer) -> None:
    verifier = built(issuer, identity_claim="email").verifier
    admitted = await verifier.verify_token(issuer.mint(email="ann@example.com", scope=None, scp=["a", "b"]))
    assert isinstance(admitted, PatchbayToken)
    assert (admitted.identity, admitted.client_id, admitted.scopes) == (
        "ann@example.com",
        "ann@example.com",
        ["a", "b"],
    )
    assert await verifier.verify_token(issuer.mint()) is None  # no email claim


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"aud": "https://other.example.com/mcp"}, "Audience doesn't match"),
        ({"aud": None}, 'Token is missing the "aud" claim'),
        ({"iss": "https://evil.example.com"}, "Invalid issuer"),
        ({"exp": 1000}, "Signature has expired"),
        ({"exp": None}, 'Token is missing the "exp" claim'),
        ({"nbf": 4102444800}, "The token is not yet valid"),
    ],
)
async def test_claims_that_do_not_hold_are_refused_with_the_reason(
    issuer: FakeIssuer, logs: pytest.LogCaptureFixture, change: dict[str, Any], reason: str
) -> None:
    verifier = built(issuer).verifier
    token = issuer.mint(**change)
    assert await verifier.verify_token(token) is None
    assert f"bearer token refused: {reason}" in logs.text
    assert_no_secret_logged(logs, token)


async def test_the_audience_defaults_to_the_url_and_oauth_audience_replaces_it(issuer: FakeIssuer) -> None:
    assert await built(issuer).verifier.verify_token(issuer.mint(aud=[RESOURCE + "/", "other"])) is not None
    custom = built(issuer, audience="https://api.example.com/patchbay").verifier
    assert await custom.verify_token(issuer.mint(aud="https://api.example.com/patchbay")) is not None
    assert await custom.verify_token(issuer.mint()) is None


async def test_algorithms_outside_the_allow_list_are_refused(
    issuer: FakeIssuer, logs: pytest.LogCaptureFixture
) -> None:
    verifier = built(issuer).verifier
    unsigned = jwt.encode(issuer.claims(), "", algorithm="none", headers={"kid": "rsa-1"})
    hmac_signed = jwt.encode(issuer.claims(), "a-shared-secret-long-enough-for-hs256", algorithm="HS256")
    for token in (unsigned, hmac_signed):
        assert await verifier.verify_token(token) is None
    assert "algorithm 'none' is not in oauth.algorithms" in logs.text
    assert "algorithm 'HS256' is not in oauth.algorithms" in logs.text
    only_ec = built(issuer, algorithms=["ES256"]).verifier
    assert await only_ec.verify_token(issuer.mint("rsa-1")) is None
    assert await only_ec.verify_token(issuer.mint("ec-1")) is not None


async def test_a_key_signs_only_with_its_own_algorithm(issuer: FakeIssuer, logs: pytest.LogCaptureFixture) -> None:
    verifier = built(issuer).verifier
    assert await verifier.verify_token(issuer.mint("rsa-1", alg="PS256")) is None  # the JWK says RS256
    assert "is for RS256, not PS256" in logs.text
    issuer.publish_alg = False  # keys without "alg": the token's algorithm, if the key's type fits
    fresh = built(issuer).verifier
    assert await fresh.verify_token(issuer.mint("rsa-1", alg="PS256")) is not None
    assert await fresh.verify_token(issuer.mint("rsa-1", headers={"kid": "ec-1"})) is None  # wrong key
    forged = issuer.mint("ec-1", headers={"kid": "rsa-1"}, alg="ES256")
    assert await fresh.verify_token(forged) is None  # an RSA key cannot check ES256


async def test_a_signature_by_another_key_is_refused(issuer: FakeIssuer) -> None:
    other = FakeIssuer()
    other.add_key("rsa-1", "rsa", number=1)  # same kid, another key
    verifier = built(issuer).verifier
    assert await verifier.verify_token(other.mint("rsa-1")) is None
    token = issuer.mint()
    header, payload, signature = token.split(".")
    tampered = ".".join((header, payload[:-4] + ("AAAA" if payload[-4:] != "AAAA" else "BBBB"), signature))
    assert await verifier.verify_token(tampered) is None


async def test_a_token_without_kid_needs_a_key_set_of_one(issuer: FakeIssuer, logs: pytest.LogCaptureFixture) -> None:
    key, _ = issuer.keys["ec-1"]
    no_kid = jwt.encode(issuer.claims(), key, algorithm="ES256")
    assert await built(issuer).verifier.verify_token(no_kid) is None
    assert "refused: it names no key (kid)" in logs.text
    assert await built(issuer).verifier.verify_token(issuer.mint("ec-1", headers={"kid": "gone"})) is None
    assert "refused: the issuer has no key 'gone'" in logs.text
    single = FakeIssuer()
    single.add_key("ec-1", "ec")
    assert await built(single).verifier.verify_token(no_kid) is not None


async def test_a_missing_scope_passes_the_verifier_and_the_gate_answers_403(issuer: FakeIssuer) -> None:
    auth = built(issuer, scopes=["mcp:use"])
    admitted = await auth.verifier.verify_token(issuer.mint(scope="other"))
    assert admitted is not None and admitted.scopes == ["other"]
    async with client_for(auth) as (client, calls):
        answer = await client.post("/mcp", headers=bearer(issuer.mint(scope="other")))
        assert answer.status_code == 403 and 'error="insufficient_scope"' in answer.headers["www-authenticate"]
        assert (await client.post("/mcp", headers=bearer(issuer.mint(scope="openid mcp:use")))).status_code == 200
        assert (await client.post("/mcp", headers=bearer(CI))).status_code == 200  # static tokens carry the scopes
        assert calls == ["user-1", "ci"]


# --- the keys: unknown kid, rate limit, JWKS down, discovery -------------------------------


async def test_an_unknown_kid_refetches_the_keys_at_most_once_per_interval(issuer: FakeIssuer) -> None:
    clock = Clock()
    verifier = built(issuer, clock).verifier
    assert await verifier.verify_token(issuer.mint("rsa-1")) is not None
    issuer.add_key("rsa-2", "rsa", number=2)  # the issuer rotates
    clock.advance(auth_module.REFETCH_INTERVAL)
    assert await verifier.verify_token(issuer.mint("rsa-2")) is not None
    assert issuer.requests.count(issuer.jwks_url) == 2
    issuer.add_key("ec-2", "ec", number=2)
    for _ in range(5):  # tokens naming unknown keys cannot make the gateway hammer the issuer
        assert await verifier.verify_token(issuer.mint("ec-2")) is None
    assert issuer.requests.count(issuer.jwks_url) == 2
    clock.advance(auth_module.REFETCH_INTERVAL)
    assert await verifier.verify_token(issuer.mint("ec-2")) is not None
    assert issuer.requests.count(issuer.jwks_url) == 3


async def test_concurrent_requests_share_one_fetch(issuer: FakeIssuer) -> None:
    verifier = built(issuer).verifier
    results: list[object] = []

    async def one() -> None:
        results.append(await verifier.verify_token(issuer.mint("ec-1")))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for _ in range(20):
                tg.start_soon(one)
    assert len(results) == 20 and all(r is not None for r in results)
    assert issuer.requests.count(issuer.jwks_url) == 1


async def test_keys_that_cannot_be_fetched_mean_401_not_a_crash(
    issuer: FakeIssuer, logs: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    auth = built(issuer, clock)
    issuer.down = True
    token = issuer.mint()
    assert await auth.verifier.verify_token(token) is None
    warnings = [r for r in logs.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "signing keys of https://id.example.com cannot be fetched" in warnings[0].message
    assert "every JWT is refused" in warnings[0].message
    async with client_for(auth) as (client, calls):
        assert (await client.post("/mcp", headers=bearer(token))).status_code == 401
        assert (await client.post("/mcp", headers=bearer(ALICE))).status_code == 200  # static tokens still work
        assert calls == ["alice"]
    issuer.down = False
    assert await auth.verifier.verify_token(token) is None  # not before RETRY_AFTER_FAILURE
    clock.advance(auth_module.RETRY_AFTER_FAILURE)
    assert await auth.verifier.verify_token(token) is not None
    issuer.down = True
    clock.advance(auth_module.KEYS_MAX_AGE)  # stale keys, the issuer down: the old keys still serve
    assert await auth.verifier.verify_token(token) is not None
    assert "the keys fetched before still serve" in logs.text
    assert_no_secret_logged(logs, token)


async def test_a_jwks_that_is_not_a_key_set_counts_as_down(issuer: FakeIssuer, logs: pytest.LogCaptureFixture) -> None:
    answers = iter([httpx2.Response(500), httpx2.Response(200, content=b"<html>"), httpx2.Response(200, json={})])
    transport = httpx2.MockTransport(lambda request: next(answers))
    clock = Clock()
    auth = build_auth(
        settings(oauth={"issuer": issuer.issuer, "jwks_url": issuer.jwks_url}),
        RESOURCE,
        transport=transport,
        clock=clock,
    )
    assert auth is not None
    for expected in ("answered 500", "Expecting value", "no 'keys' list"):
        assert await auth.verifier.verify_token(issuer.mint()) is None
        warning = [r for r in logs.records if r.levelno == logging.WARNING][-1]
        assert expected in warning.getMessage()
        clock.advance(auth_module.RETRY_AFTER_FAILURE)


async def test_an_oversized_key_set_is_refused_unread(issuer: FakeIssuer, logs: pytest.LogCaptureFixture) -> None:
    """A key set (or metadata) past FETCH_MAX_BYTES is refused as it streams, not read whole."""
    sent: list[int] = []

    async def endless() -> AsyncIterator[bytes]:
        chunk = b" " * 65_536
        while True:
            sent.append(len(chunk))
            yield chunk

    transport = httpx2.MockTransport(lambda request: httpx2.Response(200, stream=_Body(endless())))
    auth = build_auth(
        settings(oauth={"issuer": issuer.issuer, "jwks_url": issuer.jwks_url}), RESOURCE, transport=transport
    )
    assert auth is not None
    assert await auth.verifier.verify_token(issuer.mint()) is None
    warning = [r for r in logs.records if r.levelno == logging.WARNING][-1]
    assert f"more than {auth_module.FETCH_MAX_BYTES:,} bytes" in warning.getMessage()
    assert sum(sent) <= auth_module.FETCH_MAX_BYTES + 2 * 65_536


class _Body(httpx2.AsyncByteStream):
    def __init__(self, parts: AsyncIterator[bytes]) -> None:
        self._parts = parts

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for part in self._parts:
            yield part


async def test_the_jwks_url_is_found_from_the_issuers_metadata(issuer: FakeIssuer) -> None:
    verifier = built(issuer).verifier  # oauth.jwks_url absent
    assert await verifier.verify_token(issuer.mint()) is not None
    assert issuer.requests == ["https://id.example.com/.well-known/oauth-authorization-server", issuer.jwks_url]


async def test_discovery_falls_back_to_openid_and_inserts_an_issuers_path() -> None:
    issuer = FakeIssuer("https://id.example.com/tenants/acme", metadata="openid-appended")
    issuer.add_key("rsa-1", "rsa")
    verifier = built(issuer).verifier
    assert await verifier.verify_token(issuer.mint()) is not None
    assert issuer.requests == [
        "https://id.example.com/.well-known/oauth-authorization-server/tenants/acme",
        "https://id.example.com/.well-known/openid-configuration/tenants/acme",
        "https://id.example.com/tenants/acme/.well-known/openid-configuration",
        issuer.jwks_url,
    ]
    assert metadata_urls("https://id.example.com/") == [
        "https://id.example.com/.well-known/oauth-authorization-server",
        "https://id.example.com/.well-known/openid-configuration",
    ]


async def test_metadata_naming_another_issuer_is_not_trusted(logs: pytest.LogCaptureFixture) -> None:
    issuer = FakeIssuer(metadata_issuer="https://evil.example.com")
    issuer.add_key("rsa-1", "rsa")
    assert await built(issuer).verifier.verify_token(issuer.mint()) is None
    assert "is for another issuer (set oauth.jwks_url)" in logs.text
    assert issuer.jwks_url not in issuer.requests


async def test_no_metadata_anywhere_says_to_set_the_jwks_url(logs: pytest.LogCaptureFixture) -> None:
    issuer = FakeIssuer(metadata="none")
    issuer.add_key("rsa-1", "rsa")
    assert await built(issuer).verifier.verify_token(issuer.mint()) is None
    assert "no issuer metadata found (set oauth.jwks_url)" in logs.text


# --- the HTTP gate ---------------------------------------------------------------------------


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


class client_for:
    """A starlette app shaped like the gateway's, around an endpoint that records who called."""

    def __init__(self, auth: GatewayAuth) -> None:
        self.calls: list[str] = []

        async def endpoint(scope: Scope, receive: Receive, send: Send) -> None:
            token = get_access_token()
            assert isinstance(token, PatchbayToken)
            self.calls.append(token.identity)
            await PlainTextResponse("mcp")(scope, receive, send)

        async def healthz(request: Request) -> JSONResponse:
            return JSONResponse({"ok": True})

        routes = [Route("/mcp", endpoint=auth.protect(endpoint), methods=["GET", "POST"]), Route("/healthz", healthz)]
        self.app = Starlette(routes=[*routes, *auth.routes], middleware=auth.middleware)
        self.client = httpx2.AsyncClient(
            transport=httpx2.ASGITransport(app=self.app), base_url="https://mcp.example.com"
        )

    async def __aenter__(self) -> tuple[httpx2.AsyncClient, list[str]]:
        await self.client.__aenter__()
        return self.client, self.calls

    async def __aexit__(self, *exc: object) -> None:
        await self.client.__aexit__(None, None, None)


async def test_without_valid_credentials_mcp_answers_401_and_nothing_runs(issuer: FakeIssuer) -> None:
    auth = built(issuer, scopes=["mcp:use"])
    metadata = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
    async with client_for(auth) as (client, calls):
        for headers in ({}, bearer("wrong-token-0123456789"), {"Authorization": f"Basic {ALICE}"}, bearer("")):
            answer = await client.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            assert answer.status_code == 401, headers
            challenge = answer.headers["www-authenticate"]
            assert challenge.startswith("Bearer ") and f'resource_metadata="{metadata}"' in challenge
            assert answer.json()["error"] == "invalid_token"
        assert (await client.get("/mcp", headers=bearer(issuer.mint(exp=1000)))).status_code == 401
        assert calls == []
        assert (await client.get("/healthz")).status_code == 200  # only /mcp is gated
        assert (await client.post("/mcp", headers=bearer(ALICE))).text == "mcp"
        assert (await client.post("/mcp", headers=bearer(issuer.mint(sub="bob")))).status_code == 200
        assert calls == ["alice", "bob"]


async def test_protected_resource_metadata_names_the_issuer_and_the_resource(issuer: FakeIssuer) -> None:
    auth = built(issuer, scopes=["mcp:use", "openid"])
    assert auth.resource_metadata_url == "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
    async with client_for(auth) as (client, _):
        for path in ("/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"):
            answer = await client.get(path, headers={"Origin": "https://claude.ai"})  # browsers may read it
            assert answer.status_code == 200 and answer.headers["access-control-allow-origin"] == "*"
            document = answer.json()
            assert document["resource"] == RESOURCE
            assert document["authorization_servers"] == ["https://id.example.com"]  # exactly the issuer
            assert document["scopes_supported"] == ["mcp:use", "openid"]
            assert document["bearer_methods_supported"] == ["header"]
    assert issuer.requests == []  # serving metadata asks the issuer nothing


async def test_metadata_follows_a_resource_url_with_a_longer_path() -> None:
    auth = build_auth(
        settings(oauth={"issuer": "https://id.example.com"}), "https://gw.example.com/team/mcp", clock=Clock()
    )
    assert auth is not None
    assert auth.resource_metadata_url == "https://gw.example.com/.well-known/oauth-protected-resource/team/mcp"
    assert sorted(route.path for route in auth.routes) == [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource/team/mcp",
    ]


async def test_static_tokens_alone_challenge_with_bearer_and_serve_no_metadata() -> None:
    auth = built()
    assert auth.routes == [] and auth.resource_metadata_url is None
    async with client_for(auth) as (client, calls):
        answer = await client.post("/mcp")
        assert answer.status_code == 401 and answer.headers["www-authenticate"].startswith("Bearer ")
        assert "resource_metadata" not in answer.headers["www-authenticate"]
        assert (await client.get("/.well-known/oauth-protected-resource")).status_code == 404
        assert (await client.post("/mcp", headers=bearer(CI))).status_code == 200
        assert calls == ["ci"]


async def test_a_verifier_that_raises_still_answers_401(monkeypatch: pytest.MonkeyPatch) -> None:
    auth = built()

    def boom(token: str) -> None:
        raise RuntimeError("unexpected")

    monkeypatch.setattr(auth.verifier, "_static", type("S", (), {"match": staticmethod(boom)})())
    async with client_for(auth) as (client, calls):
        assert (await client.post("/mcp", headers=bearer(CI))).status_code == 401
        assert calls == []


# --- the documentation's examples ------------------------------------------------------------


def _readme_gateway_examples() -> list[str]:
    """The JSON examples that have a "gateway" object in docs/GATEWAY.md (the gateway's section of
    the README until it moved there), as written there."""
    page = (Path(__file__).resolve().parent.parent / "docs" / "GATEWAY.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```json\n(.*?)```", page, flags=re.DOTALL)
    return [block for block in blocks if '"gateway"' in block]


README_EXAMPLES = _readme_gateway_examples()


def test_the_readme_shows_both_ways_in() -> None:
    assert any('"tokens"' in text for text in README_EXAMPLES)
    assert any('"oauth"' in text for text in README_EXAMPLES)


@pytest.mark.parametrize("text", README_EXAMPLES)
def test_the_readme_examples_load(text: str, tmp_path: Path) -> None:
    environ = {"ALICE_TOKEN": ALICE, "CI_TOKEN": CI}
    config = parse_config(text, tmp_path / "patchbay.json", environ)
    assert config.gateway is not None
    assert build_auth(config.gateway, config.gateway.url or RESOURCE) is not None
