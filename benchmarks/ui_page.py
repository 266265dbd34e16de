"""``mcp-patchbay ui``'s answer times with a big world (issue 35): 30 servers, 100,000 log rows.

    .venv/bin/python -m benchmarks.ui_page [--rows 100000] [--servers 30] [--reps 25]

A data folder of its own: the activity log filled with ``--rows`` rows over the last day (tool
calls to every server by two clients, their errors, restarts), two proxies' presence files with
``--servers`` servers each (10 tools a server, one failed, one needing a sign-in), a config
with those servers, and one held definition in the pins file. Then ``mcp-patchbay ui --no-open``
is started on it as a person starts it, and each page is fetched ``--reps`` times over HTTP by
one client (cookie set, as a browser's): the overview (statistics over the day's rows), the log
(its first 100 rows), the log's poll for new rows, the held page, the tools page and a tools
search, each after one unmeasured fetch (its template compiled, the search index built).
Printed: median, p95 and max in ms, the load average before and after, and the cost of the
overview's count made afresh (the page keeps one ``STATS_FRESH`` seconds).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mcp_patchbay.ui.log import STATS_FRESH

ROOT = Path(__file__).resolve().parent.parent
PAGES = {
    "overview /": "/",
    "log /log": "/log",
    "log poll /log/new": "/log/new?after=0",
    "held /held": "/held",
    "tools /tools": "/tools",
    "tools search": "/tools?q=create+an+issue+in+a+repository",
}


def _world(folder: Path, servers: int, rows: int) -> tuple[Path, dict[str, str]]:
    sys.path.insert(0, str(ROOT / "src"))
    data = folder / "data"
    env = {**os.environ, "XDG_DATA_HOME": str(data), "PYTHONPATH": str(ROOT / "src")}
    os.environ["XDG_DATA_HOME"] = str(data)
    from mcp_patchbay.activity.store import ActivityRow, ActivityStore, values_of
    from mcp_patchbay.presence.folder import write

    names = [f"server{n:02d}" for n in range(servers)]
    config = folder / "patchbay.json"
    entries = {name: {"command": "bench-server", "args": [name]} for name in names}
    config.write_text(json.dumps({"mcpServers": entries}, indent=2), encoding="utf-8")

    store = ActivityStore.open()
    now = time.time()
    rng = random.Random(35)
    batch: list[tuple[object, ...]] = []
    for n in range(rows):
        server = names[n % servers]
        client = "claude-code 2.1.0" if n % 2 else "cursor 1.7.0"
        failed = rng.random() < 0.03
        row = ActivityRow(
            None,
            now - 86_000 * (rows - n) / rows,
            "tool_call",
            f"stdio pid {1000 + n % 2}",
            client,
            server,
            f"{server}__tool{n % 10}",
            f"tool{n % 10}",
            rng.lognormvariate(3, 1),
            "TIMEOUT" if failed else "ok",
            "TIMEOUT" if failed else None,
            120,
            2400,
            "the call's deadline passed" if failed else None,
        )
        batch.append(values_of(row))
        if len(batch) == 5000:
            store.insert(batch)
            batch = []
    store.insert(batch)
    store.close()

    tools = [
        {
            "name": f"{name}__tool{t}",
            "server": name,
            "tool": f"tool{t}",
            "title": None,
            "description": f"Tool {t} of {name}: creates, lists or updates items such as issues, files and notes.",
            "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}},
        }
        for name in names
        for t in range(10)
    ]
    states = ["ready"] * servers
    states[1], states[2] = "failed", "needs_sign_in"
    for pid in (os.getpid(), os.getppid()):  # processes that live as long as the benchmark
        write(
            {
                "version": 1,
                "pid": pid,
                "started_at": now - 3600,
                "updated_at": now,
                "transport": "stdio",
                "client": {"name": "claude-code" if pid == os.getpid() else "cursor", "version": "2", "title": None},
                "parent": {"pid": 1, "name": "client"},
                "config": str(config),
                "profile": None,
                "servers": [
                    {
                        "name": name,
                        "state": state,
                        "transport": "stdio",
                        "tools": 10,
                        "problem": "failed: command 'bench-server' not found" if state == "failed" else None,
                        "restarts": 0,
                        "remote": state == "needs_sign_in",
                        "held": [],
                        "tools_off": [],
                    }
                    for name, state in zip(names, states, strict=True)
                ],
                "tools": tools,
            }
        )
    _held(config, names[0])
    return config, env


def _held(config: Path, server: str) -> None:
    import mcp_types as types

    from mcp_patchbay.config.settings import Settings
    from mcp_patchbay.trust.guard import Guard

    guard = Guard(config, Settings())
    schema: dict[str, Any] = {"type": "object"}
    guard.review(server, [types.Tool(name="tool0", description="Creates an item.", input_schema=schema)])
    guard.review(server, [types.Tool(name="tool0", description="Creates an item. Now better.", input_schema=schema)])


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--servers", type=int, default=30)
    parser.add_argument("--reps", type=int, default=25)
    args = parser.parse_args()
    import httpx2

    with tempfile.TemporaryDirectory(prefix="patchbay-ui-bench-") as folder:
        config, env = _world(Path(folder), args.servers, args.rows)
        process = subprocess.Popen(
            [sys.executable, "-m", "mcp_patchbay", "ui", "--no-open", "--config", str(config)],
            stdout=subprocess.PIPE,
            env=env,
            cwd=str(ROOT),
        )
        try:
            assert process.stdout is not None
            url = process.stdout.readline().decode().strip()
            origin = url.split("/?", 1)[0]
            load_before = os.getloadavg()
            with httpx2.Client(base_url=origin, timeout=60) as http:
                http.get(url)  # the token becomes the cookie
                for path in PAGES.values():  # each template compiled, the search index built (meaning model)
                    http.get(path)
                print(f"{args.servers} servers x 2 proxies, {args.rows:,} log rows; {args.reps} fetches each (ms)")
                print(f"{'page':22} {'median':>8} {'p95':>8} {'max':>8}")
                for label, path in PAGES.items():
                    times: list[float] = []
                    for _ in range(args.reps):
                        started = time.perf_counter()
                        # A connection each, as a browser's first request: on a kept one, this client's
                        # delayed ACKs added about 40 ms to some answers (curl saw none).
                        headers = {"connection": "close", **({"hx-request": "true"} if "poll" in label else {})}
                        answer = http.get(path, headers=headers)
                        times.append((time.perf_counter() - started) * 1000)
                        assert answer.status_code == 200, (path, answer.status_code)
                    times.sort()
                    p95 = times[min(len(times) - 1, round(0.95 * len(times)) - 1)]
                    print(f"{label:22} {statistics.median(times):8.1f} {p95:8.1f} {times[-1]:8.1f}")
            load_after = os.getloadavg()
            counts: list[float] = []
            from mcp_patchbay.activity.store import ActivityStore

            store = ActivityStore.open()
            for _ in range(args.reps):
                started = time.perf_counter()
                store.server_stats(time.time() - 86_400)
                counts.append((time.perf_counter() - started) * 1000)
            store.close()
            print(
                f"the overview's count afresh (server_stats over the day, in-process; the page keeps a count "
                f"{STATS_FRESH:g} s): median {statistics.median(counts):.1f} ms, max {max(counts):.1f} ms"
            )
            print(f"load average (1, 5, 15 min): before {load_before}, after {load_after}; {os.cpu_count()} cores")
        finally:
            process.terminate()
            process.wait(10)
            if process.stdout is not None:
                process.stdout.close()


if __name__ == "__main__":
    main()
