"""End to end: sign-in to a real OAuth-protected MCP server through a real authorization server.

The world (``tests/e2e/oauth_world``, all on loopback): panva's oidc-provider as the
authorization server (OpenID discovery, dynamic client registration, PKCE S256 required,
RFC 8707 resource indicators with JWT access tokens, refresh tokens, interactions that
approve at once) and an MCP server on the SDK that accepts only its tokens for its own URL.
``BROWSER`` is a headless browser that fetches the authorization URL and follows the
redirects to the proxy's loopback callback, as a person's browser does once they approve.

The proxy is run as a user runs it: ``mcp-patchbay login|logout|check`` as commands, and
``python -m mcp_patchbay CONFIG`` over stdio driven by the SDK's ``Client``, each with its
own ``XDG_DATA_HOME`` (where tokens are kept).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from tests.e2e.oauth_world.world import World, browser, browser_urls, missing, running_world
from tests.e2e_util import ROOT, assert_clean_model_text, fault_entry, result_text

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

if (why := missing()) is not None:
    pytest.skip(f"{why}: run scripts/install", allow_module_level=True)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --- the world, checked with the SDK's own OAuth client -----------------------------------------


class MemoryStorage(TokenStorage):
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


@asynccontextmanager
async def loopback_callback() -> AsyncIterator[tuple[int, Callable[[], Awaitable[AuthorizationCodeResult]]]]:
    """An RFC 8252 loopback redirect receiver: (port, wait for the redirect's parameters)."""
    received: list[dict[str, list[str]]] = []
    arrived = anyio.Event()

    async def serve(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            request = b""
            with anyio.fail_after(10):
                while b"\r\n\r\n" not in request:
                    request += await stream.receive()
            target = request.split(b" ", 2)[1].decode()
            received.append(parse_qs(urlsplit(target).query))
            await stream.send(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\nconnection: close\r\n\r\nsigned in\n")
            arrived.set()

    async def wait() -> AuthorizationCodeResult:
        with anyio.fail_after(30):
            await arrived.wait()
        query = {key: values[0] for key, values in received[-1].items()}
        return AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, serve)
        yield listener.extra(anyio.abc.SocketAttribute.local_port), wait
        tg.cancel_scope.cancel()


async def test_the_world_signs_in_with_the_sdks_own_oauth_client(tmp_path: Path) -> None:
    """The world itself works: the SDK's OAuthClientProvider discovers, registers, signs in
    (PKCE S256, resource indicator), and calls the tools; the MCP server refuses what it must."""
    with running_world(tmp_path) as world:
        async with httpx2.AsyncClient() as http:
            bare = await http.post(world.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            assert bare.status_code == 401
            assert 'resource_metadata="' in bare.headers["www-authenticate"]
            forged = await http.post(
                world.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers={"Authorization": "Bearer x.y.z"}
            )
            assert forged.status_code == 401

        command = str(browser(tmp_path))
        async with loopback_callback() as (port, wait_for_callback):

            async def open_browser(url: str) -> None:
                with anyio.fail_after(30):
                    done = await anyio.run_process([command, url], check=False)
                assert done.returncode == 0, done.stderr.decode()

            metadata = OAuthClientMetadata(
                redirect_uris=[f"http://127.0.0.1:{port}/callback"],  # pyright: ignore[reportArgumentType]
                grant_types=["authorization_code", "refresh_token"],
                token_endpoint_auth_method="none",
                client_name="sdk check",
            )
            storage = MemoryStorage()
            provider = OAuthClientProvider(world.url, metadata, storage, open_browser, wait_for_callback)
            async with httpx2.AsyncClient(auth=provider, timeout=30) as http:
                with anyio.fail_after(60):
                    async with Client(streamable_http_client(world.url, http_client=http), mode="legacy") as client:
                        names = {t.name for t in (await client.list_tools()).tools}
                        assert names == {"whoami", "echo"}
                        who = (await client.call_tool("whoami", {})).structured_content
                        assert who is not None
                        echoed = await client.call_tool("echo", {"text": "through oauth"})
                        assert result_text(echoed) == "through oauth"

            # The refresh token works, and what it gives is accepted (a refresh without `resource`
            # gets a token for the one resource granted).
            assert storage.tokens is not None and storage.tokens.refresh_token and storage.client is not None
            async with httpx2.AsyncClient(timeout=10) as http:
                refresh = {"refresh_token": storage.tokens.refresh_token, "client_id": storage.client.client_id}
                refreshed = await http.post(f"{world.issuer}/token", data={"grant_type": "refresh_token", **refresh})
                assert refreshed.status_code == 200, refreshed.text
                token = refreshed.json()["access_token"]
                ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
                accepted = await http.post(world.url, json=ping, headers={"Authorization": f"Bearer {token}"})
                assert accepted.status_code not in (401, 403), accepted.text

    assert who["subject"] == "e2e-user" and who["audience"] == world.url and "mcp:tools" in who["scopes"]
    assert storage.tokens is not None and storage.tokens.refresh_token
    [authorization] = world.events("authorization")
    assert authorization["code_challenge_method"] == "S256" and authorization["resource"] == world.url
    assert world.token_grants() == ["authorization_code", "refresh_token"]
    assert [e["status"] for e in world.events("registration")] == [201]


# --- the proxy, as a user runs it ----------------------------------------------------------------

SERVER = "world"
LOGIN = f"mcp-patchbay login {SERVER}"
PROXY_WITHIN = 60.0
"""Seconds for one ``mcp-patchbay`` command, or one whole serving session, at most."""


def write_config(
    tmp: Path, world: World, *, local: bool = True, oauth: dict[str, Any] | bool | None = None, **settings: Any
) -> Path:
    """The world's MCP server as ``world`` (no ``oauth`` key unless given: its 401 is enough),
    and a local stdio server ``local`` (fault_server: ``local__echo``) that needs no sign-in."""
    servers: dict[str, Any] = {SERVER: {"url": world.url, **({"oauth": oauth} if oauth is not None else {})}}
    if local:
        servers["local"] = fault_entry("local")
    path = tmp / "patchbay.json"
    settings = {"startup_wait": 10, "connect_timeout": 20, "watch": False, **settings}
    path.write_text(json.dumps({"mcpServers": servers, "patchbay": settings}, indent=1))
    return path


def user_env(tmp: Path, *, background: bool = False) -> dict[str, str]:
    """What differs for this user: their data directory (the tokens) and their browser."""
    return {"XDG_DATA_HOME": str(tmp / "data"), "BROWSER": str(browser(tmp, background=background))}


def token_files(tmp: Path) -> list[Path]:
    """The stored sign-ins (the data folder holds other files too: start_memory's)."""
    folder = tmp / "data" / "mcp-patchbay" / "oauth"
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def stored_secrets(tmp: Path) -> list[str]:
    """Every token and client secret in the stored sign-ins (to look for them where they must not be)."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                if key in ("access_token", "refresh_token", "client_secret") and isinstance(inner, str):
                    found.append(inner)
                walk(inner)
        elif isinstance(value, list):
            for inner in value:
                walk(inner)

    for path in token_files(tmp):
        walk(json.loads(path.read_text()))
    return found


@dataclass
class Ran:
    code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


async def patchbay(tmp: Path, *args: str, within: float = PROXY_WITHIN) -> Ran:
    """``mcp-patchbay ARGS`` as the user runs it, with their data directory and browser."""
    env = {**os.environ, **user_env(tmp)}
    with anyio.fail_after(within):
        done = await anyio.run_process([sys.executable, "-m", "mcp_patchbay", *args], env=env, cwd=ROOT, check=False)
    return Ran(done.returncode, done.stdout.decode(), done.stderr.decode())


@dataclass
class Serving:
    """The proxy over stdio: the client, the tools/list_changed it got, and where it wrote."""

    client: Client
    stderr: Path
    log: Path
    list_changed: int = 0
    _changed: anyio.Event = field(default_factory=anyio.Event)

    async def call(self, name: str, arguments: dict[str, Any] | None = None) -> types.CallToolResult:
        with anyio.fail_after(30):
            return await self.client.call_tool(name, arguments or {})

    async def ok(self, name: str, arguments: dict[str, Any] | None = None) -> types.CallToolResult:
        result = await self.call(name, arguments)
        assert not result.is_error, (name, result)
        return result

    async def names(self) -> set[str]:
        with anyio.fail_after(30):
            return {t.name for t in (await self.client.list_tools()).tools}

    async def wait_for_tools(self, expected: set[str], within: float) -> set[str]:
        """tools/list until ``expected`` are all there, listing again on each tools/list_changed."""
        with anyio.fail_after(within):
            while True:
                changed = self._changed
                names = await self.names()
                if expected <= names:
                    return names
                await changed.wait()

    async def eventually_ok(self, name: str, within: float) -> types.CallToolResult:
        """Call until the call succeeds (a server coming back may answer an error meanwhile),
        trying again on each tools/list_changed and at least once a second."""
        with anyio.fail_after(within):
            while True:
                changed = self._changed
                result = await self.call(name)
                if not result.is_error:
                    return result
                with anyio.move_on_after(1):
                    await changed.wait()

    def written(self) -> str:
        """Everything the proxy wrote to stderr and to its log file."""
        return "".join(p.read_text(errors="replace") for p in (self.stderr, self.log) if p.exists())


@asynccontextmanager
async def serving(tmp: Path, config: Path, *, background: bool = False) -> AsyncIterator[Serving]:
    """``python -m mcp_patchbay CONFIG`` over stdio, DEBUG to its log file (where a token must not appear)."""
    stderr, log = tmp / "proxy.stderr", tmp / "proxy.log"
    args = ["-m", "mcp_patchbay", str(config), "--log-file", str(log), "--log-level", "DEBUG"]
    env = user_env(tmp, background=background)
    if "PYTHONPATH" in os.environ:  # the SDK's stdio client passes on only a safe few variables
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    params = StdioServerParameters(command=sys.executable, args=args, env=env, cwd=str(ROOT))
    session: Serving | None = None

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification) and session is not None:
            session.list_changed += 1
            session._changed.set()
            session._changed = anyio.Event()

    with anyio.fail_after(PROXY_WITHIN), stderr.open("w") as errlog:
        transport = stdio_client(params, errlog=errlog)
        async with Client(transport, mode="legacy", cache=None, message_handler=on_message) as client:
            session = Serving(client, stderr, log)
            yield session


def assert_no_secret(tmp: Path, *texts: str) -> None:
    secrets = stored_secrets(tmp)
    assert secrets, "no token stored"
    for text in texts:
        for secret in secrets:
            assert secret not in text, "a token or client secret was written out"


def auth_error(result: types.CallToolResult) -> dict[str, Any]:
    """The structured error of an isError result (the world's tools are unknown until signed in,
    so the proxy has no outputSchema for them and the error is structured)."""
    assert result.is_error, result
    assert result.structured_content is not None, result
    return result.structured_content["error"]


async def test_login_then_serve_calls_the_protected_tools(tmp_path: Path) -> None:
    with running_world(tmp_path / "world") as world:
        config = write_config(tmp_path, world)
        login = await patchbay(tmp_path, "login", SERVER, "--config", str(config))
        assert login.code == 0, login.output
        assert len(browser_urls(tmp_path)) == 1
        [authorization] = world.events("authorization")
        assert authorization["code_challenge_method"] == "S256"
        assert authorization["resource"] == world.url
        assert authorization["redirect_uri"].startswith("http://127.0.0.1:")
        assert authorization["redirect_uri"].endswith("/callback")
        assert world.token_grants() == ["authorization_code"]

        [stored] = token_files(tmp_path)
        assert stored.stat().st_mode & 0o777 == 0o600, oct(stored.stat().st_mode)

        check = await patchbay(tmp_path, "check", str(config))
        assert check.code == 0, check.output

        async with serving(tmp_path, config) as proxy:
            names = await proxy.names()
            assert {f"{SERVER}__whoami", f"{SERVER}__echo", "local__echo"} <= names, names
            who = (await proxy.ok(f"{SERVER}__whoami")).structured_content
            assert who is not None
            assert who["subject"] == "e2e-user" and who["audience"] == world.url and "mcp:tools" in who["scopes"]
            echoed = await proxy.ok(f"{SERVER}__echo", {"text": "through the patchbay"})
            assert result_text(echoed) == "through the patchbay"
            assert result_text(await proxy.ok("local__echo", {"text": "local"})) == "local"

        # Serving used the stored sign-in: no browser, no new authorization.
        assert len(browser_urls(tmp_path)) == 1
        assert len(world.events("authorization")) == 1
        assert_no_secret(tmp_path, login.output, check.output, proxy.written())


async def test_serving_without_sign_in_asks_the_user_and_comes_up_once_they_approve(tmp_path: Path) -> None:
    # A desktop browser (returns at once) and a person who approves only when the test says so.
    with running_world(tmp_path / "world", hold_consent=True) as world:
        config = write_config(tmp_path, world)
        check = await patchbay(tmp_path, "check", str(config))
        assert check.code == 1 and "needs sign-in" in check.stdout and LOGIN in check.stdout, check.output

        async with serving(tmp_path, config, background=True) as proxy:
            names = await proxy.names()
            assert "local__echo" in names and f"{SERVER}__whoami" not in names, names
            assert result_text(await proxy.ok("local__echo", {"text": "meanwhile"})) == "meanwhile"

            first = await proxy.call(f"{SERVER}__whoami")
            error = auth_error(first)
            assert error["code"] == "AUTH_REQUIRED" and error["retryable"] is True, error
            assert "browser" in result_text(first), result_text(first)
            assert_clean_model_text(first)
            assert len(browser_urls(tmp_path)) == 1
            # Asked again while the person is still on the consent page: no second window.
            again = await proxy.call(f"{SERVER}__echo", {"text": "now?"})
            assert auth_error(again)["code"] == "AUTH_REQUIRED"
            assert len(browser_urls(tmp_path)) == 1
            assert result_text(await proxy.ok("local__echo", {"text": "unblocked"})) == "unblocked"

            world.approve()
            await proxy.wait_for_tools({f"{SERVER}__whoami", f"{SERVER}__echo"}, within=60)
            assert proxy.list_changed >= 1
            who = (await proxy.ok(f"{SERVER}__whoami")).structured_content
            assert who is not None and who["subject"] == "e2e-user"

        assert len(browser_urls(tmp_path)) == 1, browser_urls(tmp_path)
        assert world.token_grants() == ["authorization_code"]
        [stored] = token_files(tmp_path)
        assert stored.stat().st_mode & 0o777 == 0o600
        assert_no_secret(tmp_path, proxy.written())


async def test_a_sign_in_that_needs_no_one_lets_the_call_through(tmp_path: Path) -> None:
    # The authorization server approves at once (consent remembered): the first call may go
    # through after the sign-in, or be answered with a retryable sign-in error; either way the
    # server comes up without anything from the user, and the tools appear.
    with running_world(tmp_path / "world") as world:
        config = write_config(tmp_path, world)
        async with serving(tmp_path, config) as proxy:
            assert f"{SERVER}__whoami" not in await proxy.names()  # a client lists the tools first
            first = await proxy.call(f"{SERVER}__whoami")
            if first.is_error:
                error = auth_error(first)
                assert error["code"] in ("AUTH_REQUIRED", "SERVER_STARTING") and error["retryable"], error
            who = (await proxy.eventually_ok(f"{SERVER}__whoami", within=60)).structured_content
            assert who is not None and who["subject"] == "e2e-user"
            await proxy.wait_for_tools({f"{SERVER}__whoami", f"{SERVER}__echo"}, within=30)
            assert proxy.list_changed >= 1
        assert len(browser_urls(tmp_path)) == 1, browser_urls(tmp_path)
        assert world.token_grants() == ["authorization_code"]
        assert_no_secret(tmp_path, proxy.written())


async def test_with_open_browser_off_the_answer_names_the_login_command(tmp_path: Path) -> None:
    with running_world(tmp_path / "world") as world:
        config = write_config(tmp_path, world, open_browser=False)
        async with serving(tmp_path, config) as proxy:
            result = await proxy.call(f"{SERVER}__whoami")
            error = auth_error(result)
            assert error["code"] == "AUTH_REQUIRED", error
            assert LOGIN in result_text(result), result_text(result)
            assert browser_urls(tmp_path) == []  # nothing opened
            assert world.events("authorization") == []

            # The user runs the command in a terminal; the serving proxy notices and comes up.
            login = await patchbay(tmp_path, "login", SERVER, "--config", str(config))
            assert login.code == 0, login.output
            await proxy.wait_for_tools({f"{SERVER}__whoami"}, within=30)
            who = (await proxy.ok(f"{SERVER}__whoami")).structured_content
            assert who is not None and who["subject"] == "e2e-user"
        assert len(browser_urls(tmp_path)) == 1  # the login's


async def test_an_expired_access_token_is_refreshed(tmp_path: Path) -> None:
    ttl = 6
    with running_world(tmp_path / "world", access_token_ttl=ttl) as world:
        config = write_config(tmp_path, world, local=False)
        login = await patchbay(tmp_path, "login", SERVER, "--config", str(config))
        assert login.code == 0, login.output
        async with serving(tmp_path, config) as proxy:
            await proxy.wait_for_tools({f"{SERVER}__whoami"}, within=30)
            first = (await proxy.ok(f"{SERVER}__whoami")).structured_content
            assert first is not None
            assert first["expires_at"] - first["issued_at"] == ttl
            # Not coordination: the thing under test is a token's lifetime running out.
            await anyio.sleep(max(0.0, first["expires_at"] - time.time()) + 1)
            assert time.time() > first["expires_at"]
            later = (await proxy.ok(f"{SERVER}__whoami")).structured_content
            assert later is not None
            assert later["token_id"] != first["token_id"] and later["expires_at"] > time.time()
            assert later["subject"] == "e2e-user"
            stderr_text = proxy.written()
        assert "refresh_token" in world.token_grants(), world.events("token")
        assert len(world.events("authorization")) == 1  # refreshed, not signed in again
        assert len(browser_urls(tmp_path)) == 1
        assert_no_secret(tmp_path, stderr_text)


async def test_a_refused_refresh_turns_the_server_back_to_needing_sign_in(tmp_path: Path) -> None:
    ttl = 6
    with running_world(tmp_path / "world", access_token_ttl=ttl, hold_consent=True) as world:
        config = write_config(tmp_path, world)
        world.approve()  # the login's consent
        login = await patchbay(tmp_path, "login", SERVER, "--config", str(config))
        assert login.code == 0, login.output
        async with serving(tmp_path, config, background=True) as proxy:
            await proxy.wait_for_tools({f"{SERVER}__whoami"}, within=30)
            first = (await proxy.ok(f"{SERVER}__whoami")).structured_content
            assert first is not None

            # The user revokes the grant at the authorization server (RFC 7009, the refresh token).
            [stored] = token_files(tmp_path)
            async with httpx2.AsyncClient(timeout=10) as http:
                revoked = await revoke_refresh_token(http, world, json.loads(stored.read_text()))
            assert revoked.status_code == 200, revoked.text

            await anyio.sleep(max(0.0, first["expires_at"] - time.time()) + 1)  # the access token runs out
            refused = await proxy.call(f"{SERVER}__echo", {"text": "after the refusal"})
            error = auth_error(refused)
            assert error["code"] == "AUTH_REQUIRED" and error["retryable"] is True, error
            assert_clean_model_text(refused)
            assert result_text(await proxy.ok("local__echo", {"text": "unharmed"})) == "unharmed"

            # The proxy started a sign-in on that call; the person approves; the server comes back.
            world.approve()
            again = await proxy.eventually_ok(f"{SERVER}__whoami", within=60)
            assert again.structured_content is not None and again.structured_content["subject"] == "e2e-user"
            written = proxy.written()
        grants = world.events("token")
        assert any(e["grant_type"] == "refresh_token" and e["status"] == 400 for e in grants), grants
        assert len(world.events("authorization")) == 2  # the login, and the proxy's own sign-in
        assert len(browser_urls(tmp_path)) == 2
        assert_no_secret(tmp_path, written)


async def revoke_refresh_token(http: httpx2.AsyncClient, world: World, saved: dict[str, Any]) -> httpx2.Response:
    """Revoke the stored refresh token (RFC 7009), authenticating as the client registered."""
    client = _find_dict(saved, "client_id")
    data = {"token": _find(saved, "refresh_token"), "token_type_hint": "refresh_token"}
    method = client.get("token_endpoint_auth_method", "client_secret_basic")
    auth: tuple[str, str] | None = None
    if method == "client_secret_basic":
        auth = (client["client_id"], client["client_secret"])
    elif method == "client_secret_post":
        data |= {"client_id": client["client_id"], "client_secret": client["client_secret"]}
    else:
        data["client_id"] = client["client_id"]
    # auth=None: no authentication (httpx2 takes None; its post() signature does not say so)
    return await http.post(f"{world.issuer}/token/revocation", data=data, auth=cast(Any, auth))


def _find_dict(value: Any, key: str) -> dict[str, Any]:
    """The first mapping in ``value`` (depth first) that holds ``key``."""
    if isinstance(value, dict):
        if key in value:
            return value
        for inner in value.values():
            if found := _find_dict(inner, key):
                return found
    return {}


def _find(value: Any, key: str) -> str:
    if isinstance(value, dict):
        if isinstance(value.get(key), str):
            return value[key]
        for inner in value.values():
            if (found := _find(inner, key)) != "":
                return found
    return ""


async def test_logout_forgets_the_sign_in(tmp_path: Path) -> None:
    with running_world(tmp_path / "world") as world:
        config = write_config(tmp_path, world, local=False)
        login = await patchbay(tmp_path, "login", SERVER, "--config", str(config))
        assert login.code == 0, login.output
        assert token_files(tmp_path)
        ready = await patchbay(tmp_path, "check", str(config))
        assert ready.code == 0 and "needs sign-in" not in ready.stdout, ready.output

        logout = await patchbay(tmp_path, "logout", SERVER, "--config", str(config))
        assert logout.code == 0, logout.output
        assert token_files(tmp_path) == []
        check = await patchbay(tmp_path, "check", str(config))
        assert check.code == 1, check.output
        assert "needs sign-in" in check.stdout and LOGIN in check.stdout, check.output


async def test_login_says_plainly_that_the_authorization_server_is_unreachable(tmp_path: Path) -> None:
    with running_world(tmp_path / "world") as world:
        world.stop_authorization_server()
        config = write_config(tmp_path, world)
        login = await patchbay(tmp_path, "login", SERVER, "--config", str(config))
        assert login.code == 1, login.output
        assert "authorization server" in login.output and "reached" in login.output, login.output
        assert "Traceback" not in login.output, login.output
        assert stored_secrets(tmp_path) == []


async def test_serving_says_the_authorization_server_is_unreachable_and_the_rest_works(tmp_path: Path) -> None:
    with running_world(tmp_path / "world") as world:
        world.stop_authorization_server()
        config = write_config(tmp_path, world)
        async with serving(tmp_path, config) as proxy:
            assert result_text(await proxy.ok("local__echo", {"text": "fine"})) == "fine"
            result = await proxy.call(f"{SERVER}__whoami")
            error = auth_error(result)
            assert error["code"] == "AUTH_SERVER_UNREACHABLE", error
            assert "authorization server" in result_text(result), result_text(result)
            assert_clean_model_text(result)
            assert result_text(await proxy.ok("local__echo", {"text": "still fine"})) == "still fine"


async def test_login_says_plainly_that_the_sign_in_was_declined(tmp_path: Path) -> None:
    with running_world(tmp_path / "world", deny=True) as world:
        config = write_config(tmp_path, world)
        login = await patchbay(tmp_path, "login", SERVER, "--config", str(config))
        assert login.code == 1, login.output
        assert "declined" in login.output, login.output
        assert "Traceback" not in login.output, login.output
        assert world.token_grants() == []


async def test_serving_says_the_sign_in_was_declined(tmp_path: Path) -> None:
    with running_world(tmp_path / "world", deny=True) as world:
        config = write_config(tmp_path, world)
        async with serving(tmp_path, config) as proxy:
            result = await proxy.call(f"{SERVER}__whoami")
            error = auth_error(result)
            assert error["code"] == "AUTH_DENIED", error
            assert_clean_model_text(result)
            assert result_text(await proxy.ok("local__echo", {"text": "fine"})) == "fine"
        assert world.token_grants() == []


async def test_oauth_false_turns_sign_in_off(tmp_path: Path) -> None:
    with running_world(tmp_path / "world") as world:
        config = write_config(tmp_path, world, oauth=False)
        check = await patchbay(tmp_path, "check", str(config))
        assert check.code == 1 and "needs sign-in" not in check.stdout and "401" in check.stdout, check.output
        login = await patchbay(tmp_path, "login", SERVER, "--config", str(config))
        assert login.code != 0 and "turned off" in login.output, login.output
        async with serving(tmp_path, config) as proxy:
            result = await proxy.call(f"{SERVER}__whoami")
            error = auth_error(result)
            assert error["code"] not in ("AUTH_REQUIRED", "AUTH_SERVER_UNREACHABLE"), error
            assert_clean_model_text(result)
            assert result_text(await proxy.ok("local__echo", {"text": "fine"})) == "fine"
        assert browser_urls(tmp_path) == []
        assert world.events("authorization") == [] and world.events("registration") == []


async def test_a_pre_registered_client_from_the_config(tmp_path: Path) -> None:
    client_id, client_secret = "patchbay-e2e", "e2e-" + "s3cr3t" * 6
    with running_world(tmp_path / "world", client=(client_id, client_secret)) as world:
        oauth = {"client_id": client_id, "client_secret": client_secret, "scope": "mcp:tools"}
        config = write_config(tmp_path, world, oauth=oauth)
        login = await patchbay(tmp_path, "login", SERVER, "--config", str(config))
        assert login.code == 0, login.output
        assert world.events("registration") == []  # no dynamic registration
        [authorization] = world.events("authorization")
        assert authorization["client_id"] == client_id
        assert authorization["scope"].split()[0] == "mcp:tools", authorization
        assert world.token_grants() == ["authorization_code"]
        async with serving(tmp_path, config) as proxy:
            await proxy.wait_for_tools({f"{SERVER}__whoami"}, within=30)
            who = (await proxy.ok(f"{SERVER}__whoami")).structured_content
            assert who is not None and who["client_id"] == client_id
        for text in (login.output, proxy.written()):
            assert client_secret not in text
        assert_no_secret(tmp_path, login.output, proxy.written())
