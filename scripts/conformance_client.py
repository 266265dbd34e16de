"""The client the MCP conformance suite drives for its authorization scenarios.

    conformance client --command ".venv/bin/python scripts/conformance_client.py" --scenario S
    conformance client --command ".venv/bin/python scripts/conformance_client.py --sdk" --scenario S

The suite starts its resource and authorization servers, then runs the command with its
MCP URL as the last argument, the scenario's name in ``MCP_CONFORMANCE_SCENARIO`` and, for
some scenarios, ``MCP_CONFORMANCE_CONTEXT`` (JSON: ``client_id``, ``client_secret``...). Its
authorization server approves at once and redirects to the client's ``redirect_uri``;
``BROWSER`` points at ``scripts/headless_browser.py``, which follows that redirect.

Proxy mode (the default) signs in and serves the way a user does:

1. a config ``{"mcpServers": {"conf": {"url": URL, "oauth": {...}}}}`` in a temporary
   folder, the ``oauth`` object holding the context's ``client_id``/``client_secret`` and,
   for ``auth/basic-cimd``, ``client_metadata_url``;
2. ``mcp-patchbay login conf --config CFG`` with ``BROWSER`` set and a temporary
   ``XDG_DATA_HOME``;
3. ``mcp-patchbay serve CFG`` over stdio, driven by the SDK's ``Client``: the ``conf__``
   tools listed, each one called. A call answered with an ``AUTH_REQUIRED`` error (the
   proxy started a sign-in in the background, a scope step-up for example) is retried a
   few times over a few seconds.

``--sdk`` is the baseline: the SDK's own ``OAuthClientProvider`` driven the same way
(the same browser, a loopback callback, tokens in memory), connected straight to the URL.

Exit 0 when every tool call succeeded, 1 otherwise; what happened goes to stderr (the
suite shows it when the client fails). Every wait is bounded, the whole run by
``--timeout`` (default 25 s, under the suite's own 30 s).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import webbrowser
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast
from urllib.parse import parse_qsl, urlsplit

import anyio
import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

ROOT = Path(__file__).resolve().parent.parent
BROWSER = ROOT / "scripts" / "headless_browser.py"
CIMD_SCENARIO = "auth/basic-cimd"
CIMD_URL = "https://conformance-test.local/client-metadata.json"
SERVER = "conf"
PREFIX = f"{SERVER}__"

LOGIN_TIMEOUT = 20.0
"""At most this much of the run for ``mcp-patchbay login``; the rest is for serving."""
RETRIES = 6
"""Calls after the first when the answer is AUTH_REQUIRED, RETRY_PAUSE apart."""
RETRY_PAUSE = 1.0
LISTING_WAIT = 5.0
"""How long the tools of ``conf`` may take to appear in the proxy's listing."""
CALLBACK_WAIT = 15.0


def say(message: str) -> None:
    print(f"conformance_client: {message}", file=sys.stderr, flush=True)


class Failed(Exception):
    """The flow did not work; the message says where."""


def oauth_settings(scenario: str, context: dict[str, Any]) -> dict[str, Any]:
    """The config's ``oauth`` object for a scenario: what its context gives, the CIMD URL for basic-cimd."""
    settings = {key: context[key] for key in ("client_id", "client_secret") if context.get(key)}
    if scenario == CIMD_SCENARIO:
        settings["client_metadata_url"] = CIMD_URL
    return settings


def auth_required(result: types.CallToolResult) -> bool:
    """An isError result saying a sign-in is needed (structured error code, or the text)."""
    if not result.is_error:
        return False
    structured: dict[str, Any] = result.structured_content or {}
    error: object = structured.get("error")
    if isinstance(error, dict) and cast(dict[str, object], error).get("code") == "AUTH_REQUIRED":
        return True
    return any(isinstance(block, types.TextContent) and "AUTH_REQUIRED" in block.text for block in result.content)


def summary(result: types.CallToolResult) -> str:
    text = " ".join(block.text for block in result.content if isinstance(block, types.TextContent))
    return text if len(text) <= 300 else text[:300] + "..."


async def all_tools(client: Client) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return tools


async def call_with_retries(client: Client, name: str) -> types.CallToolResult:
    result = await client.call_tool(name, {})
    for attempt in range(1, RETRIES + 1):
        if not auth_required(result):
            break
        say(f"{name}: AUTH_REQUIRED ({summary(result)}); retry {attempt}/{RETRIES} in {RETRY_PAUSE:.0f}s")
        await anyio.sleep(RETRY_PAUSE)
        result = await client.call_tool(name, {})
    return result


