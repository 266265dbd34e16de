"""Startup: from spawn to a complete ``tools/list``, through a proxy and directly.

    .venv/bin/python -m benchmarks.startup [--reps N] [--fastmcp]

Scenarios, each measured ``--reps`` times with the sides alternating:

- ``1 upstream``: the proxy with one bench_server, against that bench_server started
  directly (spawn, initialize, tools/list).
- ``10 upstreams``: the proxy with ten, against the ten started directly and all connected
  and listed concurrently from one client process.
- ``proxy alone``: the proxy with an empty config, until it answers ``initialize``,
  against one bench_server until it answers ``initialize`` (a minimal Python SDK server:
  the interpreter and the SDK import are in both). FastMCP refuses a config without
  servers, so its figure is ``initialize`` with the one-upstream config (it answers
  before it connects the upstream).

Every bench_server writes its pid to a spawn log, so the result also says how many
upstream processes each side started for one measurement. ``timeline`` shows where the
proxy's one-upstream startup goes: when, after the proxy's spawn, it answers
``initialize``, when its upstream process appears, and when ``tools/list`` is answered; in
all mode (the list waits for the upstream) and in search mode (``find_tools`` and
``call_tool`` listed at once). A client's first model request leaves 1.5 to 2 s after it
spawns its servers (Claude Code), so these two marks are the proxy's part of that race.

    .venv/bin/python -m benchmarks.startup --timeline [--reps 10]   (the timelines only)

The clock runs from just before the spawn until the last ``tools/list`` (or ``initialize``)
answer; shutting down is not counted.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from mcp import StdioServerParameters

from benchmarks.common import (
    WORK,
    bench_server_entry,
    client,
    direct_params,
    fastmcp_available,
    fastmcp_params,
    log,
    median,
    proxy_command,
    proxy_params,
    raw_process,
    write_config,
)
from benchmarks.processes import children_of

Measure = Callable[[], Awaitable[float]]


async def listed(params: StdioServerParameters, expect: int | None = None) -> float:
    """Seconds from spawn to the answer of tools/list (with ``expect`` tools, when given)."""
    started = time.perf_counter()
    async with client(params) as c:
        tools = (await c.session.list_tools()).tools
        elapsed = time.perf_counter() - started
    if expect is not None and len(tools) != expect:
        raise RuntimeError(f"expected {expect} tools, got {len(tools)}")
    return elapsed


async def initialized(params: StdioServerParameters) -> float:
    started = time.perf_counter()
    async with client(params):
        elapsed = time.perf_counter() - started
    return elapsed


async def all_listed(params: list[StdioServerParameters]) -> float:
    """Seconds until every one of the servers, started concurrently, has answered tools/list."""
    started = time.perf_counter()
    finished: list[float] = []

    async def one(p: StdioServerParameters) -> None:
        async with client(p) as c:
            await c.session.list_tools()
            finished.append(time.perf_counter())
            await done.wait()  # keep every connection open until all have listed

    done = anyio.Event()
    async with anyio.create_task_group() as tg:
        for p in params:
            tg.start_soon(one, p)
        while len(finished) < len(params):
            await anyio.sleep(0.001)
        elapsed = max(finished) - started
        done.set()
    return elapsed


SPAWN_LOG = WORK / "spawns-startup.log"


def spawned() -> int:
    try:
        return len(SPAWN_LOG.read_text().splitlines())
    except OSError:
        return 0


async def _watch_child(pid: int, started: float, found: list[float]) -> None:
    while not children_of(pid):
        await anyio.sleep(0.002)
    found.append(time.perf_counter() - started)


async def timeline(reps: int, expose: str = "all") -> dict[str, float]:
    """Milliseconds from the proxy's spawn to: initialize answered, upstream spawned, tools/list answered."""
    config = write_config(f"startup-timeline-{expose}", {"bench": bench_server_entry("bench")}, expose=expose)
    marks: dict[str, list[float]] = {
        "initialize answered": [],
        "upstream process spawned": [],
        "tools/list answered": [],
    }
    for _ in range(reps):
        started = time.perf_counter()
        async with raw_process(proxy_command(config)) as session:
            child: list[float] = []

            async with anyio.create_task_group() as tg:
                tg.start_soon(_watch_child, session.pid, started, child)
                await session.initialize()
                marks["initialize answered"].append(time.perf_counter() - started)
                await session.request("tools/list")
                marks["tools/list answered"].append(time.perf_counter() - started)
            marks["upstream process spawned"].append(child[0])
    result = {k: median(v) * 1000 for k, v in marks.items()}
    log(f"  startup timeline ({expose} mode): " + ", ".join(f"{k} {v:.0f} ms" for k, v in result.items()))
    return result


