"""Run every benchmark and write docs/PERFORMANCE.md. What ``scripts/bench`` runs.

    .venv/bin/python scripts/bench_report.py [--quick] [--commit REV] [--output docs/PERFORMANCE.md] [--json FILE]

Parts, in order: per-call overhead (bench_server, then server-everything), FastMCP's
two-upstream spawn check, startup, name resolution (``bench_naming.py``), memory, profile.
Every ratio is against a baseline measured in the same run, batches alternating. A part
that fails is reported as failed in the document; the others still run.

By default the proxy under test is the working tree's ``src/``. ``--commit REV`` measures a
commit instead: ``git archive REV src scripts/bench_naming.py`` is unpacked into
``.bench/snapshot/`` and the proxy's processes run with ``PYTHONPATH`` pointing there, so
edits made to the working tree during the run do not leak into it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import anyio
import bench_calls
import bench_memory
import bench_profile
import bench_startup
from bench_common import (
    FASTMCP,
    PY,
    ROOT,
    VARIANTS,
    WORK,
    fastmcp_available,
    fastmcp_command,
    log,
    proxy_command,
    use_source,
)

NAMING = ROOT / "scripts" / "bench_naming.py"

FULL = {
    "batches": 10,
    "calls": 200,
    "concurrent_calls": 400,
    "callers": 50,
    "warmup": 100,
    "multi_calls": 5,
    "startup_reps": 7,
    "naming_calls": 2000,
    "memory_calls": 100_000,
    "profile_seconds": 10,
    "profile_calls": 2000,
    "profile_rounds": 2,
}
QUICK = {
    "batches": 4,
    "calls": 100,
    "concurrent_calls": 300,
    "callers": 50,
    "warmup": 50,
    "multi_calls": 3,
    "startup_reps": 2,
    "naming_calls": 300,
    "memory_calls": 20_000,
    "profile_seconds": 5,
    "profile_calls": 2000,
    "profile_rounds": 1,
}


# --- the machine and the versions -------------------------------------------------------------


def _run(command: list[str]) -> str:
    try:
        done = subprocess.run(command, check=False, capture_output=True, text=True, cwd=ROOT, timeout=60)
        return done.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def machine() -> dict[str, str]:
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")), "")
    meminfo = Path("/proc/meminfo").read_text() if Path("/proc/meminfo").exists() else ""
    total_kib = next((int(line.split()[1]) for line in meminfo.splitlines() if line.startswith("MemTotal:")), 0)
    return {
        "cpu": model or platform.processor() or "unknown",
        "cores": str(os.cpu_count()),
        "ram": f"{total_kib / 1024 / 1024:.1f} GiB",
        "os": f"{platform.system()} {platform.release()}",
        "load": " ".join(f"{v:.2f}" for v in os.getloadavg()),
    }


SNAPSHOT = WORK / "snapshot"
_measured: dict[str, str] = {}


def snapshot(rev: str) -> None:
    """Unpack ``rev``'s ``src/`` and naming benchmark into .bench/snapshot and measure those."""
    global NAMING  # noqa: PLW0603 - the one switch between working tree and snapshot
    commit = _run(["git", "rev-parse", "--short", rev])
    if not commit:
        raise SystemExit(f"bench_report: unknown revision {rev!r}")
    shutil.rmtree(SNAPSHOT, ignore_errors=True)
    SNAPSHOT.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "archive", commit, "src", "scripts/bench_naming.py"], capture_output=True, check=True, cwd=ROOT
    )
    subprocess.run(["tar", "-x", "-C", str(SNAPSHOT)], input=archive.stdout, check=True)
    use_source(SNAPSHOT / "src")
    NAMING = SNAPSHOT / "scripts" / "bench_naming.py"
    _measured["commit"] = commit
    log(f"measuring commit {commit} from {SNAPSHOT.relative_to(ROOT)}")


def versions() -> dict[str, str]:
    if "commit" in _measured:
        commit, dirty = _measured["commit"] + " (snapshot, --commit)", ""
    else:
        commit = _run(["git", "rev-parse", "--short", "HEAD"])
        dirty = _run(["git", "status", "--porcelain", "--", "src"])
    fastmcp = ""
    if fastmcp_available():
        fastmcp = _run([str(Path(FASTMCP).with_name("python")), "-c", "import fastmcp; print(fastmcp.__version__)"])
    return {
        "python": sys.version.split()[0],
        "mcp": metadata.version("mcp"),
        "pydantic": metadata.version("pydantic"),
        "anyio": metadata.version("anyio"),
        "node": _run(["node", "--version"]),
        "mcp-patchbay": commit + (" + uncommitted changes in src/" if dirty else ""),
        "fastmcp": fastmcp or "not installed",
        "py-spy": _run([str(ROOT / ".venv" / "bin" / "py-spy"), "--version"]).replace("py-spy ", "") or "not installed",
    }


# --- parts ------------------------------------------------------------------------------------


def naming(calls: int) -> dict[str, Any]:
    if not NAMING.exists():
        raise RuntimeError(f"{NAMING.relative_to(ROOT)} is missing")
    done = subprocess.run(
        [PY, str(NAMING), "--calls", str(calls)], capture_output=True, text=True, cwd=ROOT, check=True, timeout=600
    )
    rows: list[dict[str, Any]] = []
    for line in done.stdout.splitlines():
        m = re.match(r"\s*(\d+)\s+([\d.]+)\s+(\S+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$", line)
        if m:
            rows.append(
                {
                    "tools": int(m[1]),
                    "build_ms": float(m[2]),
                    "kind": m[3],
                    "median_ms": float(m[4]),
                    "p99_ms": float(m[5]),
                    "max_ms": float(m[6]),
                }
            )
    if not rows:
        raise RuntimeError(f"could not read bench_naming.py's output:\n{done.stdout[-2000:]}")
    return {"rows": rows, "output": done.stdout}


