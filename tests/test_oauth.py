"""The OAuth pieces in memory: the stored sign-in, the served connection's auth flow, the
loopback listener, the config key and the command line. The whole flow against real
authorization servers is in tests/e2e (test_oauth_real, test_oauth_conformance)."""

from __future__ import annotations

import json
import stat
import time
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import OAuthClientInformationFull, OAuthMetadata, OAuthToken

from mcp_patchbay.cli import UsageError, parse_options
from mcp_patchbay.config import OAuthSettings, parse_config
from mcp_patchbay.errors.tree import Code, UpstreamError
from mcp_patchbay.oauth.loopback import loopback
from mcp_patchbay.oauth.provider import UpstreamAuth
from mcp_patchbay.oauth.store import TokenStore, file_for

pytestmark = pytest.mark.anyio

URL = "https://mcp.example/mcp"


@pytest.fixture
def store(tmp_path: Path) -> TokenStore:
    return TokenStore(URL, file_for(URL, tmp_path / "oauth"))


# --- the stored sign-in ------------------------------------------------------------------


async def test_the_store_writes_one_private_file_per_url(store: TokenStore, tmp_path: Path) -> None:
    assert store.version() == 0 and not store.signed_in()
    await store.set_tokens(OAuthToken(access_token="secret-a", expires_in=3600, refresh_token="secret-r"))
    await store.set_client_info(OAuthClientInformationFull(client_id="c1", redirect_uris=None))
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(store.path.parent.stat().st_mode) == 0o700
    assert store.path.name.startswith("mcp.example-")
    assert file_for("https://other.example/mcp", tmp_path / "oauth") != store.path
    tokens = await store.get_tokens()
    assert tokens is not None and tokens.access_token == "secret-a"
    expires = store.expires_at()
    assert expires is not None and 3590 < expires - time.time() <= 3600
    info = await store.get_client_info()
    assert info is not None and info.client_id == "c1"
    assert store.version() != 0
    assert not list(store.path.parent.glob(".*.tmp"))  # written whole, then renamed


async def test_forgetting_the_client_keeps_the_tokens_and_forget_removes_all(store: TokenStore) -> None:
    await store.set_tokens(OAuthToken(access_token="a", scope="mcp:basic"))
    await store.set_client_info(OAuthClientInformationFull(client_id="c1"))
    store.forget_client()
    assert store.client_info() is None and store.signed_in()
    assert store.forget() and not store.path.exists() and not store.forget()


async def test_a_file_for_another_url_or_unreadable_counts_as_none(store: TokenStore) -> None:
    store.path.parent.mkdir(parents=True)
    store.path.write_text(json.dumps({"server_url": "https://else/mcp", "tokens": {"access_token": "x"}}))
    assert store.tokens() is None
    store.path.write_text("{not json")
    assert store.tokens() is None and store.client_info() is None


# --- the served connection's flow ----------------------------------------------------------


def served(store: TokenStore, oauth: OAuthSettings | None = None) -> UpstreamAuth:
    return UpstreamAuth(URL, store, oauth, "http://127.0.0.1/callback", interactive=False)


class Upstream:
    """An MCP endpoint and its authorization server, as an httpx transport that records what it got."""

    def __init__(self, answers: list[httpx2.Response]) -> None:
        self.answers = answers
        self.seen: list[httpx2.Request] = []
        self.refuse_refresh = False

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.seen.append(request)
        if request.url.path == "/token":
            body = request.content.decode()
            if "grant_type=refresh_token" in body and not self.refuse_refresh:
                return httpx2.Response(200, json={"access_token": "fresh", "expires_in": 3600, "refresh_token": "r2"})
            return httpx2.Response(400, json={"error": "invalid_grant"})
        return self.answers.pop(0)


@pytest.fixture
async def client_for() -> AsyncGenerator[Any, None]:
    clients: list[httpx2.AsyncClient] = []

    def make(auth: httpx2.Auth, upstream: Upstream) -> httpx2.AsyncClient:
        client = httpx2.AsyncClient(auth=auth, transport=httpx2.MockTransport(upstream))
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.aclose()


BEARER = {"www-authenticate": 'Bearer resource_metadata="https://mcp.example/.well-known/oauth-protected-resource"'}


