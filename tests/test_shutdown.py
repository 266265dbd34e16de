"""Issue 11, part 1: no upstream outlives the proxy, however quickly the client kills it.

The proxy runs as users run it (``python -m mcp_patchbay CONFIG``, a real subprocess) in front
of ``tests/servers/stubborn_server.py``: a standard-library MCP server that starts in a few
milliseconds and can ignore the end of its stdin, ignore SIGTERM, and leave a child in its
process group (what ``npx`` leaves: a grandchild of the proxy). Every test waits for the
upstreams through the protocol (initialize, tools/list through the proxy: after that, each
upstream has recorded its pid), then stops the proxy the way a client does and waits, on
pidfds and with a deadline, for every process to be gone.

mcp-cli sends SIGTERM, then SIGKILL one second later; the issue reproduced the orphan with
SIGKILL 0.3 s after SIGTERM. The e2e case runs server-everything (directly, through its
installed binary and through npx) for a client that declared ``roots``: it does not exit when
its stdin closes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import anyio
import anyio.abc
import pytest

from mcp_patchbay.upstreams import spawn
from mcp_patchbay.upstreams.spawn import WATCHDOG_SCRIPT
from tests.e2e_util import NODE_MODULES, SERVERS, alive, descendants_of, start_time, wait_gone
from tests.processes import cmdline, pids, stat_fields

STUBBORN = SERVERS / "stubborn_server.py"
EVERYTHING = NODE_MODULES / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
EVERYTHING_BIN = NODE_MODULES / ".bin" / "mcp-server-everything"
NODE = shutil.which("node")
NPX = shutil.which("npx")

KILL_AFTER = 0.3
"""The issue's reproduction: SIGKILL this long after SIGTERM (mcp-cli waits one second)."""
GONE_WITHIN = 2.0
"""Every upstream process is gone this long after the first signal."""
QUICK = 1.0
"""Servers that exit on SIGTERM are gone this long after it (with the proxy)."""


def stubborn(name: str, record: Path, *flags: str) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(STUBBORN), "--name", name, "--record", str(record), *flags]}


def write_config(tmp: Path, servers: dict[str, Any], extra: dict[str, Any] | None = None) -> Path:
    path = tmp / "patchbay.json"
    settings = {"watch": False, "startup_wait": 20, "connect_timeout": 30, **(extra or {})}
    path.write_text(json.dumps({"mcpServers": servers, "patchbay": settings}))
    return path


@dataclass
class Running:
    """The proxy as a client sees it: JSON-RPC lines on its stdin and stdout."""

    process: anyio.abc.Process
    record: Path
    buffer: bytes = b""
    messages: list[dict[str, Any]] = field(default_factory=lambda: list[dict[str, Any]]())

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")

    async def response(self, id: int) -> dict[str, Any]:
        """The proxy's answer to our request ``id``; its own requests (``roots/list``) are answered meanwhile."""
        assert self.process.stdout is not None
        while True:
            for message in self.messages:
                if message.get("id") == id and "method" not in message:
                    return message
            chunk = await self.process.stdout.receive()
            self.buffer += chunk
            *lines, self.buffer = self.buffer.split(b"\n")
            for line in filter(bytes.strip, lines):
                message = cast("dict[str, Any]", json.loads(line))
                self.messages.append(message)
                if "method" in message and "id" in message:
                    answer: dict[str, Any] = {"roots": []} if message["method"] == "roots/list" else {}
                    await self.send({"id": message["id"], "result": answer})

    async def handshake(self, capabilities: dict[str, Any] | None = None) -> set[str]:
        """initialize, initialized, tools/list: the tool names. Every upstream has started after it."""
        params = {
            "protocolVersion": "2025-06-18",
            "capabilities": capabilities or {},
            "clientInfo": {"name": "shutdown-test", "version": "1"},
        }
        await self.send({"id": 1, "method": "initialize", "params": params})
        assert "result" in await self.response(1), self.messages
        await self.send({"method": "notifications/initialized"})
        await self.send({"id": 2, "method": "tools/list", "params": {}})
        return {t["name"] for t in (await self.response(2))["result"]["tools"]}

    def recorded(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.record.read_text().splitlines() if line.strip()]

    def everything_started(self) -> list[tuple[int, int | None]]:
        """The proxy's whole tree (upstreams, their children, the watchdog), with start times."""
        return [(pid, start_time(pid)) for pid in descendants_of(self.process.pid)]

    def kill(self) -> None:
        """SIGKILL, unless the proxy has already exited (and been reaped)."""
        with suppress(ProcessLookupError):
            self.process.kill()

    def watchdog(self) -> int:
        found = [pid for pid in descendants_of(self.process.pid) if cmdline(pid).startswith("/bin/sh -c trap")]
        assert len(found) == 1, [(pid, cmdline(pid)) for pid in descendants_of(self.process.pid)]
        return found[0]