PROBE = """
import importlib.util, inspect, json, sys
from pathlib import Path
import anyio
out = {"own_stdio": importlib.util.find_spec("mcp_patchbay.downstream") is not None}
out["raw_upstream"] = importlib.util.find_spec("mcp_patchbay.rawcalls") is not None
out["client_lane"] = importlib.util.find_spec("mcp_patchbay.lane") is not None
try:
    import mcp_patchbay.server
    out["lazy_jsonschema"] = "jsonschema" not in sys.modules
    from mcp_patchbay import spawn
    out["early_spawn"] = hasattr(spawn, "early")
except Exception:
    out["lazy_jsonschema"] = out["early_spawn"] = None
try:
    from mcp_patchbay import policies
    out["bulkhead_nowait"] = "acquire_nowait" in inspect.getsource(policies.with_bulkhead)
except Exception:
    out["bulkhead_nowait"] = None
try:
    from mcp.server._otel import OpenTelemetryMiddleware
    from mcp_patchbay.config import load_config
    from mcp_patchbay.server import Proxy

    async def main():
        proxy = Proxy(load_config(Path(sys.argv[1])))
        return any(isinstance(m, OpenTelemetryMiddleware) for m in proxy.server.middleware)

    out["otel_middleware"] = anyio.run(main)
except Exception:
    out["otel_middleware"] = None
print(json.dumps(out))
"""


def probe() -> dict[str, Any]:
    """What the proxy under test already does (so the findings speak of that code, not an older one)."""
    config = WORK / "probe.json"
    config.write_text('{"mcpServers": {}}', encoding="utf-8")
    done = subprocess.run(
        [PY, "-c", PROBE, str(config)], capture_output=True, text=True, cwd=ROOT, check=False, timeout=120
    )
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": done.stderr[-500:]}


def run_all(quick: bool) -> dict[str, Any]:
    p = QUICK if quick else FULL
    results: dict[str, Any] = {"params": p, "quick": quick, "machine": machine(), "versions": versions()}
    features = probe()
    results["features"] = features
    # An experiment that changes nothing in the code under test is not run.
    VARIANTS[:] = [
        v
        for v in ("sdk-stdio", "no-otel")
        if (v == "sdk-stdio" and features.get("own_stdio")) or (v == "no-otel" and features.get("otel_middleware"))
    ]
    log(f"proxy under test: {features}; experiments: {', '.join(VARIANTS) or 'none'}")
    results["started"] = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    began = time.monotonic()
    timings: dict[str, float] = {}

    def part(name: str, fn: Callable[[], Any]) -> None:
        log(f"== {name}")
        started = time.monotonic()
        try:
            results[name] = fn()
        except Exception as exc:
            log(f"   {name} failed: {exc!r}")
            results[name] = {"error": "".join(traceback.format_exception_only(exc)).strip()}
        timings[name] = time.monotonic() - started

    for upstream in ("bench", "everything"):
        part(
            f"calls_{upstream}",
            lambda upstream=upstream: anyio.run(
                lambda: bench_calls.compare(
                    bench_calls.targets_for(upstream, with_fastmcp=True, with_variant=upstream == "bench"),
                    batches=p["batches"],
                    calls=p["calls"],
                    concurrent_calls=p["concurrent_calls"],
                    callers=p["callers"],
                    warmup=p["warmup"],
                )
            ),
        )
    part("multi", lambda: anyio.run(bench_calls.fastmcp_multi, p["multi_calls"]))
    part("startup", lambda: anyio.run(bench_startup.run, p["startup_reps"], True, 1))
    part("naming", lambda: naming(p["naming_calls"]))
    part("memory", lambda: anyio.run(bench_memory.run, p["memory_calls"], 64))
    part(
        "profile",
        lambda: anyio.run(bench_profile.run, p["profile_seconds"], p["profile_calls"], p["profile_rounds"]),
    )
    results["timings"] = timings
    results["total_seconds"] = time.monotonic() - began
    results["machine_after"] = machine()
    return results


# --- the document -----------------------------------------------------------------------------


def fmt(value: Any, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "0%"  # no sample fell there
    if isinstance(value, float):
        if abs(value) >= 100:
            return f"{value:,.0f}"
        return f"{value:.{digits}f}"
    return str(value)


def ratio(a: Any, b: Any) -> float | None:
    try:
        if a is None or b is None or b == 0 or math.isnan(a) or math.isnan(b):
            return None
        return a / b
    except TypeError:
        return None


def verdict(value: float | None, target: str) -> str:
    if value is None:
        return "0%"  # no sample fell there
    op, limit = target[:2], float(target[2:].strip().rstrip("x").replace("ms", ""))
    ok = value <= limit if op == "≤ " else value >= limit if op == "≥ " else value < limit
    return "**pass**" if ok else "**FAIL**"


class Doc:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, *lines: str) -> None:
        self.lines.extend(lines)

    def table(self, header: list[str], rows: list[list[str]]) -> None:
        self.lines.append("| " + " | ".join(header) + " |")
        self.lines.append("|" + "|".join(" --- " for _ in header) + "|")
        for row in rows:
            self.lines.append("| " + " | ".join(row) + " |")
        self.lines.append("")


def failed(part: Any) -> str | None:
    if isinstance(part, dict) and "error" in part:
        return str(part["error"])
    return None


