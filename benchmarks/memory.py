"""Memory: the proxy's own RSS with 16 upstreams, and over 100,000 calls.

    .venv/bin/python -m benchmarks.memory [--calls 100000] [--window 64]

The proxy serves 16 bench_server upstreams (``--fast-stdio``, so that they leave more of
the two cores to the proxy under test). A raw JSON-RPC client (no SDK, so the
client is not the bottleneck) keeps ``--window`` calls in flight, round-robin over the
16 tools. VmRSS of the proxy process alone (not its children) is read from
/proc/PID/status after startup, after a warm-up, and when the 10%, 50% and 100% marks of
``--calls`` are answered. For scale, the RSS of one upstream (a minimal Python SDK server)
is reported beside it.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import anyio
from tests.processes import children_of, rss_kib

from benchmarks.common import bench_server_entry, log, median, proxy_command, raw_process, write_config

UPSTREAMS = 16


async def run(calls: int, window: int) -> dict[str, Any]:
    config = write_config(
        "memory-16", {f"m{i:02d}": bench_server_entry(f"m{i:02d}", fast_stdio=True) for i in range(UPSTREAMS)}
    )
    arguments = {"text": "hello"}
    async with raw_process(proxy_command(config)) as session:
        await session.initialize()
        tools = [t["name"] for t in (await session.request("tools/list"))["tools"] if t["name"].endswith("__echo")]
        if len(tools) != UPSTREAMS:
            raise RuntimeError(f"expected {UPSTREAMS} upstream tools, got {tools}")
        rss: dict[str, int | None] = {"started": rss_kib(session.pid)}
        upstream_rss = median([float(v) for v in (rss_kib(p) for p in children_of(session.pid)) if v is not None])
        await session.load(tools, arguments, min(2000, calls), window)
        rss["warm"] = rss_kib(session.pid)
        marks = [calls // 10, calls // 2, calls]

        def checkpoint(n: int) -> None:
            rss[str(n)] = rss_kib(session.pid)
            log(f"  memory: {n:,} calls, proxy RSS {rss[str(n)]} KiB")

        seconds, errors = await session.load(
            tools, arguments, calls, window, checkpoints=marks, on_checkpoint=checkpoint
        )
    return {
        "upstreams": UPSTREAMS,
        "calls": calls,
        "window": window,
        "marks": marks,
        "rss_kib": rss,
        "upstream_rss_kib": upstream_rss,
        "seconds": seconds,
        "calls_per_second": calls / seconds,
        "errors": errors,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--window", type=int, default=64, help="calls in flight")
    args = parser.parse_args()
    print(json.dumps(anyio.run(run, args.calls, args.window), indent=1))


if __name__ == "__main__":
    main()
