"""The HTTP gateway against the same upstream served directly, side by side in one run.

    .venv/bin/python -m benchmarks.gateway [--quick] [--json] [--reps 5] [--seconds 3]

Benchmarks, not tests. Three processes besides this one:

- the upstream: ``tests/servers/gateway_upstream.py``, the SDK's low-level ``Server`` under
  uvicorn at ``/mcp``, a tool ``echo`` that answers at once, both protocol eras;
- one gateway replica: ``mcp-patchbay serve --http 127.0.0.1:PORT CONFIG``, the config naming
  that upstream by URL (its tool is ``bench__echo`` there) and ``patchbay.max_concurrency`` 128;
- the load generator, ``benchmarks/gateway_load.py``, a new process for every run: raw
  HTTP/1.1 with pre-built request bytes (``--client sdk``: the SDK's ``Client``).

With ``--peer``, a peer users would pick stands beside them (``gateway_peer``: mcp-hub, installed
once into the git-ignored ``.bench/peers``) in front of the same upstream, measured in the same
interleaved 2025-era cells (it serves the HTTP+SSE transport: ``gateway_load.py --era sse``), and
a second table gives the three sides with their ratios to direct and their CPU per call.

Calls per second, median and p99 latency of ``tools/call`` with 1, 10 and 100 concurrent
clients (each its own connection, one call at a time), for both eras: 2025-11-25 sessions and
stateless 2026-07-28 requests. Each cell runs ``--reps`` times per side, the sides
interleaved (direct, gateway, gateway, direct, ...); the figures are medians of the runs. The
CPU time of every process in each measured window gives the CPU per call of the upstream, the
gateway and the load generator. Then the gateway's memory per idle 2025-era session (VmRSS
before and after opening N sessions: ``initialize`` and ``notifications/initialized``, no GET
stream), beside the upstream's own for the same sessions opened directly; and, unless
``--no-client-cost``, what the SDK's client costs against the raw one. The load average is
read at the start and at the end. Everything is also written to ``.bench/gateway.json``.

Targets (issue 15): gateway throughput at least 0.7 of direct, added median latency under 1 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import select
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

from tests.processes import cpu_seconds, free_port, rss_kib

from benchmarks.common import PY, ROOT, WORK, errlog, log, median, write_config
from benchmarks.gateway_load import Connection, HTTPError, http_request
from benchmarks.gateway_peer import hub, install, render_peer

UPSTREAM_SCRIPT = str(ROOT / "tests" / "servers" / "gateway_upstream.py")
LOAD_SCRIPT = str(ROOT / "benchmarks" / "gateway_load.py")
THROUGHPUT_TARGET = 0.7
ADDED_MEDIAN_TARGET_MS = 1.0
MAX_CONCURRENCY = 128
MAX_SESSIONS = 1000  # the gateway's max_sessions: the idle-session figure opens up to 1000
"""``patchbay.max_concurrency`` in the gateway's config: more than the most clients a run has."""


# --- processes -------------------------------------------------------------------------------


def read_line(stream: IO[str], timeout: float, what: str) -> str:
    """One line from a child's stdout, waiting at most ``timeout`` seconds."""
    ready, _, _ = select.select([stream], [], [], timeout)
    if not ready:
        raise TimeoutError(f"{what}: no answer within {timeout:.0f}s")
    line = stream.readline()
    if not line:
        raise RuntimeError(f"{what}: the process ended (its stderr is in {WORK / 'processes.log'})")
    return line