def results_rows(r: dict[str, Any]) -> list[list[str]]:
    rows: list[list[str]] = []
    for key, label in (("calls_bench", "bench_server `echo`"), ("calls_everything", "server-everything `get-sum`")):
        c = r.get(key, {})
        if failed(c) or "direct" not in c:
            rows.append([f"Per-call, {label}", "failed", "", "", "", f"n/a: {failed(c)}"])
            continue
        d, p = c["direct"], c["patchbay"]
        med = ratio(p["median_ms"], d["median_ms"])
        thr = ratio(p["throughput"], d["throughput"])
        rows += [
            [
                f"Median latency, sequential, {label} (ms)",
                fmt(d["median_ms"], 3),
                fmt(p["median_ms"], 3),
                fmt(med) + "x" if med else "n/a",
                "≤ 1.5x",
                verdict(med, "≤ 1.5"),
            ],
            [
                f"p99 latency, sequential, {label} (ms)",
                fmt(d["p99_ms"], 3),
                fmt(p["p99_ms"], 3),
                fmt(ratio(p["p99_ms"], d["p99_ms"])) + "x",
                "-",
                "-",
            ],
            [
                f"Added latency per call, {label} (ms)",
                "-",
                f"+{p['median_ms'] - d['median_ms']:.3f}",
                "-",
                "-",
                "-",
            ],
            [
                f"Throughput, 50 callers, {label} (calls/s)",
                fmt(d["throughput"]),
                fmt(p["throughput"]),
                fmt(thr) + "x" if thr else "n/a",
                "≥ 0.7x",
                verdict(thr, "≥ 0.7"),
            ],
        ]
    s = r.get("startup", {})
    for key, label, base in (
        ("1 upstream", "Startup to complete tools/list, 1 upstream (ms)", "direct"),
        ("10 upstreams", "Startup to complete tools/list, 10 upstreams (ms)", "direct, 10 in parallel"),
        ("proxy alone", "Proxy alone: spawn to initialize answered, no upstreams (ms)", "bench_server's own"),
    ):
        row = s.get(key) if not failed(s) else None
        if not row:
            rows.append([label, "failed", "", "", "", f"n/a: {failed(s)}"])
            continue
        value = ratio(row["patchbay"]["median_ms"], row["direct"]["median_ms"])
        rows.append(
            [
                label + f" [baseline: {base}]",
                fmt(row["direct"]["median_ms"]),
                fmt(row["patchbay"]["median_ms"]),
                fmt(value) + "x" if value else "n/a",
                "≤ 1.2x",
                verdict(value, "≤ 1.2"),
            ]
        )
    n = r.get("naming", {})
    if failed(n) or "rows" not in n:
        rows.append(["Name resolution p99", "failed", "", "", "", f"n/a: {failed(n)}"])
    else:
        for size in sorted({row["tools"] for row in n["rows"]}):
            worst = max((row for row in n["rows"] if row["tools"] == size), key=lambda row: row["p99_ms"])
            target = "< 5 ms" if size == 10_000 else "-"
            rows.append(
                [
                    f"Name resolution p99, {size:,} tools, worst kind ({worst['kind']}) (ms)",
                    "-",
                    fmt(worst["p99_ms"], 3),
                    "-",
                    target,
                    verdict(worst["p99_ms"], "< 5") if size == 10_000 else "-",
                ]
            )
    m = r.get("memory", {})
    if failed(m) or "rss_kib" not in m:
        rows.append(["Memory", "failed", "", "", "", f"n/a: {failed(m)}"])
    else:
        rss = m["rss_kib"]
        mib = lambda kib: None if kib is None else kib / 1024  # noqa: E731
        rows.append(
            [
                f"Proxy RSS with {m['upstreams']} upstreams, after start (MiB) [baseline: one upstream's RSS]",
                fmt(mib(m["upstream_rss_kib"]), 1),
                fmt(mib(rss["started"]), 1),
                fmt(ratio(rss["started"], m["upstream_rss_kib"])) + "x",
                "-",
                "-",
            ]
        )
        first, *_, last = m["marks"]
        for mark in m["marks"]:
            rows.append([f"Proxy RSS after {mark:,} calls (MiB)", "-", fmt(mib(rss.get(str(mark))), 1), "-", "-", "-"])
        growth = ratio(rss.get(str(last)), rss.get(str(first)))
        rows.append(
            [
                f"RSS growth from {first:,} to {last:,} calls [baseline: RSS at {first:,}]",
                fmt(mib(rss.get(str(first))), 1),
                fmt(mib(rss.get(str(last))), 1),
                fmt(growth, 3) + "x" if growth else "n/a",
                "≤ 1.05x (no growth)",
                verdict(growth, "≤ 1.05"),
            ]
        )
    return rows


def fastmcp_rows(r: dict[str, Any]) -> list[list[str]]:
    rows: list[list[str]] = []
    for key, label in (("calls_bench", "bench_server `echo`"), ("calls_everything", "server-everything `get-sum`")):
        c = r.get(key, {})
        if failed(c) or "fastmcp" not in c:
            continue
        d, p, f = c["direct"], c["patchbay"], c["fastmcp"]
        for field, name, digits in (("median_ms", "median latency (ms)", 3), ("throughput", "throughput (calls/s)", 0)):
            rows.append(
                [
                    f"{label}: {name}",
                    fmt(d[field], digits),
                    f"{fmt(p[field], digits)} ({fmt(ratio(p[field], d[field]))}x)",
                    f"{fmt(f[field], digits)} ({fmt(ratio(f[field], d[field]))}x)",
                ]
            )
    s = r.get("startup", {})
    if not failed(s):
        for key in ("1 upstream", "10 upstreams", "proxy alone"):
            row = s.get(key, {})
            if "fastmcp" not in row:
                continue
            d, p, f = row["direct"], row["patchbay"], row["fastmcp"]
            note = " (FastMCP: initialize with the 1-upstream config)" if key == "proxy alone" else ""
            spawns = f"; upstream processes started: {p.get('spawns', '?')} vs {f.get('spawns', '?')}"
            rows.append(
                [
                    f"startup, {key} (ms){note}{spawns if key != 'proxy alone' else ''}",
                    fmt(d["median_ms"]),
                    f"{fmt(p['median_ms'])} ({fmt(ratio(p['median_ms'], d['median_ms']))}x)",
                    f"{fmt(f['median_ms'])} ({fmt(ratio(f['median_ms'], d['median_ms']))}x)",
                ]
            )
    multi = r.get("multi", {})
    if not failed(multi) and "fastmcp" in multi:
        direct = r.get("calls_bench", {}).get("direct", {}).get("median_ms")
        p, f = multi.get("patchbay", {}), multi["fastmcp"]
        rows.append(
            [
                "config with 2 upstreams: median latency per call (ms)",
                fmt(direct, 3),
                f"{fmt(p.get('median_ms'), 3)} ({fmt(ratio(p.get('median_ms'), direct))}x)",
                f"{fmt(f['median_ms'], 3)} ({fmt(ratio(f['median_ms'], direct))}x)",
            ]
        )
        rows.append(
            [
                "config with 2 upstreams: upstream processes started per call",
                "0",
                fmt(p.get("spawns_per_call"), 1),
                fmt(f["spawns_per_call"], 1),
            ]
        )
    return rows


