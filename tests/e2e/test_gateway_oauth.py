"""End to end: the HTTP gateway as an OAuth 2.1 resource server, with a real authorization server
and real OAuth clients, nothing mocked.

- The authorization server is the OAuth world's (``tests/e2e/oauth_world``): panva's
  oidc-provider on loopback, dynamic registration, PKCE S256, RFC 8707 resource indicators
  whose JWT access tokens (RS256, ``kid`` ``e2e-signing-key``) carry the resource as ``aud``,
  ``sub`` ``e2e-user`` and the client's ``client_id``; one confidential client registered
  beforehand (``CLIENT_ID``).
- The gateway is ``mcp-patchbay serve --http 127.0.0.1:PORT CONFIG`` on a port free a moment
  before, ``gateway.url`` its ``/mcp`` and ``gateway.oauth.issuer`` that server, in front of
  ``mcp-server-time`` and a fault_server (``local``). Its ``access`` rules read the tokens'
  claims: the pre-registered client (``client_id``) sees everything, anyone else signed in
  as ``e2e-user`` (``sub``) sees ``time__get_current_time`` only.
- The clients: mcp-patchbay itself, given nothing but the gateway's URL (``login`` by
  discovery, then ``serve`` over stdio driven by the SDK's ``Client``: a call goes through
  both proxies), and the SDK's own ``OAuthClientProvider`` as the pre-registered client.
  Tokens the gateway must refuse (another audience, another issuer, another key, expired...)
  are minted by a plain authorization-code flow with PKCE against the same server.

Every wait is bounded and waits on what the code says: the servers announce themselves (a
line on stdout or stderr, read as it comes, with a deadline), the gateway logs when it is ready,
and every process is stopped on the way out (its exit seen on a pidfd). Nothing waits for a
token's lifetime to run out: the authorization server signs with a key of its own, so the test
cannot mint an expired token the gateway would otherwise accept; it asks that server to issue the
next one already expired (``POST /e2e/expire-next``, ``Issuer.expire_next``).
(``test_gateway_auth`` checks ``exp`` against an injected clock.)
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import select
import subprocess
import sys
import time
from collections.abc import AsyncGenerator, Callable, Generator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import anyio
import httpx2
import jwt
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.client import ConnectMode
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata

from tests.e2e.oauth_world.world import AUTHORIZATION_SERVER, NODE, Announced, browser, browser_urls, missing
from tests.e2e.test_oauth_real import MemoryStorage, assert_no_secret, loopback_callback, patchbay, serving
from tests.e2e_util import (
    ROOT,
    StderrTee,
    alive,
    descendants_of,
    error_info,
    fault_entry,
    result_text,
    start_time,
    stop,
)
from tests.jwt_util import private_key
from tests.processes import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

if (why := missing()) is not None:
    pytest.skip(f"{why}: run scripts/install", allow_module_level=True)

TIME = Path(sys.executable).parent / "mcp-server-time"
if not TIME.exists():
    pytest.skip(f"mcp-server-time missing ({TIME}): run scripts/install", allow_module_level=True)

PATCHBAY = Path(sys.executable).parent / "mcp-patchbay"
CLIENT_ID, CLIENT_SECRET = "gateway-e2e", "e2e-" + "gateway-secret" * 3
"""The client registered with the authorization server beforehand (client_secret_basic)."""
USER = "e2e-user"
"""The ``sub`` of every token the world's authorization server issues."""
SCOPE = "mcp:tools"
START_WITHIN = 30.0
"""Seconds for the gateway to announce itself and for ``/readyz`` to answer 200."""
STOP_WITHIN = 15.0
ACCESS = [
    {"claim": "client_id", "values": [CLIENT_ID], "servers": ["*"]},
    {"claim": "sub", "values": [USER], "servers": ["time"], "tools": {"time": {"allow": ["get_current_time"]}}},
]
EVERYTHING = {"time__get_current_time", "time__convert_time", "local__echo"}
"""Tools the pre-registered client sees (among others of ``local``)."""
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "gateway-oauth-e2e", "version": "0"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
PROTOCOLS = {"auto": "2026-07-28", "legacy": "2025-11-25"}
"""What the SDK's ``Client`` speaks with the gateway in each mode: stateless, and a 2025-era session."""


# --- the authorization server ----------------------------------------------------------------