async def exercise(client: Client, prefix: str) -> None:
    """List the tools (those starting with ``prefix``) and call each; raise Failed unless all succeed."""
    deadline = time.monotonic() + LISTING_WAIT
    while True:
        tools = [tool for tool in await all_tools(client) if tool.name.startswith(prefix)]
        if tools or time.monotonic() >= deadline:
            break
        await anyio.sleep(0.5)
    if not tools:
        raise Failed(f"no {prefix or 'upstream '}tools listed within {LISTING_WAIT:.0f}s")
    say(f"tools: {', '.join(tool.name for tool in tools)}")
    failures = 0
    for tool in tools:
        result = await call_with_retries(client, tool.name)
        if result.is_error:
            failures += 1
            say(f"{tool.name}: isError: {summary(result)} {json.dumps(result.structured_content)}")
        else:
            say(f"{tool.name}: ok: {summary(result)}")
    if failures:
        raise Failed(f"{failures} of {len(tools)} tool calls failed")


# Proxy mode


def show_output(stdout: str | bytes | None, stderr: str | bytes | None) -> None:
    for stream, raw in (("stdout", stdout), ("stderr", stderr)):
        # TimeoutExpired carries bytes even with text=True.
        text = raw.decode(errors="replace") if isinstance(raw, bytes) else raw or ""
        for line in text.splitlines():
            say(f"login {stream}: {line}")


def login(patchbay: Path, config: Path, env: dict[str, str], timeout: float) -> None:
    command = [str(patchbay), "login", SERVER, "--config", str(config)]
    started = time.monotonic()
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        show_output(exc.stdout, exc.stderr)
        raise Failed(f"mcp-patchbay login did not finish within {timeout:.0f}s") from exc
    show_output(done.stdout, done.stderr)
    say(f"login exited {done.returncode} after {time.monotonic() - started:.1f}s")
    if done.returncode != 0:
        raise Failed(f"mcp-patchbay login exited {done.returncode}")


async def serve_and_exercise(patchbay: Path, config: Path, env: dict[str, str], log: Path) -> None:
    params = StdioServerParameters(command=str(patchbay), args=["serve", str(config), "--log-file", str(log)], env=env)
    async with Client(params, cache=None) as client:
        await exercise(client, PREFIX)


def run_proxy(url: str, scenario: str, context: dict[str, Any], timeout: float) -> None:
    patchbay = Path(sys.executable).parent / "mcp-patchbay"
    if not patchbay.exists():
        raise Failed(f"{patchbay} not found: run scripts/install")
    with tempfile.TemporaryDirectory(prefix="patchbay-conformance-") as tmp:
        folder = Path(tmp)
        config = folder / "patchbay.json"
        entry = {"url": url, "oauth": oauth_settings(scenario, context)}
        config.write_text(json.dumps({"mcpServers": {SERVER: entry}}, indent=1))
        say(f"config: {json.dumps(entry)}")
        extra = {"BROWSER": str(BROWSER), "XDG_DATA_HOME": str(folder / "data")}
        log = folder / "patchbay.log"
        deadline = time.monotonic() + timeout
        try:
            login(patchbay, config, {**os.environ, **extra}, min(LOGIN_TIMEOUT, timeout))

            async def bounded() -> None:
                with anyio.fail_after(max(deadline - time.monotonic(), 1.0)):
                    await serve_and_exercise(patchbay, config, extra, log)

            anyio.run(bounded)
        except BaseException:
            if log.exists():
                for line in log.read_text(errors="replace").splitlines()[-60:]:
                    say(f"proxy log: {line}")
            raise


# SDK baseline


