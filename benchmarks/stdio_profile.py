"""Where the proxied path spends its time: CPU per call, a py-spy profile, import cost.

    .venv/bin/python -m benchmarks.stdio_profile [--seconds 10] [--calls 4000]

1. CPU per call, from /proc/PID/stat: the proxy and its upstream under a steady load from
   a raw JSON-RPC client (16 in flight), against the same bench_server driven directly.
   Rounds alternate.
2. ``py-spy record --gil --format speedscope`` attached to the proxy under the same load
   (``.bench/profile.speedscope.json``; open it at speedscope.app). ``--gil`` keeps only
   samples of the thread holding the GIL: the proxy's Python work, without idle waits.
   The samples are summed by category of the innermost frame (self time) and by the
   stages of the call path found anywhere on the stack (inclusive time).
3. Import cost: the wall time of importing what the proxy imports at start, against what
   a minimal SDK server (bench_server) imports.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
from tests.processes import children_of, cpu_seconds

from benchmarks.common import (
    BENCH_SERVER,
    PY,
    ROOT,
    WORK,
    bench_server_entry,
    log,
    median,
    proxy_command,
    raw_process,
    write_config,
)

PYSPY = str(ROOT / ".venv" / "bin" / "py-spy")
ARGS = {"text": "hello"}

# Self time: the innermost frame decides; the first rule that matches wins.
CATEGORIES: list[tuple[str, tuple[str, ...]]] = [
    ("pydantic validation / serialization (SDK models)", ("pydantic",)),
    ("stdlib json", ("/json/",)),
    (
        "thread hand-offs (anyio.to_thread for stdin/stdout, queue, locks, loop wake-ups)",
        (
            "threading.py",
            "queue.py",
            "to_thread",
            "run_sync_in_worker_thread",
            "WorkerThread",
            "_fileio.py",
            "concurrent/futures",
            "_read_from_self",
            "_write_to_self",
            "call_soon_threadsafe",
        ),
    ),
    ("mcp-patchbay (src/mcp_patchbay)", ("mcp_patchbay",)),
    ("OpenTelemetry (the SDK's spans; no exporter installed)", ("opentelemetry", "_otel")),
    ("MCP SDK (dispatcher, sessions, runner)", ("/mcp/", "mcp_types")),
    ("logging", ("/logging/",)),
    (
        "anyio / asyncio machinery (tasks, cancel scopes, memory streams, event loop)",
        ("asyncio", "anyio", "selectors", "sniffio", "contextlib", "contextvars", "typing.py"),
    ),
]

_STDIO = "mcp_patchbay/upstreams/transports/stdio.py"

# Inclusive time: a sample counts for a stage when any frame on its stack matches (file part, function part).
STAGES: list[tuple[str, tuple[tuple[str, str], ...]]] = [
    ("downstream read: wire.stdio read_stdin (parse + validate)", (("mcp_patchbay/wire/stdio.py", "read_stdin"),)),
    ("downstream write: wire.stdio write_stdout (dump + write)", (("mcp_patchbay/wire/stdio.py", "write_stdout"),)),
    ("client-side lane: stdio_calls.CallLane (take, run, answer)", (("mcp_patchbay/fastpath/stdio_calls.py", ""),)),
    ("upstream lane: pipe_calls.RawCalls (send, match the answer)", (("mcp_patchbay/fastpath/pipe_calls.py", ""),)),
    ("the call path's steps (calls.steps, calls.resolve)", (("calls/steps.py", ""), ("calls/resolve.py", ""))),
    ("policy chain (calls.policies: deadline, breaker, bulkhead, retry)", (("mcp_patchbay/calls/policies.py", ""),)),
    ("downstream via the SDK's threaded stdio_server (older proxies)", (("mcp/server/stdio.py", "std"),)),
    ("SDK request dispatch (JSONRPCDispatcher._handle_request)", (("jsonrpc_dispatcher.py", "_handle_request"),)),
    ("any mcp-patchbay frame on the stack (src/mcp_patchbay)", (("mcp_patchbay/", ""),)),
    ("upstream request send (dispatcher send_raw_request / send_request)", (("mcp/", "send_r"),)),
    ("upstream write: stdio write_stdin (dump + pipe write)", ((_STDIO, "write_stdin"),)),
    ("upstream read: stdio read_stdout (parse + validate)", ((_STDIO, "read_stdout"),)),
    ("OpenTelemetry spans and context (SDK; no exporter installed)", (("", "otel"), ("opentelemetry", ""))),
    ("pydantic anywhere on the stack", (("pydantic", ""),)),
]  # fmt: skip


# --- 1. CPU per call ----------------------------------------------------------------------


async def proxy_cpu(command: list[str], calls: int) -> tuple[float, float, float]:
    """(proxy CPU ms per call, upstream CPU ms per call, calls per second)."""
    async with raw_process(command) as session:
        await session.initialize()
        tools = [t["name"] for t in (await session.request("tools/list"))["tools"]]
        await session.load(tools, ARGS, 1000, 16)
        upstream = children_of(session.pid)[0]
        proxy0, up0 = cpu_seconds(session.pid) or 0.0, cpu_seconds(upstream) or 0.0
        seconds, _ = await session.load(tools, ARGS, calls, 16)
        proxy1, up1 = cpu_seconds(session.pid) or 0.0, cpu_seconds(upstream) or 0.0
    return (proxy1 - proxy0) / calls * 1000, (up1 - up0) / calls * 1000, calls / seconds


async def direct_cpu(calls: int) -> tuple[float, float]:
    async with raw_process([PY, BENCH_SERVER]) as session:
        await session.initialize()
        await session.load(["echo"], ARGS, 1000, 16)
        before = cpu_seconds(session.pid) or 0.0
        seconds, _ = await session.load(["echo"], ARGS, calls, 16)
        after = cpu_seconds(session.pid) or 0.0
    return (after - before) / calls * 1000, calls / seconds


async def cpu_per_call(calls: int, rounds: int) -> dict[str, Any]:
    config = write_config("profile-1", {"bench": bench_server_entry()})
    rows: dict[str, list[float]] = collections.defaultdict(list)
    for _ in range(rounds):
        up, rate = await direct_cpu(calls)
        rows["direct_upstream"].append(up)
        rows["direct_rate"].append(rate)
        proxy, up, rate = await proxy_cpu(proxy_command(config), calls)
        rows["proxy"].append(proxy)
        rows["proxied_upstream"].append(up)
        rows["proxied_rate"].append(rate)
    result = {key: median(values) for key, values in rows.items()}
    log(f"  CPU per call: proxy {result['proxy']:.3f} ms, upstream {result['direct_upstream']:.3f} ms")
    return result


# --- 2. py-spy ------------------------------------------------------------------------------


async def record(seconds: int, output: Path) -> dict[str, Any]:
    config = write_config("profile-1", {"bench": bench_server_entry()})
    async with raw_process(proxy_command(config)) as session:
        await session.initialize()
        tools = [t["name"] for t in (await session.request("tools/list"))["tools"]]
        await session.load(tools, ARGS, 1000, 16)
        command = [PYSPY, "record", "--pid", str(session.pid), "--duration", str(seconds), "--rate", "250"]
        command += ["--gil", "--nonblocking", "--format", "speedscope", "--output", str(output)]
        spy = await anyio.open_process(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        calls = 0
        started = time.perf_counter()
        while spy.returncode is None:
            await session.load(tools, ARGS, 500, 16)
            calls += 500
            with anyio.move_on_after(0):
                await spy.wait()
        await spy.wait()
        elapsed = time.perf_counter() - started
        if spy.returncode != 0 or not exists(output):
            error = b""
            if spy.stderr is not None:
                error = await spy.stderr.receive() if spy.returncode else b""
            raise RuntimeError(f"py-spy failed ({spy.returncode}): {error.decode(errors='replace')[:500]}")
    shown = " ".join(command).replace(str(ROOT) + "/", "").replace(str(session.pid), "PROXY_PID")
    return {"command": shown, "calls": calls, "calls_per_second": calls / elapsed}


def exists(path: Path) -> bool:
    return path.exists()


def analyse(path: Path) -> dict[str, Any]:
    document = json.loads(path.read_text())
    frames = document["shared"]["frames"]

    def where(index: int) -> tuple[str, str]:
        frame = frames[index]
        return frame.get("file", "") or "", frame["name"]

    total = 0.0
    by_category: collections.Counter[str] = collections.Counter()
    by_stage: collections.Counter[str] = collections.Counter()
    by_function: collections.Counter[str] = collections.Counter()
    by_thread: collections.Counter[str] = collections.Counter()
    for profile in document["profiles"]:
        thread = "worker threads" if "worker" in profile["name"].lower() else "main thread"
        for stack, weight in zip(profile["samples"], profile["weights"], strict=True):
            if not stack:
                continue
            total += weight
            by_thread[thread] += weight
            file, name = where(stack[-1])
            short = re.sub(r".*/(site-packages|src|lib/python3\.\d+)/", "", file)
            by_function[f"{name} ({short})"] += weight
            category = "other"
            for label, needles in CATEGORIES:
                if any(n in file or n in name for n in needles):
                    category = label
                    break
            by_category[category] += weight
            places = [where(i) for i in stack]
            for label, alternatives in STAGES:
                if any(fp in f and np in n for f, n in places for fp, np in alternatives):
                    by_stage[label] += weight

    def shares(counter: collections.Counter[str], limit: int | None = None) -> list[tuple[str, float]]:
        return [(k, v / total * 100) for k, v in counter.most_common(limit)] if total else []

    return {
        "samples_seconds": total,
        "categories": shares(by_category),
        "stages": [(label, by_stage[label] / total * 100 if total else 0.0) for label, _ in STAGES],
        "functions": shares(by_function, 15),
        "threads": shares(by_thread),
    }


# --- 3. imports -----------------------------------------------------------------------------

IMPORTS = {
    "interpreter only (python -c pass)": "pass",
    "what bench_server imports (mcp low-level Server + stdio)": "import mcp.server.lowlevel.server, mcp.server.stdio",
    "what the proxy imports to serve": (
        "import mcp_patchbay.cli, mcp_patchbay.session.proxy, mcp_patchbay.config.watch, mcp.server.stdio"
    ),
}


def import_costs(rounds: int = 3) -> dict[str, float]:
    samples: dict[str, list[float]] = {label: [] for label in IMPORTS}
    for _ in range(rounds):
        for label, code in IMPORTS.items():
            started = time.perf_counter()
            subprocess.run([PY, "-c", code], check=True, cwd=ROOT)
            samples[label].append((time.perf_counter() - started) * 1000)
    return {label: median(values) for label, values in samples.items()}


def own_imports() -> list[tuple[str, float]]:
    """The slowest imports of the proxy, cumulative ms, from ``python -X importtime``."""
    done = subprocess.run(
        [PY, "-X", "importtime", "-c", IMPORTS["what the proxy imports to serve"]],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    rows: list[tuple[str, float]] = []
    for line in done.stderr.splitlines():
        parts = line.split("|")
        if len(parts) != 3 or not parts[1].strip().isdigit():
            continue
        name = parts[2].strip()
        if name.startswith("mcp_patchbay") or name.split(".")[0] in ("httpx2", "jsonschema", "rapidfuzz", "mcp"):
            rows.append((parts[2].rstrip(), int(parts[1]) / 1000))
    top = [r for r in rows if not r[0].startswith("    ")]  # three levels deep at most
    return sorted(top, key=lambda r: -r[1])[:12]


async def run(seconds: int, calls: int, rounds: int) -> dict[str, Any]:
    output = WORK / "profile.speedscope.json"
    result: dict[str, Any] = {"cpu": await cpu_per_call(calls, rounds)}
    try:
        result["record"] = await record(seconds, output)
        result["profile"] = analyse(output)
        result["profile_file"] = str(output.relative_to(ROOT))
    except Exception as exc:
        log(f"  py-spy profile failed: {exc!r}")
        result["profile_error"] = repr(exc)
    result["imports"] = import_costs()
    result["own_imports"] = own_imports()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=10, help="py-spy recording time")
    parser.add_argument("--calls", type=int, default=4000, help="calls per CPU-time round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(json.dumps(anyio.run(run, args.seconds, args.calls, args.rounds), indent=1))


if __name__ == "__main__":
    main()