@dataclass
class Issuer:
    """One oidc-provider process (the OAuth world's authorization server, without its MCP server)."""

    url: str
    events_path: Path
    access_token_ttl: int

    def events(self, event: str) -> list[dict[str, Any]]:
        if not self.events_path.exists():
            return []
        rows = [json.loads(line) for line in self.events_path.read_text().splitlines() if line.strip()]
        return [row for row in rows if row["event"] == event]

    async def expire_next(self, *, ago: int) -> None:
        """The next access token this server issues ran out ``ago`` seconds before it was issued
        (its lifetime unchanged, moved back): the expiry path without waiting for it."""
        async with httpx2.AsyncClient(timeout=10) as http:
            answer = await http.post(f"{self.url}/e2e/expire-next", params={"ago": ago})
        assert answer.status_code == 204, answer.text


@contextmanager
def authorization_server(tmp: Path, *, access_token_ttl: int = 3600) -> Generator[Issuer]:
    """``authorization_server.mjs`` with the pre-registered client; stopped on the way out."""
    assert NODE is not None
    tmp.mkdir(parents=True, exist_ok=True)
    events = tmp / "authorization-server.events"
    command = [NODE, str(AUTHORIZATION_SERVER), "--events", str(events), "--access-token-ttl", str(access_token_ttl)]
    command += ["--client-id", CLIENT_ID, "--client-secret", CLIENT_SECRET]
    server = Announced(command, tmp / "authorization-server.stderr")
    try:
        yield Issuer(server.announced["issuer"], events, access_token_ttl)
    finally:
        server.stop()


def _s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


async def mint(issuer: str, resource: str, *, client: tuple[str, str] | None = None) -> str:
    """An access token for ``resource`` from ``issuer``, by the authorization code flow with
    PKCE S256 (its redirects followed, cookies kept, up to the client's loopback redirect URI,
    which is never fetched). ``client``: the (id, secret) of a client registered beforehand;
    else a public client registered for the occasion (so each token has its own ``client_id``)."""
    redirect_uri = "http://127.0.0.1:9/callback"
    async with httpx2.AsyncClient(timeout=10) as http:
        with anyio.fail_after(30):
            metadata = (await http.get(f"{issuer}/.well-known/openid-configuration")).json()
            if client is None:
                registration = {
                    "redirect_uris": [redirect_uri],
                    "application_type": "native",
                    "token_endpoint_auth_method": "none",
                    "grant_types": ["authorization_code"],
                    "response_types": ["code"],
                }
                registered = await http.post(metadata["registration_endpoint"], json=registration)
                assert registered.status_code == 201, registered.text
                client_id: str = registered.json()["client_id"]
            else:
                client_id = client[0]
            verifier = secrets.token_urlsafe(48)
            query = {
                "client_id": client_id,
                "response_type": "code",
                "redirect_uri": redirect_uri,
                "scope": SCOPE,
                "resource": resource,
                "code_challenge": _s256(verifier),
                "code_challenge_method": "S256",
                "state": secrets.token_urlsafe(16),
            }
            answer = await http.get(metadata["authorization_endpoint"], params=query)
            for _ in range(10):
                assert answer.status_code in (302, 303), (answer.status_code, answer.text)
                location = urljoin(str(answer.url), answer.headers["location"])
                if location.startswith(redirect_uri):
                    break
                answer = await http.get(location)
            else:
                raise AssertionError("the authorization server never redirected to the client")
            code = parse_qs(urlsplit(location).query)["code"][0]
            exchange = {
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": redirect_uri,
                "code_verifier": verifier,
                "resource": resource,
            }
            if client is None:
                token = await http.post(metadata["token_endpoint"], data={**exchange, "client_id": client_id})
            else:  # client_secret_basic
                token = await http.post(metadata["token_endpoint"], data=exchange, auth=client)
            assert token.status_code == 200, token.text
            return token.json()["access_token"]


def _b64(part: dict[str, Any]) -> str:
    """One part of a JWT, as a forger writes it."""
    return base64.urlsafe_b64encode(json.dumps(part).encode()).rstrip(b"=").decode()


def claims_of(token: str) -> dict[str, Any]:
    """A JWT's claims, unverified (to look at what the authorization server put in)."""
    return jwt.decode(token, options={"verify_signature": False})


# --- the gateway ------------------------------------------------------------------------------


@dataclass
class Gateway:
    url: str
    base: str
    process: subprocess.Popen[bytes]
    stderr: Path
    said: Callable[[str, float], bool]
    """``said(text, within)``: whether the gateway wrote a stderr line containing ``text`` within
    ``within`` seconds (False as soon as it has exited without)."""

    def log(self) -> str:
        return self.stderr.read_text(errors="replace")


