"""Servers started when needed: N lazy servers with their listings kept, against the same N eager.

    .venv/bin/python -m benchmarks.lazy [--servers 30] [--reps 5] [--write]

Both sides serve ``--servers`` bench_servers (``benchmarks/server.py``, one tool each). The
lazy side's config says ``"patchbay": {"start": "lazy"}``, and its listings were learned once
before, as a user would: ``mcp-patchbay check`` starts every server and keeps their listings
(in a data folder of the benchmark's own, ``.bench/lazy-data``). Each rep, for each side (the
sides alternating), a raw JSON-RPC client spawns the proxy and measures:

- ``first tools/list``: milliseconds from the spawn to the answer of the first ``tools/list``
  (``initialize`` first), every server's tool in it;
- ``processes``: the upstream processes the proxy runs once that answer is in (its children
  running ``server.py``; the target on the lazy side is 0), and how many server processes the
  whole rep started (each bench_server writes its pid to a spawn log);
- ``RSS``: the proxy's own, and the proxy's plus its upstreams', at that moment (``/proc``);
- ``first call``: the first ``tools/call`` to one server's ``echo``: on the lazy side it starts
  that server, on the eager side the server is running; the difference is the added latency of
  a lazy server's first call. ``second call``: the same call again.

For scale, the same start with no server at all (``none``: the proxy's own start and RSS).

Medians over the reps, with the load average (1 min) before and after. ``--write`` puts the
figures in docs/PERFORMANCE.md's "Servers started when needed" section (``doc_sections``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import time
from typing import Any

import anyio
from tests.processes import children_of, cmdline, rss_kib

from benchmarks.common import BENCH_SERVER, PY, ROOT, WORK, bench_server_entry, log, median, raw_process, write_config
from benchmarks.doc_sections import replace_section

DATA_HOME = WORK / "lazy-data"
SPAWN_LOG = WORK / "spawns-lazy.log"
SIDES = ("eager", "lazy", "none")


def spawned() -> int:
    try:
        return len(SPAWN_LOG.read_text().splitlines())
    except OSError:
        return 0


def configs(servers: int) -> dict[str, Any]:
    entries = {f"s{i:02d}": bench_server_entry(f"s{i:02d}", spawn_log=SPAWN_LOG) for i in range(servers)}
    paths = {side: write_config(f"lazy-{side}-{servers}", entries, start=side) for side in ("eager", "lazy")}
    return {**paths, "none": write_config("lazy-none", {})}


def learn(config: Any) -> None:
    """``mcp-patchbay check`` on the lazy config: it starts every server and keeps their listings."""
    command = [PY, "-m", "mcp_patchbay", "check", str(config), "--json"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"check failed ({done.returncode}): {done.stdout[-2000:]} {done.stderr[-2000:]}")


def upstreams_of(pid: int) -> list[int]:
    return [child for child in children_of(pid) if BENCH_SERVER in cmdline(child)]


async def one_run(config: Any, servers: int) -> dict[str, float]:
    command = [PY, "-m", "mcp_patchbay", "--config", str(config), "--log-level", "WARNING"]
    before = spawned()
    started = time.perf_counter()
    async with raw_process(command) as session:
        await session.initialize()
        tools = (await session.request("tools/list"))["tools"]
        listed = time.perf_counter() - started
        if len(tools) != servers:
            raise RuntimeError(f"expected {servers} tools, got {len(tools)}")
        children = upstreams_of(session.pid)
        proxy_rss = rss_kib(session.pid) or 0
        total_rss = proxy_rss + sum(rss_kib(child) or 0 for child in children)
        call = {"name": "s00__echo", "arguments": {"text": "hello"}}
        timings: list[float] = []
        for _ in range(2 if servers else 0):
            began = time.perf_counter()
            result = await session.request("tools/call", call)
            timings.append(time.perf_counter() - began)
            if result.get("isError"):
                raise RuntimeError(f"the call failed: {result}")
    return {
        "first_list_ms": listed * 1000,
        "processes": float(len(children)),
        "spawned": float(spawned() - before),
        "proxy_rss_kib": float(proxy_rss),
        "total_rss_kib": float(total_rss),
        "first_call_ms": timings[0] * 1000 if timings else math.nan,
        "second_call_ms": timings[1] * 1000 if timings else math.nan,
    }


async def run(servers: int, reps: int) -> dict[str, Any]:
    DATA_HOME.mkdir(parents=True, exist_ok=True)
    os.environ["XDG_DATA_HOME"] = str(DATA_HOME)  # the proxies (and check) keep their listings here
    paths = configs(servers)
    load_before = os.getloadavg()[0]
    learn(paths["lazy"])
    samples: dict[str, list[dict[str, float]]] = {side: [] for side in SIDES}
    for side in SIDES:  # warm the page and bytecode caches, unmeasured
        await one_run(paths[side], servers if side != "none" else 0)
    for rep in range(reps):
        for side in SIDES if rep % 2 == 0 else tuple(reversed(SIDES)):
            sample = await one_run(paths[side], servers if side != "none" else 0)
            samples[side].append(sample)
            log(f"  lazy {side} rep {rep + 1}: " + ", ".join(f"{k} {v:.0f}" for k, v in sample.items()))
    result: dict[str, Any] = {
        "servers": servers,
        "reps": reps,
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
    }
    for side in SIDES:
        keys = samples[side][0].keys()
        result[side] = {key: median([s[key] for s in samples[side]]) for key in keys}
    result["added_first_call_ms"] = result["lazy"]["first_call_ms"] - result["eager"]["first_call_ms"]
    return result


def section(result: dict[str, Any]) -> str:
    eager, lazy, none = result["eager"], result["lazy"], result["none"]

    def mib(kib: float) -> str:
        return f"{kib / 1024:,.0f} MiB"

    def ms(value: float, digits: int = 0) -> str:
        return f"{value:,.{digits}f} ms"

    rows = [
        (
            "upstream processes after the first `tools/list`",
            f"{eager['processes']:.0f}",
            f"{lazy['processes']:.0f}",
            "0",
        ),
        ("server processes started in a run (one call)", f"{eager['spawned']:.0f}", f"{lazy['spawned']:.0f}", "-"),
        (
            "first `tools/list` answered, from spawn",
            ms(eager["first_list_ms"]),
            ms(lazy["first_list_ms"]),
            ms(none["first_list_ms"]),
        ),
        ("RSS, the proxy", mib(eager["proxy_rss_kib"]), mib(lazy["proxy_rss_kib"]), mib(none["proxy_rss_kib"])),
        ("RSS, the proxy and its upstreams", mib(eager["total_rss_kib"]), mib(lazy["total_rss_kib"]), "-"),
        ("first call to a server", ms(eager["first_call_ms"]), ms(lazy["first_call_ms"]), "-"),
        ("second call", ms(eager["second_call_ms"], 1), ms(lazy["second_call_ms"], 1), "-"),
    ]
    table = "\n".join(f"| {label} | {a} | {b} | {c} |" for label, a, b, c in rows)
    return f"""## Servers started when needed