def write_doc(r: dict[str, Any], path: Path, command: str) -> None:
    doc = Doc()
    p = r["params"]
    m, v = r["machine"], r["versions"]
    doc(
        "# Performance",
        "",
        "<!-- Generated by scripts/bench (scripts/bench_report.py). Do not edit by hand: run it again. -->",
        "",
        f"Measured {r['started']} with `{command}`"
        + (" (**quick run**: fewer batches and calls, figures are rougher)" if r["quick"] else "")
        + f"; the whole run took {r['total_seconds'] / 60:.1f} min.",
        "",
        "Every ratio is against a baseline measured side by side in the same run: the connections to both",
        "sides stay open and their batches alternate (the order rotates each batch), and each figure is",
        "the median over batches, so a noisy neighbour on this shared machine hits both sides alike.",
        "",
        "## Machine and versions",
        "",
    )
    doc.table(
        ["", ""],
        [
            ["CPU", f"{m['cpu']}, {m['cores']} cores"],
            ["RAM", m["ram"]],
            ["OS", m["os"]],
            ["Load average (1, 5, 15 min) before / after", f"{m['load']} / {r['machine_after']['load']}"],
            ["Python", v["python"]],
            ["mcp (SDK) / pydantic / anyio", f"{v['mcp']} / {v['pydantic']} / {v['anyio']}"],
            ["node", v["node"]],
            ["mcp-patchbay (git commit)", v["mcp-patchbay"]],
            ["fastmcp (own virtualenv, .bench/fastmcp-venv)", v["fastmcp"]],
            ["py-spy", v["py-spy"]],
        ],
    )
    doc("## Results", "")
    doc.table(["Figure", "Direct / baseline", "mcp-patchbay", "Ratio", "Target", "Result"], results_rows(r))
    doc(
        "Per-call figures: batches of "
        f"{p['calls']} sequential calls and of {p['concurrent_calls']} calls shared by {p['callers']} concurrent "
        f"callers, {p['batches']} batches per side, after {p['warmup']} warm-up calls. Startup: "
        f"{p['startup_reps']} repetitions per side, sides alternating, after one unmeasured start of each. "
        f"Memory: {p['memory_calls']:,} calls with 64 in flight over 16 upstreams.",
        "",
    )
    doc(*notes(r))
    variant_section(doc, r)
    doc("## Against FastMCP", "")
    rows = fastmcp_rows(r)
    if rows:
        doc(
            "FastMCP 4.1.2's multi-server proxy (`fastmcp run config.json`), with the same config files and the",
            "same client, measured in the same alternating batches. With one server in the config FastMCP keeps",
            "one upstream connection open; with two or more it builds a fresh client per request and starts",
            "every upstream in the config anew for each call (counted below with the spawn log that",
            "bench_server writes), so its per-call figures with one server are its best case.",
            "",
        )
        doc.table(["Figure", "Direct", "mcp-patchbay (ratio)", "FastMCP (ratio)"], rows)
    else:
        doc("FastMCP was not measured (not installed, or its part failed).", "")
    profile_section(doc, r)
    naming_section(doc, r)
    commands_section(doc, r, command)
    failures = {k: failed(v) for k, v in r.items() if failed(v)}
    if failures:
        doc("## Parts that failed", "")
        for key, error in failures.items():
            doc(f"- `{key}`: `{error}`")
        doc("")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(doc.lines).rstrip() + "\n", encoding="utf-8")


def notes(r: dict[str, Any]) -> list[str]:
    out = ["### Reading the results", ""]
    c = r.get("calls_bench", {})
    if not failed(c) and "direct" in c:
        d, p = c["direct"], c["patchbay"]
        out.append(
            f"- A proxied call is two stdio hops instead of one: the client's process, the proxy and the upstream "
            f"share two cores, so the proxy's CPU time per call (see the profile) is added to the latency and "
            f"taken from the throughput of the others. bench_server answers in {d['median_ms']:.2f} ms directly "
            f"and {p['median_ms']:.2f} ms through the proxy: the proxy adds {p['median_ms'] - d['median_ms']:.2f} "
            "ms per call."
        )
    pr_cpu = r.get("profile", {}).get("cpu") if not failed(r.get("profile", {})) else None
    if not failed(c) and "direct" in c and pr_cpu:
        added = c["patchbay"]["median_ms"] - c["direct"]["median_ms"]
        out.append(
            f"- The added latency ({added:.2f} ms) is {added / pr_cpu['proxy']:.1f}x the proxy's CPU time per call "
            f"({pr_cpu['proxy']:.3f} ms): the rest is waiting, two more pipe hops and process wake-ups per call, "
            "on two cores that the client, the proxy, the upstream and the machine's other work share (see the "
            "load average above). Sequential latency is the figure that suffers most from a busy neighbour."
        )
    e = r.get("calls_everything", {})
    if not failed(e) and "direct" in e:
        out.append(
            f"- server-everything (node) answers faster than a Python SDK server ({e['direct']['median_ms']:.2f} ms "
            "direct), so the same added cost is a larger ratio there."
        )
    s = r.get("startup", {})
    pr = r.get("profile", {})
    if not failed(s) and "proxy alone" in s:
        imports = pr.get("imports", {}) if not failed(pr) else {}
        text = (
            f"- Startup: the proxy is itself a Python process that imports the MCP SDK before it starts any "
            f"upstream: alone it takes {s['proxy alone']['patchbay']['median_ms']:.0f} ms to answer `initialize` "
            f"(bench_server: {s['proxy alone']['direct']['median_ms']:.0f} ms)."
        )
        if imports:
            values = list(imports.values())
            text += (
                f" Importing what it serves with takes {values[2]:.0f} ms, against {values[1]:.0f} ms for what a "
                f"minimal SDK server imports and {values[0]:.0f} ms for the bare interpreter."
            )
        line = s.get("timeline")
        if line:
            values = list(line.values())
            text += (
                f" Timeline of a one-upstream start, from the proxy's spawn: `initialize` answered at "
                f"{values[0]:.0f} ms, the upstream process spawned at {values[1]:.0f} ms, `tools/list` answered at "
                f"{values[2]:.0f} ms."
            )
            if values[1] < values[0] * 0.6:
                text += (
                    " The upstream is spawned before the proxy's heavy imports, so its own start runs beside "
                    "the proxy's on the second core."
                )
            else:
                text += (
                    " The upstream is spawned only once the proxy has imported everything and is serving, so its "
                    "own start (interpreter, imports, handshake) follows the proxy's instead of running beside it "
                    "on the second core: a one-upstream startup costs about the sum of both."
                )
            text += " With ten upstreams the ten starts dominate and overlap the proxy's, so the ratio is near 1."
        out.append(text)
    mem = r.get("memory", {})
    if not failed(mem) and "calls_per_second" in mem:
        text = (
            f"- Memory: {mem['calls']:,} calls ran at {mem['calls_per_second']:.0f} calls/s with {mem['errors']} "
            "errors. RSS is of the proxy process alone (VmRSS), not of its upstreams."
        )
        first, last = mem["marks"][0], mem["marks"][-1]
        rss = mem["rss_kib"]
        if rss.get(str(first)) is not None and rss.get(str(last)) is not None:
            grown = (rss[str(last)] - rss[str(first)]) * 1024
            text += (
                f" From {first:,} to {last:,} calls it changed by {grown / 1024:+,.0f} KiB, "
                f"{grown / (last - first):+.1f} bytes per call"
                + (
                    ": within the bound, but a run ten times longer would tell a slow leak from allocator noise."
                    if grown / (last - first) > 4
                    else "."
                )
            )
        out.append(text)
    out.append("")
    return out


