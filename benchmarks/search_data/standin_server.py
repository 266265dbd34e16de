"""A stand-in MCP server: one server's real tool definitions from catalog.json, over stdio.

    python benchmarks/search_data/standin_server.py CATALOG SERVER

Lists exactly the tools (and instructions) the real server listed; a call answers with the
tool's name and arguments as structured content, so a benchmark can check which tool ran.
Plain JSON-RPC lines and the standard library only: it starts in milliseconds, so 35 of them
behind the proxy cost little.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def main() -> None:
    catalog: dict[str, Any] = json.loads(open(sys.argv[1], encoding="utf-8").read())  # noqa: PTH123, SIM115
    server = catalog[sys.argv[2]]
    tools: list[dict[str, Any]] = server.get("tools", [])
    known = {tool["name"] for tool in tools}
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if request_id is None:
            continue  # a notification
        result: dict[str, Any]
        if method == "initialize":
            result = {
                "protocolVersion": message["params"].get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": sys.argv[2], "version": "stand-in"},
            }
            if server.get("instructions"):
                result["instructions"] = server["instructions"]
        elif method == "tools/list":
            result = {"tools": tools}
        elif method == "tools/call":
            name = message["params"]["name"]
            arguments = message["params"].get("arguments") or {}
            ran = {"server": sys.argv[2], "tool": name, "arguments": arguments}
            text = json.dumps(ran)
            result = {
                "content": [{"type": "text", "text": text}],
                "structuredContent": ran,
                "isError": name not in known,
            }
        elif method == "ping":
            result = {}
        else:
            reply = {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": f"no {method}"}}
            print(json.dumps(reply), flush=True)
            continue
        print(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}), flush=True)


if __name__ == "__main__":
    main()
