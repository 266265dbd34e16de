"""Write docs/PERFORMANCE.md from the results of ``benchmarks.report.run_all`` (or a saved results JSON).

The document's text is ``report_template.md`` (string.Template, one block per optional
section); this module builds its tables from the results, row by row, and fills the fields. The
statements under "Reading the results" and "Findings" come from ``benchmarks.report_findings``.
Nothing here measures.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from string import Template
from typing import Any, cast

from benchmarks.common import ROOT, fastmcp_command, proxy_command
from benchmarks.doc_sections import carry_over
from benchmarks.report_findings import statements

TEMPLATE = Path(__file__).with_name("report_template.md")
UPSTREAMS = (("calls_bench", "bench_server `echo`"), ("calls_everything", "server-everything `get-sum`"))
STARTUPS = (
    ("1 upstream", "Startup to complete tools/list, 1 upstream (ms)", "direct"),
    ("10 upstreams", "Startup to complete tools/list, 10 upstreams (ms)", "direct, 10 in parallel"),
    ("proxy alone", "Proxy alone: spawn to initialize answered, no upstreams (ms)", "bench_server's own"),
)
Row = list[str]


# --- figures --------------------------------------------------------------------------------


def fmt(value: Any, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.{digits}f}"
    return str(value)


def ratio(a: Any, b: Any) -> float | None:
    try:
        if a is None or b is None or b == 0 or math.isnan(a) or math.isnan(b):
            return None
        return float(a / b)
    except TypeError:
        return None


def times(value: float | None, digits: int = 2) -> str:
    """A ratio as shown in the tables: ``1.41x``."""
    return "n/a" if value is None else f"{fmt(value, digits)}x"


def verdict(value: float | None, op: str, limit: float) -> str:
    if value is None:
        return "n/a"
    ok = {"≤": value <= limit, "≥": value >= limit, "<": value < limit}[op]
    return "**pass**" if ok else "**FAIL**"


def failed(part: Any) -> str | None:
    if isinstance(part, dict) and "error" in part:
        return str(cast("dict[str, Any]", part)["error"])
    return None


def ok(r: dict[str, Any], key: str) -> dict[str, Any]:
    """A part's results, or {} when it failed or is missing."""
    part = r.get(key)
    return cast("dict[str, Any]", part) if isinstance(part, dict) and not failed(part) else {}