async def test_no_token_and_a_bearer_challenge_is_noted_and_the_refusal_returned(
    store: TokenStore, client_for: Any
) -> None:
    auth = served(store)
    upstream = Upstream([httpx2.Response(401, headers=BEARER)])
    response = await client_for(auth, upstream).post(URL, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert response.status_code == 401  # the request's own answer: no discovery, no browser
    assert [r.url.path for r in upstream.seen] == ["/mcp"]
    assert auth.challenge is not None and auth.challenge.status == 401 and not auth.challenge.step_up


async def test_a_token_near_expiry_is_refreshed_before_the_request(store: TokenStore, client_for: Any) -> None:
    await store.set_tokens(OAuthToken(access_token="old", expires_in=3600, refresh_token="r1"))
    await store.set_client_info(OAuthClientInformationFull(client_id="c1"))
    store.set_metadata(metadata(), None)
    stored = json.loads(store.path.read_text())
    store.path.write_text(json.dumps({**stored, "expires_at": time.time() + 20}))  # an hour's token, 20 s left
    auth = served(store)
    upstream = Upstream([httpx2.Response(200, json={"jsonrpc": "2.0", "id": 1, "result": {}})])
    response = await client_for(auth, upstream).post(URL, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert response.status_code == 200
    assert [r.url.path for r in upstream.seen] == ["/token", "/mcp"]
    assert upstream.seen[1].headers["authorization"] == "Bearer fresh"
    stored = store.tokens()
    assert stored is not None and stored.access_token == "fresh" and stored.refresh_token == "r2"


async def test_a_401_with_a_valid_looking_token_refreshes_once_then_resends(store: TokenStore, client_for: Any) -> None:
    await store.set_tokens(OAuthToken(access_token="revoked", expires_in=3600, refresh_token="r1"))
    await store.set_client_info(OAuthClientInformationFull(client_id="c1"))
    store.set_metadata(metadata(), None)
    auth = served(store)
    ok = httpx2.Response(200, json={"jsonrpc": "2.0", "id": 1, "result": {}})
    upstream = Upstream([httpx2.Response(401, headers=BEARER), ok])
    response = await client_for(auth, upstream).post(URL, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert response.status_code == 200 and auth.challenge is None
    assert [r.url.path for r in upstream.seen] == ["/mcp", "/token", "/mcp"]
    assert upstream.seen[-1].headers["authorization"] == "Bearer fresh"


async def test_a_step_up_names_its_scope_and_a_covered_one_is_not_a_sign_in(store: TokenStore, client_for: Any) -> None:
    await store.set_tokens(OAuthToken(access_token="t", expires_in=3600, scope="mcp:basic"))
    auth = served(store)
    wider = {"www-authenticate": 'Bearer error="insufficient_scope", scope="mcp:basic mcp:write"'}
    same = {"www-authenticate": 'Bearer error="insufficient_scope", scope="mcp:basic"'}
    upstream = Upstream([httpx2.Response(403, headers=wider), httpx2.Response(403, headers=same)])
    client = client_for(auth, upstream)
    assert (await client.post(URL, json={})).status_code == 403
    assert auth.challenge is not None and auth.challenge.step_up and auth.challenge.scope == "mcp:basic mcp:write"
    auth.challenge = None
    assert (await client.post(URL, json={})).status_code == 403
    assert auth.challenge is None and auth.challenge_covered


async def test_a_sign_in_elsewhere_is_picked_up_by_the_next_request(store: TokenStore, client_for: Any) -> None:
    ok = httpx2.Response(200, json={})
    auth = served(store)
    upstream = Upstream([httpx2.Response(401, headers=BEARER), ok])
    client = client_for(auth, upstream)
    assert (await client.post(URL, json={})).status_code == 401
    await TokenStore(URL, store.path).set_tokens(OAuthToken(access_token="from-login", expires_in=3600))
    assert (await client.post(URL, json={})).status_code == 200
    assert upstream.seen[-1].headers["authorization"] == "Bearer from-login"


async def test_a_pre_registered_client_authenticates_as_the_server_accepts(store: TokenStore) -> None:
    oauth = OAuthSettings(client_id="pre", client_secret="s3cret")
    auth = served(store, oauth)
    await auth._initialize()  # pyright: ignore[reportPrivateUsage]
    info = auth.context.client_info
    assert info is not None and info.client_id == "pre"
    auth.context.oauth_metadata = metadata(token_endpoint_auth_methods_supported=["client_secret_post"])
    auth._settle_auth_method()  # pyright: ignore[reportPrivateUsage]
    assert info.token_endpoint_auth_method == "client_secret_post"


def metadata(**more: Any) -> OAuthMetadata:
    return OAuthMetadata.model_validate(
        {
            "issuer": "https://mcp.example",
            "authorization_endpoint": "https://mcp.example/authorize",
            "token_endpoint": "https://mcp.example/token",
            **more,
        }
    )


async def test_a_refused_refresh_returns_the_resources_own_refusal(store: TokenStore, client_for: Any) -> None:
    await store.set_tokens(OAuthToken(access_token="revoked", expires_in=3600, refresh_token="bad"))
    await store.set_client_info(OAuthClientInformationFull(client_id="c1"))
    store.set_metadata(metadata(), None)
    auth = served(store)
    upstream = Upstream([httpx2.Response(401, headers=BEARER), httpx2.Response(401, headers=BEARER)])
    upstream.refuse_refresh = True
    response = await client_for(auth, upstream).post(URL, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert response.status_code == 401 and response.request.url.path == "/mcp"  # not the token endpoint's 400
    assert [r.url.path for r in upstream.seen] == ["/mcp", "/token", "/mcp"]
    assert "authorization" not in upstream.seen[-1].headers
    assert auth.challenge is not None and auth.challenge.status == 401


async def test_a_refresh_cancelled_midway_leaves_the_connection_usable(store: TokenStore, client_for: Any) -> None:
    await store.set_tokens(OAuthToken(access_token="revoked", expires_in=3600, refresh_token="r1"))
    await store.set_client_info(OAuthClientInformationFull(client_id="c1"))
    store.set_metadata(metadata(), None)
    auth = served(store)
    at_token, answer = anyio.Event(), anyio.Event()

    async def handler(request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/token":
            at_token.set()
            await answer.wait()
            return httpx2.Response(200, json={"access_token": "fresh", "expires_in": 3600})
        ok = request.headers.get("authorization") == "Bearer fresh"
        return httpx2.Response(200 if ok else 401, headers={} if ok else BEARER, json={})

    client = httpx2.AsyncClient(auth=auth, transport=httpx2.MockTransport(handler))
    async with client, anyio.create_task_group() as tg:
        tg.start_soon(client.post, URL)
        with anyio.fail_after(5):
            await at_token.wait()
        tg.cancel_scope.cancel()  # the call is abandoned while the refresh holds the lock
    answer.set()
    async with httpx2.AsyncClient(auth=auth, transport=httpx2.MockTransport(handler)) as again:
        with anyio.fail_after(5):
            assert (await again.post(URL)).status_code == 200


def test_the_sdk_provider_members_upstream_auth_relies_on_are_present() -> None:
    """UpstreamAuth overrides or calls these protected members of the SDK's provider: an SDK
    upgrade that moves one must fail here, not in a user's sign-in."""
    for name in (
        "_initialize",
        "_auth_flow",
        "_refresh_token",
        "_handle_refresh_response",
        "_handle_token_response",
        "_exchange_token_authorization_code",
        "_add_auth_header",
    ):
        assert callable(getattr(OAuthClientProvider, name, None)), name
    auth = served(TokenStore(URL, Path("/nonexistent/x.json")))
    assert hasattr(auth, "_initialized") and hasattr(auth.context, "lock")


# --- the loopback listener -----------------------------------------------------------------


async def test_the_loopback_takes_the_code_and_reports_a_denial() -> None:
    async with loopback("svc", None) as site:
        assert site.redirect_uri.startswith("http://127.0.0.1:") and site.redirect_uri.endswith("/callback")
        async with httpx2.AsyncClient() as browser:
            assert (await browser.get(site.redirect_uri.replace("/callback", "/favicon.ico"))).status_code == 404
            page = await browser.get(site.redirect_uri, params={"code": "c0de", "state": "s1"})
            assert page.status_code == 200 and "signed in to svc" in page.text
            with anyio.fail_after(5):
                result = await site.result()
            assert (result.code, result.state) == ("c0de", "s1")
    async with loopback("svc", None) as site:
        site.expect("https://as.example/authorize?client_id=c&state=s1&code_challenge=x")
        async with httpx2.AsyncClient() as browser:
            # Another page cannot end the sign-in: a callback with another state is refused.
            forged = await browser.get(site.redirect_uri, params={"error": "access_denied", "state": "other"})
            assert forged.status_code == 400
            await browser.get(site.redirect_uri, params={"error": "access_denied", "state": "s1"})
        with pytest.raises(UpstreamError) as denied, anyio.fail_after(5):
            await site.result()
    assert denied.value.code is Code.AUTH_DENIED and len(denied.value.message) < 500


# --- config and command line ---------------------------------------------------------------


def test_the_oauth_key_in_a_config(tmp_path: Path) -> None:
    config = parse_config(
        json.dumps(
            {
                "mcpServers": {
                    "a": {"url": "https://a/mcp", "oauth": {"client_id": "c", "scope": "r w", "callback_port": 8765}},
                    "b": {"url": "https://b/mcp", "oauth": False},
                    "c": {"url": "https://c/mcp", "headers": {"Authorization": "Bearer k"}},
                    "d": {"url": "https://d/mcp", "oauth": {"scpe": "x"}},
                    "e": {"url": "https://e/mcp", "oauth": {"client_metadata_url": "http://e/doc.json"}},
                    "f": {"command": "x", "oauth": {}},
                }
            }
        ),
        tmp_path / "patchbay.json",
    )
    entries = {e.name: e for e in config.servers}
    a = entries["a"].spec
    assert a is not None and a.oauth and a.oauth.callback_port == 8765 and a.signs_in  # type: ignore[union-attr]
    assert not entries["b"].spec.signs_in  # type: ignore[union-attr]
    assert not entries["c"].spec.signs_in  # type: ignore[union-attr]  # a static token: no sign-in unless asked
    assert entries["d"].problem == "mcpServers.d.oauth: unknown key 'scpe' (did you mean 'scope'?)"
    assert "client_metadata_url: expected an https:// URL" in (entries["e"].problem or "")
    assert "'oauth' applies only to remote servers" in (entries["f"].problem or "")


def test_the_configured_scope_stays_when_a_challenge_names_another() -> None:
    from mcp_patchbay.oauth.provider import client_metadata

    metadata = client_metadata("http://127.0.0.1:1/callback", OAuthSettings(scope="read:custom"))
    metadata.scope = "mcp:tools"  # what the SDK's flow does with the challenge's scope
    assert set((metadata.scope or "").split()) == {"read:custom", "mcp:tools"}
    metadata.scope = None
    assert metadata.scope == "read:custom"


def test_login_and_logout_take_the_server_then_the_config() -> None:
    options = parse_options(["login", "github", "--config", "cfg.json"], {})
    assert (options.command, options.server, options.config) == ("login", "github", "cfg.json")
    options = parse_options(["logout", "github", "cfg.json"], {})
    assert (options.command, options.server, options.config) == ("logout", "github", "cfg.json")
    with pytest.raises(UsageError, match="needs the server's name"):
        parse_options(["login"], {})


async def test_a_transient_refresh_failure_is_not_a_sign_in(store: TokenStore, client_for: Any) -> None:
    """An expired token whose refresh gets a 503: the server's 401 is the authorization server's
    passing trouble (retried with backoff, gate.judge), not a reason to open a browser."""
    await store.set_tokens(OAuthToken(access_token="old", expires_in=3600, refresh_token="r1"))
    await store.set_client_info(OAuthClientInformationFull(client_id="c1"))
    store.set_metadata(metadata(), None)
    stored = json.loads(store.path.read_text())
    store.path.write_text(json.dumps({**stored, "expires_at": time.time() - 10}))
    auth = served(store)

    def handler(request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/token":
            return httpx2.Response(503, json={"error": "temporarily_unavailable"})
        return httpx2.Response(401, headers=BEARER)

    async with httpx2.AsyncClient(auth=auth, transport=httpx2.MockTransport(handler)) as client:
        assert (await client.post(URL, json={})).status_code == 401
    assert auth.refresh_trouble == 503 and auth.challenge is None


def test_credentials_quoted_by_a_library_are_cut_from_logs() -> None:
    from mcp_patchbay.redaction import redact

    text = redact(
        "Invalid token response: input_value={'access_token': 'gho_A1', 'scope': 'repo'} "
        'body {"refresh_token": "rt-9", "client_secret": "s3"} form access_token=at-1&x=1'
    )
    assert not any(secret in text for secret in ("gho_A1", "rt-9", "s3", "at-1")), text
    assert "'scope': 'repo'" in text


def test_a_404_that_names_the_method_is_not_a_lost_session() -> None:
    """Only a 404 whose JSON-RPC error is about the session (on a request that carried one)
    rebuilds the session; "Method not found" with 404 is the server's answer, passed on."""
    import mcp_types as types
    from mcp.shared.message import SessionMessage

    from mcp_patchbay.errors.foreign import HTTP_STATUS_KEY
    from mcp_patchbay.upstreams.transports.http import HttpStatuses

    async def stamped(code: int, message: str, session: bool) -> types.ErrorData:
        statuses = HttpStatuses()
        headers = {"mcp-session-id": "s1"} if session else {}
        request = httpx2.Request("POST", URL, headers=headers, json={"jsonrpc": "2.0", "id": 7, "method": "x"})
        await statuses.hook(httpx2.Response(404, request=request))
        answer = SessionMessage(
            types.JSONRPCError(jsonrpc="2.0", id=7, error=types.ErrorData(code=code, message=message))
        )
        out = statuses.stamp(answer)
        assert isinstance(out, SessionMessage) and isinstance(out.message, types.JSONRPCError)
        return out.message.error

    async def run() -> None:
        lost = await stamped(-32600, "Session not found", session=True)
        assert lost.message == "Session terminated" and (lost.data or {})[HTTP_STATUS_KEY] == 404
        assert (await stamped(-32601, "Method not found", session=True)).message == "Method not found"
        assert (await stamped(-32600, "Session not found", session=False)).message == "Session not found"

    anyio.run(run)
