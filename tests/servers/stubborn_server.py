"""A tiny MCP server on stdio (standard library only, so it starts in a few milliseconds) that
can refuse to stop, for the shutdown tests.

Run as ``python tests/servers/stubborn_server.py [flags]``. It answers ``initialize``, ``ping``,
``tools/list`` (one tool, ``pid``, returning the process id) and ``tools/call``.

  --record FILE       append a JSON line {"name", "pid", "pgid", "kind"} for this process, and one
                      for its child (``--child``), once each is running
  --name NAME         the name in the record (default ``stubborn``)
  --ignore-eof        after stdin closes, keep running (the proxy must signal us)
  --ignore-sigterm    ignore SIGTERM (only SIGKILL stops us)
  --tool NAME         the tool's name (default ``pid``)
  --child             start a child in our process group that ignores SIGTERM and stdin's end
                      (what ``npx`` leaves behind: a grandchild of the proxy)
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, cast

CHILD = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True:\n    time.sleep(60)\n"


def record(path: str | None, name: str, kind: str, pid: int) -> None:
    if path is None:
        return
    line = json.dumps({"name": name, "kind": kind, "pid": pid, "pgid": os.getpgid(pid)}) + "\n"
    with Path(path).open("a", encoding="utf-8") as file:
        file.write(line)


def answer(message: dict[str, Any], tool: str = "pid") -> dict[str, Any] | None:
    method = message.get("method")
    if "id" not in message:
        return None
    result: object
    if method == "initialize":
        params: dict[str, Any] = message.get("params") or {}
        version: str | None = params.get("protocolVersion")
        result = {
            "protocolVersion": version or "2025-06-18",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "stubborn", "version": "1"},
        }
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        result = {"tools": [{"name": tool, "description": "The process id.", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": str(os.getpid())}]}
    else:
        return {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "method not found"}}
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--record")
    parser.add_argument("--name", default="stubborn")
    parser.add_argument("--ignore-eof", action="store_true")
    parser.add_argument("--ignore-sigterm", action="store_true")
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--tool", default="pid")
    args = parser.parse_args()
    if args.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.child:
        child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.DEVNULL)
        record(args.record, args.name, "child", child.pid)
    record(args.record, args.name, "server", os.getpid())
    for line in sys.stdin.buffer:
        try:
            message: Any = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict):
            reply = answer(cast("dict[str, Any]", message), args.tool)
            if reply is not None:
                sys.stdout.write(json.dumps(reply) + "\n")
                sys.stdout.flush()
    if args.ignore_eof:
        while True:
            time.sleep(60)


if __name__ == "__main__":
    main()
