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

``--pins`` measures what pinning costs the start with 10 upstreams (issue 36): the ten started
directly, against the proxy with ``pin: "off"``, with ``pin: "hold"`` (the default) on a fresh
data folder (every definition first seen: scanned and pinned), with ``pin: "hold"`` on a second
start (a data folder an unmeasured start pinned), and with ``pin: "hold"`` first seeing these ten
beside the pins of other configs (the 35 servers and 522 tools of ``search_data/catalog.json``,
a 0.8 MB file: the pins file is the user's, shared by every config). Each side has a data
folder of its own under ``.bench/`` (``XDG_DATA_HOME``), never the user's. ``--write`` puts the
figures in docs/PERFORMANCE.md's "Starting with pins" section (``doc_sections``).

    .venv/bin/python -m benchmarks.startup --pins [--reps 7] [--commit REV] [--against REV] [--write]
    .venv/bin/python -m benchmarks.startup --pins --write --render FILE [--before FILE]

``--commit REV`` runs the proxy from ``REV``'s ``src/`` (``git archive``, unpacked under
``.bench/startup-pins-src/``), so the working tree's uncommitted edits stay out of the figures;
``--against REV`` measures that commit's proxy too, its sides interleaved with the others' in
the same rotation (the same direct runs for both), shown as "before". Each result is saved as
``.bench/startup-pins-COMMIT.json``; ``--before`` one of them shows it beside this one in the
section, and ``--render`` one writes the section from it.

The clock runs from just before the spawn until the last ``tools/list`` (or ``initialize``)
answer; shutting down is not counted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import textwrap
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import StdioServerParameters
from tests.processes import children_of

from benchmarks.common import (
    PROXY_ENV,
    ROOT,
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
    unpacked_source,
    write_config,
)
from benchmarks.doc_sections import replace_section

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


# --- pins (issue 36) ------------------------------------------------------------------------

PINS_DATA = WORK / "startup-pins"
PIN_SIDES = (
    "direct",
    "pin off",
    "pin hold, fresh data folder",
    "pin hold, second start",
    "pin hold, beside other configs' pins",
)
CATALOG = ROOT / "benchmarks" / "search_data" / "catalog.json"


def _in_data_folder(config: Any, folder: Any, source: Path | None) -> StdioServerParameters:
    """The proxy of ``config`` with its own data folder (``XDG_DATA_HOME``: the pins file in it),
    run from ``source`` (a ``src/``; None: as the other benchmarks run it)."""
    command = proxy_command(config)
    environment = {**PROXY_ENV, "XDG_DATA_HOME": str(folder)}
    if source is not None:
        environment["PYTHONPATH"] = str(source)
    return StdioServerParameters(command=command[0], args=command[1:], cwd=str(ROOT), env=environment)


TEN = {f"s{i}": bench_server_entry(f"s{i}", spawn_log=SPAWN_LOG) for i in range(10)}


def pin_scenarios(name: str, source: Path | None) -> dict[str, Measure]:
    """The proxy's sides, run from ``source``, each in data folders under ``.bench/startup-pins/NAME``."""
    hold = write_config("startup-10-hold", TEN)  # pin and scan at their defaults: hold
    off = write_config("startup-10-off", TEN, pin="off")
    data = PINS_DATA / name
    counts = {"fresh": 0, "beside": 0}
    others = _others_pinned(PINS_DATA / "others")

    async def first_sight(kind: str) -> float:
        counts[kind] += 1
        folder = data / f"{kind}-{counts[kind]}"  # nothing of this config pinned: every definition first seen
        if kind == "beside":
            shutil.copytree(others, folder)
        return await listed(_in_data_folder(hold, folder, source), 10)

    return {
        "pin off": lambda: listed(_in_data_folder(off, data / "off", source), 10),
        "pin hold, fresh data folder": lambda: first_sight("fresh"),
        "pin hold, second start": lambda: listed(_in_data_folder(hold, data / "second", source), 10),
        "pin hold, beside other configs' pins": lambda: first_sight("beside"),
    }