def stop(process: subprocess.Popen[Any]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


@contextlib.contextmanager
def upstream(tools: int = 1) -> Iterator[tuple[subprocess.Popen[str], str]]:
    port = free_port()
    command = [PY, UPSTREAM_SCRIPT, "--port", str(port), "--tools", str(tools)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errlog(), text=True, cwd=ROOT)
    try:
        assert process.stdout is not None
        read_line(process.stdout, 60, "the upstream's start")
        yield process, f"http://127.0.0.1:{port}/mcp"
    finally:
        stop(process)


def http_get(url: str, timeout: float = 5) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            return answer.status, answer.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


@contextlib.contextmanager
def gateway(upstream_url: str) -> Iterator[tuple[subprocess.Popen[str], str, float]]:
    """``mcp-patchbay serve --http`` with the upstream in its config; yields (process, /mcp URL, s to ready)."""
    # max_concurrency: the default (16 in flight, 64 queued per upstream) is sized for one desktop
    # client; 100 benchmark clients would get BULKHEAD_FULL results instead of calls. Every client
    # here is one member (127.0.0.1, no sign-in): at the default max_sessions_per_identity (50) the
    # gateway would end the least recently used of 100 clients' sessions (404 "Session not found").
    config = write_config(
        "gateway-bench",
        {"bench": {"type": "http", "url": upstream_url}},
        gateway={"max_sessions_per_identity": MAX_SESSIONS},
        max_concurrency=MAX_CONCURRENCY,
    )
    port = free_port()
    arguments = ["serve", "--http", f"127.0.0.1:{port}", str(config), "--log-level", "WARNING"]
    command = [PY, "-m", "mcp_patchbay", *arguments]
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=errlog(), stderr=errlog(), text=True, cwd=ROOT)
    try:
        deadline = started + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the gateway exited with {process.returncode}: see {WORK / 'processes.log'}")
            with contextlib.suppress(OSError):
                if http_get(f"http://127.0.0.1:{port}/readyz", timeout=2)[0] == 200:
                    break
            if time.perf_counter() > deadline:
                raise TimeoutError("the gateway's /readyz did not answer 200 within 60 s")
            time.sleep(0.05)
        yield process, f"http://127.0.0.1:{port}/mcp", time.perf_counter() - started
    finally:
        stop(process)


# --- one measured run -------------------------------------------------------------------------


@dataclass
class Side:
    label: str
    url: str
    tool: str
    pids: dict[str, int]
    """The server processes whose CPU time is read around each run, by role."""


def load_run(
    side: Side, era: str, clients: int, *, seconds: float, warmup: float, client: str = "raw"
) -> dict[str, Any]:
    command = [PY, LOAD_SCRIPT, "--url", side.url, "--era", era, "--clients", str(clients), "--tool", side.tool]
    command += ["--seconds", str(seconds), "--warmup", str(warmup), "--client", client]
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog(), text=True, cwd=ROOT
    )
    try:
        assert process.stdin is not None and process.stdout is not None
        read_line(process.stdout, 120, f"load generator for {side.label}")
        before = {role: cpu_seconds(pid) or 0.0 for role, pid in side.pids.items()}
        load_before = os.getloadavg()[0]
        process.stdin.write("go\n")
        process.stdin.flush()
        result: dict[str, Any] = json.loads(read_line(process.stdout, seconds + 120, f"{side.label} run"))
        after = {role: cpu_seconds(pid) or 0.0 for role, pid in side.pids.items()}
        process.wait(timeout=30)
    finally:
        stop(process)
    calls = max(1, result["calls"])
    for role in side.pids:
        result[f"{role}_cpu_ms_per_call"] = (after[role] - before[role]) / calls * 1000
    result["client_cpu_ms_per_call"] = result["client_cpu_s"] / calls * 1000
    result["client_busy"] = result["client_cpu_s"] / result["seconds"]
    result["load_1min"] = load_before
    if result["errors"]:
        log(f"    {side.label}: {result['errors']} errors, e.g. {result['error_samples']}")
    return result


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    keys = [k for k in runs[0] if isinstance(runs[0][k], int | float) and not isinstance(runs[0][k], bool)]
    summary: dict[str, Any] = {k: median([float(r[k]) for r in runs]) for k in keys}
    summary["errors"] = sum(r["errors"] for r in runs)
    summary["runs"] = [{k: round(r[k], 4) if isinstance(r[k], float) else r[k] for k in keys} for r in runs]
    return summary


def compare(
    direct: Side,
    through: Side,
    *,
    eras: list[str],
    concurrency: list[int],
    reps: int,
    seconds: float,
    warmup: float,
    peer: Side | None = None,
) -> list[dict[str, Any]]:
    """Each cell: ``reps`` runs per side, the order rotating every repetition; medians of runs.
    ``peer`` (mcp-hub, HTTP+SSE: ``gateway_peer``) runs in the 2025-era cells beside them."""
    cells: list[dict[str, Any]] = []
    for era in eras:
        sides = [direct, through] + ([peer] if peer is not None and era == "2025" else [])
        for clients in concurrency:
            runs: dict[str, list[dict[str, Any]]] = {side.label: [] for side in sides}
            for rep in range(reps):
                shift = rep % len(sides)
                order = sides[shift:] + sides[:shift]
                if rep % 2:
                    order.reverse()
                for side in order:
                    side_era = "sse" if side is peer else era
                    runs[side.label].append(load_run(side, side_era, clients, seconds=seconds, warmup=warmup))
                log(
                    f"  era {era}, {clients:3d} clients, rep {rep + 1}/{reps}: "
                    + ", ".join(
                        f"{label} {r[-1]['throughput']:.0f}/s median {r[-1]['median_ms']:.2f} ms"
                        for label, r in runs.items()
                    )
                )
            d = summarize(runs[direct.label])
            g = summarize(runs[through.label])
            cell: dict[str, Any] = {
                "era": era,
                "clients": clients,
                "direct": d,
                "gateway": g,
                "throughput_ratio": g["throughput"] / d["throughput"],
                "added_median_ms": g["median_ms"] - d["median_ms"],
                "added_p99_ms": g["p99_ms"] - d["p99_ms"],
            }
            if peer is not None and peer.label in runs:
                cell["peer"] = summarize(runs[peer.label])
            cells.append(cell)
    return cells


