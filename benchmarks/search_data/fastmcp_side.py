# pyright: reportMissingImports=false
# (fastmcp is installed in its own virtualenv, never the project's: see below.)
"""FastMCP's BM25SearchTransform on the bench catalog: run with a Python that has fastmcp==4.1.2.

    /tmp/fastmcp-venv/bin/python benchmarks/search_data/fastmcp_side.py [--limit 5] [--tasks PATH] > results.json

Not part of the project's environment: benchmarks/search.py runs this in a separate venv
(``--fastmcp-python``) and reads its JSON from stdout. In process: a FastMCP server gets one
stand-in tool per catalog tool, with the same exposed name, description and inputSchema;
``BM25SearchTransform(max_results=limit)`` is applied; every task's query goes through the
transform's ``search_tools`` tool via an in-memory ``fastmcp.Client``, as a client would call
it. Output: for each task the ranked names and the answer's text size in characters.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

from fastmcp import Client, FastMCP
from fastmcp.server.transforms.search import BM25SearchTransform
from fastmcp.tools.base import Tool

HERE = Path(__file__).resolve().parent


def stand_in(name: str, description: str, schema: dict[str, Any]) -> Tool:
    base = Tool.from_function(fn=lambda: "ok", name=name, description=description or None)
    schema = dict(schema) if isinstance(schema, dict) else {}
    schema.setdefault("type", "object")
    return base.model_copy(update={"parameters": schema})


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=int, default=5)
    parser.add_argument("--tasks", type=Path, default=HERE / "tasks.json")
    args = parser.parse_args()
    catalog = json.loads((HERE / "catalog.json").read_text())
    loaded = json.loads(args.tasks.read_text())
    tasks = loaded["tasks"] if isinstance(loaded, dict) else loaded
    server = FastMCP("bench")
    for name, entry in catalog.items():
        for tool in entry["tools"]:
            server.add_tool(stand_in(f"{name}__{tool['name']}", tool.get("description", ""), tool.get("inputSchema")))
    server.add_transform(BM25SearchTransform(max_results=args.limit))
    out: list[dict[str, Any]] = []
    async with Client(server) as client:
        listed = [t.name for t in await client.list_tools()]
        for task in tasks:
            started = time.perf_counter()
            result = await client.call_tool("search_tools", {"query": task["query"]})
            elapsed = time.perf_counter() - started
            text = "".join(getattr(block, "text", "") for block in result.content)
            data: Any = result.structured_content
            items = data.get("result", data) if isinstance(data, dict) else data
            if not isinstance(items, list):
                items = json.loads(text) if text.startswith("[") else []
            names = [item["name"] for item in items if isinstance(item, dict)]
            out.append({"query": task["query"], "names": names, "chars": len(text), "seconds": elapsed})
    print(json.dumps({"listed": listed, "results": out}))


if __name__ == "__main__":
    asyncio.run(main())
