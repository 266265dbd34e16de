"""Remote upstreams: streamable HTTP and SSE, real and faked, all on loopback.

(a) The real ``@modelcontextprotocol/server-everything`` in its streamableHttp and sse
    modes (node, from tests/e2e/node_modules), bound to 127.0.0.1 on a port the system
    picks (``tests/servers/loopback.cjs`` forces the address and reports the port).
(b) Fakes: a real SDK streamable-HTTP server behind an ASGI middleware that answers with
    HTTP errors on demand (``tests/servers/http_fault_server.py``), served by uvicorn in
    this event loop on a socket bound before the test starts (no start-up race).

Each test checks the error code the model gets, that a healthy upstream beside the
faulty one is unaffected, and that the session goes on.
"""

from __future__ import annotations

import math
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import AsyncGenerator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest

from mcp_patchbay.upstreams.upstream import State
from tests.e2e_util import NODE_MODULES, SERVERS, Rig, Timed, assert_clean_model_text, proxy_rig, wait_gone
from tests.servers.http_fault_server import HttpFaults, serving

pytestmark = pytest.mark.anyio

EVERYTHING = NODE_MODULES / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
SETTINGS: dict[str, Any] = {
    "restart_initial_delay": 0.1,
    "restart_max_delay": 1.0,
    "connect_timeout": 10,
    "startup_wait": 10,
    "timeout": 10,
}


def http_entry(url: str, **extra: Any) -> dict[str, Any]:
    return {"url": url, "type": "http", **extra}


@asynccontextmanager
async def http_rig(
    tmp: Path,
    faulty: HttpFaults,
    settings: dict[str, Any] | None = None,
    fake_keys: dict[str, Any] | None = None,
    **more: dict[str, Any],
) -> AsyncGenerator[Rig]:
    """The proxy in front of ``faulty`` (server 'fake', its entry with ``fake_keys``), a healthy
    fake (server 'good') and ``more`` entries."""
    good = HttpFaults()
    async with serving(good) as good_url, serving(faulty) as url:
        fake = {"url": f"{url}/sse", "type": "sse"} if faulty.sse else http_entry(f"{url}/mcp")
        fake = {**fake, **(fake_keys or {})}
        servers = {"good": http_entry(f"{good_url}/mcp"), "fake": fake, **more}
        async with proxy_rig(tmp, servers, {**SETTINGS, **(settings or {})}) as rig:
            await rig.ready("good")
            yield rig
            await _others_fine(rig)


async def _others_fine(rig: Rig) -> None:
    assert "good__echo" in await rig.alive()
    assert '"tool": "echo"' in await rig.ok("good__echo", {"text": "fine"})
    assert rig.upstream("good").restarts == 0
    for result in rig.results:
        if result.is_error and result.structured_content is not None:
            assert_clean_model_text(result)


# --- (a) the real server-everything over HTTP and SSE ------------------------------------------


class Spawned:
    """A server process on loopback that reports ``PATCHBAY_TEST_LISTENING <port>`` on stderr.

    Its stderr is read to the end (a full pipe would block it); ``wait_line`` waits for a line
    (an event, not a poll).
    """

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self.lines: list[str] = []
        self._changed = anyio.Event()

    async def read_stderr(self, *, task_status: anyio.abc.TaskStatus[int]) -> None:
        assert self.process.stderr is not None
        pending = b""
        started = False
        with anyio.fail_after(20) as scope:
            async for chunk in self.process.stderr:
                *lines, pending = (pending + chunk).split(b"\n")
                for raw in lines:
                    line = raw.decode(errors="replace")
                    self.lines.append(line)
                    if not started and line.startswith("PATCHBAY_TEST_LISTENING "):
                        task_status.started(int(line.split()[1]))
                        started = True
                        scope.deadline = math.inf
                self._changed.set()
                self._changed = anyio.Event()
        if not started:
            raise RuntimeError("the server exited before listening: " + "\n".join(self.lines[-10:]))

    async def wait_line(self, text: str, within: float = 10.0) -> None:
        with anyio.fail_after(within):
            while not any(text in line for line in self.lines):
                await self._changed.wait()