# --- memory per idle session ------------------------------------------------------------------


async def open_sessions(url: str, count: int, parallel: int = 20) -> list[str]:
    """``count`` 2025-11-25 sessions (initialize + initialized), over ``parallel`` connections."""
    host, _, path = url.split("://", 1)[1].partition("/")
    hostname, _, port = host.rpartition(":")
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    initialize = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "idle", "version": "1"},
            },
        }
    ).encode()
    initialized = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
    ids: list[str] = []

    async def opener(n: int) -> None:
        _, conn = await asyncio.get_running_loop().create_connection(Connection, hostname, int(port))
        try:
            for _ in range(n):
                status, head, body = await asyncio.wait_for(
                    conn.send(http_request("POST", "/" + path, host, headers, initialize)), 30
                )
                marker = head.find(b"\r\nmcp-session-id:")
                if status != 200 or marker < 0:
                    raise HTTPError(f"initialize: HTTP {status}: {body[:200]!r}")
                session_id = head[marker + 17 :].split(b"\r\n", 1)[0].strip().decode()
                with_session = {**headers, "mcp-session-id": session_id, "mcp-protocol-version": "2025-11-25"}
                status, _, body = await asyncio.wait_for(
                    conn.send(http_request("POST", "/" + path, host, with_session, initialized)), 30
                )
                if status != 202:
                    raise HTTPError(f"initialized: HTTP {status}: {body[:200]!r}")
                ids.append(session_id)
        finally:
            conn.close()

    shares = [count // parallel + (1 if i < count % parallel else 0) for i in range(parallel)]
    await asyncio.gather(*(opener(n) for n in shares if n))
    return ids


async def delete_sessions(url: str, ids: list[str], parallel: int = 20) -> None:
    host, _, path = url.split("://", 1)[1].partition("/")
    hostname, _, port = host.rpartition(":")

    async def deleter(chunk: list[str]) -> None:
        _, conn = await asyncio.get_running_loop().create_connection(Connection, hostname, int(port))
        try:
            for session_id in chunk:
                headers = {"mcp-session-id": session_id, "mcp-protocol-version": "2025-11-25"}
                await asyncio.wait_for(conn.send(http_request("DELETE", "/" + path, host, headers)), 30)
        finally:
            conn.close()

    await asyncio.gather(*(deleter(ids[i::parallel]) for i in range(parallel) if ids[i::parallel]))


def idle_sessions(side: Side, counts: list[int]) -> list[dict[str, Any]]:
    """RSS of each of ``side``'s processes before and after opening idle sessions through it.

    Cumulative: sessions stay open from one count to the next (deleting them would let the
    next ones reuse the freed memory), and are all deleted at the end. A few sessions are
    opened and deleted first, so that what the first one imports or builds is not counted.
    """
    asyncio.run(delete_sessions(side.url, asyncio.run(open_sessions(side.url, 20))))
    time.sleep(1)
    base = {role: rss_kib(pid) or 0 for role, pid in side.pids.items()}
    results: list[dict[str, Any]] = []
    ids: list[str] = []
    for count in counts:
        started = time.perf_counter()
        ids += asyncio.run(open_sessions(side.url, count - len(ids)))
        opened_in = time.perf_counter() - started
        time.sleep(2)  # let whatever a session starts settle
        after = {role: rss_kib(pid) or 0 for role, pid in side.pids.items()}
        entry: dict[str, Any] = {"side": side.label, "sessions": count, "open_seconds": opened_in}
        for role in side.pids:
            entry[role] = {
                "rss_before_kib": base[role],
                "rss_after_kib": after[role],
                "bytes_per_session": (after[role] - base[role]) * 1024 / count,
            }
        results.append(entry)
        log(
            f"  {side.label}: {count} idle sessions: "
            + ", ".join(
                f"{role} {base[role] / 1024:.1f} -> {after[role] / 1024:.1f} MiB "
                f"({entry[role]['bytes_per_session'] / 1024:.1f} KiB/session)"
                for role in side.pids
            )
        )
    asyncio.run(delete_sessions(side.url, ids))
    time.sleep(1)
    for entry in results:
        for role in side.pids:
            entry[role]["rss_after_delete_all_kib"] = rss_kib(side.pids[role]) or 0
    return results


# --- what a client costs ----------------------------------------------------------------------


def client_cost(direct: Side, eras: list[str], seconds: float, warmup: float) -> list[dict[str, Any]]:
    """The raw load generator against the SDK's Client, on the upstream directly."""
    rows: list[dict[str, Any]] = []
    for era in eras:
        for clients in (1, 10):
            for kind in ("raw", "sdk"):
                run = load_run(direct, era, clients, seconds=seconds, warmup=warmup, client=kind)
                rows.append({"era": era, "clients": clients, "client": kind, **run})
                log(
                    f"  client cost, era {era}, {clients} clients, {kind}: {run['throughput']:.0f}/s, "
                    f"client {run['client_cpu_ms_per_call']:.3f} ms CPU/call, "
                    f"upstream {run['upstream_cpu_ms_per_call']:.3f} ms CPU/call"
                )
    return rows


# --- report -----------------------------------------------------------------------------------


def versions() -> dict[str, str]:
    from importlib.metadata import version

    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT, check=False
    )
    return {
        "python": platform.python_version(),
        "mcp": version("mcp"),
        "uvicorn": version("uvicorn"),
        "starlette": version("starlette"),
        "httpx2": version("httpx2"),
        "commit": commit.stdout.strip(),
        "cores": str(os.cpu_count()),
    }


