"""The peer column of ``gateway.py``: mcp-hub, an aggregator users compare the gateway with.

``npm install --prefix .bench/peers mcp-hub@4.2.1`` once (``.bench/`` is git-ignored; ``install``
does it, as tests/e2e installs the real clients), then ``gateway.py --peer`` runs it in front of
the same upstream, by URL, and measures it interleaved with direct and the gateway. mcp-hub
serves the older HTTP+SSE transport at ``/mcp`` (a GET stream, POSTs to the endpoint it names),
so its load generator is ``gateway_load.py --era sse``; its tool is ``bench__echo``.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from typing import Any

from tests.processes import free_port

from benchmarks.common import ROOT, WORK, errlog

HUB_VERSION = "4.2.1"
PEERS = ROOT / ".bench" / "peers"
HUB = PEERS / "node_modules" / ".bin" / "mcp-hub"


def install() -> str | None:
    """Install mcp-hub into ``.bench/peers`` if it is not there; why it cannot be, or None."""
    if HUB.exists():
        return None
    npm = shutil.which("npm")
    if npm is None:
        return "npm is not on PATH"
    PEERS.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [npm, "install", "--prefix", str(PEERS), "--no-audit", "--no-fund", f"mcp-hub@{HUB_VERSION}"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    return None if done.returncode == 0 and HUB.exists() else f"npm install failed: {done.stderr[-300:]}"


@contextlib.contextmanager
def hub(upstream_url: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """mcp-hub with the upstream in its config; yields (process, /mcp URL) once its server is connected."""
    WORK.mkdir(exist_ok=True)
    config = WORK / "hub-config.json"
    config.write_text(json.dumps({"mcpServers": {"bench": {"url": upstream_url}}}), encoding="utf-8")
    port = free_port()
    process = subprocess.Popen(
        [str(HUB), "--port", str(port), "--config", str(config)], stdout=subprocess.PIPE, stderr=errlog(), text=True
    )
    try:
        deadline = time.perf_counter() + 60
        assert process.stdout is not None
        while True:  # its JSON log says when every server started
            line = process.stdout.readline()
            if not line:
                raise RuntimeError("mcp-hub exited before its servers started")
            if "servers started" in line:
                break
            if time.perf_counter() > deadline:
                raise TimeoutError("mcp-hub did not start its server within 60 s")
        with socket.create_connection(("127.0.0.1", port), timeout=10):
            pass
        drain = subprocess.Popen(["cat"], stdin=process.stdout, stdout=subprocess.DEVNULL)  # keep its pipe read
        yield process, f"http://127.0.0.1:{port}/mcp"
        drain.kill()
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


def render_peer(report: dict[str, Any]) -> list[str]:
    """The three sides, one row per cell that ran the peer."""
    rows = [c for c in report["cells"] if "peer" in c]
    if not rows:
        return []
    lines = [
        "",
        f"| era | clients | direct calls/s | mcp-patchbay calls/s (ratio) | mcp-hub {HUB_VERSION} calls/s (ratio) "
        "| gateway CPU ms/call | mcp-hub CPU ms/call |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    nan = float("nan")
    for cell in rows:
        d, g, p = cell["direct"], cell["gateway"], cell["peer"]
        lines.append(
            f"| {cell['era']} | {cell['clients']} | {d['throughput']:,.0f} "
            f"| {g['throughput']:,.0f} ({cell['throughput_ratio']:.2f}) "
            f"| {p['throughput']:,.0f} ({p['throughput'] / d['throughput']:.2f}) "
            f"| {g.get('gateway_cpu_ms_per_call', nan):.2f} | {p.get('peer_cpu_ms_per_call', nan):.2f} |"
        )
    return lines