def _wait_until_said(gateway: Gateway, text: str, what: str) -> None:
    """Wait for the gateway to say ``text``; fail after START_WITHIN seconds or when it exits."""
    if not gateway.said(text, START_WITHIN):
        code = gateway.process.poll()
        why = f"exited with {code}" if code is not None else "did not say it"
        pytest.fail(f"{what}: the gateway {why} within {START_WITHIN:.0f}s\n{gateway.log()[-4000:]}")


def _wait_exited(processes: list[tuple[int, int | None]], within: float) -> list[int]:
    """Wait, on pidfds (readable once a process has exited), for every (pid, start time) to be
    gone; returns the pids still running after ``within`` seconds."""
    pidfds: dict[int, int] = {}
    try:
        for pid, started in processes:
            try:
                pidfds[pid] = os.pidfd_open(pid)
            except ProcessLookupError:
                continue
            if not alive(pid, started):  # gone, a zombie, or the pid names another process now
                os.close(pidfds.pop(pid))
        deadline = time.monotonic() + within
        while pidfds and (left := deadline - time.monotonic()) > 0:
            for fd in select.select(list(pidfds.values()), [], [], left)[0]:
                pid = next(pid for pid, open_fd in pidfds.items() if open_fd == fd)
                os.close(pidfds.pop(pid))
        return list(pidfds)
    finally:
        for fd in pidfds.values():
            os.close(fd)


def _ready(base: str) -> bool:
    try:
        return httpx2.get(f"{base}/readyz", timeout=2).status_code == 200
    except httpx2.HTTPError:
        return False


@contextmanager
def running_gateway(tmp: Path, issuer: str, *, access: list[dict[str, Any]] | None = None) -> Generator[Gateway]:
    """``mcp-patchbay serve --http 127.0.0.1:PORT CONFIG`` with ``oauth.issuer`` = ``issuer``,
    ready (its announcement on stderr, then ``/readyz`` 200); SIGTERM on the way out, and it must
    exit 0 (drained), its upstreams' processes gone with it."""
    tmp.mkdir(parents=True, exist_ok=True)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    url = f"{base}/mcp"
    gateway_settings: dict[str, Any] = {"url": url, "oauth": {"issuer": issuer}, "drain_grace": 2}
    if access is not None:
        gateway_settings["access"] = access
    config = tmp / "gateway.json"
    servers = {"time": {"command": str(TIME), "args": ["--local-timezone", "UTC"]}, "local": fault_entry("local")}
    settings = {"startup_wait": 20, "connect_timeout": 20, "watch": False}
    config.write_text(json.dumps({"mcpServers": servers, "patchbay": settings, "gateway": gateway_settings}, indent=1))
    command = [str(PATCHBAY)] if PATCHBAY.exists() else [sys.executable, "-m", "mcp_patchbay"]
    command += ["serve", "--http", f"127.0.0.1:{port}", str(config), "--log-level", "INFO"]
    stderr = tmp / "gateway.stderr"
    process = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT
    )
    assert process.stderr is not None
    tee = StderrTee(process.stderr, stderr)
    gateway = Gateway(url, base, process, stderr, tee.said)
    try:
        _wait_until_said(gateway, f"mcp-patchbay: serving MCP at {url}", "the announcement")
        _wait_until_said(gateway, "mcp_patchbay.gateway.app: ready: ", "readiness")  # logged once /readyz says 200
        assert _ready(base)
        upstreams = [(pid, start_time(pid)) for pid in descendants_of(process.pid)]
        assert len(upstreams) >= 2, upstreams  # mcp-server-time and the fault_server
        yield gateway
    finally:
        if not stop(process, STOP_WITHIN):
            pytest.fail(f"the gateway did not stop within {STOP_WITHIN:.0f}s of SIGTERM")
    tee.join(STOP_WITHIN)
    assert process.returncode == 0, gateway.log()[-4000:]
    left = _wait_exited(upstreams, STOP_WITHIN)
    assert not left, f"upstream processes {left} outlived the gateway"


@pytest.fixture(scope="module")
def issuer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Issuer]:
    with authorization_server(tmp_path_factory.mktemp("issuer")) as server:
        yield server


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, issuer: Issuer) -> Iterator[Gateway]:
    with running_gateway(tmp_path_factory.mktemp("gateway"), issuer.url, access=ACCESS) as running:
        yield running