VARIANT_TITLES = {
    "sdk-stdio": "with the SDK's threaded stdio_server (before)",
    "no-otel": "without the SDK's OTel middleware",
}


def variant_section(doc: Doc, r: dict[str, Any]) -> None:
    c = r.get("calls_bench", {})
    pr = r.get("profile", {})
    variants = [v for v in VARIANTS if v in c] if not failed(c) else []
    if not variants:
        return
    d, p = c["direct"], c["patchbay"]
    explain = {
        "sdk-stdio": "`sdk-stdio` serves the client's side with the SDK's threaded `stdio_server` (one worker-thread "
        "round trip per line read and two per message written), as the proxy did before it had its own transport "
        "(`mcp_patchbay.downstream`), so it shows what that change bought",
        "no-otel": "`no-otel` drops the SDK's `OpenTelemetryMiddleware` from the proxy's `Server.middleware` (a span "
        "per request, opened even though no exporter is installed)",
    }
    doc(
        "### Experiments: the same proxy with one thing changed",
        "",
        "`scripts/bench_variant.py` runs the proxy with one change, measured in the same alternating batches as "
        "the table above (bench_server `echo`): " + "; ".join(explain[v] for v in variants) + ". (An experiment "
        "whose change the measured code already contains is not run.)",
        "",
    )

    def cell(side: dict[str, Any], field: str, base: dict[str, Any], digits: int) -> str:
        return f"{fmt(side[field], digits)} ({fmt(ratio(side[field], base[field]))}x)"

    rows = []
    for field, label, digits in (
        ("median_ms", "median latency, sequential (ms)", 3),
        ("p99_ms", "p99 latency, sequential (ms)", 3),
        ("throughput", "throughput, 50 callers (calls/s)", 0),
    ):
        rows.append(
            [label, fmt(d[field], digits), cell(p, field, d, digits)] + [cell(c[v], field, d, digits) for v in variants]
        )
    cpu = pr.get("cpu") if not failed(pr) else None
    if cpu:
        rows.append(
            [
                "proxy CPU per call (ms, /proc/PID/stat; see below)",
                f"{cpu['direct_upstream']:.3f} (the upstream itself)",
                f"{cpu['proxy']:.3f}",
            ]
            + [f"{cpu[f'{v}_proxy']:.3f}" if f"{v}_proxy" in cpu else "n/a" for v in variants]
        )
    doc.table(
        ["bench_server `echo`", "Direct", "mcp-patchbay as committed"] + [VARIANT_TITLES[v] for v in variants], rows
    )


def profile_section(doc: Doc, r: dict[str, Any]) -> None:
    pr = r.get("profile", {})
    doc("## Where the time goes", "")
    if failed(pr):
        doc(f"The profile part failed: `{failed(pr)}`", "")
        return
    cpu = pr["cpu"]
    doc(
        "### CPU per call",
        "",
        "CPU time (user + system, /proc/PID/stat) per call under a steady load of 16 calls in flight from a raw",
        "JSON-RPC client, so that the client is not the bottleneck:",
        "",
    )
    doc.table(
        ["Process", "CPU ms per call", "Calls/s in that run"],
        [
            ["bench_server called directly", f"{cpu['direct_upstream']:.3f}", fmt(cpu["direct_rate"])],
            ["the proxy (mcp-patchbay)", f"{cpu['proxy']:.3f}", fmt(cpu["proxied_rate"])],
            ["bench_server behind the proxy", f"{cpu['proxied_upstream']:.3f}", ""],
        ]
        + [
            [f"the proxy {VARIANT_TITLES[v]}", f"{cpu[f'{v}_proxy']:.3f}", fmt(cpu[f"{v}_rate"])]
            for v in VARIANTS
            if f"{v}_proxy" in cpu
        ],
    )
    doc(
        "CPU time is less sensitive to a noisy neighbour than wall time, but not immune: differences under about "
        "10% between rows are within what repeated runs here have shown.",
        "",
    )
    prof = pr.get("profile")
    if prof:
        rec = pr["record"]
        doc(
            "### py-spy profile of the proxy",
            "",
            f"`{rec['command']}` while {rec['calls']:,} calls went through the proxy "
            f"({rec['calls_per_second']:.0f} calls/s). `--gil` keeps only samples of the thread that holds the GIL, "
            f"that is the proxy's Python work without its idle waits ({prof['samples_seconds']:.1f} s of samples). "
            f"The speedscope file is `{pr['profile_file']}` (not committed; open it at speedscope.app).",
            "",
            "Self time, by what the innermost frame belongs to:",
            "",
        )
        doc.table(["Category", "Share"], [[k, f"{v:.1f}%"] for k, v in prof["categories"]])
        doc("Inclusive time: samples with a frame of this stage anywhere on the stack (stages overlap):", "")
        doc.table(["Stage", "Share"], [[k, f"{v:.1f}%"] for k, v in prof["stages"]])
        doc("Top functions by self time:", "")
        doc.table(["Function", "Share"], [[f"`{k}`", f"{v:.1f}%"] for k, v in prof["functions"]])
        doc(
            "Threads: " + ", ".join(f"{k} {v:.1f}%" for k, v in prof["threads"]) + " of the GIL-holding samples.",
            "",
        )
    imports = pr.get("imports")
    if imports:
        doc("### Start cost: imports", "")
        doc.table(["What", "Wall time (ms), median of 3"], [[k, f"{v:.0f}"] for k, v in imports.items()])
        own = pr.get("own_imports") or []
        if own:
            doc("Slowest imports under `mcp_patchbay` (cumulative, `python -X importtime`, one run):", "")
            doc.table(["Module", "ms"], [[f"`{name.strip()}`", f"{ms:.0f}"] for name, ms in own])
    doc(*findings(r))


