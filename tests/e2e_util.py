"""Helpers shared by the suites that run real processes and sockets (faults, HTTP, end to end).

- ``fault_entry``: a config entry launching ``tests/servers/fault_server.py``.
- ``ProcessRecord``: every fault_server process (and child it starts) writes a line to a
  record file; after the proxy stops, ``wait_gone`` proves each one is dead.
- ``wait_gone``: waits on a pidfd (an event, not a poll) for each process to exit;
  ``start_time``, ``alive``, ``children_of``, ``descendants_of`` read /proc through
  ``tests.processes`` (the one reading of /proc/PID/stat, and ``free_port``, ``cmdline``).
- ``assert_clean_model_text``: what the model is shown is short, and holds no file path,
  traceback or secret.
- ``conformance_suite_problem``, ``run_suite``, ``suite_checks``, ``bad_checks``: the official
  conformance suite (node 22), run bounded, and what its checks.json files say.
- ``proxy_rig``: the proxy in-process (no connector: real processes and sockets) with an SDK
  ``Client`` on it, and a ``LogWaiter`` on its log.
- ``StderrTee``: a subprocess's stderr copied to a file, with a bounded wait for a line it
  writes (a server saying it is ready); ``stop``: SIGTERM, then SIGKILL past a bound.
"""

from __future__ import annotations

import json
import logging
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncGenerator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from mcp_patchbay.config import Config, parse_config
from mcp_patchbay.session.proxy import Proxy
from mcp_patchbay.upstreams.upstream import Upstream
from tests.harness import proxy_transport
from tests.processes import pids, stat_fields

ROOT = Path(__file__).resolve().parent.parent
SERVERS = ROOT / "tests" / "servers"
FAULT_SERVER = SERVERS / "fault_server.py"
NODE_MODULES = ROOT / "tests" / "e2e" / "node_modules"
NODE22 = NODE_MODULES / "node" / "bin" / "node"
"""Node 22 from npm (tests/e2e/package.json): the conformance suite needs it."""
CONFORMANCE_SUITE = NODE_MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
"""Colour codes in the suite's output."""
SECRET = "abc123"

_PATH = re.compile(r"(?:^|[\s'\"(=:])(?:~|[A-Za-z]:)?[/\\](?:[\w.@-]+[/\\])+[\w.@-]*")


def fault_entry(name: str, *flags: str, record: Path | None = None, **extra: Any) -> dict[str, Any]:
    """A config entry for a fault_server named ``name`` with the given startup flags."""
    args = [str(FAULT_SERVER), "--name", name, *flags]
    if record is not None:
        args += ["--record", str(record)]
    return {"command": sys.executable, "args": args, **extra}


def result_text(result: types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))


def error_info(result: types.CallToolResult) -> dict[str, Any]:
    assert result.is_error, result
    assert result.structured_content is not None, result
    return result.structured_content["error"]


def assert_clean_model_text(result: types.CallToolResult, *secrets: str) -> None:
    """An error shown to the model: under 500 characters, no path, no traceback, no secret."""
    text = result_text(result)
    info = error_info(result)
    for shown in (text, info["message"]):
        assert len(shown) < 500, shown
        assert "Traceback" not in shown and 'File "' not in shown, shown
        assert not _PATH.search(shown), f"file path in model text: {shown!r}"
        for secret in (SECRET, *secrets):
            assert secret not in shown, shown


@dataclass(frozen=True)
class Recorded:
    kind: str
    name: str
    pid: int
    start: int | None


class ProcessRecord:
    """The record file the fault servers append to (``--record``)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def entries(self) -> list[Recorded]:
        if not self.path.exists():
            return []
        rows = [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]
        return [Recorded(r["kind"], r["name"], r["pid"], r["start"]) for r in rows]

    def pids(self, name: str | None = None, kind: str | None = None) -> list[int]:
        return [e.pid for e in self.entries() if (name is None or e.name == name) and (kind is None or e.kind == kind)]

    async def wait_all_gone(self, timeout: float = 10.0) -> list[Recorded]:
        entries = self.entries()
        await wait_gone([(e.pid, e.start) for e in entries], timeout)
        return entries


def start_time(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat (``stat_fields``' ``[19]``): tells a process from a later one reusing its pid."""
    fields = stat_fields(pid)
    return None if fields is None else int(fields[19])