{result["servers"]} bench_servers (one tool each), eager against lazy with their listings kept
(`"patchbay": {{"start": "lazy"}}`, learned once by `mcp-patchbay check`), and the proxy with no
server for scale. Medians of {result["reps"]} runs per side, the sides alternating, on the two cores
described above, shared with other work while this ran: load average (1 min) {result["load_before"]:.1f}
before and {result["load_after"]:.1f} after.

| | eager | lazy | no server |
|---|---:|---:|---:|
{table}

With its servers lazy the proxy starts as if it had none: no process, its own start and memory.
A lazy server's first call waits for its start: {result["added_first_call_ms"]:,.0f} ms added here (a
Python SDK server: the interpreter and the SDK's import are most of it; an `npx` server takes
longer). Every later call costs what an eager server's does. Measured with
`.venv/bin/python -m benchmarks.lazy --servers {result["servers"]} --reps {result["reps"]} --write`.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--servers", type=int, default=30)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--write", action="store_true", help="write the section of docs/PERFORMANCE.md")
    args = parser.parse_args()
    result = anyio.run(run, args.servers, args.reps)
    (WORK / "lazy_results.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(json.dumps(result, indent=1))
    if args.write:
        replace_section(ROOT / "docs" / "PERFORMANCE.md", "lazy", section(result))


if __name__ == "__main__":
    main()
