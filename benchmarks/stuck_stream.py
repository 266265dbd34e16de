"""The stuck-stream attack on a real gateway, measured: memory of the gateway process and
``list_changed`` latency of a normal session while other clients never read (issue 20).

    .venv/bin/python -m benchmarks.stuck_stream [--seconds 60] [--attackers 4]

Starts ``mcp-patchbay serve --http`` on a free loopback port with one stdio upstream (this
file, run with ``--upstream``) whose ``burst`` tool sends 8 KB ``resources/updated``
notices and then changes its tool list. Attackers open a session, subscribe to the
resource, open the GET stream with a 1 KiB receive buffer and never read it; when the
gateway ends such a session, the attacker opens another at once. A driver session calls
``burst`` in a loop; a normal session times each ``tools/list_changed`` from the end of
the call that caused it. The gateway's RSS is read from ``/proc`` every 5 s.

Prints the RSS series, the growth over the run (from before the attack to the end, and
from 5 s into it to the end), the stuck sessions the gateway ended, and the latency
of ``list_changed`` (median, max). Not a test: it runs for a minute and its figures depend
on the machine; quote them with the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from tests.processes import free_port, rss_kib

ROOT = Path(__file__).resolve().parent.parent
URI = "feed://stuck/" + "x" * 8000
"""Each update names this URI: 8 KB a notice fills a stuck client's buffers quickly."""
HANDSHAKE = "2025-11-25"
GATEWAY_ARGS: list[str] = os.environ.get("STUCK_GATEWAY_ARGS", "").split()
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


# --- the upstream (run as a subprocess of the gateway) --------------------------------------------


def upstream() -> None:
    from mcp.server.lowlevel.server import Server
    from mcp.server.stdio import stdio_server

    state = {"round": 0}

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        tools = [types.Tool(name="burst", input_schema={"type": "object"})]
        # The list's content changes every round (a tool comes and goes), without growing.
        if state["round"] % 2:
            tools.append(types.Tool(name="odd_round", input_schema={"type": "object"}))
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        for _ in range(int((params.arguments or {}).get("updates", 0))):
            await ctx.session.send_resource_updated(URI)
        state["round"] += 1
        await ctx.session.send_tool_list_changed()
        return types.CallToolResult(content=[types.TextContent(type="text", text=str(state["round"]))])

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[types.Resource(uri=URI, name="feed")])

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=params.uri, text="x")])

    async def subscribe(ctx: Any, params: Any) -> types.EmptyResult:
        return types.EmptyResult()

    server: Server[Any] = Server(
        "feed",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
        on_subscribe_resource=subscribe,
        on_unsubscribe_resource=subscribe,
    )

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(serve)


# --- the attack and the measurement ---------------------------------------------------------------


def report_log(log_path: Path) -> None:
    """What the gateway logged: its WARNINGs for ended sessions, and any ERROR (there should be none)."""
    log = log_path.read_text(errors="replace")
    if os.environ.get("STUCK_KEEP_LOG"):
        Path(os.environ["STUCK_KEEP_LOG"]).write_text(log)
    closing = log.count("closing session")
    errors = [line for line in log.splitlines() if " ERROR " in line or "Traceback" in line]
    print(f"gateway log: {closing} 'closing session' warnings, {len(errors)} ERROR lines", file=sys.stderr)
    for line in errors[:5]:
        print("   ", line, file=sys.stderr)


def rss_mib(pid: int) -> float:
    kib = rss_kib(pid)
    if kib is None:
        raise RuntimeError("no VmRSS")
    return kib / 1024


async def post(http: httpx2.AsyncClient, body: dict[str, Any], session: str | None = None) -> httpx2.Response:
    headers = dict(HEADERS)
    if session is not None:
        headers |= {"mcp-session-id": session, "mcp-protocol-version": HANDSHAKE}
    return await http.post("/mcp", json=body, headers=headers)