def alive(pid: int, start: int | None = None) -> bool:
    """Running (a zombie is dead; a later process reusing the pid is not ours)."""
    fields = stat_fields(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return False
    return start is None or int(fields[19]) == start


async def wait_gone(pids: Iterable[int | tuple[int, int | None]], timeout: float = 10.0) -> None:
    """Every process has exited, waited for on pidfds, within ``timeout`` seconds in all."""
    with anyio.fail_after(timeout):
        for item in pids:
            pid, start = item if isinstance(item, tuple) else (item, None)
            await _wait_exit(pid, start)
    survivors = [p for p in pids if alive(*(p if isinstance(p, tuple) else (p, None)))]
    assert not survivors, survivors


async def _wait_exit(pid: int, start: int | None) -> None:
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        if not alive(pid, start):  # gone, a zombie, or the pid now names another process
            return
        if not select.select([fd], [], [], 0)[0]:
            await anyio.wait_readable(fd)  # readable once the process has exited
    finally:
        os.close(fd)


def children_of(pid: int) -> list[int]:
    """Direct children of a process that are running (not zombies), from /proc (psutil is not installed)."""
    return [
        child
        for child in pids()
        if (fields := stat_fields(child)) is not None and int(fields[1]) == pid and fields[0] not in ("Z", "X")
    ]


def descendants_of(pid: int) -> list[int]:
    result: list[int] = []
    todo = [pid]
    while todo:
        for child in children_of(todo.pop()):
            result.append(child)
            todo.append(child)
    return result


# --- the proxy in-process, with a client and its log ------------------------------------------


class LogWaiter(logging.Handler):
    """Collects the proxy's log records and wakes a waiter when one matches (an event, not a poll)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self._changed = anyio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self._changed.set()
        self._changed = anyio.Event()

    def messages(self, pattern: str = "") -> list[str]:
        found = [r.getMessage() for r in self.records]
        return [m for m in found if re.search(pattern, m)]

    async def wait_for(self, pattern: str, count: int = 1, timeout: float = 10.0) -> list[str]:
        with anyio.fail_after(timeout):
            while len(found := self.messages(pattern)) < count:
                await self._changed.wait()
        return found

    def everything(self) -> str:
        parts: list[str] = []
        for record in self.records:
            parts.append(record.getMessage())
            if record.exc_info:
                parts.append(logging.Formatter().formatException(record.exc_info))
        return "\n".join(parts)


@dataclass(frozen=True)
class Timed:
    result: types.CallToolResult
    seconds: float

    @property
    def error(self) -> dict[str, Any]:
        return error_info(self.result)


@dataclass
class Rig:
    proxy: Proxy
    client: Client
    log: LogWaiter
    tmp: Path
    started: float
    record: ProcessRecord
    results: list[types.CallToolResult] = field(default_factory=lambda: list[types.CallToolResult]())
    pids: list[int] = field(default_factory=lambda: list[int]())

    def upstream(self, name: str) -> Upstream:
        return self.proxy.supervisor.upstreams[name]

    async def call(self, name: str, arguments: dict[str, Any] | None = None, *, within: float = 10.0) -> Timed:
        began = time.monotonic()
        with anyio.fail_after(within):
            result = await self.client.call_tool(name, arguments or {})
        self.results.append(result)
        return Timed(result, time.monotonic() - began)

    async def ok(self, name: str, arguments: dict[str, Any] | None = None, *, within: float = 10.0) -> str:
        timed = await self.call(name, arguments, within=within)
        assert not timed.result.is_error, timed.result
        return result_text(timed.result)

    async def pid(self, server: str) -> int:
        pid = int(await self.ok(f"{server}__pid"))
        self.pids.append(pid)
        return pid

    async def ready(self, server: str, within: float = 15.0) -> None:
        upstream = self.upstream(server)
        assert await upstream.wait_ready(within), f"{server} not ready: {upstream.reason()}"

    async def first_attempt(self, server: str, within: float = 15.0) -> None:
        with anyio.fail_after(within):
            await self.upstream(server).first_attempt_done.wait()

    async def alive(self) -> set[str]:
        """The session works: ping and tools/list answer. Returns the tool names."""
        with anyio.fail_after(10):
            await self.client.send_ping()  # pyright: ignore[reportDeprecated] - legacy mode
            return {t.name for t in (await self.client.list_tools()).tools}


def make_config(tmp: Path, servers: dict[str, Any], settings: dict[str, Any]) -> Config:
    path = tmp / "patchbay.json"
    path.write_text(json.dumps({"mcpServers": servers, "patchbay": {"watch": False, **settings}}))
    return parse_config(path.read_text(), path, environ=dict(os.environ))


@asynccontextmanager
async def proxy_rig(
    tmp: Path, servers: dict[str, Any], settings: dict[str, Any], *, mode: str = "legacy", bound: float = 60.0
) -> AsyncGenerator[Rig]:
    """The proxy in-process in front of ``servers``, an SDK client on it, everything within ``bound`` s."""
    config = make_config(tmp, servers, settings)
    log = LogWaiter()
    patchbay_logger = logging.getLogger("mcp_patchbay")
    patchbay_logger.addHandler(log)
    previous_level = patchbay_logger.level
    patchbay_logger.setLevel(logging.DEBUG)
    proxy = Proxy(config)
    try:
        with anyio.fail_after(bound):
            async with anyio.create_task_group() as tg:
                await tg.start(proxy.run)
                try:
                    async with Client(proxy_transport(proxy), mode=mode, cache=None) as client:  # pyright: ignore[reportArgumentType]
                        yield Rig(proxy, client, log, tmp, time.monotonic(), ProcessRecord(tmp / "processes.jsonl"))
                finally:
                    tg.cancel_scope.cancel()
    finally:
        patchbay_logger.removeHandler(log)
        patchbay_logger.setLevel(previous_level)


def conformance_suite_problem() -> str | None:
    """Why the conformance suite cannot run here (node 22 or the suite missing), or None."""
    if not NODE22.exists() or not CONFORMANCE_SUITE.exists():
        return (
            f"node 22 or the MCP conformance suite is missing ({NODE22}, {CONFORMANCE_SUITE}): run scripts/install "
            "(it installs both from tests/e2e/package.json; needs npm)"
        )
    version = subprocess.run([NODE22, "--version"], capture_output=True, text=True, timeout=30, check=False)
    if not version.stdout.startswith("v22."):
        return f"{NODE22} is not node 22 ({version.stdout.strip()!r}): run scripts/install"
    return None


def run_suite(command: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Run ``command`` in its own process group; on timeout kill the whole group, then fail."""
    with subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    ) as process:
        try:
            output, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate(timeout=10)
            pytest.fail(f"the conformance suite did not finish within {timeout:.0f}s:\n{ANSI.sub('', output)[-4000:]}")
        return subprocess.CompletedProcess(command, process.returncode, output)