async def timelines(reps: int) -> dict[str, dict[str, float]]:
    return {"timeline": await timeline(reps), "timeline search": await timeline(reps, "search")}


def scenarios(with_fastmcp: bool) -> dict[str, dict[str, Measure]]:
    one = {"bench": bench_server_entry("bench", spawn_log=SPAWN_LOG)}
    ten = {f"s{i}": bench_server_entry(f"s{i}", spawn_log=SPAWN_LOG) for i in range(10)}
    one_config = write_config("startup-1", one)
    ten_config = write_config("startup-10", ten)
    empty_config = write_config("startup-0", {})
    result: dict[str, dict[str, Measure]] = {
        "1 upstream": {
            "direct": lambda: listed(direct_params(one["bench"]), 1),
            "patchbay": lambda: listed(proxy_params(one_config), 1),
        },
        "10 upstreams": {
            "direct": lambda: all_listed([direct_params(e) for e in ten.values()]),
            "patchbay": lambda: listed(proxy_params(ten_config), 10),
        },
        "proxy alone": {
            "direct": lambda: initialized(direct_params(one["bench"])),
            "patchbay": lambda: initialized(proxy_params(empty_config)),
        },
    }
    if with_fastmcp and fastmcp_available():
        result["1 upstream"]["fastmcp"] = lambda: listed(fastmcp_params(one_config), 1)
        result["10 upstreams"]["fastmcp"] = lambda: listed(fastmcp_params(ten_config), 10)
        result["proxy alone"]["fastmcp"] = lambda: initialized(fastmcp_params(one_config))
    return result


async def run(reps: int, with_fastmcp: bool, slow_reps: int = 2) -> dict[str, dict[str, Any]]:
    """``slow_reps`` caps the repetitions of a measurement that took over 10 s (FastMCP, 10 upstreams).

    The one-process scenarios are short and noisy: they get twice ``reps``.
    """
    results: dict[str, dict[str, Any]] = {}
    all_scenarios = scenarios(with_fastmcp)
    for label, measure in all_scenarios["1 upstream"].items():  # warm the page and bytecode caches, unmeasured
        try:
            await measure()
        except Exception as exc:
            log(f"  warm-up of {label} failed: {exc!r}")
    for name, sides in all_scenarios.items():
        samples: dict[str, list[float]] = {label: [] for label in sides}
        spawns: dict[str, list[int]] = {label: [] for label in sides}
        labels = list(sides)
        for rep in range(reps if name == "10 upstreams" else 2 * reps):
            order = labels[rep % len(labels) :] + labels[: rep % len(labels)]
            for label in order:
                if len(samples[label]) >= slow_reps and min(samples[label]) > 10_000:
                    continue
                before = spawned()
                try:
                    samples[label].append(await sides[label]() * 1000)
                except Exception as exc:
                    log(f"  {name} / {label}: failed: {exc!r}")
                spawns[label].append(spawned() - before)
        results[name] = {
            label: {
                "median_ms": median(values),
                "samples_ms": [round(v, 1) for v in values],
                "spawns": max(spawns[label], default=0),
            }
            for label, values in samples.items()
        }
        log(f"  startup {name}: " + ", ".join(f"{k} {median(v):.0f} ms" for k, v in samples.items()))
    results.update(await timelines(max(10, reps)))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--fastmcp", action="store_true")
    parser.add_argument("--timeline", action="store_true", help="only the timelines (--reps each, default 10)")
    args = parser.parse_args()
    if args.timeline:
        print(json.dumps(anyio.run(timelines, args.reps if args.reps != 5 else 10), indent=1))
        return
    print(json.dumps(anyio.run(run, args.reps, args.fastmcp), indent=1))


if __name__ == "__main__":
    main()