def findings(r: dict[str, Any]) -> list[str]:
    """The analysis: what the figures above say, and what would take the proxy further.

    Written against what ``probe`` and the timeline say the measured code already does, so a
    suggestion that has been carried out is reported as done, with its measured effect.
    """
    pr = r.get("profile", {})
    prof = pr.get("profile", {}) if not failed(pr) else {}
    cats = dict(prof.get("categories", []))
    stages = dict(prof.get("stages", []))
    cpu = pr.get("cpu", {}) if not failed(pr) else {}
    c = r.get("calls_bench", {}) if not failed(r.get("calls_bench", {})) else {}
    features = r.get("features", {})
    startup = r.get("startup", {}) if not failed(r.get("startup", {})) else {}
    line = startup.get("timeline", {})
    spawned, answered = line.get("upstream process spawned"), line.get("initialize answered")
    prespawn = spawned is not None and answered is not None and spawned < answered * 0.6

    def share(table: dict[str, float], prefix: str) -> str:
        for key, value in table.items():
            if key.startswith(prefix):
                return f"{value:.0f}%"
        return "0%"  # no sample fell there

    def compare(variant: str, before_is_variant: bool) -> str:
        if variant not in c or "patchbay" not in c:
            return "not measured in this run"
        p, v = c["patchbay"], c[variant]
        a, b = (v, p) if before_is_variant else (p, v)
        text = f"median {a['median_ms']:.2f} → {b['median_ms']:.2f} ms, throughput {a['throughput']:.0f} → "
        text += f"{b['throughput']:.0f} calls/s"
        key = f"{variant}_proxy"
        if key in cpu:
            x, y = (cpu[key], cpu["proxy"]) if before_is_variant else (cpu["proxy"], cpu[key])
            text += f", proxy CPU per call {x:.3f} → {y:.3f} ms"
        return text

    done: list[str] = []
    todo: list[str] = []
    if features.get("own_stdio"):
        done.append(
            "**The client's side runs without threads** (`mcp_patchbay.downstream`, commit c13a2d7). The SDK's "
            "`stdio_server` read stdin through `anyio.wrap_file`, a worker-thread round trip per line and two per "
            "message written; in the first runs of this benchmark waking those threads was a quarter of the "
            "proxy's GIL time. The `sdk-stdio` experiment puts the old transport back; from it to the "
            f"committed proxy: {compare('sdk-stdio', True)}."
        )
    else:
        todo.append(
            "**Serve the client's stdio without threads** — `cli._serve`: replace the SDK's `stdio_server` "
            "(a worker-thread round trip per line read, two per message written) with event-loop pipes on "
            "duplicated fds 0/1, keeping the SDK's diversion of fds 0/1. Expected: a quarter to a half of the "
            "proxy's CPU per call."
        )
    if features.get("otel_middleware") is False and features.get("raw_upstream"):
        done.append(
            "**No OpenTelemetry on a tool call's path**: the proxy sets its own server middleware list (the "
            "SDK's opens a span per request even with no exporter installed), and the raw lane sends the "
            "upstream request itself, so the SDK's per-request CLIENT span is gone too: "
            f"{share(stages, 'OpenTelemetry')} of the proxy's GIL time (inclusive)."
        )
    elif features.get("otel_middleware") is False:
        done.append(
            "**No SDK OpenTelemetry middleware on the server side**: the proxy sets its own middleware list. "
            "What remains of OpenTelemetry is the CLIENT span the SDK opens per upstream request inside "
            f"`JSONRPCDispatcher.send_raw_request`: {share(stages, 'OpenTelemetry')} of the proxy's GIL time "
            "(inclusive), with no opt-out short of writing the request ourselves (the raw lane below)."
        )
    elif features.get("otel_middleware"):
        todo.append(
            "**Drop the SDK's OpenTelemetry middleware** — `server.Proxy._build_server`: remove the "
            "`OpenTelemetryMiddleware` from `server.middleware` (the SDK's documented opt-out); it opens a "
            "span per request even with no exporter installed. Measured with the `no-otel` experiment: "
            f"{compare('no-otel', False)}."
        )
    if prespawn and features.get("early_spawn"):
        done.append(
            f"**Upstreams are spawned before the proxy's heavy imports, and before the config check**: in the "
            f"timeline the upstream process appears {spawned:.0f} ms after the proxy's spawn, before the proxy "
            f"answers `initialize` ({answered:.0f} ms), so the upstream's own start overlaps the proxy's. "
            "`spawn.early` reads the file with `json` alone and starts the plain stdio entries before pydantic "
            "is imported (it was 167 ms in, behind the config check); `spawn.settle` keeps only the processes "
            "the validated config launches exactly. Measured side by side with early starting switched off "
            "(`MCP_PATCHBAY_EARLY=1`), 15 alternating reps (2026-11-23): one-upstream startup 1.24x direct "
            "against 1.35x."
        )
    elif prespawn:
        done.append(
            f"**Upstreams are spawned before the proxy's heavy imports**: in the timeline the upstream process "
            f"appears {spawned:.0f} ms after the proxy's spawn, before the proxy answers `initialize` "
            f"({answered:.0f} ms), so the upstream's own start overlaps the proxy's."
        )
    elif spawned is not None:
        todo.append(
            "**Spawn the upstreams before the heavy imports** (startup) — the timeline shows the upstream "
            f"process appearing only at {spawned:.0f} ms, when the proxy has imported everything and answers "
            "`initialize`. In `cli.main`, right after `load_config` and before `_serve` imports "
            "`mcp_patchbay.server` (and with it the SDK's server and client packages), spawn each enabled stdio "
            "upstream and let `stdio.stdio_transport` adopt that process for its first connection (restarts "
            "spawn as today; the upstream's `initialize` still waits for the client's capabilities). Expected: "
            "the one-upstream startup drops from about proxy-alone + upstream toward the larger of the two."
        )
    if features.get("lazy_jsonschema"):
        done.append(
            "**`jsonschema` is not imported at start**: a tool's argument checker is built at its first use, "
            "and the supervisor imports `jsonschema` in a worker thread once startup is over (it was 56 ms of "
            "the proxy's start). With early spawning, one-upstream startup measured 1.13x direct, against 1.24x "
            "before this change (15 alternating reps, 2026-11-23)."
        )
    if features.get("bulkhead_nowait"):
        done.append("**The bulkhead takes a free slot without a checkpoint** (`acquire_nowait`, commit 40cc424).")
    elif features.get("bulkhead_nowait") is False:
        todo.append(
            "**Bulkhead fast path without a checkpoint** — `policies.with_bulkhead`: when `semaphore.value > 0`, "
            "`acquire_nowait()` and release in `finally` instead of `async with semaphore` (a task switch and a "
            "shielded cancel scope less per call)."
        )
    if features.get("raw_upstream"):
        done.append(
            "**A raw lane to stdio upstreams** (`mcp_patchbay.rawcalls`): a tool call's request line is written "
            "to the upstream's pipe directly (ids `\"pb-<n>\"`, which cannot collide with the SDK's integer "
            "ids) and `stdio.read_stdout` hands every parsed line to `RawCalls.take` first; answers and progress "
            "for its ids stop there, everything else goes to the SDK's session. Gone from a call: two "
            "memory-stream hand-offs, the dispatcher's bookkeeping, its cancel scope and OpenTelemetry span, "
            f"and the reply's model validation. In this run that lane is {share(stages, 'upstream raw lane')} of "
            "the proxy's GIL time (inclusive)."
        )
    else:
        todo.append(
            "**A raw lane for tools/call to stdio upstreams** — the upstream side of a call is still the SDK's "
            f"client machinery: the request send is {share(stages, 'upstream request send')} of the proxy's GIL "
            "time (inclusive). Give `stdio.stdio_transport` a table of pending raw requests (ids of our own), "
            "write the request line directly to the pipe, and let `read_stdout` resolve a pending entry when a "
            "response carries one of those ids."
        )
    if features.get("client_lane"):
        done.append(
            "**A lane at the client's side** (`mcp_patchbay.lane`): after the client's handshake, "
            "`downstream.read_stdin` offers each parsed line to `CallLane.offer`; a well-formed `tools/call` "
            "runs in a task of its own through the same `Proxy.run_tool` and policy chain, and its answer is "
            "written as one JSON line; its `notifications/cancelled` cancels it. Everything else, the handshake "
            "first and every call on the stateless 2026-07-28 protocol, still goes to the SDK. In this run the "
            f"lane is {share(stages, 'client-side lane')} of the proxy's GIL time (inclusive), and the SDK's "
            f"request dispatch {share(stages, 'SDK request dispatch')} (tools/list, the handshake)."
        )
    else:
        todo.append(
            "**A raw lane at the client's side too** — the SDK's server dispatch of a request "
            f"is {share(stages, 'SDK request dispatch')} of the proxy's GIL time (inclusive). "
            "`downstream.read_stdin` could recognise a handshake-era `tools/call` line itself, run it in a task "
            "of its own and write the response line directly."
        )
    if features.get("raw_upstream") and features.get("client_lane"):
        done.append(
            "**Tried and not adopted: uvloop.** With both lanes in place, the same proxy on uvloop (anyio's "
            "`use_uvloop`) measured side by side with it on asyncio, raw JSON-RPC client, bench_server `echo`, "
            "12 alternating batches of 200 calls (2026-11-23): median 1.182 ms vs 1.188 ms (1.43x vs 1.44x "
            "direct), proxy CPU per call 0.312 ms vs 0.333 ms. Within this machine's noise: not worth a "
            "dependency."
        )
    todo += [
        "**A native asyncio task per lane call** — `lane.CallLane._take_call` starts each call with anyio's "
        "`TaskGroup.start_soon` (task handle, cancel scope, bookkeeping): a few percent of the proxy's GIL "
        "time. `loop.create_task` with a set of tasks to cancel at shutdown would do, since anyio's cancel "
        "scopes work inside native tasks. Expected: a few percent of CPU per call.",
        "**A faster JSON codec** — each lane call runs `json.loads` twice and `json.dumps` twice (both edges); "
        "stdlib json is several percent of the proxy's GIL time. orjson would cut that by about two thirds; "
        "a dependency for a few percent.",
        "**Fewer task hand-offs per message** (for what the lanes leave to the SDK: lists, resources, "
        "prompts, calls to HTTP upstreams) — both transports give the SDK a zero-buffer memory stream for "
        "writing, drained by a `write_stdin`/`write_stdout` task: pass instead a small object with "
        "`async send(message)` (dump + write + drain), `aclose()` and `__aenter__`/`__aexit__`, which is all "
        "`JSONRPCDispatcher` uses: one task switch less per message on each edge. And give the read streams a "
        "small buffer (`create_memory_object_stream(16)`), so a reader that got several lines in one chunk "
        "hands them over without waiting for the dispatcher each time. Not measured here; expected a modest "
        "gain in throughput under concurrency (anyio/asyncio machinery is "
        f"{share(cats, 'anyio')} of self time, and this is where the proxy's own code creates it).",
    ]
    todo.append(
        "**Import less at start** — "
        + ("" if features.get("lazy_jsonschema") else "`catalog`/`arguments` import `jsonschema`, ")
        + "`naming` imports `rapidfuzz`, `upstream` imports `httpx2` and the SDK's SSE and streamable-HTTP "
        "clients: these can be imported on first use (the HTTP stack only for remote upstreams). The SDK's own "
        "`mcp.server` import (which pulls in `mcp.client`, `MCPServer`, uvicorn and starlette) dominates and is "
        "not ours to change. Expected: at most the difference between the two import rows above."
    )
    out = [
        "### Findings",
        "",
        f"- **Where the proxy's CPU goes now**: anyio/asyncio machinery {share(cats, 'anyio')} of self time "
        "(task steps, cancel scopes, the event loop's pipe transports and selector, checkpoints; anyio's "
        "`current_async_library` lookup runs on every primitive), the SDK's dispatcher and runner "
        f"{share(cats, 'MCP SDK')}, our own code {share(cats, 'mcp-patchbay')}, pydantic {share(cats, 'pydantic')} "
        + (
            "(a tools/call no longer meets pydantic at all: both lanes pass JSON values). A proxied call is now: "
            "downstream reader (`json.loads`, `CallLane.offer`) → a new task per call → our policy chain → "
            "`RawCalls.request` writes the line to the upstream's pipe; and back: the upstream reader "
            "(`json.loads`, `RawCalls.take`) resolves the call's future → the task writes the answer line."
            if features.get("raw_upstream") and features.get("client_lane")
            else "(the tools/call fast path passes arguments and results as JSON values; what remains is parsing "
            "each incoming line into a `JSONRPCMessage` on both edges and dumping each outgoing one). A proxied "
            "call is a chain of task switches: downstream reader → SDK dispatcher → a new handler task per "
            "request → our policy chain → the upstream dispatcher → our `write_stdin` task → pipe; and back "
            "through our `read_stdout` task → dispatcher → the handler → our `write_stdout` task."
        ),
    ]
    e = r.get("calls_everything", {}) if not failed(r.get("calls_everything", {})) else {}
    if c and e and cpu:
        out.append(
            "- **What the per-call target asks**: a median within 1.5x of direct leaves the proxy half the direct "
            f"latency: {c['direct']['median_ms'] / 2:.2f} ms per call with bench_server, "
            f"{e['direct']['median_ms'] / 2:.2f} ms with server-everything. The proxy's CPU time alone is "
            f"{cpu['proxy']:.3f} ms per call (a Python SDK server's is {cpu['direct_upstream']:.3f} ms: the proxy "
            "is a server and a client in one), and on two cores shared by client, proxy and upstream that time "
            "lands on latency and throughput. Against a node server that answers in a fraction of a "
            "millisecond, two more pipe hops and process wake-ups per call weigh on the ratio whatever the "
            "proxy's own work: with a raw JSON-RPC client (no SDK on the client side) server-everything answers "
            "in under 0.1 ms, and the proxy's added latency is then several times that."
        )
    if done:
        out += [
            "",
            "Done since the first runs of this benchmark (measured in this run where an experiment exists):",
            "",
        ]
        out += [f"- {item}" for item in done]
    out += ["", "### What would take it further (suggested changes, largest expected gain first)", ""]
    out += [f"{i}. {item}" for i, item in enumerate(todo, 1)]
    out += [""]
    return out