@asynccontextmanager
async def proxy(
    tmp: Path,
    servers: dict[str, Any],
    *,
    bound: float = 40.0,
    arguments: tuple[str, ...] = ("--log-file", "proxy.log"),
    env: dict[str, str] | None = None,
    settings: dict[str, Any] | None = None,
) -> AsyncGenerator[Running]:
    """``python -m mcp_patchbay CONFIG ARGUMENTS`` in ``tmp`` (stderr to ``tmp/stderr.txt``)."""
    config = write_config(tmp, servers, settings)
    command = [sys.executable, "-m", "mcp_patchbay", str(config), *arguments]
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PATCHBAY_")} | (env or {})
    with (tmp / "stderr.txt").open("wb") as stderr:
        process = await anyio.open_process(command, cwd=tmp, stderr=stderr, env=environment)
    try:
        with anyio.fail_after(bound):
            yield Running(process, tmp / "record.jsonl")
    finally:
        if process.returncode is None:
            process.kill()
        with anyio.move_on_after(5):
            await process.wait()


def group_members(pgids: set[int]) -> list[int]:
    """Live processes (not zombies) in any of these process groups (``[2]`` of /proc/PID/stat's fields)."""
    return [
        pid
        for pid in pids()
        if (fields := stat_fields(pid)) is not None and int(fields[2]) in pgids and fields[0] not in ("Z", "X")
    ]


async def assert_all_gone(tree: list[tuple[int, int | None]], pgids: set[int], since: float, within: float) -> float:
    """Every process in ``tree`` exits before ``since + within``; returns when, in seconds after ``since``."""
    try:
        await wait_gone(tree, timeout=max(0.0, since + within - time.monotonic()))
    except TimeoutError:
        left = [(pid, cmdline(pid)) for pid, start in tree if alive(pid, start)]
        raise AssertionError(f"still alive {within:g}s after the signal: {left}") from None
    gone_after = time.monotonic() - since
    assert not group_members(pgids), [(pid, cmdline(pid)) for pid in group_members(pgids)]
    return gone_after


def stubborn_servers(record: Path) -> dict[str, Any]:
    return {
        "plain": stubborn("plain", record),
        "deaf": stubborn("deaf", record, "--ignore-eof"),
        "stubborn": stubborn("stubborn", record, "--ignore-eof", "--ignore-sigterm", "--child"),
    }


@pytest.mark.anyio
async def test_sigterm_then_sigkill_0_3_s_later_leaves_no_upstream(tmp_path: Path) -> None:
    """The issue's reproduction: the proxy is SIGKILLed in the middle of its shutdown."""
    async with proxy(tmp_path, stubborn_servers(tmp_path / "record.jsonl")) as running:
        assert {"plain__pid", "deaf__pid", "stubborn__pid"} <= await running.handshake({"roots": {}})
        recorded = running.recorded()
        assert {(r["name"], r["kind"]) for r in recorded} >= {("stubborn", "child"), ("deaf", "server")}
        tree = running.everything_started()
        assert {r["pid"] for r in recorded} <= {pid for pid, _ in tree}
        running.watchdog()
        since = time.monotonic()
        running.process.send_signal(signal.SIGTERM)
        await anyio.sleep(KILL_AFTER)  # the scenario itself (a client's countdown), not a wait for anything
        running.kill()
        await assert_all_gone(tree, {r["pgid"] for r in recorded}, since, GONE_WITHIN)