def _others_pinned(folder: Any) -> Any:
    """A data folder whose pins file holds the benchmark catalog's 35 servers, pinned under another config."""
    import mcp_types as types

    from mcp_patchbay.trust.decide import Policy, decide
    from mcp_patchbay.trust.store import PinStore, entry_key

    if (folder / "mcp-patchbay" / "pins.json").exists():
        return folder
    catalog = json.loads(CATALOG.read_text(encoding="utf-8"))
    store = PinStore(folder / "mcp-patchbay" / "pins.json")
    config = WORK / "another-config.json"
    for server, listed_by in catalog.items():
        tools = [types.Tool.model_validate(tool) for tool in listed_by["tools"]]
        record = decide(None, tools, policy=Policy(scan="off"), now=time.time(), server=server).record
        store.update(entry_key(config, server), lambda _, record=record: record)
    return folder


def _load() -> float:
    return os.getloadavg()[0]


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, cwd=ROOT, check=True).stdout.strip()


async def pins(reps: int, sources: dict[str, Path | None]) -> list[dict[str, Any]]:
    """The start with 10 upstreams under each pin side of each source (by name: a commit), ``reps``
    times, every side of every source in one rotating order; a result per source."""
    shutil.rmtree(PINS_DATA, ignore_errors=True)
    sides: dict[tuple[str, str], Measure] = {
        ("", "direct"): lambda: all_listed([direct_params(e) for e in TEN.values()])
    }
    for name, source in sources.items():
        sides.update({(name, label): measure for label, measure in pin_scenarios(name, source).items()})
    load_before = _load()
    for (_, label), measure in sides.items():  # warm caches; pins the second start's folders
        if label in ("direct", "pin hold, second start", "pin off"):
            await measure()
    samples: dict[tuple[str, str], list[float]] = {side: [] for side in sides}
    order = list(sides)
    for rep in range(reps):
        for side in order[rep % len(order) :] + order[: rep % len(order)]:
            samples[side].append(await sides[side]() * 1000)
    load_after = _load()
    direct = samples[("", "direct")]
    results: list[dict[str, Any]] = []
    for name in sources:
        values = {"direct": direct, **{label: v for (of, label), v in samples.items() if of == name}}
        result: dict[str, Any] = {
            "reps": reps,
            "load_before": load_before,
            "load_after": load_after,
            "commit": name,
            "interleaved_with": [other for other in sources if other != name],
            "sides": {
                label: {
                    "median_ms": median(v),
                    "ratio": median(v) / median(direct),
                    "paired_ratio": median([a / d for a, d in zip(v, direct, strict=True)]),
                    "samples_ms": [round(a, 1) for a in v],
                }
                for label, v in values.items()
            },
        }
        results.append(result)
        log(
            f"  startup, 10 upstreams, {name}: "
            + ", ".join(f"{k} {v['median_ms']:.0f} ms ({v['ratio']:.2f}x)" for k, v in result["sides"].items())
            + f"; load {load_before:.2f} -> {load_after:.2f}"
        )
    return results


