"""Shared pieces of the stdio benchmarks: paths, configs, the sides' commands, clients, statistics.

Not run on its own; ``scripts/bench`` runs ``benchmarks.report``, which imports the modules
beside this one. Processes, ports and ``/proc`` readings are in ``tests.processes``.
"""

from __future__ import annotations

import functools
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

import anyio
import anyio.abc
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".bench"
PY = str(ROOT / ".venv" / "bin" / "python")
BENCH_SERVER = str(ROOT / "benchmarks" / "server.py")
EVERYTHING = str(
    ROOT / "tests" / "e2e" / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
)
FASTMCP = str(WORK / "fastmcp-venv" / "bin" / "fastmcp")


PROXY_ENV: dict[str, str] = {
    name: value for name in ("PATCHBAY_FAST_PATH", "PYTHONPATH") if (value := os.environ.get(name))
}
"""Extra environment for the proxy's processes, which the SDK's stdio client starts with only a few
safe variables: ``PYTHONPATH`` when measuring a snapshot (``use_source``, or as given), and
``$PATCHBAY_FAST_PATH`` as given (``PATCHBAY_FAST_PATH=0`` measures the SDK's path on both sides)."""


def unpacked_source(rev: str, under: str) -> tuple[str, Path]:
    """``rev``'s short hash and its ``src/``, unpacked (``git archive``) under ``.bench/UNDER/HASH/``:
    another commit's proxy, run beside this tree's (``use_source``)."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", rev], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout.strip()
    folder = WORK / under / commit
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", commit, "src"], capture_output=True, check=True, cwd=ROOT)
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    return commit, folder / "src"


def use_source(src: Path) -> None:
    """Run the proxy from ``src`` (a snapshot of ``src/``) instead of the editable install."""
    PROXY_ENV["PYTHONPATH"] = str(src)
    os.environ["PYTHONPATH"] = str(src)  # processes started without an explicit environment


@functools.cache
def errlog() -> TextIO:
    """Where the stderr of every process the benchmarks start goes (kept out of the report)."""
    WORK.mkdir(exist_ok=True)
    return (WORK / "processes.log").open("a", encoding="utf-8")


# --- what to run ---------------------------------------------------------------------------


def bench_server_entry(
    name: str = "bench", tools: int = 1, spawn_log: Path | None = None, fast_stdio: bool = False
) -> dict[str, Any]:
    args = [BENCH_SERVER, "--name", name, "--tools", str(tools)]
    if spawn_log is not None:
        args += ["--spawn-log", str(spawn_log)]
    if fast_stdio:
        args.append("--fast-stdio")
    return {"command": PY, "args": args}


def everything_entry() -> dict[str, Any]:
    return {"command": "node", "args": [EVERYTHING]}


def write_config(
    name: str, servers: dict[str, dict[str, Any]], gateway: dict[str, Any] | None = None, **patchbay: Any
) -> Path:
    """A config file in ``.bench/``: ``{"mcpServers": ...}``, read by both mcp-patchbay and FastMCP."""
    WORK.mkdir(exist_ok=True)
    document: dict[str, Any] = {"mcpServers": servers}
    if patchbay:
        document["patchbay"] = patchbay
    if gateway:
        document["gateway"] = gateway
    path = WORK / f"{name}.json"
    path.write_text(json.dumps(document, indent=1), encoding="utf-8")
    return path


def direct_params(entry: dict[str, Any]) -> StdioServerParameters:
    return StdioServerParameters(command=entry["command"], args=list(entry["args"]), cwd=str(ROOT))


def proxy_command(config: Path) -> list[str]:
    return [PY, "-m", "mcp_patchbay", "--config", str(config), "--log-level", "WARNING"]


def proxy_params(config: Path) -> StdioServerParameters:
    command = proxy_command(config)
    return StdioServerParameters(command=command[0], args=command[1:], cwd=str(ROOT), env=dict(PROXY_ENV) or None)


def fastmcp_command(config: Path) -> list[str]:
    return [FASTMCP, "run", str(config), "--no-banner", "--log-level", "WARNING"]


def fastmcp_params(config: Path) -> StdioServerParameters:
    command = fastmcp_command(config)
    return StdioServerParameters(command=command[0], args=command[1:], cwd=str(ROOT))


def fastmcp_available() -> bool:
    return Path(FASTMCP).exists()


def client(params: StdioServerParameters) -> Client:
    """The SDK client every benchmark uses, on every side: legacy handshake, no response cache."""
    return Client(stdio_client(params, errlog=errlog()), mode="legacy", cache=None)  # pyright: ignore[reportArgumentType]


def call_request(tool: str, arguments: dict[str, Any]) -> types.CallToolRequest:
    return types.CallToolRequest(params=types.CallToolRequestParams(name=tool, arguments=arguments))


async def call(c: Client, request: types.CallToolRequest) -> types.CallToolResult:
    result = await c.session.send_request(request, types.CallToolResult)
    if result.is_error:
        raise RuntimeError(f"tool call failed: {result.content}")
    return result


# --- statistics ----------------------------------------------------------------------------


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else math.nan


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


# --- processes -----------------------------------------------------------------------------


# --- a raw JSON-RPC client, for load that the proxy, not the client, has to keep up with ----


class RawSession:
    """Speaks newline-delimited JSON-RPC to a process directly: no SDK, no pydantic.

    Used where the benchmark needs many calls per second (memory, profile), so the
    Python client does not become the bottleneck on a two-core machine.
    """

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self.pid = process.pid
        self._buffer = b""
        self._next_id = 0

    def next_id(self) -> int:
        self._next_id += 1
        return self._next_id

    async def send(self, *messages: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(b"".join(json.dumps(m).encode() + b"\n" for m in messages))

    async def lines(self) -> AsyncIterator[bytes]:
        assert self.process.stdout is not None
        while True:
            while b"\n" in self._buffer:
                line, self._buffer = self._buffer.split(b"\n", 1)
                if line.strip():
                    yield line
            try:
                self._buffer += await self.process.stdout.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                return

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """One request, waiting for its response (other messages are skipped)."""
        request_id = self.next_id()
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)
        async for line in self.lines():
            reply = json.loads(line)
            if reply.get("id") == request_id:
                if "error" in reply:
                    raise RuntimeError(f"{method} failed: {reply['error']}")
                return reply["result"]
        raise RuntimeError(f"the process closed its stdout before answering {method}")

    async def initialize(self) -> dict[str, Any]:
        result = await self.request(
            "initialize",
            {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
        )
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return result

    async def load(
        self,
        tools: Sequence[str],
        arguments: dict[str, Any],
        total: int,
        window: int,
        *,
        checkpoints: Sequence[int] = (),
        on_checkpoint: Any = None,
    ) -> tuple[float, int]:
        """``total`` tools/call requests, round-robin over ``tools``, at most ``window`` in flight.

        Returns (seconds, errors). ``on_checkpoint(n)`` runs when the n-th response arrives.
        """
        limiter = anyio.Semaphore(window)
        errors = 0
        marks = sorted(checkpoints)
        started = time.perf_counter()

        async def writer() -> None:
            for i in range(total):
                await limiter.acquire()
                await self.send(
                    {
                        "jsonrpc": "2.0",
                        "id": self.next_id(),
                        "method": "tools/call",
                        "params": {"name": tools[i % len(tools)], "arguments": arguments},
                    }
                )

        async with anyio.create_task_group() as tg:
            tg.start_soon(writer)
            done = 0
            async for line in self.lines():
                reply = json.loads(line)
                if "id" not in reply or "method" in reply:
                    continue  # a notification or a request from the proxy
                done += 1
                if "error" in reply or reply.get("result", {}).get("isError"):
                    errors += 1
                limiter.release()
                while marks and done >= marks[0]:
                    if on_checkpoint is not None:
                        on_checkpoint(marks.pop(0))
                    else:
                        marks.pop(0)
                if done >= total:
                    break
        return time.perf_counter() - started, errors

    async def close(self) -> None:
        if self.process.stdin is not None:
            await self.process.stdin.aclose()
        with anyio.move_on_after(10):
            await self.process.wait()
        if self.process.returncode is None:
            self.process.kill()
            await self.process.wait()


@asynccontextmanager
async def raw_process(command: list[str]) -> AsyncIterator[RawSession]:
    process = await anyio.open_process(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog(), cwd=str(ROOT)
    )
    session = RawSession(process)
    try:
        yield session
    finally:
        with anyio.CancelScope(shield=True):
            await session.close()


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