@pytest.mark.anyio
async def test_sigkill_of_the_proxy_leaves_no_upstream(tmp_path: Path) -> None:
    """No chance to clean up at all: the watchdog stops every group, the child in one included."""
    async with proxy(tmp_path, stubborn_servers(tmp_path / "record.jsonl")) as running:
        await running.handshake({"roots": {}})
        recorded = running.recorded()
        tree = running.everything_started()
        since = time.monotonic()
        running.process.kill()
        await assert_all_gone(tree, {r["pgid"] for r in recorded}, since, GONE_WITHIN)


@pytest.mark.anyio
async def test_sigterm_alone_stops_every_upstream_and_the_proxy_within_a_second(tmp_path: Path) -> None:
    """Servers that exit on SIGTERM (and not on stdin's end): all signalled at once, no stdin-only wait."""
    record = tmp_path / "record.jsonl"
    servers = {f"deaf{n}": stubborn(f"deaf{n}", record, "--ignore-eof") for n in range(3)}
    async with proxy(tmp_path, servers) as running:
        await running.handshake()
        recorded = running.recorded()
        tree = running.everything_started()
        since = time.monotonic()
        running.process.send_signal(signal.SIGTERM)
        await assert_all_gone(tree, {r["pgid"] for r in recorded}, since, QUICK)
        with anyio.fail_after(max(0.0, since + QUICK - time.monotonic())):
            assert await running.process.wait() == 0


@pytest.mark.anyio
async def test_sigterm_gives_servers_that_ignore_it_a_short_grace_then_sigkill(tmp_path: Path) -> None:
    async with proxy(tmp_path, stubborn_servers(tmp_path / "record.jsonl")) as running:
        await running.handshake()
        recorded = running.recorded()
        tree = running.everything_started()
        since = time.monotonic()
        running.process.send_signal(signal.SIGTERM)
        await assert_all_gone(tree, {r["pgid"] for r in recorded}, since, 1.5)  # 0.5 s grace, then SIGKILL
        with anyio.fail_after(max(0.0, since + 1.5 - time.monotonic())):
            assert await running.process.wait() == 0


