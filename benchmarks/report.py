"""Run every benchmark and write docs/PERFORMANCE.md. What ``scripts/bench`` runs.

    .venv/bin/python -m benchmarks.report [--quick] [--commit REV] [--output docs/PERFORMANCE.md] [--json FILE]
    .venv/bin/python -m benchmarks.report --render-only .bench/results.json [--output FILE]

Parts, in order: per-call overhead (bench_server, then server-everything), FastMCP's
two-upstream spawn check, startup, name resolution (``naming.py``), memory, profile.
Every ratio is against a baseline measured in the same run, batches alternating. A part
that fails is reported as failed in the document; the others still run.

By default the proxy under test is the working tree's ``src/``. ``--commit REV`` measures a
commit instead: ``git archive REV src benchmarks/naming.py`` is unpacked into
``.bench/snapshot/`` and the proxy's processes run with ``PYTHONPATH`` pointing there, so
edits made to the working tree during the run do not leak into it.

This module measures and saves the raw results (``--json``); ``report_render.py`` writes
the document from them with ``report_template.md``, and ``report_findings.py`` holds
the rules that turn the figures into statements. ``--render-only FILE`` writes the document
from saved results without measuring.
"""

from __future__ import annotations

import argparse
import datetime
import json
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

from benchmarks import calls as bench_calls
from benchmarks import memory as bench_memory
from benchmarks import startup as bench_startup
from benchmarks import stdio_profile as bench_profile
from benchmarks.common import (
    FASTMCP,
    PY,
    ROOT,
    WORK,
    fastmcp_available,
    log,
    use_source,
)
from benchmarks.report_render import write_doc

naming_script: Path = ROOT / "benchmarks" / "naming.py"

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
    global naming_script  # noqa: PLW0603 - the one switch between working tree and snapshot
    commit = _run(["git", "rev-parse", "--short", rev])
    if not commit:
        raise SystemExit(f"benchmarks.report: unknown revision {rev!r}")
    shutil.rmtree(SNAPSHOT, ignore_errors=True)
    SNAPSHOT.mkdir(parents=True)
    # The naming benchmark was scripts/bench_naming.py before issue 21 moved it to benchmarks/.
    listed = _run(["git", "ls-tree", "--name-only", commit, "benchmarks/naming.py"])
    naming_path = "benchmarks/naming.py" if listed else "scripts/bench_naming.py"
    archive = subprocess.run(["git", "archive", commit, "src", naming_path], capture_output=True, check=True, cwd=ROOT)
    subprocess.run(["tar", "-x", "-C", str(SNAPSHOT)], input=archive.stdout, check=True)
    use_source(SNAPSHOT / "src")
    naming_script = SNAPSHOT / naming_path
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
    if not naming_script.exists():
        raise RuntimeError(f"{naming_script.relative_to(ROOT)} is missing")
    done = subprocess.run(
        [PY, str(naming_script), "--calls", str(calls)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
        timeout=600,
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
        raise RuntimeError(f"could not read naming.py's output:\n{done.stdout[-2000:]}")
    return {"rows": rows, "output": done.stdout}


PROBE = """
import importlib.util, inspect, json, sys
from pathlib import Path
import anyio
out = {"own_stdio": importlib.util.find_spec("mcp_patchbay.wire.stdio") is not None}
out["raw_upstream"] = importlib.util.find_spec("mcp_patchbay.fastpath.pipe_calls") is not None
out["client_lane"] = importlib.util.find_spec("mcp_patchbay.fastpath.stdio_calls") is not None
try:
    import mcp_patchbay.session.proxy
    out["lazy_jsonschema"] = "jsonschema" not in sys.modules
    from mcp_patchbay.upstreams import spawn
    out["early_spawn"] = hasattr(spawn, "early")
except Exception:
    out["lazy_jsonschema"] = out["early_spawn"] = None
try:
    from mcp_patchbay.calls import policies
    out["bulkhead_nowait"] = "acquire_nowait" in inspect.getsource(policies.with_bulkhead)
except Exception:
    out["bulkhead_nowait"] = None
try:
    from mcp.server._otel import OpenTelemetryMiddleware
    from mcp_patchbay.config import load_config
    from mcp_patchbay.session.proxy import Proxy
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
    log(f"proxy under test: {features}")
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
                    bench_calls.targets_for(upstream, with_fastmcp=True),
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer batches and calls (about a third of the time)")
    parser.add_argument("--commit", help="measure this commit's src/ (a snapshot) instead of the working tree")
    parser.add_argument("--output", default=str(ROOT / "docs" / "PERFORMANCE.md"))
    parser.add_argument("--json", default=str(WORK / "results.json"), help="raw results")
    parser.add_argument(
        "--render-only", "--from-json", dest="render_only", metavar="FILE", help="write the document from saved results"
    )
    parser.add_argument("--command", default="scripts/bench", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.render_only:
        results = json.loads(Path(args.render_only).read_text(encoding="utf-8"))
    else:
        if args.commit:
            snapshot(args.commit)
        results = run_all(args.quick)
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(results, indent=1), encoding="utf-8")
    command = args.command + (" --quick" if results.get("quick") else "")
    if args.commit and not args.render_only:
        command += f" --commit {args.commit}"
    write_doc(results, Path(args.output), command)
    log(f"wrote {args.output} (raw results: {args.render_only or args.json})")


if __name__ == "__main__":
    main()