def table(header: list[str], rows: list[Row]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def with_ratio(value: Any, base: Any, digits: int) -> str:
    return f"{fmt(value, digits)} ({times(ratio(value, base))})"


# --- tables ---------------------------------------------------------------------------------


def machine_rows(r: dict[str, Any]) -> list[Row]:
    m, v = r["machine"], r["versions"]
    return [
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
    ]


def _failed_row(label: str, part: Any) -> Row:
    return [label, "failed", "", "", "", f"n/a: {failed(part)}"]


def call_rows(r: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    for key, label in UPSTREAMS:
        c = r.get(key, {})
        if failed(c) or "direct" not in c:
            rows.append(_failed_row(f"Per-call, {label}", c))
            continue
        d, p = c["direct"], c["patchbay"]
        med, thr = ratio(p["median_ms"], d["median_ms"]), ratio(p["throughput"], d["throughput"])
        p99 = ratio(p["p99_ms"], d["p99_ms"])
        added = f"+{p['median_ms'] - d['median_ms']:.3f}"
        throughput = fmt(d["throughput"]), fmt(p["throughput"])
        direct, proxied = fmt(d["median_ms"], 3), fmt(p["median_ms"], 3)
        rows += [
            [
                f"Median latency, sequential, {label} (ms)",
                direct,
                proxied,
                times(med),
                "≤ 1.5x",
                verdict(med, "≤", 1.5),
            ],
            [f"p99 latency, sequential, {label} (ms)", fmt(d["p99_ms"], 3), fmt(p["p99_ms"], 3), times(p99), "-", "-"],
            [f"Added latency per call, {label} (ms)", "-", added, "-", "-", "-"],
            [f"Throughput, 50 callers, {label} (calls/s)", *throughput, times(thr), "≥ 0.7x", verdict(thr, "≥", 0.7)],
        ]
    return rows


def startup_rows(r: dict[str, Any]) -> list[Row]:
    s = r.get("startup", {})
    rows: list[Row] = []
    for key, label, base in STARTUPS:
        row = s.get(key) if not failed(s) else None
        if not row:
            rows.append(_failed_row(label, s))
            continue
        value = ratio(row["patchbay"]["median_ms"], row["direct"]["median_ms"])
        direct, proxied = fmt(row["direct"]["median_ms"]), fmt(row["patchbay"]["median_ms"])
        rows.append([f"{label} [baseline: {base}]", direct, proxied, times(value), "≤ 1.2x", verdict(value, "≤", 1.2)])
    return rows


def naming_rows(r: dict[str, Any]) -> list[Row]:
    n = r.get("naming", {})
    if failed(n) or "rows" not in n:
        return [_failed_row("Name resolution p99", n)]
    rows: list[Row] = []
    for size in sorted({row["tools"] for row in n["rows"]}):
        worst = max((row for row in n["rows"] if row["tools"] == size), key=lambda row: row["p99_ms"])
        target, result = ("< 5 ms", verdict(worst["p99_ms"], "<", 5)) if size == 10_000 else ("-", "-")
        label = f"Name resolution p99, {size:,} tools, worst kind ({worst['kind']}) (ms)"
        rows.append([label, "-", fmt(worst["p99_ms"], 3), "-", target, result])
    return rows


def memory_rows(r: dict[str, Any]) -> list[Row]:
    m = r.get("memory", {})
    if failed(m) or "rss_kib" not in m:
        return [_failed_row("Memory", m)]
    rss = m["rss_kib"]

    def mib(kib: Any) -> str:
        return fmt(None if kib is None else kib / 1024, 1)

    first, last = m["marks"][0], m["marks"][-1]
    growth = ratio(rss.get(str(last)), rss.get(str(first)))
    started = ratio(rss["started"], m["upstream_rss_kib"])
    label = f"Proxy RSS with {m['upstreams']} upstreams, after start (MiB) [baseline: one upstream's RSS]"
    rows = [[label, mib(m["upstream_rss_kib"]), mib(rss["started"]), times(started), "-", "-"]]
    rows += [[f"Proxy RSS after {n:,} calls (MiB)", "-", mib(rss.get(str(n))), "-", "-", "-"] for n in m["marks"]]
    label = f"RSS growth from {first:,} to {last:,} calls [baseline: RSS at {first:,}]"
    low, high = mib(rss.get(str(first))), mib(rss.get(str(last)))
    rows.append([label, low, high, times(growth, 3), "≤ 1.05x (no growth)", verdict(growth, "≤", 1.05)])
    return rows


def fastmcp_rows(r: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    for key, label in UPSTREAMS:
        c = ok(r, key)
        if "fastmcp" not in c:
            continue
        d, p, f = c["direct"], c["patchbay"], c["fastmcp"]
        for field, name, digits in (("median_ms", "median latency (ms)", 3), ("throughput", "throughput (calls/s)", 0)):
            base = d[field]
            rows.append([f"{label}: {name}", fmt(base, digits)] + [with_ratio(x[field], base, digits) for x in (p, f)])
    s = ok(r, "startup")
    for key, _, _ in STARTUPS:
        row = s.get(key, {})
        if "fastmcp" not in row:
            continue
        d, p, f = row["direct"], row["patchbay"], row["fastmcp"]
        if key == "proxy alone":
            label = f"startup, {key} (ms) (FastMCP: initialize with the 1-upstream config)"
        else:
            label = f"startup, {key} (ms); upstream processes started: {p.get('spawns', '?')} vs {f.get('spawns', '?')}"
        base = d["median_ms"]
        rows.append([label, fmt(base)] + [with_ratio(x["median_ms"], base, 2) for x in (p, f)])
    multi = ok(r, "multi")
    if "fastmcp" in multi:
        direct = r.get("calls_bench", {}).get("direct", {}).get("median_ms")
        p, f = multi.get("patchbay", {}), multi["fastmcp"]
        rows.append(
            ["config with 2 upstreams: median latency per call (ms)", fmt(direct, 3)]
            + [with_ratio(x.get("median_ms"), direct, 3) for x in (p, f)]
        )
        label = "config with 2 upstreams: upstream processes started per call"
        rows.append([label, "0", fmt(p.get("spawns_per_call"), 1), fmt(f["spawns_per_call"], 1)])
    return rows


def cpu_rows(r: dict[str, Any]) -> list[Row]:
    cpu = r["profile"]["cpu"]
    return [
        ["bench_server called directly", f"{cpu['direct_upstream']:.3f}", fmt(cpu["direct_rate"])],
        ["the proxy (mcp-patchbay)", f"{cpu['proxy']:.3f}", fmt(cpu["proxied_rate"])],
        ["bench_server behind the proxy", f"{cpu['proxied_upstream']:.3f}", ""],
    ]


def shares(pairs: list[tuple[str, float]], code: bool = False) -> list[Row]:
    return [[f"`{k}`" if code else k, f"{v:.1f}%"] for k, v in pairs]


# --- sections -------------------------------------------------------------------------------


def blocks(path: Path = TEMPLATE) -> dict[str, Template]:
    """The template's blocks by name: the text after each ``<!-- block: NAME -->`` line."""
    parts = re.split(r"^<!-- block: (.+?) -->\n", path.read_text(encoding="utf-8"), flags=re.M)
    return {name: Template(text) for name, text in zip(parts[1::2], parts[2::2], strict=True)}


def profile_section(t: dict[str, Template], r: dict[str, Any]) -> str:
    pr = r.get("profile", {})
    if failed(pr):
        return t["profile failed"].substitute(error=failed(pr))
    out = [t["cpu"].substitute(table=table(["Process", "CPU ms per call", "Calls/s in that run"], cpu_rows(r)))]
    prof = pr.get("profile")
    if prof:
        rec = pr["record"]
        out.append(
            t["py-spy"].substitute(
                command=rec["command"],
                calls=f"{rec['calls']:,}",
                rate=f"{rec['calls_per_second']:.0f}",
                seconds=f"{prof['samples_seconds']:.1f}",
                file=pr["profile_file"],
                categories=table(["Category", "Share"], shares(prof["categories"])),
                stages=table(["Stage", "Share"], shares(prof["stages"])),
                functions=table(["Function", "Share"], shares(prof["functions"], code=True)),
                threads=", ".join(f"{k} {v:.1f}%" for k, v in prof["threads"]),
            )
        )
    imports = pr.get("imports")
    if imports:
        rows = [[k, f"{v:.0f}"] for k, v in imports.items()]
        out.append(t["imports"].substitute(table=table(["What", "Wall time (ms), median of 3"], rows)))
        own: list[tuple[str, float]] = pr.get("own_imports") or []
        if own:
            rows = [[f"`{name.strip()}`", f"{ms:.0f}"] for name, ms in own]
            out.append(t["own imports"].substitute(table=table(["Module", "ms"], rows)))
    return "\n".join(out)


def naming_section(t: dict[str, Template], r: dict[str, Any]) -> str:
    n = ok(r, "naming")
    if "rows" not in n:
        return ""
    rows = [
        [f"{row['tools']:,}", fmt(row["build_ms"], 1), row["kind"]]
        + [fmt(row[k], 3) for k in ("median_ms", "p99_ms", "max_ms")]
        for row in n["rows"]
    ]
    return t["naming"].substitute(
        table=table(["Tools", "Build (ms)", "Kind", "Median (ms)", "p99 (ms)", "Max (ms)"], rows)
    )


def bullets(lines: list[str]) -> str:
    return "\n".join(f"- {line}" for line in lines) or "- (no figures from this run to read)"


def render(r: dict[str, Any], command: str, template: Path = TEMPLATE) -> str:
    """The whole document for one run's results."""
    t = blocks(template)
    p = r["params"]
    failures = {k: failed(v) for k, v in r.items() if failed(v)}
    fast = fastmcp_rows(r)
    config = Path(".bench/calls-bench.json")
    fields = {
        **{k: str(v) for k, v in p.items()},
        "started": r["started"],
        "command": command,
        "quick_note": " (**quick run**: fewer batches and calls, figures are rougher)" if r["quick"] else "",
        "minutes": f"{r['total_seconds'] / 60:.1f}",
        "machine_table": table(["", ""], machine_rows(r)),
        "results_table": table(
            ["Figure", "Direct / baseline", "mcp-patchbay", "Ratio", "Target", "Result"],
            call_rows(r) + startup_rows(r) + naming_rows(r) + memory_rows(r),
        ),
        "memory_calls": f"{p['memory_calls']:,}",
        "memory_calls_plain": str(p["memory_calls"]),
        "call_options": f"--batches {p['batches']} --calls {p['calls']} --concurrent-calls {p['concurrent_calls']} "
        f"--callers {p['callers']} --warmup {p['warmup']}",
        "reading": bullets(statements(r, "reading")),
        "fastmcp": t["fastmcp"].substitute(
            table=table(["Figure", "Direct", "mcp-patchbay (ratio)", "FastMCP (ratio)"], fast)
        )
        if fast
        else t["fastmcp missing"].template,
        "profile": profile_section(t, r),
        "findings": bullets(statements(r, "findings")),
        "naming": naming_section(t, r),
        "config": str(config),
        "proxy_command": " ".join(proxy_command(ROOT / config)).replace(str(ROOT) + "/", ""),
        "fastmcp_command": " ".join(fastmcp_command(ROOT / config)).replace(str(ROOT) + "/", ""),
        "timings": ", ".join(f"{k} {v:.0f}" for k, v in r.get("timings", {}).items()),
        "failures": t["failures"].substitute(list="\n".join(f"- `{k}`: `{e}`" for k, e in failures.items()))
        if failures
        else "",
    }
    text = t["document"].substitute(fields)
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"


def write_doc(r: dict[str, Any], path: Path, command: str) -> None:
    """Write the document; the sections other benchmarks own (``doc_sections``) are kept."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(carry_over(path, render(r, command)), encoding="utf-8")
