"""The statements under "Reading the results" and "Findings" in docs/PERFORMANCE.md, as rules.

``facts`` flattens one run's results into named figures (a part that failed, or was not
measured, contributes none). Each ``Rule`` names the figures it needs, may add a condition on
them, and says one sentence with those figures filled in (``str.format``). A rule whose figures
are missing or whose condition is false says nothing, so every statement is about this run's
data. Statements about history ("was X in commit Y") do not belong here: the run cannot check them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, cast

Facts = dict[str, Any]


@dataclass(frozen=True)
class Rule:
    section: str  # "reading" or "findings"
    needs: tuple[str, ...]
    say: str
    when: Callable[[Facts], bool] | None = None


def failed(part: Any) -> bool:
    return isinstance(part, dict) and "error" in part


def _part(r: dict[str, Any], key: str) -> dict[str, Any]:
    part = r.get(key)
    return cast("dict[str, Any]", part) if isinstance(part, dict) and not failed(part) else {}


def _share(table: Iterable[tuple[str, float]], prefix: str) -> float:
    """A profile share by label prefix; 0 when no sample fell there."""
    return next((value for label, value in table if label.startswith(prefix)), 0.0)


def _calls(f: Facts, prefix: str, c: dict[str, Any]) -> None:
    if "direct" not in c or "patchbay" not in c:
        return
    d, p = c["direct"], c["patchbay"]
    f[f"{prefix}_direct"], f[f"{prefix}_proxy"] = d["median_ms"], p["median_ms"]
    f[f"{prefix}_added"] = p["median_ms"] - d["median_ms"]
    f[f"{prefix}_half"] = d["median_ms"] / 2
    f[f"{prefix}_proxy_thr"] = p["throughput"]
    if d["median_ms"]:
        f[f"{prefix}_ratio"] = p["median_ms"] / d["median_ms"]
    if d["throughput"]:
        f[f"{prefix}_thr_ratio"] = p["throughput"] / d["throughput"]


def facts(r: dict[str, Any]) -> Facts:
    """The named figures of one run (only those it measured)."""
    f: Facts = {}
    machine, after = r.get("machine", {}), r.get("machine_after", {})
    f["cores"], f["load_before"], f["load_after"] = machine.get("cores"), machine.get("load"), after.get("load")
    features: dict[str, Any] = r.get("features") or {}
    for name, value in features.items():
        f[f"feat_{name}"] = value
    _calls(f, "b", _part(r, "calls_bench"))
    e = _part(r, "calls_everything")
    if "direct" in e and "patchbay" in e:
        _calls(f, "e", {"direct": e["direct"], "patchbay": e["patchbay"]})

    pr = _part(r, "profile")
    cpu: dict[str, float] = pr.get("cpu") or {}
    if cpu:
        f["cpu_proxy"], f["cpu_upstream"] = cpu["proxy"], cpu["direct_upstream"]
        if "b_added" in f and cpu["proxy"]:
            f["added_over_cpu"] = f["b_added"] / cpu["proxy"]
    prof: dict[str, Any] = pr.get("profile") or {}
    if prof:
        cats: list[tuple[str, float]] = prof.get("categories", [])
        stages: list[tuple[str, float]] = prof.get("stages", [])
        for key, prefix in (
            ("anyio", "anyio"),
            ("sdk", "MCP SDK"),
            ("ours", "mcp-patchbay"),
            ("pydantic", "pydantic"),
            ("json", "stdlib json"),
        ):
            f[f"share_{key}"] = _share(cats, prefix)
        for key, prefix in (
            ("client_lane", "client-side lane"),
            ("raw_lane", "upstream raw lane"),
            ("sdk_dispatch", "SDK request dispatch"),
            ("send", "upstream request send"),
            ("sdk_stdio", "downstream via the SDK's threaded"),
            ("policy", "policy chain"),
            ("otel", "OpenTelemetry"),
            ("pydantic", "pydantic anywhere"),
        ):
            f[f"st_{key}"] = _share(stages, prefix)
        if prof.get("functions"):
            f["top_fn"], f["top_fn_share"] = prof["functions"][0]
    import_ms: dict[str, float] = pr.get("imports") or {}
    imports = list(import_ms.values())
    if len(imports) >= 3:
        f["imp_bare"], f["imp_sdk"], f["imp_proxy"] = imports[:3]
        f["imp_own"] = imports[2] - imports[1]
    if pr.get("own_imports"):
        name, ms = pr["own_imports"][0]
        f["own_top"], f["own_top_ms"] = name.strip(), ms

    s = _part(r, "startup")
    alone: dict[str, Any] = s.get("proxy alone") or {}
    if alone:
        f["start_alone_proxy"], f["start_alone_direct"] = alone["patchbay"]["median_ms"], alone["direct"]["median_ms"]
    for key, name in (("1 upstream", "start1"), ("10 upstreams", "start10")):
        row: dict[str, Any] = s.get(key) or {}
        if row and row["direct"]["median_ms"]:
            f[f"{name}_ratio"] = row["patchbay"]["median_ms"] / row["direct"]["median_ms"]
    for part, suffix in (("timeline", ""), ("timeline search", "_search")):
        line: dict[str, float] = s.get(part) or {}
        for key, name in (
            ("initialize answered", "t_init"),
            ("upstream process spawned", "t_spawn"),
            ("tools/list answered", "t_list"),
        ):
            if key in line:
                f[name + suffix] = line[key]

    multi = _part(r, "multi")
    if "fastmcp" in multi and "patchbay" in multi:
        f["multi_p_spawns"] = multi["patchbay"].get("spawns_per_call")
        f["multi_f_spawns"] = multi["fastmcp"].get("spawns_per_call")

    m = _part(r, "memory")
    if "calls_per_second" in m:
        f["mem_calls"], f["mem_rate"], f["mem_errors"] = m["calls"], m["calls_per_second"], m["errors"]
        first, last = m["marks"][0], m["marks"][-1]
        low, high = m["rss_kib"].get(str(first)), m["rss_kib"].get(str(last))
        if low is not None and high is not None and last > first:
            f["mem_first"], f["mem_last"] = first, last
            f["mem_grown_kib"] = float(high - low)
            f["mem_bytes_per_call"] = (high - low) * 1024 / (last - first)
            f["mem_growth"] = high / low if low else None
    return {k: v for k, v in f.items() if v is not None}


RULES: list[Rule] = [
    # --- reading the results ---------------------------------------------------------------
    Rule(
        "reading",
        ("b_direct", "b_proxy", "b_added", "b_ratio"),
        "A proxied call is two stdio hops instead of one: bench_server answers in {b_direct:.2f} ms directly and "
        "{b_proxy:.2f} ms through the proxy, which adds {b_added:.2f} ms per call ({b_ratio:.2f}x).",
        lambda f: f["b_added"] > 0,
    ),
    Rule(
        "reading",
        ("b_direct", "b_proxy", "b_added", "b_ratio"),
        "bench_server answered in {b_direct:.2f} ms directly and {b_proxy:.2f} ms through the proxy "
        "({b_ratio:.2f}x): in this run the noise between batches was larger than the proxy's added latency.",
        lambda f: f["b_added"] <= 0,
    ),
    Rule(
        "reading",
        ("b_added", "cpu_proxy", "added_over_cpu", "cores", "load_before", "load_after"),
        "The added latency ({b_added:.2f} ms) is {added_over_cpu:.1f}x the proxy's CPU time per call "
        "({cpu_proxy:.3f} ms): the rest is waiting (pipe hops, process wake-ups) on {cores} cores shared by the "
        "client, the proxy, the upstream and the machine's other work (load {load_before} before the run, "
        "{load_after} after).",
        lambda f: f["added_over_cpu"] > 1,
    ),
    Rule(
        "reading",
        ("b_added", "cpu_proxy"),
        "The added latency ({b_added:.2f} ms) is within the proxy's CPU time per call ({cpu_proxy:.3f} ms).",
        lambda f: 0 < f["b_added"] <= f["cpu_proxy"],
    ),
    Rule(
        "reading",
        ("e_direct", "b_direct", "e_added", "e_ratio", "b_ratio"),
        "server-everything (node) answers faster than bench_server ({e_direct:.2f} against {b_direct:.2f} ms "
        "direct), so the proxy's added {e_added:.2f} ms is a larger ratio there: {e_ratio:.2f}x against "
        "{b_ratio:.2f}x.",
        lambda f: f["e_direct"] < f["b_direct"] and f["e_added"] > 0 and f["e_ratio"] > f["b_ratio"],
    ),
    Rule(
        "reading",
        ("b_thr_ratio", "e_thr_ratio"),
        "With 50 concurrent callers the proxy's throughput is {b_thr_ratio:.2f}x direct with bench_server and "
        "{e_thr_ratio:.2f}x with server-everything.",
    ),
    Rule(
        "reading",
        ("start_alone_proxy", "start_alone_direct"),
        "Startup: alone, the proxy takes {start_alone_proxy:.0f} ms to answer `initialize`; bench_server, a "
        "minimal SDK server, {start_alone_direct:.0f} ms.",
    ),
    Rule(
        "reading",
        ("imp_proxy", "imp_sdk", "imp_bare"),
        "Importing what the proxy serves with takes {imp_proxy:.0f} ms, against {imp_sdk:.0f} ms for what a "
        "minimal SDK server imports and {imp_bare:.0f} ms for the bare interpreter.",
    ),
    Rule(
        "reading",
        ("t_init", "t_spawn", "t_list"),
        "Timeline of a one-upstream start in all mode, from the proxy's spawn (medians): `initialize` answered "
        "at {t_init:.0f} ms (before the SDK is loaded: `early_handshake`), upstream process spawned at "
        "{t_spawn:.0f} ms, `tools/list` answered at {t_list:.0f} ms (it waits for the upstream).",
    ),
    Rule(
        "reading",
        ("t_init_search", "t_list_search"),
        "In search mode `initialize` is answered at {t_init_search:.0f} ms and `tools/list` at "
        "{t_list_search:.0f} ms: its two tools do not wait for the upstreams. Claude Code sends its first model "
        "request 1.5 to 2 s after it spawns its servers.",
    ),
    Rule(
        "reading",
        ("t_list", "t_spawn"),
        "The upstream is spawned before the proxy has finished its imports, so its own start runs beside the proxy's.",
        lambda f: f["t_spawn"] < f["t_list"] * 0.5,
    ),
    Rule(
        "reading",
        ("t_list", "t_spawn"),
        "The upstream is spawned only once the proxy is serving, so a one-upstream start costs about the sum "
        "of both starts.",
        lambda f: f["t_spawn"] >= f["t_list"] * 0.5,
    ),
    Rule(
        "reading",
        ("start1_ratio", "start10_ratio"),
        "With ten upstreams the startup ratio is {start10_ratio:.2f}x, against {start1_ratio:.2f}x with one: the "
        "upstreams' own starts weigh more than the proxy's.",
        lambda f: f["start10_ratio"] < f["start1_ratio"],
    ),
    Rule(
        "reading",
        ("mem_calls", "mem_rate", "mem_errors"),
        "Memory: {mem_calls:,} calls ran at {mem_rate:.0f} calls/s with {mem_errors} errors. RSS is of the proxy "
        "process alone (VmRSS), not of its upstreams.",
    ),
    Rule(
        "reading",
        ("mem_first", "mem_last", "mem_grown_kib", "mem_bytes_per_call"),
        "From {mem_first:,} to {mem_last:,} calls the proxy's RSS changed by {mem_grown_kib:+,.0f} KiB, "
        "{mem_bytes_per_call:+.1f} bytes per call.",
    ),
    Rule(
        "reading",
        ("mem_growth", "mem_bytes_per_call"),
        "That is within the bound, but a run ten times longer would tell a slow leak from allocator noise.",
        lambda f: f["mem_growth"] <= 1.05 and f["mem_bytes_per_call"] > 4,
    ),
    # --- findings --------------------------------------------------------------------------
    Rule(
        "findings",
        ("share_anyio", "share_ours", "share_json", "share_sdk", "share_pydantic"),
        "**Where the proxy's CPU goes** (self time): anyio/asyncio machinery {share_anyio:.0f}%, mcp-patchbay's "
        "own code {share_ours:.0f}%, stdlib json {share_json:.0f}%, the MCP SDK {share_sdk:.0f}%, pydantic "
        "{share_pydantic:.0f}%.",
    ),
    Rule(
        "findings",
        ("top_fn", "top_fn_share"),
        "**The largest single function** by self time is `{top_fn}` ({top_fn_share:.1f}%).",
    ),
    Rule(
        "findings",
        ("st_client_lane", "st_sdk_dispatch", "feat_client_lane"),
        "**The client-side lane** (`mcp_patchbay.fastpath.stdio_calls`, a tools/call served without the SDK's "
        "dispatcher) is "
        "{st_client_lane:.0f}% of the proxy's GIL time (inclusive); the SDK's request dispatch, which still "
        "serves the handshake and tools/list, {st_sdk_dispatch:.0f}%.",
        lambda f: bool(f["feat_client_lane"]),
    ),
    Rule(
        "findings",
        ("st_sdk_dispatch", "feat_client_lane"),
        "**The SDK's request dispatch** is {st_sdk_dispatch:.0f}% of the proxy's GIL time (inclusive): the "
        "measured code has no lane of its own at the client's side.",
        lambda f: f["feat_client_lane"] is False,
    ),
    Rule(
        "findings",
        ("st_raw_lane", "feat_raw_upstream"),
        "**The raw lane to stdio upstreams** (`mcp_patchbay.fastpath.pipe_calls`, the request line written to the "
        "upstream's pipe directly) is {st_raw_lane:.0f}% of the proxy's GIL time (inclusive).",
        lambda f: bool(f["feat_raw_upstream"]),
    ),
    Rule(
        "findings",
        ("st_send", "feat_raw_upstream"),
        "**The SDK's upstream request send** is {st_send:.0f}% of the proxy's GIL time (inclusive): the measured "
        "code has no raw lane to its upstreams.",
        lambda f: f["feat_raw_upstream"] is False,
    ),
    Rule(
        "findings",
        ("st_pydantic", "share_pydantic"),
        "**pydantic is off a tool call's path**: {st_pydantic:.1f}% of the samples have it anywhere on the stack.",
        lambda f: f["st_pydantic"] < 1,
    ),
    Rule(
        "findings",
        ("st_sdk_stdio",),
        "**The SDK's threaded stdio_server** serves the client's side: {st_sdk_stdio:.0f}% of the proxy's GIL "
        "time (inclusive).",
        lambda f: f["st_sdk_stdio"] >= 1,
    ),
    Rule(
        "findings",
        ("st_otel",),
        "**OpenTelemetry** spans and context are {st_otel:.0f}% of the proxy's GIL time (inclusive), with no "
        "exporter installed.",
    ),
    Rule(
        "findings",
        ("st_policy",),
        "**The policy chain** (deadline, breaker, bulkhead, retry) is {st_policy:.0f}% of the proxy's GIL time "
        "(inclusive).",
    ),
    Rule(
        "findings",
        ("b_half", "e_half", "cpu_proxy", "cpu_upstream"),
        "**What the per-call target asks**: a median within 1.5x of direct leaves the proxy half the direct "
        "latency, {b_half:.2f} ms per call with bench_server and {e_half:.2f} ms with server-everything. The "
        "proxy's CPU time alone is {cpu_proxy:.3f} ms per call (bench_server's own: {cpu_upstream:.3f} ms).",
    ),
    Rule(
        "findings",
        ("e_half", "cpu_proxy"),
        "**server-everything's budget is below the proxy's CPU time**: {cpu_proxy:.3f} ms of CPU per call against "
        "{e_half:.2f} ms of allowed added latency.",
        lambda f: f["cpu_proxy"] > f["e_half"],
    ),
    Rule(
        "findings",
        ("share_json",),
        "**stdlib json** is {share_json:.0f}% of the proxy's self time: the most a faster JSON codec could take off.",
        lambda f: f["share_json"] >= 5,
    ),
    Rule(
        "findings",
        ("imp_own", "imp_proxy", "imp_sdk"),
        "**Import cost of its own**: the proxy's imports take {imp_own:.0f} ms more than a minimal SDK server's "
        "({imp_proxy:.0f} against {imp_sdk:.0f} ms), the most that importing less at start could save.",
        lambda f: f["imp_own"] > 0,
    ),
    Rule(
        "findings",
        ("own_top", "own_top_ms"),
        "**The slowest import** under `mcp_patchbay` is `{own_top}` ({own_top_ms:.0f} ms cumulative, SDK imports "
        "included).",
    ),
    Rule(
        "findings",
        ("multi_f_spawns", "multi_p_spawns"),
        "**With two upstreams in the config** FastMCP starts {multi_f_spawns:.1f} upstream processes per call, "
        "mcp-patchbay {multi_p_spawns:.1f}.",
    ),
]


def statements(r: dict[str, Any], section: str, rules: Iterable[Rule] = RULES) -> list[str]:
    """The sentences of ``section`` whose rules hold on this run's results."""
    f = facts(r)
    out: list[str] = []
    for rule in rules:
        if rule.section != section or any(key not in f for key in rule.needs):
            continue
        if rule.when is None or rule.when(f):
            out.append(rule.say.format(**f))
    return out