class MemoryStorage:
    """The SDK's TokenStorage, in memory: one process signs in and uses the tokens."""

    def __init__(self, client_info: OAuthClientInformationFull | None = None) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info = client_info

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class LoopbackCallback:
    """``http://127.0.0.1:PORT/callback`` (RFC 8252): each redirect's query parameters, in order."""

    def __init__(self) -> None:
        self.arrived: asyncio.Queue[dict[str, str]] = asyncio.Queue()
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._answer, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self.port}/callback"

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(5):
                request = await reader.readuntil(b"\r\n\r\n")
            target = request.split(b"\r\n", 1)[0].split(b" ")[1].decode()
            parts = urlsplit(target)
            found = parts.path == "/callback"
            status = b"200 OK" if found else b"404 Not Found"
            body = b"Signed in; you can close this window.\n" if found else b"not found\n"
            writer.write(
                b"HTTP/1.1 " + status + b"\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
            )
            await writer.drain()
            if found:
                self.arrived.put_nowait(dict(parse_qsl(parts.query)))
        except (OSError, TimeoutError, IndexError, UnicodeDecodeError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def next_code(self) -> AuthorizationCodeResult:
        with anyio.fail_after(CALLBACK_WAIT):
            params = await self.arrived.get()
        if "code" not in params:
            raise Failed(f"the authorization server redirected without a code: {sorted(params)}")
        return AuthorizationCodeResult(code=params["code"], state=params.get("state"), iss=params.get("iss"))

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


def browser_opener() -> Callable[[str], Awaitable[None]]:
    async def open_browser(url: str) -> None:
        say("opening the authorization URL with webbrowser")
        # webbrowser waits for a BROWSER command to exit, and ours waits for our callback.
        if not await anyio.to_thread.run_sync(webbrowser.open, url):
            raise Failed("webbrowser.open failed (BROWSER)")

    return open_browser


async def sdk_flow(url: str, scenario: str, context: dict[str, Any]) -> None:
    callback = LoopbackCallback()
    await callback.start()
    try:
        metadata = OAuthClientMetadata(
            client_name="mcp-patchbay conformance (SDK baseline)",
            redirect_uris=[callback.redirect_uri],  # pyright: ignore[reportArgumentType]
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
        )
        settings = oauth_settings(scenario, context)
        preregistered = None
        if "client_id" in settings:
            # A pre-registered client lives in storage; with a secret, RFC 7591's default method.
            secret = settings.get("client_secret")
            preregistered = OAuthClientInformationFull(
                client_id=settings["client_id"],
                client_secret=secret,
                redirect_uris=[callback.redirect_uri],  # pyright: ignore[reportArgumentType]
                token_endpoint_auth_method="client_secret_basic" if secret else "none",
            )
        provider = OAuthClientProvider(
            server_url=url,
            client_metadata=metadata,
            storage=MemoryStorage(preregistered),
            redirect_handler=browser_opener(),
            callback_handler=callback.next_code,
            client_metadata_url=settings.get("client_metadata_url"),
        )
        async with httpx2.AsyncClient(auth=provider, timeout=httpx2.Timeout(10.0, read=30.0)) as http:
            async with Client(streamable_http_client(url, http_client=http), cache=None) as client:
                await exercise(client, "")
    finally:
        callback.close()


def run_sdk(url: str, scenario: str, context: dict[str, Any], timeout: float) -> None:
    os.environ["BROWSER"] = str(BROWSER)  # read by webbrowser on its first use

    async def bounded() -> None:
        with anyio.fail_after(timeout):
            await sdk_flow(url, scenario, context)

    anyio.run(bounded)


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups (the transports' task groups wrap them)."""
    if not isinstance(exc, BaseExceptionGroup):
        return [exc]
    return [leaf for inner in cast(BaseExceptionGroup[BaseException], exc).exceptions for leaf in leaves(inner)]


def reason(exc: BaseException, timeout: float) -> str:
    def one(leaf: BaseException) -> str:
        if isinstance(leaf, Failed):
            return str(leaf)
        if isinstance(leaf, TimeoutError):
            return f"not done within {timeout:.0f}s"
        return f"{type(leaf).__name__}: {leaf}"  # the SDK's errors, connection failures

    return "; ".join(one(leaf) for leaf in leaves(exc))


def main() -> int:
    parser = argparse.ArgumentParser(description="The client the MCP conformance suite drives.")
    parser.add_argument("--sdk", action="store_true", help="the SDK's OAuthClientProvider, not the proxy")
    parser.add_argument("--timeout", type=float, default=25.0, help="seconds for the whole run (default 25)")
    parser.add_argument("url", help="the MCP server's URL (the suite appends it)")
    args = parser.parse_args()
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    mode = "sdk" if args.sdk else "proxy"
    say(f"{mode} mode, scenario {scenario or '(none)'}, {args.url}")
    started = time.monotonic()
    try:
        (run_sdk if args.sdk else run_proxy)(args.url, scenario, context, args.timeout)
    except Exception as exc:  # report what went wrong in a line or a few, not a trace only
        say(f"FAILED: {reason(exc, args.timeout)}")
        return 1
    say(f"ok in {time.monotonic() - started:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