async def post(gateway: Gateway, token: str | None) -> httpx2.Response:
    """An ``initialize`` POST to ``/mcp``, with ``token`` as the bearer if any."""
    headers = dict(MCP_HEADERS)
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    async with httpx2.AsyncClient(timeout=10) as http:
        with anyio.fail_after(20):
            return await http.post(gateway.url, json=INITIALIZE, headers=headers)


@asynccontextmanager
async def connected(gateway: Gateway, token: str, mode: ConnectMode = "legacy") -> AsyncGenerator[Client]:
    """The SDK's ``Client`` on the gateway, sending ``token`` as it is (no sign-in of its own)."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        async with Client(streamable_http_client(gateway.url, http_client=http), mode=mode, cache=None) as client:
            yield client


async def in_session(gateway: Gateway, session: str, token: str, message: dict[str, Any]) -> httpx2.Response:
    """One POST of ``message`` in the 2025-era session ``session``, with ``token`` as the bearer."""
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {token}", "Mcp-Session-Id": session}
    headers["MCP-Protocol-Version"] = PROTOCOLS["legacy"]
    async with httpx2.AsyncClient(timeout=10) as http:
        with anyio.fail_after(20):
            return await http.post(gateway.url, json=message, headers=headers)


# --- the tests --------------------------------------------------------------------------------


async def test_without_a_token_the_gateway_points_at_its_authorization_server(gateway: Gateway, issuer: Issuer) -> None:
    refused = await post(gateway, None)
    assert refused.status_code == 401, refused.text
    challenge = refused.headers["www-authenticate"]
    assert challenge.startswith("Bearer ") and 'resource_metadata="' in challenge, challenge
    metadata_url = challenge.split('resource_metadata="', 1)[1].split('"', 1)[0]
    assert metadata_url.startswith(f"{gateway.base}/.well-known/oauth-protected-resource"), metadata_url

    async with httpx2.AsyncClient(timeout=10) as http:
        with anyio.fail_after(20):
            named = await http.get(metadata_url)
            root = await http.get(f"{gateway.base}/.well-known/oauth-protected-resource")
            streamed = await http.get(gateway.url, headers={"Accept": "text/event-stream"})
            garbage = await http.post(
                gateway.url, json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": "Bearer not-a-token"}
            )
            healthy = await http.get(f"{gateway.base}/healthz")
    for answer in (named, root):
        assert answer.status_code == 200, answer.text
        document = answer.json()
        assert document["authorization_servers"] == [issuer.url], document
        assert document["resource"] == gateway.url, document
    assert streamed.status_code == 401 and garbage.status_code == 401
    assert 'resource_metadata="' in garbage.headers["www-authenticate"]
    assert healthy.status_code == 200  # the probes need no token


async def test_patchbay_signs_in_by_discovery_and_calls_through_both_proxies(
    gateway: Gateway, issuer: Issuer, tmp_path: Path
) -> None:
    """mcp-patchbay as the gateway's OAuth client, knowing only its URL: ``login`` finds the
    authorization server from the gateway's 401 and metadata, registers itself, signs in (the
    headless browser approves) for the gateway as the resource; ``serve`` over stdio lists and
    calls the gateway's tools, as the ``access`` rule for ``sub`` allows."""
    config = tmp_path / "client.json"
    settings = {"startup_wait": 10, "connect_timeout": 20, "watch": False}
    config.write_text(json.dumps({"mcpServers": {"team": {"url": gateway.url}}, "patchbay": settings}))
    registrations = len(issuer.events("registration"))

    check = await patchbay(tmp_path, "check", str(config))
    assert check.code == 1 and "needs sign-in" in check.stdout, check.output
    login = await patchbay(tmp_path, "login", "team", "--config", str(config))
    assert login.code == 0, login.output
    assert len(browser_urls(tmp_path)) == 1
    [registration] = issuer.events("registration")[registrations:]
    assert registration["status"] == 201  # dynamic registration: no client was configured
    authorization = issuer.events("authorization")[-1]
    assert authorization["resource"] == gateway.url, authorization  # RFC 8707: the gateway, from its metadata
    assert authorization["code_challenge_method"] == "S256", authorization

    async with serving(tmp_path, config) as proxy:
        names = await proxy.names()
        assert names == {"team__time__get_current_time"}, names
        now = json.loads(result_text(await proxy.ok("team__time__get_current_time", {"timezone": "UTC"})))
        assert now["timezone"] == "UTC" and now["datetime"].endswith("+00:00"), now
        hidden = await proxy.call("team__local__echo", {"text": "not mine"})
        assert error_info(hidden)["code"] == "TOOL_NOT_FOUND", hidden  # the outer proxy never listed it
        written = proxy.written()

    assert_no_secret(tmp_path, written, login.output, gateway.log())


