"""Experiment: mcp-patchbay with a downstream stdio transport that uses no threads.

    .venv/bin/python scripts/bench_stdio_variant.py --config FILE [--log-level WARNING]

Runs the proxy exactly as ``python -m mcp_patchbay`` does, except that the SDK's
``mcp.server.stdio.stdio_server`` is replaced by ``pipe_stdio_server`` below. The SDK's
version reads stdin through ``anyio.wrap_file`` (one worker-thread round trip per line
read) and writes each message with two more (``write`` and ``flush``); this one puts
fds 0/1 in non-blocking mode and waits for them on the event loop (epoll), the way the
proxy's own upstream transport (``mcp_patchbay.stdio``) already reads its servers.

The benchmark compares it with the stock proxy to put a number on what moving the
downstream edge off threads would gain. It keeps the SDK's protection of the wire:
fd 0 is pointed at /dev/null and fd 1 at stderr while serving, so stray reads and prints
by handlers or children cannot touch the protocol stream.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import anyio
import mcp.server.stdio
import mcp_types as types
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))


@asynccontextmanager
async def pipe_stdio_server(stdin: Any = None, stdout: Any = None) -> AsyncIterator[tuple[Any, Any]]:
    wire_in = os.dup(0)
    wire_out = os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    os.set_blocking(wire_in, False)
    os.set_blocking(wire_out, False)

    read_writer, read_stream = create_context_streams[SessionMessage | Exception](0)
    write_stream, write_reader = create_context_streams[SessionMessage](0)

    async def reader() -> None:
        buffer = b""
        async with read_writer:
            while True:
                try:
                    chunk = os.read(wire_in, 1 << 16)
                except BlockingIOError:
                    await anyio.wait_readable(wire_in)
                    continue
                if not chunk:
                    return
                buffer += chunk
                if b"\n" not in chunk:
                    continue
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    try:
                        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                    except Exception as exc:
                        await read_writer.send(exc)
                        continue
                    await read_writer.send(SessionMessage(message))

    async def writer() -> None:
        async with write_reader:
            async for session_message in write_reader:
                data = session_message.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"
                view = memoryview(data)
                while view:
                    try:
                        view = view[os.write(wire_out, view) :]
                    except BlockingIOError:
                        await anyio.wait_writable(wire_out)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            tg.start_soon(writer)
            yield read_stream, write_stream
            tg.cancel_scope.cancel()
    finally:
        with suppress(OSError):
            os.dup2(wire_in, 0)
            os.dup2(wire_out, 1)


def main() -> None:
    mcp.server.stdio.stdio_server = pipe_stdio_server  # type: ignore[assignment]
    from mcp_patchbay.cli import main as cli_main

    raise SystemExit(cli_main(sys.argv[1:]))


if __name__ == "__main__":
    main()