@pytest.mark.anyio
async def test_sigint_stops_every_upstream_at_once(tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"
    async with proxy(tmp_path, {"deaf": stubborn("deaf", record, "--ignore-eof")}) as running:
        await running.handshake()
        tree = running.everything_started()
        since = time.monotonic()
        running.process.send_signal(signal.SIGINT)
        await assert_all_gone(tree, {r["pgid"] for r in running.recorded()}, since, QUICK)
        with anyio.fail_after(max(0.0, since + QUICK - time.monotonic())):
            assert await running.process.wait() == 0


@pytest.mark.anyio
async def test_stdin_eof_stops_every_upstream_at_once(tmp_path: Path) -> None:
    """The client leaves: servers that ignore their own stdin's end still stop within a second."""
    record = tmp_path / "record.jsonl"
    servers = {"deaf": stubborn("deaf", record, "--ignore-eof"), "plain": stubborn("plain", record)}
    async with proxy(tmp_path, servers) as running:
        await running.handshake({"roots": {}})
        tree = running.everything_started()
        since = time.monotonic()
        assert running.process.stdin is not None
        await running.process.stdin.aclose()
        await assert_all_gone(tree, {r["pgid"] for r in running.recorded()}, since, QUICK)
        with anyio.fail_after(max(0.0, since + QUICK - time.monotonic())):
            assert await running.process.wait() == 0


def test_the_watchdog_stops_tracked_groups_when_the_pipe_closes() -> None:
    """The watchdog alone: what it does when its proxy dies (the pipe's only writer closes)."""
    script = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(60)\n"
    read, write = os.pipe()
    watchdog = subprocess.Popen(["/bin/sh", "-c", WATCHDOG_SCRIPT], stdin=read, start_new_session=True)
    os.close(read)
    sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
    groups = [
        subprocess.Popen([sys.executable, "-c", script], start_new_session=True),  # ignores SIGTERM
        subprocess.Popen(sleep, start_new_session=True),
        subprocess.Popen(sleep, start_new_session=True),
    ]
    forgotten = groups[2]
    try:
        os.write(write, "".join(f"+{p.pid}\n" for p in groups).encode() + f"-{forgotten.pid}\n".encode())
        since = time.monotonic()
        os.close(write)  # what the proxy's death does
        for process in groups[:2]:
            process.wait(timeout=max(0.0, since + GONE_WITHIN - time.monotonic()))
        assert watchdog.wait(timeout=GONE_WITHIN) == 0
        assert forgotten.poll() is None, "the watchdog signalled a group it had been told to forget"
    finally:
        for process in [*groups, watchdog]:
            if process.poll() is None:
                process.kill()
                process.wait(5)


def test_every_upstream_reaches_the_watchdog_whichever_batch_started_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: upstreams prespawned after ``early`` had started the watchdog were never told
    to it (npx entries, which have a ``cwd``), and outlived a SIGKILLed proxy."""
    watchdog = spawn._Watchdog()  # pyright: ignore[reportPrivateUsage]
    monkeypatch.setattr(spawn, "_WATCHDOG", watchdog)
    sleep = ["-c", "import time; time.sleep(60)"]
    started: list[subprocess.Popen[bytes]] = []
    try:
        with watchdog.batch():  # spawn.early
            started.append(spawn.popen(sys.executable, sleep, None, None))
        assert watchdog.process is not None
        with watchdog.batch():  # spawn.prespawn, the watchdog already running
            started.append(spawn.popen(sys.executable, sleep, None, None))
        started.append(spawn.popen(sys.executable, sleep, None, None))  # a restart
        assert spawn.tracked() == {p.pid for p in started}
        since = time.monotonic()
        assert watchdog.fd is not None
        os.close(watchdog.fd)  # what the proxy's death does
        watchdog.fd = None
        for process in started:
            process.wait(timeout=max(0.0, since + GONE_WITHIN - time.monotonic()))
        assert watchdog.process.wait(timeout=GONE_WITHIN) == 0
    finally:
        for process in started:
            if process.poll() is None:
                process.kill()
                process.wait(5)
            for pipe in (process.stdin, process.stdout, process.stderr):
                if pipe is not None:
                    pipe.close()


# --- server-everything, as users run it ----------------------------------------------------


def everything_entries() -> dict[str, Any]:
    assert NODE is not None
    entries: dict[str, Any] = {"node": {"command": NODE, "args": [str(EVERYTHING)]}}
    if EVERYTHING_BIN.exists():
        entries["bin"] = {"command": str(EVERYTHING_BIN), "args": []}
    if NPX is not None:
        entries["npx"] = {
            "command": NPX,
            "args": ["--no-install", "mcp-server-everything"],
            "cwd": str(NODE_MODULES.parent),
        }
    return entries


@pytest.mark.e2e
@pytest.mark.skipif(
    NODE is None or not EVERYTHING.exists(), reason="node or server-everything missing: scripts/install"
)
@pytest.mark.parametrize("how", ["sigterm-then-sigkill", "sigkill"])
@pytest.mark.anyio
async def test_server_everything_does_not_outlive_a_killed_proxy(tmp_path: Path, how: str) -> None:
    """A client that declared roots: server-everything then ignores its stdin's end."""
    entries = everything_entries()
    async with proxy(tmp_path, entries, bound=60) as running:
        await running.handshake({"roots": {"listChanged": True}})
        for n, name in enumerate(entries, start=10):  # each one serving, npx's node included
            call = {"name": f"{name}__get-sum", "arguments": {"a": n, "b": 1}}
            await running.send({"id": n, "method": "tools/call", "params": call})
            assert str(n + 1) in (await running.response(n))["result"]["content"][0]["text"]
        tree = running.everything_started()
        upstreams = [pid for pid in descendants_of(running.process.pid) if os.getpgid(pid) == pid]
        commands = " ".join(cmdline(pid) for pid, _ in tree)
        assert str(EVERYTHING) in commands or "server-everything" in commands, commands
        since = time.monotonic()
        if how == "sigkill":
            running.process.kill()
        else:
            running.process.send_signal(signal.SIGTERM)
            await anyio.sleep(KILL_AFTER)  # the scenario itself, not a wait for anything
            running.kill()
        await assert_all_gone(tree, set(upstreams), since, GONE_WITHIN)