async def test_the_sdks_oauth_client_signs_in_to_the_gateway(gateway: Gateway, issuer: Issuer, tmp_path: Path) -> None:
    """The SDK's ``OAuthClientProvider`` as the pre-registered client: it discovers the
    authorization server from the gateway, signs in with PKCE for the gateway's URL, and (its
    ``client_id`` matching the broad rule) sees and calls every server's tools, on the
    stateless protocol and in a 2025-era session."""
    command = str(browser(tmp_path))
    async with loopback_callback() as (port, wait_for_callback):

        async def open_browser(url: str) -> None:
            with anyio.fail_after(30):
                done = await anyio.run_process([command, url], check=False)
            assert done.returncode == 0, done.stderr.decode()

        redirect_uri = f"http://127.0.0.1:{port}/callback"
        metadata = OAuthClientMetadata(
            redirect_uris=[redirect_uri],  # pyright: ignore[reportArgumentType]
            grant_types=["authorization_code", "refresh_token"],
            token_endpoint_auth_method="client_secret_basic",
            client_name="sdk client",
        )
        storage = MemoryStorage()
        storage.client = OAuthClientInformationFull(
            client_id=CLIENT_ID,
            client_secret=CLIENT_SECRET,
            redirect_uris=[redirect_uri],  # pyright: ignore[reportArgumentType]
            grant_types=["authorization_code", "refresh_token"],
            token_endpoint_auth_method="client_secret_basic",
        )
        provider = OAuthClientProvider(gateway.url, metadata, storage, open_browser, wait_for_callback)
        async with httpx2.AsyncClient(auth=provider, timeout=30) as http:
            for mode in ("auto", "legacy"):
                with anyio.fail_after(60):
                    async with Client(streamable_http_client(gateway.url, http_client=http), mode=mode) as client:
                        assert client.protocol_version == PROTOCOLS[mode], (mode, client.protocol_version)
                        names = {t.name for t in (await client.list_tools()).tools}
                        assert names >= EVERYTHING, (mode, names)
                        echoed = await client.call_tool("local__echo", {"text": f"through oauth ({mode})"})
                        assert result_text(echoed) == f"through oauth ({mode})", echoed
                        converted = await client.call_tool(
                            "time__convert_time",
                            {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Europe/Paris"},
                        )
                        assert not converted.is_error, converted

    assert len(browser_urls(tmp_path)) == 1  # one sign-in served both connections
    assert storage.tokens is not None
    claims = claims_of(storage.tokens.access_token)
    assert claims["aud"] == gateway.url and claims["client_id"] == CLIENT_ID and claims["iss"] == issuer.url, claims
    authorization = issuer.events("authorization")[-1]
    assert authorization["client_id"] == CLIENT_ID and authorization["resource"] == gateway.url, authorization


async def test_access_rules_read_the_tokens_claims(gateway: Gateway, issuer: Issuer) -> None:
    """Same person, two clients: a token of the pre-registered client (its ``client_id`` matches
    the broad rule) sees every server; a token of a client registered on the fly matches only
    the rule for ``sub``: one tool listed, and the others answer as missing if called by name."""
    narrow = await mint(issuer.url, gateway.url)
    broad = await mint(issuer.url, gateway.url, client=(CLIENT_ID, CLIENT_SECRET))
    assert claims_of(narrow)["sub"] == claims_of(broad)["sub"] == USER
    assert claims_of(narrow)["client_id"] != CLIENT_ID and claims_of(broad)["client_id"] == CLIENT_ID

    for mode in PROTOCOLS:
        with anyio.fail_after(60):
            async with connected(gateway, narrow, mode) as client:
                names = {t.name for t in (await client.list_tools()).tools}
                assert names == {"time__get_current_time"}, (mode, names)
                now = await client.call_tool("time__get_current_time", {"timezone": "UTC"})
                assert not now.is_error, now
                for hidden, arguments in (("local__echo", {"text": "x"}), ("time__convert_time", {})):
                    refused = await client.call_tool(hidden, arguments)
                    # Answered as a tool that does not exist: nothing tells a hidden tool from a missing one.
                    assert error_info(refused)["code"] == "TOOL_NOT_FOUND", (mode, hidden, refused)
            async with connected(gateway, broad, mode) as client:
                names = {t.name for t in (await client.list_tools()).tools}
                assert names >= EVERYTHING and len(names) > len(EVERYTHING), (mode, names)
                assert result_text(await client.call_tool("local__echo", {"text": "mine"})) == "mine"


async def test_a_session_answers_only_the_credential_that_opened_it(gateway: Gateway, issuer: Issuer) -> None:
    """A 2025-era session opened with one client's token goes on with another token of that
    client (a refreshed one: same client, person and issuer), and is not found for another client."""
    opener = await mint(issuer.url, gateway.url, client=(CLIENT_ID, CLIENT_SECRET))
    renewed = await mint(issuer.url, gateway.url, client=(CLIENT_ID, CLIENT_SECRET))
    stranger = await mint(issuer.url, gateway.url)
    assert len({opener, renewed, stranger}) == 3

    opened = await post(gateway, opener)
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    initialized = await in_session(gateway, session, opener, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert initialized.status_code == 202, initialized.text
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    assert (await in_session(gateway, session, renewed, ping)).status_code == 200
    hijack = await in_session(gateway, session, stranger, ping)
    assert hijack.status_code == 404, hijack.text
    assert (await in_session(gateway, session, opener, ping)).status_code == 200  # unharmed


async def test_the_gateway_refuses_tokens_it_must_not_take(gateway: Gateway, issuer: Issuer, tmp_path: Path) -> None:
    good = await mint(issuer.url, gateway.url)
    accepted = await post(gateway, good)
    assert accepted.status_code == 200, accepted.text  # the refusals below are the token's doing

    header = jwt.get_unverified_header(good)
    claims = claims_of(good)
    now = int(time.time())
    forged_claims = {**claims, "iat": now, "exp": now + 600}
    other_key = private_key("rsa", 7)
    head, _, signature = good.split(".")
    other_port = free_port()

    refused: dict[str, str] = {
        "for another resource of the same issuer": await mint(issuer.url, f"http://127.0.0.1:{other_port}/mcp"),
        "its claims changed after signing": f"{head}.{_b64({**claims, 'sub': 'admin'})}.{signature}",
        "signed by another key under the issuer's kid": jwt.encode(
            forged_claims, other_key, algorithm="RS256", headers={"kid": header["kid"], "typ": "at+jwt"}
        ),
        "signed by a key the issuer does not have": jwt.encode(
            forged_claims, other_key, algorithm="RS256", headers={"kid": "not-the-issuers", "typ": "at+jwt"}
        ),
        "unsigned (alg none)": f"{_b64({'alg': 'none', 'typ': 'at+jwt'})}.{_b64(forged_claims)}.",
        "signed with HMAC": jwt.encode(forged_claims, "k" * 32, algorithm="HS256"),
    }
    with authorization_server(tmp_path / "second-issuer") as second:
        refused["from another issuer, for the gateway"] = await mint(second.url, gateway.url)
    assert claims_of(refused["from another issuer, for the gateway"])["aud"] == gateway.url

    for why, token in refused.items():
        answer = await post(gateway, token)
        assert answer.status_code == 401, (why, answer.status_code, answer.text)
        assert 'resource_metadata="' in answer.headers["www-authenticate"], why
    assert (await post(gateway, good)).status_code == 200  # still: nothing above spoiled the keys

    log = gateway.log()
    for reason in ("Audience doesn't match", "Signature verification failed", "has no key", "'none'", "'HS256'"):
        assert reason in log, (reason, log[-4000:])
    for token in (good, *refused.values()):
        assert token not in log


async def test_an_expired_token_is_refused(gateway: Gateway, issuer: Issuer) -> None:
    """A token of the issuer's, for the gateway, refused once its ``exp`` has passed: one issued
    already expired 2 s ago (within the JWT library's leeway, so the gateway's own check of ``exp``
    is the one that refuses it), beside one just like it that has not."""
    accepted = await post(gateway, await mint(issuer.url, gateway.url))
    assert accepted.status_code == 200, accepted.text
    await issuer.expire_next(ago=2)
    token = await mint(issuer.url, gateway.url)
    expires_at = claims_of(token)["exp"]
    assert expires_at - claims_of(token)["iat"] == issuer.access_token_ttl
    assert expires_at < time.time()
    expired = await post(gateway, token)
    assert expired.status_code == 401, expired.text
    assert 'resource_metadata="' in expired.headers["www-authenticate"]
    assert gateway.said("refused: it expired", 10)  # by the gateway's own check of exp, logged as it answers
    assert (await post(gateway, await mint(issuer.url, gateway.url))).status_code == 200