def naming_section(doc: Doc, r: dict[str, Any]) -> None:
    n = r.get("naming", {})
    if failed(n) or "rows" not in n:
        return
    doc(
        "## Name resolution",
        "",
        "`scripts/bench_naming.py` (owned by the naming code's author): `Resolver.resolve` (with `suggest` for "
        "names that cannot run) on generated catalogs; exact hits, normalized hits and typos. Pure CPU, in "
        "process: there is no I/O baseline, the target is absolute.",
        "",
    )
    doc.table(
        ["Tools", "Build (ms)", "Kind", "Median (ms)", "p99 (ms)", "Max (ms)"],
        [
            [
                f"{row['tools']:,}",
                fmt(row["build_ms"], 1),
                row["kind"],
                fmt(row["median_ms"], 3),
                fmt(row["p99_ms"], 3),
                fmt(row["max_ms"], 3),
            ]
            for row in n["rows"]
        ],
    )


def commands_section(doc: Doc, r: dict[str, Any], command: str) -> None:
    p = r["params"]
    config = ".bench/calls-bench.json"
    doc(
        "## How it was measured",
        "",
        f"`{command}` runs `.venv/bin/python scripts/bench_report.py`, which runs these parts in process "
        "(each script also runs on its own with the same options):",
        "",
        "```sh",
        f".venv/bin/python scripts/bench_calls.py --upstream bench --fastmcp --variant --batches {p['batches']} "
        f"--calls {p['calls']} --concurrent-calls {p['concurrent_calls']} --callers {p['callers']} "
        f"--warmup {p['warmup']}",
        f".venv/bin/python scripts/bench_calls.py --upstream everything --fastmcp --batches {p['batches']} "
        f"--calls {p['calls']} --concurrent-calls {p['concurrent_calls']} --callers {p['callers']} "
        f"--warmup {p['warmup']}",
        f".venv/bin/python scripts/bench_calls.py --multi   # {p['multi_calls']} calls in the report",
        f".venv/bin/python scripts/bench_startup.py --fastmcp --reps {p['startup_reps']}",
        f".venv/bin/python scripts/bench_naming.py --calls {p['naming_calls']}",
        f".venv/bin/python scripts/bench_memory.py --calls {p['memory_calls']} --window 64",
        f".venv/bin/python scripts/bench_profile.py --seconds {p['profile_seconds']} --calls {p['profile_calls']} "
        f"--rounds {p['profile_rounds']}",
        "```",
        "",
        "The processes each side runs (configs are written to `.bench/`):",
        "",
        "```sh",
        "# client: the SDK's Client(stdio_client(StdioServerParameters(...)), mode='legacy', cache=None),",
        "#         calls with client.session.send_request(CallToolRequest(...), CallToolResult)",
        "# direct:",
        ".venv/bin/python scripts/bench_server.py --name bench --tools 1",
        "node tests/e2e/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
        "# mcp-patchbay:",
        " ".join(proxy_command(Path(config))).replace(str(ROOT) + "/", ""),
        "# FastMCP:",
        " ".join(fastmcp_command(Path(config))).replace(str(ROOT) + "/", ""),
        "# experiments (sdk-stdio, no-otel):",
        f".venv/bin/python scripts/bench_variant.py --variant no-otel --config {config} --log-level WARNING",
        "```",
        "",
        "With `--commit REV` the proxy's processes (and `bench_naming.py`) run from `.bench/snapshot/`, "
        "unpacked from `git archive REV src scripts/bench_naming.py`, with `PYTHONPATH=.bench/snapshot/src`.",
        "",
        "Time per part (s): " + ", ".join(f"{k} {v:.0f}" for k, v in r.get("timings", {}).items()) + ".",
        "",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer batches and calls (about a third of the time)")
    parser.add_argument("--commit", help="measure this commit's src/ (a snapshot) instead of the working tree")
    parser.add_argument("--output", default=str(ROOT / "docs" / "PERFORMANCE.md"))
    parser.add_argument("--json", default=str(WORK / "results.json"), help="raw results")
    parser.add_argument("--from-json", help="only write the document from saved raw results")
    parser.add_argument("--command", default="scripts/bench", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.from_json:
        results = json.loads(Path(args.from_json).read_text())
    else:
        if args.commit:
            snapshot(args.commit)
        results = run_all(args.quick)
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(results, indent=1), encoding="utf-8")
    command = args.command + (" --quick" if results.get("quick") else "")
    if args.commit and not args.from_json:
        command += f" --commit {args.commit}"
    write_doc(results, Path(args.output), command)
    log(f"wrote {args.output} (raw results: {args.json})")


if __name__ == "__main__":
    main()
