"""An upstream MCP server whose tool definitions come from a file, for the trust suite (issue 25).

Run as ``python tests/servers/trust_server.py DEFINITIONS [--record FILE] [--name NAME]``.
DEFINITIONS is a JSON file ``{"tools": [{"name", "description", "inputSchema"?}, ...]}``, read
again at every ``tools/list``; when it changes (its modification time or size, looked at every
20 ms by a thread), the server sends ``notifications/tools/list_changed``, as a server updated
behind the user's back would. A tool call answers ``ran NAME`` and appends NAME as a line to
the ``--record`` file, so a test can tell what ran. Standard library only: it starts in a few
milliseconds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

POLL = 0.02


class Server:
    def __init__(self, definitions: Path, record: Path | None, name: str) -> None:
        self.definitions = definitions
        self.record = record
        self.name = name
        self.out = sys.stdout.buffer
        self.lock = threading.Lock()
        self.ready = threading.Event()
        """Set once the client said ``initialized``: list_changed is sent only after it."""

    def send(self, message: dict[str, Any]) -> None:
        with self.lock:
            self.out.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
            self.out.flush()

    def tools(self) -> list[dict[str, Any]]:
        data = json.loads(self.definitions.read_text(encoding="utf-8"))
        return [{"inputSchema": {"type": "object"}, **tool} for tool in data.get("tools", [])]

    def handle(self, message: dict[str, Any]) -> None:
        method, request_id = message.get("method"), message.get("id")
        params: dict[str, Any] = message.get("params") or {}
        if method == "initialize":
            result = {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": self.name, "version": "1"},
            }
            self.send({"jsonrpc": "2.0", "id": request_id, "result": result})
        elif method == "notifications/initialized":
            self.ready.set()
        elif method == "tools/list":
            self.send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": self.tools()}})
        elif method == "tools/call":
            name = str(params.get("name"))
            if self.record is not None:
                with self.record.open("a", encoding="utf-8") as file:
                    file.write(name + "\n")
            result = {"content": [{"type": "text", "text": f"ran {name}"}]}
            self.send({"jsonrpc": "2.0", "id": request_id, "result": result})
        elif method == "ping":
            self.send({"jsonrpc": "2.0", "id": request_id, "result": {}})
        elif request_id is not None and method is not None:
            self.send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "Method not found"}})

    def watch(self) -> None:
        """Send list_changed whenever the definitions file changes."""
        seen = _version(self.definitions)
        while True:
            time.sleep(POLL)
            now = _version(self.definitions)
            if now != seen and self.ready.is_set():
                seen = now
                self.send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})


def _version(path: Path) -> tuple[int, int]:
    try:
        status = path.stat()
    except OSError:
        return (0, 0)
    return (status.st_mtime_ns, status.st_size)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("definitions", type=Path)
    parser.add_argument("--record", type=Path)
    parser.add_argument("--name", default="trust")
    args = parser.parse_args()
    server = Server(args.definitions, args.record, args.name)
    threading.Thread(target=server.watch, daemon=True).start()
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict):
            server.handle(message)  # pyright: ignore[reportUnknownArgumentType]
    os._exit(0)  # the watching thread is a daemon; stdin closed: done


if __name__ == "__main__":
    sys.exit(main())
