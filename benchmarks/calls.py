"""Per-call overhead: the same upstream called directly and through a proxy, side by side.

    .venv/bin/python -m benchmarks.calls [--upstream bench|everything] [--fastmcp] [--quick]

Every side is a connection from the SDK client (legacy handshake, no cache) over stdio:
``direct`` to the upstream itself, ``patchbay`` to ``python -m mcp_patchbay`` with that one
upstream in its config, and with ``--fastmcp`` also ``fastmcp run`` with the same config.
All connections stay open for the whole run; batches of each side alternate (the order
rotates every batch), so a noisy neighbour hits every side alike. Per batch: the median
and p99 of sequential calls, and the throughput of ``--concurrency`` callers sharing a
batch of calls. Reported: the median over batches of each figure.

``fastmcp_multi`` checks the claim that FastMCP's config proxy starts its upstreams anew
for every call when the config names more than one server.
"""

from __future__ import annotations

import argparse
import json
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp import StdioServerParameters

from benchmarks.common import (
    WORK,
    bench_server_entry,
    call,
    call_request,
    client,
    direct_params,
    everything_entry,
    fastmcp_available,
    fastmcp_params,
    log,
    median,
    percentile,
    proxy_params,
    write_config,
)


@dataclass
class Target:
    label: str
    params: StdioServerParameters
    tool: str
    arguments: dict[str, Any]


@dataclass
class Samples:
    medians: list[float] = field(default_factory=lambda: list[float]())
    p99s: list[float] = field(default_factory=lambda: list[float]())
    throughputs: list[float] = field(default_factory=lambda: list[float]())

    def summary(self) -> dict[str, Any]:
        return {
            "median_ms": median(self.medians),
            "p99_ms": median(self.p99s),
            "throughput": median(self.throughputs),
            "batch_medians_ms": [round(v, 3) for v in self.medians],
            "batch_p99s_ms": [round(v, 3) for v in self.p99s],
            "batch_throughputs": [round(v, 1) for v in self.throughputs],
        }


UPSTREAMS: dict[str, tuple[dict[str, Any], str, dict[str, Any]]] = {
    # name: (config entry, tool, arguments)
    "bench": (bench_server_entry(), "echo", {"text": "hello"}),
    "everything": (everything_entry(), "get-sum", {"a": 1, "b": 2}),
}


def targets_for(upstream: str, with_fastmcp: bool) -> list[Target]:
    entry, tool, arguments = UPSTREAMS[upstream]
    config = write_config(f"calls-{upstream}", {upstream: entry})
    targets = [
        Target("direct", direct_params(entry), tool, arguments),
        Target("patchbay", proxy_params(config), f"{upstream}__{tool}", arguments),
    ]
    if with_fastmcp and fastmcp_available():
        # With one server in its config, FastMCP serves the tools under their own names.
        targets.append(Target("fastmcp", fastmcp_params(config), tool, arguments))
    return targets


async def sequential(c: Any, request: Any, calls: int) -> list[float]:
    timings: list[float] = []
    for _ in range(calls):
        started = time.perf_counter()
        await call(c, request)
        timings.append((time.perf_counter() - started) * 1000)
    return timings


async def concurrent(c: Any, request: Any, calls: int, callers: int) -> float:
    """Calls per second of ``callers`` tasks sharing ``calls`` calls."""
    remaining = calls

    async def caller() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await call(c, request)

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(callers):
            tg.start_soon(caller)
    return calls / (time.perf_counter() - started)


async def compare(
    targets: list[Target], *, batches: int, calls: int, concurrent_calls: int, callers: int, warmup: int
) -> dict[str, dict[str, Any]]:
    samples = {t.label: Samples() for t in targets}
    async with AsyncExitStack() as stack:
        clients: dict[str, Any] = {}
        for target in targets:
            c = await stack.enter_async_context(client(target.params))
            tools = [tool.name for tool in (await c.session.list_tools()).tools]
            if target.tool not in tools:
                raise RuntimeError(f"{target.label}: no tool {target.tool!r} in {tools[:10]}")
            clients[target.label] = c
        requests = {t.label: call_request(t.tool, t.arguments) for t in targets}
        for target in targets:  # warm up: caches, pydantic's lazy schemas, the thread pools
            c, request = clients[target.label], requests[target.label]
            await sequential(c, request, warmup)
            await concurrent(c, request, min(warmup, concurrent_calls), callers)
        for batch in range(batches):
            order = targets[batch % len(targets) :] + targets[: batch % len(targets)]
            for target in order:
                timings = await sequential(clients[target.label], requests[target.label], calls)
                samples[target.label].medians.append(median(timings))
                samples[target.label].p99s.append(percentile(timings, 99))
            for target in order:
                rate = await concurrent(clients[target.label], requests[target.label], concurrent_calls, callers)
                samples[target.label].throughputs.append(rate)
            log(
                f"  batch {batch + 1}/{batches}: "
                + ", ".join(
                    f"{t.label} {samples[t.label].medians[-1]:.2f} ms {samples[t.label].throughputs[-1]:.0f}/s"
                    for t in targets
                )
            )
    return {label: s.summary() for label, s in samples.items()}


def count_lines(path: str) -> int:
    return len(Path(path).read_text().splitlines())


async def fastmcp_multi(calls: int) -> dict[str, Any]:
    """Two upstreams in one config: how many upstream processes does each call start?

    Measured for FastMCP and, with the same config, for mcp-patchbay.
    """
    results: dict[str, Any] = {}
    sides: list[tuple[str, Any, str]] = []
    for label in ("patchbay", "fastmcp"):
        if label == "fastmcp" and not fastmcp_available():
            continue
        spawn_log = WORK / f"spawns-{label}.log"
        spawn_log.unlink(missing_ok=True)
        config = write_config(
            f"multi-{label}",
            {name: bench_server_entry(name, spawn_log=spawn_log) for name in ("one", "two")},
        )
        params = proxy_params(config) if label == "patchbay" else fastmcp_params(config)
        sides.append((label, params, str(spawn_log)))
    for label, params, spawn_log in sides:
        async with client(params) as c:
            tools = [tool.name for tool in (await c.session.list_tools()).tools]
            tool = next(name for name in tools if name.startswith("one") and name.endswith("echo"))
            request = call_request(tool, {"text": "hello"})
            await call(c, request)
            before = count_lines(spawn_log)
            timings = await sequential(c, request, calls)
            after = count_lines(spawn_log)
        results[label] = {
            "tool": tool,
            "calls": calls,
            "median_ms": median(timings),
            "spawns_per_call": (after - before) / calls,
            "spawns_total": after,
        }
        log(f"  {label} with 2 upstreams: {median(timings):.1f} ms/call, {(after - before) / calls:g} spawns per call")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--upstream", choices=sorted(UPSTREAMS), default="bench")
    parser.add_argument("--fastmcp", action="store_true", help="also measure FastMCP's proxy")
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--calls", type=int, default=200, help="sequential calls per batch")
    parser.add_argument("--concurrent-calls", type=int, default=500, help="calls per concurrent batch")
    parser.add_argument("--callers", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--multi", action="store_true", help="run the two-upstream spawn check instead")
    args = parser.parse_args()
    if args.multi:
        print(json.dumps(anyio.run(fastmcp_multi, 5), indent=1))
        return
    result = anyio.run(
        lambda: compare(
            targets_for(args.upstream, args.fastmcp),
            batches=args.batches,
            calls=args.calls,
            concurrent_calls=args.concurrent_calls,
            callers=args.callers,
            warmup=args.warmup,
        )
    )
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