def verdict(ok: bool) -> str:
    return "pass" if ok else "FAIL"


def render(report: dict[str, Any]) -> str:
    lines = [
        f"load average (1, 5, 15 min): start {report['load_start']}, end {report['load_end']}; "
        f"{report['reps']} runs of {report['seconds']} s per side and cell, interleaved; medians of runs",
        f"versions: {report['versions']}",
        "A/A RUN: a second upstream stands in the gateway's place"
        if report.get("aa")
        else f"gateway ready (/readyz 200) {report['gateway_ready_s'] * 1000:.0f} ms after spawn",
        "",
        "| era | clients | direct calls/s | gateway calls/s | ratio | direct median ms | gateway median ms "
        "| added median ms | direct p99 ms | gateway p99 ms "
        "| upstream / gateway / client CPU ms per call (gateway side) | target |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for cell in report["cells"]:
        d, g = cell["direct"], cell["gateway"]
        ok = cell["throughput_ratio"] >= THROUGHPUT_TARGET and cell["added_median_ms"] < ADDED_MEDIAN_TARGET_MS
        lines.append(
            f"| {cell['era']} | {cell['clients']} | {d['throughput']:,.0f} | {g['throughput']:,.0f} "
            f"| {cell['throughput_ratio']:.2f} | {d['median_ms']:.2f} | {g['median_ms']:.2f} "
            f"| {cell['added_median_ms']:+.2f} | {d['p99_ms']:.2f} | {g['p99_ms']:.2f} "
            f"| {g['upstream_cpu_ms_per_call']:.2f} / {g.get('gateway_cpu_ms_per_call', float('nan')):.2f} / "
            f"{g['client_cpu_ms_per_call']:.2f} | {verdict(ok)} |"
        )
    errors = sum(c["direct"]["errors"] + c["gateway"]["errors"] for c in report["cells"])
    errors += sum(c["peer"]["errors"] for c in report["cells"] if "peer" in c)
    lines.append(f"\nerrors in all runs: {errors}")
    lines += render_peer(report)
    if report.get("memory"):
        lines += ["", "| side | idle 2025 sessions | process | RSS before MiB | after MiB | per session KiB |"]
        lines.append("| --- | ---: | --- | ---: | ---: | ---: |")
        for entry in report["memory"]:
            for role in ("gateway", "upstream"):
                if role in entry:
                    m = entry[role]
                    lines.append(
                        f"| {entry['side']} | {entry['sessions']} | {role} | {m['rss_before_kib'] / 1024:.1f} "
                        f"| {m['rss_after_kib'] / 1024:.1f} | {m['bytes_per_session'] / 1024:.1f} |"
                    )
    if report.get("client_cost"):
        lines += ["", "| era | clients | client | calls/s | client CPU ms per call | upstream CPU ms per call |"]
        lines.append("| --- | ---: | --- | ---: | ---: | ---: |")
        for row in report["client_cost"]:
            lines.append(
                f"| {row['era']} | {row['clients']} | {row['client']} | {row['throughput']:,.0f} "
                f"| {row['client_cpu_ms_per_call']:.3f} | {row['upstream_cpu_ms_per_call']:.3f} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2 runs of 1 s per side, 200 idle sessions")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--reps", type=int, default=5, help="runs per side and cell")
    parser.add_argument("--seconds", type=float, default=3.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=0.5, help="unmeasured seconds per run, before it")
    parser.add_argument("--concurrency", default="1,10,100")
    parser.add_argument("--eras", default="2025,2026")
    parser.add_argument("--sessions", default="200,1000", help="idle sessions for the memory figure")
    parser.add_argument("--no-memory", action="store_true")
    parser.add_argument("--upstream-tools", type=int, default=1, help="tools the upstream lists (a larger catalog)")
    parser.add_argument("--no-client-cost", action="store_true")
    parser.add_argument("--peer", action="store_true", help="mcp-hub beside them (gateway_peer; installs it once)")
    parser.add_argument(
        "--aa",
        action="store_true",
        help="an A/A run: a second upstream in the gateway's place (how far apart two identical sides come out)",
    )
    args = parser.parse_args()
    if args.quick:
        args.reps, args.seconds, args.warmup, args.sessions = 2, 1.0, 0.3, "200"
    eras = args.eras.split(",")
    concurrency = [int(c) for c in args.concurrency.split(",")]
    report: dict[str, Any] = {
        "load_start": " ".join(f"{v:.2f}" for v in os.getloadavg()),
        "versions": versions(),
        "reps": args.reps,
        "seconds": args.seconds,
    }
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        up, up_url = stack.enter_context(upstream(args.upstream_tools))
        report["upstream_tools"] = args.upstream_tools
        direct = Side("direct", up_url, "echo", {"upstream": up.pid})
        if args.aa:
            other, other_url = stack.enter_context(upstream(args.upstream_tools))
            through = Side("gateway", other_url, "echo", {"upstream": other.pid})
            report["gateway_ready_s"] = float("nan")
            report["aa"] = True
        else:
            gw, gw_url, report["gateway_ready_s"] = stack.enter_context(gateway(up_url))
            through = Side("gateway", gw_url, "bench__echo", {"upstream": up.pid, "gateway": gw.pid})
        peer: Side | None = None
        if args.peer:
            problem = install()
            if problem is not None:
                sys.exit(f"benchmarks.gateway: mcp-hub: {problem}")
            hub_process, hub_url = stack.enter_context(hub(up_url))
            peer = Side("mcp-hub", hub_url, "bench__echo", {"upstream": up.pid, "peer": hub_process.pid})
        probe = load_run(through, "2025", 1, seconds=0.2, warmup=0.1)
        probe_modern = load_run(through, "2026", 1, seconds=0.2, warmup=0.1)
        if probe["errors"] or probe_modern["errors"]:
            sys.exit(
                f"benchmarks.gateway: calls through the gateway fail: {probe['error_samples']}"
                f" {probe_modern['error_samples']}"
            )
        if not args.no_memory:  # first, while both processes are fresh: freed memory would be reused
            counts = sorted(int(n) for n in args.sessions.split(","))
            report["memory"] = idle_sessions(through, counts) + idle_sessions(direct, counts)
        report["cells"] = compare(
            direct,
            through,
            eras=eras,
            concurrency=concurrency,
            reps=args.reps,
            seconds=args.seconds,
            warmup=args.warmup,
            peer=peer,
        )
        if not args.no_client_cost:
            report["client_cost"] = client_cost(direct, eras, max(1.0, args.seconds / 2), args.warmup)
    report["load_end"] = " ".join(f"{v:.2f}" for v in os.getloadavg())
    report["total_seconds"] = time.perf_counter() - started
    WORK.mkdir(exist_ok=True)
    (WORK / "gateway.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(json.dumps(report, indent=1) if args.json else render(report))


if __name__ == "__main__":
    main()
