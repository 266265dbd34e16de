"""An upstream MCP server that writes its JSON-RPC lines by hand, for the hostile-wire suite.

Run as ``python tests/servers/raw_server.py``. ``fault_server.py`` is a real SDK server,
so it cannot write what this one must: answers nested thousands deep (the SDK's own
serializer refuses them), lines of any length written in pieces, the id first or last
(Python's SDK writes it first, ``JSON.stringify`` of the TypeScript SDK's objects last),
and bursts of notifications. Stdlib only, one thread, one line in and out at a time.

Tools (each a ``tools/call`` by name; arguments as said):
  echo {text}             the text back
  deep {depth, id_last}   a result whose structuredContent nests ``depth`` arrays deep
  long {bytes, id_last}   a result whose text is ``bytes`` long, written in 1 MiB pieces
  hold {}                 no answer until a ``release`` call comes (calls in flight)
  release {}              answer every held call ("released"), then this one
  burst {count}           send ``count`` tools/list_changed, the tool list's version tool
                          (``v<n>``) changing with each
  lists {}                how many tools/list requests came so far
  poison_list {}          the next tools/list answer nests 5,000 deep, announced by a
                          tools/list_changed (an answer to the SDK session's integer id)

With ``--untyped`` it also lists ``untyped`` (an inputSchema with no "type") and ``schemaless``
(no inputSchema), as some servers in use do; calling them answers "unknown tool".
"""

from __future__ import annotations

import json
import sys
from typing import Any

TOOLS = ["echo", "deep", "long", "hold", "release", "burst", "lists", "poison_list"]


class Server:
    def __init__(self) -> None:
        self.out = sys.stdout.buffer
        self.version = 0
        self.lists = 0
        self.held: list[Any] = []
        self.poisoned = False

    def write(self, data: bytes) -> None:
        self.out.write(data)
        self.out.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")

    def answer(self, request_id: Any, result: dict[str, Any]) -> None:
        self.send({"jsonrpc": "2.0", "id": request_id, "result": result})

    def text(self, request_id: Any, value: str) -> None:
        self.answer(request_id, {"content": [{"type": "text", "text": value}]})

    def tools(self) -> list[dict[str, Any]]:
        names = [*TOOLS, f"v{self.version}"] if self.version else TOOLS
        listed: list[dict[str, Any]] = [{"name": name, "inputSchema": {"type": "object"}} for name in names]
        if "--untyped" in sys.argv:  # as @modelcontextprotocol/server-gitlab lists every tool
            listed.append({"name": "untyped", "inputSchema": {"$schema": "http://json-schema.org/draft-07/schema#"}})
            listed.append({"name": "schemaless"})
        return listed

    def handle(self, message: dict[str, Any]) -> None:
        method, request_id = message.get("method"), message.get("id")
        params: dict[str, Any] = message.get("params") or {}
        if method == "initialize":
            self.answer(
                request_id,
                {
                    "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                    "capabilities": {"tools": {"listChanged": True}},
                    "serverInfo": {"name": "raw", "version": "1"},
                },
            )
        elif method == "tools/list":
            self.lists += 1
            if self.poisoned:
                self.poisoned = False
                self.write(self.nested(request_id, 5000, id_last=False))
            else:
                self.answer(request_id, {"tools": self.tools()})
        elif method == "tools/call":
            arguments: dict[str, Any] = params.get("arguments") or {}
            self.call(request_id, params.get("name"), arguments)
        elif request_id is not None and method is not None:
            self.send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "Method not found"}})

    def nested(self, request_id: Any, depth: int, *, id_last: bool) -> bytes:
        inner = "[" * depth + "]" * depth
        result = f'{{"content":[{{"type":"text","text":"deep"}}],"structuredContent":{{"a":{inner}}}}}'
        ident = json.dumps(request_id)
        if id_last:
            return f'{{"result":{result},"jsonrpc":"2.0","id":{ident}}}\n'.encode()
        return f'{{"jsonrpc":"2.0","id":{ident},"result":{result}}}\n'.encode()

    def call(self, request_id: Any, name: Any, arguments: dict[str, Any]) -> None:
        if name == "echo":
            self.text(request_id, str(arguments.get("text", "")))
        elif name == "deep":
            self.write(
                self.nested(request_id, int(arguments.get("depth", 5000)), id_last=bool(arguments.get("id_last")))
            )
        elif name == "long":
            self.long(request_id, int(arguments.get("bytes", 100_000_000)), id_last=bool(arguments.get("id_last")))
        elif name == "hold":
            self.held.append(request_id)
        elif name == "release":
            for held in self.held:
                self.text(held, "released")
            self.held.clear()
            self.text(request_id, "released")
        elif name == "burst":
            for _ in range(int(arguments.get("count", 2000))):
                self.version += 1
                self.send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            self.text(request_id, f"sent; version {self.version}")
        elif name == "lists":
            self.text(request_id, str(self.lists))
        elif name == "poison_list":
            self.poisoned = True
            self.send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            self.text(request_id, "poisoned")
        else:
            self.send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32602, "message": f"no tool {name}"}})

    def long(self, request_id: Any, size: int, *, id_last: bool) -> None:
        ident = json.dumps(request_id).encode()
        head = b'{"jsonrpc":"2.0",' + (b"" if id_last else b'"id":' + ident + b",")
        self.write(head + b'"result":{"content":[{"type":"text","text":"')
        piece = b"x" * 2**20
        left = size
        while left > 0:
            self.write(piece[: min(left, len(piece))])
            left -= len(piece)
        self.write(b'"}]}' + (b',"id":' + ident if id_last else b"") + b"}\n")


def main() -> int:
    server = Server()
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict):
            server.handle(message)  # pyright: ignore[reportUnknownArgumentType]
    return 0


if __name__ == "__main__":
    sys.exit(main())