def suite_checks(results: Path) -> list[dict[str, Any]]:
    """Every check the suite wrote under ``results`` (one checks.json per scenario run)."""
    found: list[dict[str, Any]] = []
    for checks in results.rglob("checks.json"):
        found.extend(json.loads(checks.read_text()))
    return found


def bad_checks(checks: list[dict[str, Any]]) -> list[str]:
    """The failed and warning checks, a line each."""
    return [
        f"{c['status']} {c['id']}: {c.get('errorMessage') or c.get('description')}"
        for c in checks
        if c.get("status") in ("FAILURE", "WARNING")
    ]


# --- a subprocess's stderr, and its stop ------------------------------------------------------


class StderrTee:
    """A process's stderr copied line by line to ``path`` as it comes, with a wait for a line: a
    server says when it serves and when it is ready, and the test waits on that, not on a clock."""

    def __init__(self, pipe: IO[bytes], path: Path) -> None:
        self._pipe, self.path = pipe, path
        self._lines: list[str] = []
        self.ended = False
        """The pipe ended: the process exited (or closed its stderr)."""
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        with self._pipe, self.path.open("wb") as out:
            for line in self._pipe:
                out.write(line)
                out.flush()
                with self._changed:
                    self._lines.append(line.decode(errors="replace"))
                    self._changed.notify_all()
        with self._changed:
            self.ended = True
            self._changed.notify_all()

    def said(self, text: str, within: float) -> bool:
        """Whether a line containing ``text`` was written within ``within`` seconds (False as soon
        as the pipe ends without one)."""

        def seen() -> bool:
            return any(text in line for line in self._lines)

        with self._changed:
            self._changed.wait_for(lambda: seen() or self.ended, within)
            return seen()

    def text(self) -> str:
        """Everything written so far (the file's copy)."""
        return self.path.read_text(errors="replace")

    def join(self, within: float = 15.0) -> None:
        self._thread.join(timeout=within)


def stop(process: subprocess.Popen[bytes], within: float) -> bool:
    """SIGTERM, then SIGKILL if it is still there after ``within`` seconds; True when it ended
    without the SIGKILL (or had already ended)."""
    if process.poll() is not None:
        return True
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=within)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=within)
        return False
    return True