@asynccontextmanager
async def spawned(command: list[str], env: dict[str, str] | None = None) -> AsyncGenerator[tuple[Spawned, int]]:
    """Run a server that reports its port; yields it and the port; stops it afterwards."""
    process = await anyio.open_process(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    server = Spawned(process)
    try:
        async with anyio.create_task_group() as tg:
            port = await tg.start(server.read_stderr)
            try:
                yield server, port
            finally:
                tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                process.terminate()
            with anyio.fail_after(20):
                await process.wait()


@asynccontextmanager
async def node_everything(mode: str) -> AsyncGenerator[tuple[int, int]]:
    """server-everything in ``mode`` on loopback; yields (port, pid). Stops it afterwards."""
    node = shutil.which("node")
    if node is None or not EVERYTHING.exists():
        pytest.skip("node or tests/e2e/node_modules missing: run scripts/install")
    command = [node, "--require", str(SERVERS / "loopback.cjs"), str(EVERYTHING), mode]
    async with spawned(command, {**os.environ, "PORT": "0"}) as (server, port):
        yield port, server.process.pid


async def test_real_everything_over_streamable_http_and_sse(tmp_path: Path) -> None:
    async with node_everything("streamableHttp") as (http_port, http_pid):
        async with node_everything("sse") as (sse_port, sse_pid):
            servers = {
                "ev_http": http_entry(f"http://127.0.0.1:{http_port}/mcp"),
                "ev_sse": {"url": f"http://127.0.0.1:{sse_port}/sse", "type": "sse"},
            }
            async with proxy_rig(tmp_path, servers, SETTINGS) as rig:
                await rig.ready("ev_http")
                await rig.ready("ev_sse")
                names = await rig.alive()
                assert {"ev_http__get-sum", "ev_sse__get-sum", "ev_http__echo", "ev_sse__echo"} <= names
                assert await rig.ok("ev_http__get-sum", {"a": 2, "b": 3}) == "The sum of 2 and 3 is 5."
                assert await rig.ok("ev_sse__get-sum", {"a": 40, "b": 2}) == "The sum of 40 and 2 is 42."
                assert await rig.ok("ev_sse__echo", {"message": "over sse"}) == "Echo: over sse"
                assert await rig.ok("ev_http__echo", {"message": "over http"}) == "Echo: over http"
    await wait_gone([http_pid, sse_pid], timeout=10)


# --- (b) fakes ----------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_connection_refused(tmp_path: Path, transport: str) -> None:
    # A socket bound but not listening: the port is ours, and connecting to it is refused.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        url = f"http://127.0.0.1:{port}{'/mcp' if transport == 'http' else '/sse'}"
        async with http_rig(tmp_path, HttpFaults(), down={"url": url, "type": transport}) as rig:
            await rig.first_attempt("down")
            timed = await rig.call("down__anything", {}, within=5)
            info = timed.error
            assert info["code"] in ("SERVER_UNAVAILABLE", "CONNECTION_FAILED"), info
            assert info["retryable"] is True and info["server"] == "down"
            assert "refused" in info["message"] and "'down'" in info["message"]
            assert '"tool": "echo"' in await rig.ok("fake__echo", {})


@pytest.mark.parametrize("status", [401, 403])
async def test_credentials_refused_at_startup_say_so_and_are_not_retried(tmp_path: Path, status: int) -> None:
    """Regression: a 401/403 on initialize was reported as "Server 'fake' reported an error:
    Server returned an error response" (SERVER_ERROR wording, retryable, "keeps retrying") and
    retried forever; a refused credential is a configuration problem only the user can fix."""
    faulty = HttpFaults(all_posts=status)
    # "oauth": false: the 401 carries a Bearer challenge, which otherwise starts a sign-in (below).
    async with http_rig(tmp_path, faulty, fake_keys={"oauth": False}) as rig:
        await rig.first_attempt("fake")
        timed = await rig.call("fake__echo", {}, within=5)
        info = timed.error
        assert info["code"] in ("AUTH_FAILED", "SERVER_UNAVAILABLE"), info
        assert info["category"] == "configuration" and info["retryable"] is False, info
        assert "'fake'" in info["message"] and "refused the proxy's credentials" in info["message"], info
        assert f"HTTP {status}" in info["message"] and "keeps retrying" not in info["message"]
        upstream = rig.upstream("fake")
        assert upstream.state is State.FAILED and upstream.restarts == 0
        assert sum(1 for s in faulty.seen if s.rpc_method == "initialize") == 1


async def test_a_bearer_challenge_at_startup_means_a_sign_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 401 with a Bearer challenge and no "oauth" key: the server needs a sign-in. A call starts
    one (here the server refuses to register a client, so it fails with its own code); the server
    waits in "needs sign-in" rather than being retried, and the others go on."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("BROWSER", "true")  # nothing is opened: the registration fails first
    faulty = HttpFaults(all_posts=401)
    async with http_rig(tmp_path, faulty) as rig:
        await rig.first_attempt("fake")
        upstream = rig.upstream("fake")
        assert upstream.state is State.SIGN_IN and upstream.restarts == 0
        assert "fake__sign_in" in await rig.alive()  # what the model can call to start the sign-in
        info = (await rig.call("fake__echo", {}, within=15)).error
        assert info["code"] == "AUTH_REGISTRATION_REFUSED" and info["category"] == "sign_in", info
        assert "'fake'" in info["message"] and "oauth.client_id" in info["message"], info
        assert upstream.state is State.SIGN_IN
        # The sign-in acts on the refusal the proxy got: it does not send initialize only to be refused again.
        assert sum(1 for s in faulty.seen if s.rpc_method == "initialize") == 1


@pytest.mark.parametrize("status", [401, 403])
async def test_credentials_refused_mid_session(tmp_path: Path, status: int) -> None:
    tool = "unauthorized" if status == 401 else "forbidden"
    faulty = HttpFaults(statuses={tool: (status, {})})
    async with http_rig(tmp_path, faulty) as rig:
        await rig.ready("fake")
        info = (await rig.call(f"fake__{tool}", {})).error
        assert info["code"] == "AUTH_FAILED" and info["category"] == "configuration", info
        assert info["retryable"] is False
        assert "'fake'" in info["message"] and "refused the proxy's credentials" in info["message"]
        assert '"tool": "echo"' in await rig.ok("fake__echo", {})


@pytest.mark.parametrize("body", ["plain", "json-rpc"])
async def test_session_expired_mid_session_is_rebuilt_and_the_call_sent_again(tmp_path: Path, body: str) -> None:
    """Also when the 404 carries the server's own JSON-RPC error ("Session not found", as SDK
    servers answer), which the SDK passes on instead of its stand-in."""
    faulty = HttpFaults(expire={"expire"}, session_error_body=body == "json-rpc")
    async with http_rig(tmp_path, faulty) as rig:
        await rig.ready("fake")
        assert faulty.initializes() == 1
        assert '"tool": "echo"' in await rig.ok("fake__echo", {})
        # The server forgets the session (404) on this call: the proxy re-initializes and sends it once more.
        text = await rig.ok("fake__expire", {"n": 1})
        assert '"tool": "expire"' in text
        assert faulty.initializes() == 2
        assert faulty.calls["expire"] == 1  # reached the tool once: the 404 was answered before it
        assert len(faulty.expired) == 1
        # The new session is used from now on.
        assert '"tool": "echo"' in await rig.ok("fake__echo", {})
        last = [s for s in faulty.seen if s.tool == "echo"][-1]
        assert last.session is not None and last.session not in faulty.expired


async def test_server_dies_mid_call_then_comes_back(tmp_path: Path) -> None:
    """The HTTP server process is killed during a call: the call fails at once, not at its
    timeout; calls are refused while it is down; once it is back the proxy reconnects."""
    script = [sys.executable, str(SERVERS / "http_fault_server.py")]
    async with AsyncExitStack() as stack:
        first, port = await stack.enter_async_context(spawned([*script, "--port", "0"]))
        url = f"http://127.0.0.1:{port}/mcp"
        rig = await stack.enter_async_context(http_rig(tmp_path, HttpFaults(), remote=http_entry(url)))
        await rig.ready("remote")
        assert '"tool": "echo"' in await rig.ok("remote__echo", {})
        results: dict[str, Timed] = {}

        async def hang() -> None:
            results["hang"] = await rig.call("remote__hang", {}, within=10)

        async with anyio.create_task_group() as tg:
            tg.start_soon(hang)
            await first.wait_line("http_fault_server: call hang")
            first.process.kill()
        info = results["hang"].error
        assert info["code"] == "CONNECTION_LOST" and info["retryable"] is True, info
        assert results["hang"].seconds < 5  # at once, not at the 10 s timeout
        down = await rig.call("remote__echo", {}, within=10)
        assert down.result.is_error and down.error["retryable"] is True, down.result
        await stack.enter_async_context(spawned([*script, "--port", str(port)]))
        await rig.ready("remote", within=20)
        assert '"tool": "echo"' in await rig.ok("remote__echo", {"back": True})


async def test_rate_limited_with_retry_after(tmp_path: Path) -> None:
    faulty = HttpFaults(statuses={"limited": (429, {"retry-after": "7"})})
    async with http_rig(tmp_path, faulty) as rig:
        await rig.ready("fake")
        info = (await rig.call("fake__limited", {})).error
        assert info["code"] == "RATE_LIMITED" and info["category"] == "rate_limit", info
        assert info["retryable"] is True and info["retry_after_ms"] == 7000
        assert "Wait 7s" in info["message"]
        assert '"tool": "echo"' in await rig.ok("fake__echo", {})


@pytest.mark.parametrize("status", [500, 502, 503])
async def test_server_error_status(tmp_path: Path, status: int) -> None:
    faulty = HttpFaults(statuses={"broken": (status, {})})
    async with http_rig(tmp_path, faulty) as rig:
        await rig.ready("fake")
        info = (await rig.call("fake__broken", {})).error
        assert info["code"] == "SERVER_ERROR" and info["retryable"] is True, info
        assert f"HTTP {status}" in info["message"]
        assert '"tool": "echo"' in await rig.ok("fake__echo", {})
        assert rig.upstream("fake").restarts == 0


@pytest.mark.parametrize(
    ("tool", "status", "code"),
    [("broken", 503, "SERVER_ERROR"), ("limited", 429, "RATE_LIMITED"), ("unauthorized", 401, "AUTH_FAILED")],
)
async def test_sse_http_error_fails_the_call_at_once_and_keeps_the_connection(
    tmp_path: Path, tool: str, status: int, code: str
) -> None:
    """Regression: over SSE an HTTP error on the POST of a call left the call waiting for an
    answer that never comes, until its timeout (TIMEOUT after 50 s by default), and killed the
    SDK's POST writer, so the next call failed with CONNECTION_LOST and the connection restarted."""
    headers = {"retry-after": "3"} if status == 429 else {}
    faulty = HttpFaults(sse=True, statuses={tool: (status, headers)})
    async with http_rig(tmp_path, faulty) as rig:
        await rig.ready("fake")
        assert '"tool": "echo"' in await rig.ok("fake__echo", {})
        timed = await rig.call(f"fake__{tool}", {}, within=15)
        assert timed.error["code"] == code, timed.error
        assert f"HTTP {status}" in timed.error["message"]
        assert timed.seconds < 5, timed.seconds  # at once, not at the 10 s timeout
        assert '"tool": "echo"' in await rig.ok("fake__echo", {"after": tool})
        assert rig.upstream("fake").restarts == 0


async def test_jsonrpc_error_over_sse_keeps_the_upstream_message(tmp_path: Path) -> None:
    async with http_rig(tmp_path, HttpFaults(sse=True)) as rig:
        await rig.ready("fake")
        info = (await rig.call("fake__boom", {})).error
        assert info["code"] == "SERVER_ERROR" and "database on fire" in info["message"], info


async def test_jsonrpc_error_over_http_keeps_the_upstream_message(tmp_path: Path) -> None:
    async with http_rig(tmp_path, HttpFaults()) as rig:
        await rig.ready("fake")
        info = (await rig.call("fake__boom", {})).error
        assert info["code"] == "SERVER_ERROR" and "database on fire" in info["message"], info


@pytest.mark.parametrize("other", ["GET 405", "notification 400"])
async def test_status_of_another_request_is_not_blamed_on_a_call(tmp_path: Path, other: str) -> None:
    """Regression: an HTTP error status on another request (a 405 on the optional GET stream of
    a server that offers none, a 400 on a notification) was kept for 30 s and pinned on the next
    failing call, whose own JSON-RPC error was then reported as 'answered with HTTP 405'."""
    method, status = other.split()
    faulty = HttpFaults(get_status=405) if method == "GET" else HttpFaults(notify_status=400)
    async with http_rig(tmp_path, faulty) as rig:
        await rig.ready("fake")
        await faulty.wait_seen("GET" if method == "GET" else "POST", int(status))
        info = (await rig.call("fake__boom", {})).error
        assert info["code"] == "SERVER_ERROR" and "database on fire" in info["message"], info
        assert status not in info["message"]
        assert '"tool": "echo"' in await rig.ok("fake__echo", {})


def test_http_fault_server_runs_as_a_script() -> None:
    script = SERVERS / "http_fault_server.py"
    done = subprocess.run([sys.executable, str(script), "--help"], check=False, capture_output=True, timeout=30)
    assert done.returncode == 0 and b"--expire" in done.stdout