def pins_section(result: dict[str, Any], before: dict[str, Any] | None = None) -> str:
    """The section's text: ``result``'s figures, beside ``before``'s (``--against``'s, or a run's saved)."""
    runs = [run for run in (before, result) if run is not None]
    together = before is not None and before["commit"] in result.get("interleaved_with", ())

    def cells(run: dict[str, Any], label: str) -> str:
        side = run["sides"][label]
        return f"{side['median_ms']:,.0f} | {side['ratio']:.2f}x ({side['paired_ratio']:.2f}x)"

    def second_to_off(run: dict[str, Any]) -> float:
        return run["sides"]["pin hold, second start"]["median_ms"] / run["sides"]["pin off"]["median_ms"]

    head = " | ".join(f"{run['commit']}: median (ms) | against direct" for run in runs)
    rows = "\n".join(f"| {label} | " + " | ".join(cells(run, label) for run in runs) + " |" for label in PIN_SIDES)
    loads = [run for run in runs if not together or run is result]
    runs_text = "; ".join(
        (f"{run['commit']}: " if not together else "")
        + f"medians of {run['reps']} runs per side, load average (1 min) {run['load_before']:.2f} before and "
        + f"{run['load_after']:.2f} after"
        for run in loads
    )
    if together:
        runs_text = f"both proxies' sides interleaved in one rotation, the same direct runs for both; {runs_text}"
    second = "; ".join(f"{run['commit']} {second_to_off(run):.2f}x" for run in runs)
    how = f"--pins --reps {result['reps']} --commit REV" + (" --against REV" if together else "") + " --write"
    opening = textwrap.fill(
        "From the spawn to a complete `tools/list` with 10 bench_servers, against the ten started directly and "
        'listed from one client (`benchmarks.startup`\'s "10 upstreams"), under each pin setting, each side with '
        f"a data folder of its own, the sides' order rotating ({runs_text}):",
        110,
    )
    return f"""## Starting with pins (issue 36)

{opening}

| side | {head} |
| --- |{" ---: | ---: |" * len(runs)}
{rows}

Against direct: the ratio of the medians, and in brackets the median of each run's ratio to the
direct run beside it. The second start with `pin: "hold"` against `pin: "off"`: {second}.
"Beside other configs' pins": the ten first seen in a data folder whose pins file already holds
another config's 35 servers (522 tools, 0.8 MB), as a user's does. Measured with
`.venv/bin/python -m benchmarks.startup {how}`."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--fastmcp", action="store_true")
    parser.add_argument("--timeline", action="store_true", help="only the timelines (--reps each, default 10)")
    parser.add_argument("--pins", action="store_true", help="only the start with 10 upstreams, under each pin side")
    parser.add_argument("--write", action="store_true", help="with --pins: write its section of docs/PERFORMANCE.md")
    parser.add_argument("--commit", help="with --pins: run the proxy from this commit's src/")
    parser.add_argument("--against", help="with --pins: measure this commit's src/ too, interleaved, as 'before'")
    parser.add_argument("--before", help="with --pins --write: an earlier run's results (JSON), shown beside")
    parser.add_argument("--render", help="with --pins --write: a run's saved results (JSON), not measured again")
    args = parser.parse_args()
    if args.pins:
        before: dict[str, Any] | None = None
        if args.render:
            result = json.loads(Path(args.render).read_text(encoding="utf-8"))
        else:
            sources: dict[str, Path | None] = {}
            if args.against:
                commit, source = unpacked_source(args.against, "startup-pins-src")
                sources[commit] = source
            if args.commit:
                commit, source = unpacked_source(args.commit, "startup-pins-src")
                sources[commit] = source
            else:
                sources[_git("rev-parse", "--short", "HEAD") + "+"] = None
            *earlier, result = anyio.run(pins, args.reps, sources)
            before = earlier[0] if earlier else None
            for measured in (*earlier, result):
                saved = WORK / f"startup-pins-{measured['commit']}.json"
                saved.write_text(json.dumps(measured, indent=1), encoding="utf-8")
                log(f"  saved in {saved.relative_to(ROOT)}")
        if args.write:
            if args.before:
                before = json.loads(Path(args.before).read_text(encoding="utf-8"))
            replace_section(ROOT / "docs" / "PERFORMANCE.md", "startup-pins", pins_section(result, before))
        return
    if args.timeline:
        print(json.dumps(anyio.run(timelines, args.reps if args.reps != 5 else 10), indent=1))
        return
    print(json.dumps(anyio.run(run, args.reps, args.fastmcp), indent=1))


if __name__ == "__main__":
    main()
