"""Search mode end to end, as a model uses it: the proxy over stdio in front of stand-in servers.

    .venv/bin/python -m benchmarks.search_stdio [--tasks benchmarks/search_data/tasks_blind.json] [--limit N]

Every server of ``benchmarks/search_data/catalog.json`` runs as a stand-in
(``search_data/standin_server.py``: its real tool definitions, calls echoed back). The proxy
is launched as a client launches it (``python -m mcp_patchbay CONFIG``, ``expose: "search"``)
and driven by the SDK's client: for each task, ``patchbay__find_tools`` with the task's
words, then ``patchbay__call_tool`` with the first result's name and arguments made valid
for its schema. Reported: the expected tool's rank (first, in the first five; a task's
``also`` names count as right), whether ``call_tool`` ran exactly the tool it was given,
each answer's text size, and the search latency over stdio (medians and p99). Not a test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, cast

import anyio
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "benchmarks" / "search_data"
FIND, CALL = "patchbay__find_tools", "patchbay__call_tool"


def sample(schema: Any) -> Any:
    """A value valid for a (simple) JSON schema: what a model would fill in for required arguments."""
    if not isinstance(schema, dict):
        return "x"
    node = cast("dict[str, Any]", schema)
    for key in ("anyOf", "oneOf"):
        if isinstance(node.get(key), list) and node[key]:
            options = [o for o in node[key] if isinstance(o, dict) and o.get("type") != "null"]
            return sample(options[0] if options else node[key][0])
    if "const" in node:
        return node["const"]
    if isinstance(node.get("enum"), list) and node["enum"]:
        return node["enum"][0]
    if "default" in node:
        return node["default"]
    kind = node.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "object" or "properties" in node:
        properties = cast("dict[str, Any]", node.get("properties") or {})
        return {name: sample(properties.get(name, {})) for name in node.get("required", [])}
    if kind == "array":
        return [sample(node.get("items", {})) for _ in range(int(node.get("minItems", 0)))]
    if kind in ("integer", "number"):
        low = node.get("minimum", node.get("exclusiveMinimum", 0))
        return int(low) + (1 if "exclusiveMinimum" in node else 0) if kind == "integer" else float(low) + 1
    if kind == "boolean":
        return False
    formats = {"uri": "https://example.com", "url": "https://example.com", "email": "a@example.com"}
    formats |= {
        "date-time": "2026-01-01T00:00:00Z",
        "date": "2026-01-01",
        "uuid": "00000000-0000-0000-0000-000000000000",
    }
    text = formats.get(str(node.get("format")), "x")
    return text * max(1, int(node.get("minLength", 1)) // len(text) + (1 if node.get("minLength") else 0))


def config(tmp: Path, catalog: Path) -> Path:
    servers = json.loads(catalog.read_text())
    standin = DATA / "standin_server.py"
    entries = {name: {"command": sys.executable, "args": [str(standin), str(catalog), name]} for name in servers}
    path = tmp / "patchbay.json"
    settings = {"expose": "search", "startup_wait": 60, "connect_timeout": 60, "watch": False}
    path.write_text(json.dumps({"mcpServers": entries, "patchbay": settings}))
    return path


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


async def run(tasks: list[dict[str, Any]], catalog: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        path = config(Path(tmp), catalog)
        params = StdioServerParameters(command=sys.executable, args=["-m", "mcp_patchbay", str(path)], cwd=str(ROOT))
        async with Client(params, mode="legacy", cache=None) as client:
            listed = (await client.list_tools()).tools
            listing_chars = sum(len(t.model_dump_json(by_alias=True, exclude_none=True)) for t in listed)
            ranks: list[int | None] = []
            seconds: list[float] = []
            sizes: list[int] = []
            exact = wrong = refused = 0
            misses: list[str] = []
            for task in tasks:
                right = {task["expected"], *task.get("also", [])}
                began = time.perf_counter()
                found = await client.call_tool(FIND, {"query": task["query"], "limit": 5})
                seconds.append(time.perf_counter() - began)
                text = "".join(getattr(block, "text", "") for block in found.content)
                sizes.append(len(text))
                hits = (found.structured_content or {}).get("tools", [])
                names = [hit["name"] for hit in hits]
                rank = next((i for i, name in enumerate(names) if name in right), None)
                ranks.append(rank)
                if rank != 0:
                    misses.append(f"{task['query']!r}: expected {task['expected']}, got {names[:3]}")
                if not hits:
                    continue
                first = hits[0]
                called = await client.call_tool(
                    CALL, {"name": first["name"], "arguments": sample(first.get("inputSchema", {}))}
                )
                ran = called.structured_content or {}
                if called.is_error and "error" in ran:
                    refused += 1  # the proxy refused the arguments the bench made up
                elif ran.get("tool") == first["tool"] and ran.get("server") == first["server"]:
                    exact += 1
                else:
                    wrong += 1
    n = len(tasks)
    found_ranks = [r for r in ranks if r is not None]
    return {
        "tasks": n,
        "top1": sum(1 for r in found_ranks if r == 0) / n,
        "top5": sum(1 for r in found_ranks if r < 5) / n,
        "call_tool": {"exact": exact, "other_tool": wrong, "arguments_refused": refused},
        "listing_chars": listing_chars,
        "answer_chars": {"median": statistics.median(sizes), "max": max(sizes)},
        "search_ms": {
            # The first search may wait for the index, built once in a worker thread after startup.
            "first": seconds[0] * 1000,
            "median": statistics.median(seconds[1:] or seconds) * 1000,
            "p99": percentile(seconds[1:] or seconds, 0.99) * 1000,
            "max": max(seconds[1:] or seconds) * 1000,
        },
        "misses": misses,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tasks", type=Path, default=DATA / "tasks_blind.json")
    parser.add_argument("--catalog", type=Path, default=DATA / "catalog.json")
    parser.add_argument("--limit", type=int, help="only the first N tasks")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--misses", action="store_true", help="print the tasks whose tool was not first")
    args = parser.parse_args()
    data = json.loads(args.tasks.read_text())
    tasks: list[dict[str, Any]] = data["tasks"] if isinstance(data, dict) else data
    tasks = tasks[: args.limit] if args.limit else tasks
    result = anyio.run(run, tasks, args.catalog)
    calls = result["call_tool"]
    print(f"{result['tasks']} tasks ({args.tasks.name}), proxy over stdio in search mode, stand-in servers")
    print(f"  top-1 {result['top1']:.1%}, top-5 {result['top5']:.1%}")
    print(
        f"  call_tool ran the tool it was given: {calls['exact']}; another tool: {calls['other_tool']}; "
        f"arguments refused: {calls['arguments_refused']}"
    )
    print(f"  search listing {result['listing_chars']:,} characters")
    answer, ms = result["answer_chars"], result["search_ms"]
    print(f"  find_tools text: median {answer['median']:,.0f}, max {answer['max']:,} characters")
    print(
        f"  find_tools over stdio: median {ms['median']:.1f} ms, p99 {ms['p99']:.1f} ms, max {ms['max']:.1f} ms "
        f"(the first, which may wait for the index: {ms['first']:.0f} ms)"
    )
    if args.misses:
        print("\n".join(result["misses"]))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