async def stuck_session(http: httpx2.AsyncClient, port: int) -> None:
    """One session that subscribes, opens its GET stream and never reads it, until the gateway ends it."""
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "stuck", "version": "1"}},
    }
    opened = await post(http, init)
    session = opened.headers["mcp-session-id"]
    await post(http, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    await post(http, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, session)
    await post(http, {"jsonrpc": "2.0", "id": 3, "method": "resources/subscribe", "params": {"uri": URI}}, session)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    try:
        await loop.sock_connect(sock, ("127.0.0.1", port))
        request = (
            f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n"
            f"Mcp-Session-Id: {session}\r\nMcp-Protocol-Version: {HANDSHAKE}\r\n\r\n"
        )
        await loop.sock_sendall(sock, request.encode())
        while True:  # never read the stream: only see whether the session still exists
            await anyio.sleep(0.2)
            try:
                ping = await post(http, {"jsonrpc": "2.0", "id": 4, "method": "ping"}, session)
            except httpx2.TransportError:  # the session ended while its ping was answered
                return
            if ping.status_code == 404:
                return
    finally:
        sock.close()


async def measure(seconds: float, attackers: int) -> dict[str, Any]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "patchbay.json"
        config.write_text(
            json.dumps(
                {
                    "mcpServers": {
                        "feed": {
                            "command": sys.executable,
                            "args": ["-m", "benchmarks.stuck_stream", "--upstream"],
                            "cwd": str(ROOT),
                        }
                    },
                    "patchbay": {"watch": False},
                }
            )
        )
        log_path = Path(folder) / "gateway.log"
        log_file = log_path.open("wb")
        gateway = subprocess.Popen(  # noqa: ASYNC220 - started once, before anything runs
            [sys.executable, "-m", "mcp_patchbay", "serve", "--http", f"127.0.0.1:{port}", str(config), *GATEWAY_ARGS],
            cwd=ROOT,
            stderr=log_file,
            env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        )
        try:
            return await _attack(gateway.pid, base, port, seconds, attackers)
        finally:
            gateway.terminate()
            try:
                gateway.wait(10)
            except subprocess.TimeoutExpired:
                print("the gateway did not exit 10 s after SIGTERM: killed", file=sys.stderr)
                gateway.kill()
                gateway.wait()
            log_file.close()
            report_log(log_path)


@asynccontextmanager
async def session(base: str, http: httpx2.AsyncClient, on_message: Any = None) -> AsyncGenerator[Client]:
    transport = streamable_http_client(f"{base}/mcp", http_client=http)
    async with Client(transport, mode="legacy", cache=None, message_handler=on_message) as client:  # pyright: ignore[reportArgumentType]
        yield client


async def _attack(pid: int, base: str, port: int, seconds: float, attackers: int) -> dict[str, Any]:
    async with httpx2.AsyncClient(base_url=base, timeout=10) as http:
        with anyio.fail_after(30):
            while True:
                try:
                    if (await http.get("/readyz")).status_code == 200:
                        break
                except httpx2.TransportError:
                    pass
                await anyio.sleep(0.1)
    ended = 0
    told = anyio.Event()
    latencies: list[float] = []
    stop = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            told.set()

    async def attacker() -> None:
        nonlocal ended
        async with httpx2.AsyncClient(base_url=base, timeout=10) as http:
            while not stop.is_set():
                await stuck_session(http, port)
                ended += 1

    async with (
        httpx2.AsyncClient(timeout=30) as http_normal,
        httpx2.AsyncClient(timeout=30) as http_driver,
        session(base, http_normal, on_message) as normal,
        session(base, http_driver) as driver,
        anyio.create_task_group() as tg,
    ):
        await normal.list_tools()
        samples: list[tuple[float, float]] = [(0.0, round(rss_mib(pid), 1))]  # before the attack
        for _ in range(attackers):
            tg.start_soon(attacker)
        started = time.monotonic()
        next_sample = started + 5
        while time.monotonic() - started < seconds:
            told = anyio.Event()
            await driver.call_tool("feed__burst", {"updates": 250})
            called = time.monotonic()
            with anyio.move_on_after(5):
                await told.wait()
            latencies.append(time.monotonic() - called if told.is_set() else float("inf"))
            await normal.list_tools()  # listed again: owed the next change
            if time.monotonic() >= next_sample:
                samples.append((round(time.monotonic() - started, 1), round(rss_mib(pid), 1)))
                print(f"t={samples[-1][0]:5.1f}s gateway rss={samples[-1][1]:.1f} MiB", file=sys.stderr, flush=True)
                next_sample += 5
        stop.set()
        tg.cancel_scope.cancel()
    finite = [x for x in latencies if x != float("inf")]
    return {
        "seconds": seconds,
        "attackers": attackers,
        "rss_mib": samples,
        "growth_mib": round(samples[-1][1] - samples[0][1], 1),
        "growth_after_5s_mib": round(samples[-1][1] - samples[1][1], 1) if len(samples) > 2 else None,
        "stuck_sessions_ended": ended,
        "list_changed": {
            "rounds": len(latencies),
            "missed": len(latencies) - len(finite),
            "median_ms": round(statistics.median(finite) * 1000, 1) if finite else None,
            "max_ms": round(max(finite) * 1000, 1) if finite else None,
        },
        "load_average": os.getloadavg(),
    }


def main() -> None:
    if "--upstream" in sys.argv:
        upstream()
        return
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--attackers", type=int, default=4)
    args = parser.parse_args()
    print(json.dumps(anyio.run(measure, args.seconds, args.attackers), indent=1))


if __name__ == "__main__":
    main()
