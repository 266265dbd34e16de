"""A fault-injecting upstream MCP server, for the fault and end-to-end suites.

Run as ``python tests/servers/fault_server.py [flags]``. Startup faults come from flags,
call-time faults from tools. A low-level SDK ``Server`` served over stdio.

Startup flags:
  --exit-at-startup CODE  write a stderr line holding a fake secret (``token=abc123``, and the
                          value of $FAULT_SECRET when set), then exit with CODE
  --garbage               print non-JSON lines to stdout at startup and before every reply
                          (the wire is not diverted, so ``print`` reaches it)
  --never-answer          read stdin but never reply (exits on EOF unless --ignore-eof)
  --slow-start SECONDS    sleep this long before serving
  --crash-after SECONDS   serve, then die (exit 70) this long after the start (a crash loop)
  --stderr-chatter        write a line to stderr at startup and on every call
  --ignore-eof            after stdin closes, keep running (the proxy must signal us)
  --ignore-sigterm        ignore SIGTERM (the proxy must SIGKILL us)
  --record FILE           append a JSON line {"kind", "name", "pid", "start"} for this process
                          and for every child it spawns (tests check they all die)
  --name NAME             the server's name (default ``fault``)
  --label TEXT            ignored (a command-line argument for tests to look for in logs)

Tools: echo, crash, hang, sleep, jsonrpc_error, invalid_params, traceback, huge,
huge_structured, is_error, counter, pid, child, events, stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from io import TextIOWrapper
from pathlib import Path
from typing import Any

SECRET_LINE = "fault_server: fatal: cannot open the database (token=abc123)"
GARBAGE = "fault_server banner: this is not JSON-RPC"

TOOLS: dict[str, tuple[str, dict[str, Any]]] = {
    "echo": ("Return the text given.", {"text": {"type": "string"}}),
    "crash": ("Exit the process at once (os._exit) in the middle of the call.", {"code": {"type": "integer"}}),
    "hang": ("Never return.", {}),
    "sleep": ("Sleep this many seconds, then return.", {"seconds": {"type": "number"}}),
    "jsonrpc_error": (
        "Fail with a JSON-RPC error of the given code and message.",
        {"code": {"type": "integer"}, "message": {"type": "string"}},
    ),
    "invalid_params": ("Fail with JSON-RPC -32602 and the given message.", {"message": {"type": "string"}}),
    "traceback": (
        "Fail with a JSON-RPC error whose message holds a stack trace (style: python or node).",
        {"style": {"type": "string"}},
    ),
    "huge": ("Return this many bytes of text.", {"bytes": {"type": "integer"}}),
    "huge_structured": ("Return this many bytes of structured content.", {"bytes": {"type": "integer"}}),
    "is_error": ("Return the tool's own isError result.", {}),
    "counter": ("Count the calls to this tool in this process.", {}),
    "pid": ("Return the process id.", {}),
    "child": ("Start a child process that sleeps for an hour; return its pid.", {}),
    "events": ("Return what happened to calls so far (cancellations).", {}),
    "stderr": ("Write the text to stderr.", {"text": {"type": "string"}}),
}


def _record(path: str | None, kind: str, name: str, pid: int) -> None:
    if not path:
        return
    line = json.dumps({"kind": kind, "name": name, "pid": pid, "start": _start_time(pid)})
    with Path(path).open("a", encoding="utf-8") as f:
        f.write(line + "\n")


def _start_time(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat: tells a process from a later one that reuses its pid.

    The same reading as ``tests.processes.stat_fields``, written out here because this
    server stays standalone: the proxy under test runs it by path (``python .../fault_server.py``),
    with no repository on ``sys.path`` to import the helper from, and it must start quickly."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def _parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="fault_server")
    parser.add_argument("--name", default="fault")
    parser.add_argument("--exit-at-startup", type=int, metavar="CODE")
    parser.add_argument("--garbage", action="store_true")
    parser.add_argument("--never-answer", action="store_true")
    parser.add_argument("--slow-start", type=float, metavar="SECONDS", default=0.0)
    parser.add_argument("--crash-after", type=float, metavar="SECONDS")
    parser.add_argument("--stderr-chatter", action="store_true")
    parser.add_argument("--ignore-eof", action="store_true")
    parser.add_argument("--ignore-sigterm", action="store_true")
    parser.add_argument("--record", metavar="FILE")
    parser.add_argument("--label", action="append", default=[], metavar="TEXT")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(sys.argv[1:] if argv is None else argv)
    if args.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _record(args.record, "server", args.name, os.getpid())
    if args.stderr_chatter:
        print(f"fault_server {args.name}: starting (pid {os.getpid()})", file=sys.stderr, flush=True)
    if args.exit_at_startup is not None:
        secret = os.environ.get("FAULT_SECRET")
        print(SECRET_LINE, file=sys.stderr, flush=True)
        if secret:
            print(f"fault_server: the configured secret is {secret}", file=sys.stderr, flush=True)
        return args.exit_at_startup
    if args.garbage:
        for n in range(3):
            print(f"{GARBAGE} ({n})", flush=True)
    if args.slow_start:
        time.sleep(args.slow_start)
    if args.never_answer:
        for _ in sys.stdin:
            pass  # read every request, answer none
        _linger(args)
        return 0
    import anyio

    anyio.run(_serve, args)
    _linger(args)
    return 0


def _linger(args: argparse.Namespace) -> None:
    if args.ignore_eof:
        while True:
            time.sleep(3600)


async def _serve(args: argparse.Namespace) -> None:
    import anyio
    import mcp_types as types
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel.server import Server
    from mcp.server.stdio import stdio_server
    from mcp.shared.exceptions import MCPError

    name: str = args.name
    calls: dict[str, int] = {}
    events: list[str] = []

    def text(value: str, *, is_error: bool = False) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text=value)], is_error=is_error)

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=tool,
                    description=description,
                    input_schema={"type": "object", "properties": properties},
                )
                for tool, (description, properties) in TOOLS.items()
            ]
        )

    async def run_tool(tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        match tool:
            case "echo":
                return text(str(arguments.get("text", "")))
            case "crash":
                print(f"fault_server {name}: crashing on purpose", file=sys.stderr, flush=True)
                os._exit(int(arguments.get("code", 1)))
            case "hang":
                await anyio.sleep_forever()
                raise AssertionError("unreachable")
            case "sleep":
                await anyio.sleep(float(arguments.get("seconds", 1.0)))
                return text("slept")
            case "jsonrpc_error":
                raise MCPError(int(arguments.get("code", -32603)), str(arguments.get("message", "upstream failure")))
            case "invalid_params":
                raise MCPError(types.INVALID_PARAMS, str(arguments.get("message", "invalid params")))
            case "traceback" if arguments.get("style") == "node":
                message = (
                    "Error: ENOENT: no such file or directory, open 'orders.json'\n"
                    "    at Object.openSync (node:fs:573:18)\n"
                    "    at loadOrders (/home/alice/project/index.js:10:5)\n"
                    "    at /home/alice/project/index.js:22:3"
                )
                raise MCPError(types.INTERNAL_ERROR, message)
            case "traceback":
                message = (
                    "Traceback (most recent call last):\n"
                    '  File "/home/alice/project/server.py", line 12, in handle\n'
                    "    rows = db.query(sql)\n"
                    '  File "/home/alice/project/db.py", line 40, in query\n'
                    "    raise LookupError(sql)\n"
                    "LookupError: table 'orders' does not exist"
                )
                raise MCPError(types.INTERNAL_ERROR, message)
            case "huge":
                return text("x" * int(arguments.get("bytes", 1_000_000)))
            case "huge_structured":
                blob = "y" * int(arguments.get("bytes", 1_000_000))
                return types.CallToolResult(
                    content=[types.TextContent(type="text", text="big")], structured_content={"blob": blob}
                )
            case "is_error":
                return text("the tool itself failed: no such order", is_error=True)
            case "counter":
                return text(str(calls.get("counter", 0)))
            case "pid":
                return text(str(os.getpid()))
            case "child":
                child = subprocess.Popen(  # noqa: ASYNC220 - returns at once; the child sleeps on its own
                    [sys.executable, "-c", "import time; time.sleep(3600)"],
                    stdin=subprocess.DEVNULL,
                )
                _record(args.record, "child", name, child.pid)
                return text(str(child.pid))
            case "events":
                return text(json.dumps(events))
            case "stderr":
                print(str(arguments.get("text", "")), file=sys.stderr, flush=True)
                return text("written")
            case _:
                raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {tool}")

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        tool = params.name
        calls[tool] = calls.get(tool, 0) + 1
        if args.stderr_chatter:
            print(f"fault_server {name}: call {tool}", file=sys.stderr, flush=True)
        if tool in ("hang", "sleep"):
            # Tests wait for this line (the proxy logs an upstream's stderr) to know the call is running.
            print(f"fault_server {name}: {tool} started", file=sys.stderr, flush=True)
        try:
            result = await run_tool(tool, params.arguments or {})
        except anyio.get_cancelled_exc_class():
            events.append(f"cancelled:{tool}")
            print(f"fault_server {name}: {tool} cancelled", file=sys.stderr, flush=True)
            raise
        if args.garbage:
            print(f"{GARBAGE} (before the reply to {tool})", flush=True)
        return result

    server = Server(name, version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)
    async with anyio.create_task_group() as tg:
        if args.crash_after is not None:
            tg.start_soon(_crash_later, args.crash_after)
        if args.garbage:
            # Explicit streams: the SDK then leaves fd 1 alone, so prints reach the wire (a noisy server).
            stdin = anyio.wrap_file(TextIOWrapper(sys.stdin.buffer, encoding="utf-8"))
            stdout = anyio.wrap_file(TextIOWrapper(sys.stdout.buffer, encoding="utf-8"))
            transport = stdio_server(stdin, stdout)
        else:
            transport = stdio_server()
        async with transport as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
        tg.cancel_scope.cancel()


async def _crash_later(seconds: float) -> None:
    import anyio

    await anyio.sleep(seconds)
    print("fault_server: crash-after timer fired", file=sys.stderr, flush=True)
    os._exit(70)


if __name__ == "__main__":
    sys.exit(main())
