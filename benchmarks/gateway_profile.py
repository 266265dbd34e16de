"""Where the gateway's time goes: py-spy attached to one replica under load, summed.

    .venv/bin/python -m benchmarks.gateway_profile [--era 2025|2026] [--clients 10] [--seconds 10]

Starts the upstream and one gateway as ``gateway.py`` does, drives ``--clients`` raw
clients of ``--era`` through the gateway, and records the gateway with ``py-spy record --gil``
(only samples of the thread holding the GIL: its Python work, without idle waits). The
samples are summed by what the innermost frame belongs to (self time), by stages found
anywhere on the stack (inclusive time), and by function. The raw samples are kept in
``.bench/gateway-ERA.folded`` (flame-graph input). ``--target upstream`` profiles the
upstream instead, driven directly, for comparison.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import subprocess
import threading
from pathlib import Path

from benchmarks.common import ROOT, WORK, log
from benchmarks.gateway import Side, gateway, load_run, upstream

PYSPY = str(ROOT / ".venv" / "bin" / "py-spy")

# Self time: the innermost frame decides; the first rule that matches wins.
CATEGORIES: list[tuple[str, tuple[str, ...]]] = [
    ("pydantic (SDK models: validation, serialization)", ("(pydantic",)),
    ("stdlib json", ("(json/",)),
    ("mcp-patchbay (src/mcp_patchbay)", ("(mcp_patchbay/",)),
    ("OpenTelemetry (the SDK's spans)", ("(opentelemetry", "(trace/", "_otel.py")),
    ("MCP SDK (transports, dispatcher, sessions, runner)", ("(mcp/", "(mcp_types/")),
    ("uvicorn + h11 (HTTP server)", ("(uvicorn/", "(h11/")),
    ("starlette + sse_starlette (ASGI)", ("(starlette/", "(sse_starlette/")),
    ("httpx2 / httpcore2 (HTTP client to the upstream)", ("(httpx", "(httpcore")),
    ("prometheus_client", ("(prometheus_client/",)),
    ("logging", ("(logging/",)),
    ("socket writes and reads (asyncio transports)", ("selector_events.py",)),
    (
        "anyio / asyncio machinery (tasks, cancel scopes, memory streams, event loop)",
        ("(asyncio/", "(anyio/", "(selectors.py", "(sniffio/", "(contextlib.py", "(typing.py", "(weakref.py"),
    ),
    ("generated dataclass and pydantic __init__s (<string>)", ("(<string>",)),
]

# Inclusive time: a sample counts for a stage when any frame on its stack matches (file part, function part).
STAGES: list[tuple[str, tuple[tuple[str, str], ...]]] = [
    ("uvicorn h11 protocol: parse request, write response", (("uvicorn/protocols/http", ""),)),
    ("SDK streamable HTTP server transport (the client's side)", (("mcp/server/streamable_http", ""),)),
    ("SDK 2026-07-28 single-exchange entry", (("mcp/server/_streamable_http_modern.py", ""),)),
    ("SDK request dispatch on the client's side (JSONRPCDispatcher)", (("mcp/shared/jsonrpc_dispatcher.py", ""),)),
    ("mcp-patchbay gateway package", (("mcp_patchbay/gateway/", ""),)),
    ("mcp-patchbay server.Proxy (tool path)", (("mcp_patchbay/server.py", ""),)),
    ("policy chain (policies)", (("mcp_patchbay/policies.py", ""),)),
    ("upstream send (mcp_patchbay upstream.py, sdk.py)", (("mcp_patchbay/upstream.py", ""), ("mcp_patchbay/sdk", ""))),
    ("SDK streamable HTTP client (to the upstream)", (("mcp/client/streamable_http.py", ""),)),
    ("httpx2 / httpcore2 anywhere on the stack", (("httpx", ""), ("httpcore", ""))),
    ("sse_starlette EventSourceResponse", (("sse_starlette", ""),)),
    ("prometheus_client anywhere on the stack", (("prometheus_client", ""),)),
    ("OpenTelemetry anywhere on the stack", (("", "otel"), ("opentelemetry", ""))),
    ("pydantic anywhere on the stack", (("pydantic", ""),)),
    ("logging anywhere on the stack", (("/logging/", ""),)),
]  # fmt: skip


def read_folded(path: Path) -> list[tuple[list[str], int]]:
    samples: list[tuple[list[str], int]] = []
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            samples.append((stack.split(";"), int(count)))
    return samples


def summarize(samples: list[tuple[list[str], int]]) -> str:
    total = sum(n for _, n in samples) or 1
    by_category: collections.Counter[str] = collections.Counter()
    by_stage: collections.Counter[str] = collections.Counter()
    by_function: collections.Counter[str] = collections.Counter()
    for frames, n in samples:
        leaf = frames[-1]
        by_function[leaf.split(":")[0]] += n
        category = next((name for name, marks in CATEGORIES if any(m in leaf for m in marks)), "other")
        by_category[category] += n
        for stage, rules in STAGES:
            if any(f in frame and fn in frame for frame in frames for f, fn in rules):
                by_stage[stage] += n
    lines = [f"{total} samples", "", "| Self time: category | Share |", "| --- | ---: |"]
    lines += [f"| {name} | {n / total:.1%} |" for name, n in by_category.most_common()]
    lines += ["", "| Inclusive: stage | Share |", "| --- | ---: |"]
    lines += [f"| {stage} | {by_stage[stage] / total:.1%} |" for stage, _ in STAGES]
    lines += ["", "| Self time: function | Share |", "| --- | ---: |"]
    lines += [f"| `{name}` | {n / total:.1%} |" for name, n in by_function.most_common(20)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--era", choices=["2025", "2026"], default="2025")
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--target", choices=["gateway", "upstream"], default="gateway")
    parser.add_argument("--upstream-tools", type=int, default=1, help="tools the upstream lists")
    args = parser.parse_args()
    WORK.mkdir(exist_ok=True)
    output = WORK / f"{args.target}-{args.era}.folded"
    with contextlib.ExitStack() as stack:
        up, up_url = stack.enter_context(upstream(args.upstream_tools))
        if args.target == "gateway":
            gw, gw_url, _ = stack.enter_context(gateway(up_url))
            side, pid = Side("gateway", gw_url, "bench__echo", {"upstream": up.pid, "gateway": gw.pid}), gw.pid
        else:
            side, pid = Side("direct", up_url, "echo", {"upstream": up.pid}), up.pid
        record = [PYSPY, "record", "--pid", str(pid), "--duration", str(int(args.seconds)), "--rate", "250"]
        record += ["--gil", "--nonblocking", "--format", "raw", "--output", str(output)]
        result: dict[str, object] = {}

        def drive() -> None:
            result.update(load_run(side, args.era, args.clients, seconds=args.seconds + 2, warmup=1.0))

        driver = threading.Thread(target=drive)
        driver.start()
        spy = subprocess.run(record, capture_output=True, text=True, timeout=args.seconds + 60, check=False)
        driver.join(timeout=args.seconds + 120)
        if spy.returncode != 0:
            raise SystemExit(f"py-spy failed: {spy.stderr[-2000:]}")
    role = "gateway" if args.target == "gateway" else "upstream"
    cpu = float(result.get(f"{role}_cpu_ms_per_call", 0.0))  # type: ignore[arg-type]
    rate = float(result.get("throughput", 0.0))  # type: ignore[arg-type]
    log(f"{args.target}, era {args.era}, {args.clients} clients: {rate:.0f} calls/s, CPU {cpu:.3f} ms/call")
    print(summarize(read_folded(output)))
    print(f"\nraw samples: {output}")


if __name__ == "__main__":
    main()
