"""The stdio transport to an upstream server process.

Modelled on the SDK's ``stdio_client`` (same wire format, same shutdown order:
close stdin, wait, terminate the process tree), with what a proxy needs on top:

- the process handle, so a death is seen at once and reported with its exit code;
- the last lines of the server's stderr, kept for the log when it dies early;
- lines on stdout that are not JSON-RPC are logged as garbage, never fatal;
- every line is bounded before it is parsed (``wire.jsonrpc.Bounds``: ``max_message_bytes``,
  ``max_json_depth``): one too long is skipped as it streams in, one nested too deeply
  is not parsed; the request it answers fails alone (``RawCalls.fail``, or an error
  answer handed to the SDK's session for its integer ids), a request of the server's
  gets an error answer, and the connection goes on (a ``RecursionError`` escaping the
  reader ended the connection and failed every call in flight);
- a ``RawCalls`` table that sees every line first: tool calls skip the SDK's session
  (``fastpath.pipe_calls``; with ``patchbay.fast_path`` on), everything else goes to it as usual;
- the child's environment is the proxy's own plus the entry's ``env`` (users expect the
  variables they gave the proxy to reach their servers), less what the proxy holds for its
  own use and the entry does not name (the spec's ``withheld``: ``config.withheld``).

POSIX runs the child in its own session (process group) so the whole tree is stopped;
Windows uses the SDK's Job Object helpers and its ``npx``/``.cmd`` command lookup.

Two ways to stop a server. One server alone (a restart, a config reload): close stdin,
``GRACE_SECONDS`` for it to exit, SIGTERM to its group, ``GRACE_SECONDS`` again, SIGKILL.
The whole proxy (``shutdown``: SIGTERM, SIGINT, the client's end): clients do not wait
(mcp-cli sends SIGKILL one second after SIGTERM), so every group gets SIGTERM at once,
together with the end of its stdin, and SIGKILL after ``SHUTDOWN_GRACE_SECONDS``; all
servers in parallel. If the proxy dies before that, ``spawn``'s watchdog finishes it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
from collections import deque
from collections.abc import AsyncGenerator, Collection, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from mcp_patchbay.config import StdioSpec
from mcp_patchbay.config.withheld import OWN_NAMES
from mcp_patchbay.errors.tree import Code, refusal_data, refused_answer
from mcp_patchbay.fastpath.pipe_calls import RawCalls
from mcp_patchbay.redaction import redact
from mcp_patchbay.upstreams.command_lookup import resolve_command
from mcp_patchbay.upstreams.spawn import child_environment, popen, terminate_all, untrack
from mcp_patchbay.upstreams.transports.link import Link
from mcp_patchbay.wire.jsonrpc import (
    UNTYPED_SCHEMAS,
    Bounds,
    Envelope,
    LineSplitter,
    Overlong,
    deeper_than,
    envelope_of,
    error_line,
    first_names,
    peek_envelope,
    untyped_tool_schemas,
)

logger = logging.getLogger(__name__)

STDERR_TAIL_LINES = 20
STDERR_LINE_LIMIT = 65536
"""A longer line on a server's stderr is kept (and logged) by its start only."""
GRACE_SECONDS = 2.0
"""How long a server gets to exit after its stdin closes, and again after SIGTERM (one server stopping)."""
SHUTDOWN_GRACE_SECONDS = 0.5
"""How long a server gets between SIGTERM and SIGKILL when the whole proxy stops."""

_SHUTTING_DOWN: list[bool] = []
"""Holds True once ``shutdown`` ran (a list, so no ``global`` statement)."""


def shutdown() -> None:
    """The proxy is ending: SIGTERM every upstream group now, and stop the rest without the gentle
    waits. Once: a second SIGTERM makes some node servers skip their own cleanup."""
    if _SHUTTING_DOWN:
        return
    _SHUTTING_DOWN.append(True)
    terminate_all()


@dataclass
class ProcessWatch:
    """What the proxy knows about a running upstream process."""

    pid: int
    returncode: int | None = None
    stderr_tail: deque[str] = field(default_factory=lambda: deque[str](maxlen=STDERR_TAIL_LINES))
    garbage_lines: int = 0
    exited: anyio.Event = field(default_factory=anyio.Event)
    stdout_closed: anyio.Event = field(default_factory=anyio.Event)
    """Set when the server's stdout ends: the connection is over even if the process lingers."""
    secrets: tuple[str, ...] = ()

    def describe_exit(self) -> str:
        """For the developer's log: exit code and the stderr tail, cleaned of secrets."""
        code = "unknown" if self.returncode is None else str(self.returncode)
        tail = "\n    ".join(redact(line, self.secrets) for line in self.stderr_tail)
        return f"exit code {code}" + (f"; last stderr lines:\n    {tail}" if tail else "; no stderr output")


ReadStream = MemoryObjectReceiveStream[SessionMessage | Exception]
WriteStream = MemoryObjectSendStream[SessionMessage]


@asynccontextmanager
# Long on purpose: a process's whole life (start, pipes, reader, stop) in one scope, so no path leaks it.
async def stdio_transport(  # noqa: PLR0915
    server: str,
    command: str,
    args: Sequence[str],
    env: Mapping[str, str] | None,
    cwd: str | None,
    *,
    adopt: subprocess.Popen[bytes] | None = None,
    bounds: Bounds | None = None,
    withheld: Collection[str] = OWN_NAMES,
    fast_path: bool = True,
) -> AsyncGenerator[tuple[ReadStream, WriteStream, ProcessWatch, RawCalls | None], None]:
    """Spawn ``command`` (or take over ``adopt``, started by ``spawn.prespawn``) and yield
    (read stream, write stream, process watch, raw calls; the last is None on Windows and
    without ``fast_path``, ``patchbay.fast_path``: then every request goes through the SDK's session).

    Raises OSError (FileNotFoundError, PermissionError) when the process cannot start.
    The read stream ends as soon as the process's stdout closes, so every request
    pending on it (raw calls included) fails at once instead of waiting for a timeout.
    ``bounds`` limit every line read (the settings' defaults when None); ``withheld``: names of
    the proxy's environment the process does not inherit (``spawn.child_environment``).
    """
    bounds = bounds or Bounds()
    if adopt is not None:
        process: Any = await _AdoptedProcess.take(adopt)
    else:
        if cwd is not None and not await anyio.Path(cwd).is_dir():
            # Otherwise the OS says FileNotFoundError, which reads as a missing command.
            raise NotADirectoryError(f"working directory does not exist: {cwd}")
        process = await _spawn(server, command, list(args), env, cwd, withheld=withheld)
    raw = RawCalls(process.stdin.writer) if fast_path and isinstance(process, _AdoptedProcess) else None
    watch = ProcessWatch(pid=process.pid, secrets=tuple((env or {}).values()))
    log = logger.getChild(server)
    log.debug("spawned pid %d: %s %s", process.pid, command, redact(" ".join(args), watch.secrets))

    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def refuse(envelope: Envelope, why: str, code: Code) -> None:
        """A line refused unparsed: whatever waits for it hears why, and nothing else ends."""
        request_id = envelope.request_id
        log.warning("server '%s' sent a message the proxy refuses (id %r): %s", server, request_id, why)
        if request_id is None:
            return
        if "method" in envelope.keys:  # the server's own request (sampling, roots...): answered
            with suppress(Exception):
                await process.stdin.send(
                    error_line(request_id, types.INVALID_REQUEST, f"Invalid request: refused: {why}.")
                )
            return
        if raw is not None and isinstance(request_id, str) and raw.fail(request_id, refused_answer(server, code, why)):
            return
        # An answer to a request of the SDK's session (a list, a resource): it fails with the reason.
        error = types.ErrorData(
            code=types.INTERNAL_ERROR, message=f"The proxy refused the server's answer: {why}.", data=refusal_data(code)
        )
        await read_writer.send(SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)))

    async def take_line(line: bytes | Overlong) -> None:
        if isinstance(line, Overlong):
            await refuse(peek_envelope(line.head, line.tail), bounds.too_long(line.size), Code.RESULT_TOO_LARGE)
            return
        if deeper_than(line, bounds.max_depth):
            envelope = envelope_of(line)
            await refuse(envelope, bounds.too_deep(), Code.PROTOCOL_ERROR)
            return
        value = _parse(line, watch, log)
        if value is None or (raw is not None and await raw.take(value)):
            return
        if repaired := untyped_tool_schemas(value.get("result")):
            log.warning(UNTYPED_SCHEMAS, server, len(repaired), first_names(repaired))
        message = _validate(value, line, watch, log)
        if message is not None:
            await read_writer.send(message)

    async def read_stdout() -> None:
        assert process.stdout is not None
        splitter = LineSplitter(bounds.max_bytes)
        try:
            async with read_writer:
                async for chunk in process.stdout:
                    for line in splitter.feed(chunk):
                        await take_line(line)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError):
            pass
        finally:
            if raw is not None:
                raw.close()
            watch.stdout_closed.set()
            # Keep draining so a server flushing output can still exit.
            with anyio.CancelScope(shield=True), suppress(Exception):
                async for _ in process.stdout:
                    pass

    async def read_stderr() -> None:
        if process.stderr is None:
            return
        splitter = LineSplitter(STDERR_LINE_LIMIT, window=1024)
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError):
            async for chunk in process.stderr:
                for line in splitter.feed(chunk):
                    kept = line if isinstance(line, bytes) else line.head + f" ... ({line.size:,} bytes)".encode()
                    text = kept.decode("utf-8", "replace").rstrip()
                    if text:
                        watch.stderr_tail.append(text)
                        log.debug("stderr: %s", redact(text, watch.secrets))
        rest = splitter.feed(b"\n")[0]
        if isinstance(rest, bytes) and rest.strip():
            watch.stderr_tail.append(rest.decode("utf-8", "replace").rstrip())

    async def write_stdin() -> None:
        assert process.stdin is not None
        try:
            async with write_reader:
                async for session_message in write_reader:
                    data = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send(data.encode() + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_writer.aclose()

    async def wait_exit() -> None:
        watch.returncode = await process.wait()
        watch.exited.set()
        log.debug("pid %d exited with %s", process.pid, watch.returncode)

    async with anyio.create_task_group() as tg:
        tg.start_soon(read_stdout)
        tg.start_soon(read_stderr)
        tg.start_soon(write_stdin)
        tg.start_soon(wait_exit)
        try:
            yield read_stream, write_stream, watch, raw
        finally:
            with anyio.CancelScope(shield=True):
                await _stop(process, watch)
                for stream in (read_stream, write_stream, read_writer, write_reader):
                    await stream.aclose()
            tg.cancel_scope.cancel()


def _parse(line: bytes, watch: ProcessWatch, log: logging.Logger) -> dict[str, Any] | None:
    """A line of the server's stdout as a JSON object; None (and a log line) for anything else."""
    stripped = line.strip()
    if not stripped:
        return None
    try:
        value = json.loads(stripped)
    except (ValueError, RecursionError):  # RecursionError: the last line of defence (bounds come first)
        value = None
    if isinstance(value, dict):
        return value  # pyright: ignore[reportUnknownVariableType]
    _garbage(stripped, watch, log)
    return None


def _validate(value: dict[str, Any], line: bytes, watch: ProcessWatch, log: logging.Logger) -> SessionMessage | None:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_python(value, by_name=False))
    except (ValueError, RecursionError):
        _garbage(line.strip(), watch, log)
        return None


def _garbage(line: bytes, watch: ProcessWatch, log: logging.Logger) -> None:
    watch.garbage_lines += 1
    level = logging.WARNING if watch.garbage_lines <= 5 else logging.DEBUG
    log.log(
        level,
        "wrote a line to stdout that is not JSON-RPC (stdout must carry only the protocol; "
        "log to stderr instead): %.200r",
        redact(line.decode("utf-8", "replace"), watch.secrets),
    )


async def _spawn(
    server: str,
    command: str,
    args: list[str],
    env: Mapping[str, str] | None,
    cwd: str | None,
    *,
    withheld: Collection[str],
) -> _AdoptedProcess | Any:
    if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
        from mcp.os.win32.utilities import create_windows_process

        full_env = child_environment(env, withheld, server)
        # The one lookup on every OS (command_lookup: PATH, PATHEXT, then beside our interpreter).
        resolved = resolve_command(command, full_env)
        return await create_windows_process(resolved, args, full_env, sys.stderr, cwd)
    # The same event-loop pipes as a prespawned process: the raw lane writes to them directly.
    return await _AdoptedProcess.take(popen(command, args, env, cwd, withheld=withheld, server=server))


async def _stop(process: anyio.abc.Process | Any, watch: ProcessWatch) -> None:
    """Close stdin and stop the server's whole tree: gently for one server, at once when the proxy ends.

    Polls ``returncode`` rather than awaiting ``wait()``: the waiter task may already
    be cancelled, and on asyncio ``wait()`` also waits for a pipe that a grandchild
    may hold open.
    """
    assert process.stdin is not None
    with suppress(Exception):
        await process.stdin.aclose()
    if _SHUTTING_DOWN:
        await _stop_now(process)
    elif not await _exited(process, GRACE_SECONDS):
        if sys.platform == "win32":  # pragma: no cover
            from mcp.os.win32.utilities import terminate_windows_process_tree

            await terminate_windows_process_tree(process)
        else:
            from mcp.os.posix.utilities import terminate_posix_process_tree

            await terminate_posix_process_tree(process, GRACE_SECONDS)
    if not await _exited(process, GRACE_SECONDS):
        logger.warning("upstream pid %d is still alive after SIGKILL; abandoning it", watch.pid)
    else:
        if sys.platform != "win32":
            # The leader is gone; make sure nothing it started lives on in its group.
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
        untrack(process.pid)
    watch.returncode = process.returncode
    watch.exited.set()


async def _stop_now(process: anyio.abc.Process | Any) -> None:
    """SIGTERM to the group with the end of stdin, SIGKILL ``SHUTDOWN_GRACE_SECONDS`` later."""
    if sys.platform == "win32":  # pragma: no cover
        from mcp.os.win32.utilities import terminate_windows_process_tree

        if not await _exited(process, SHUTDOWN_GRACE_SECONDS):
            await terminate_windows_process_tree(process)
        return
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGTERM)
    if not await _exited(process, SHUTDOWN_GRACE_SECONDS):
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)


async def _exited(process: anyio.abc.Process | Any, timeout: float) -> bool:
    with anyio.move_on_after(timeout):
        while process.returncode is None:
            await anyio.sleep(0.01)
    return process.returncode is not None


class _PipeReader:
    """An event-loop pipe as anyio's byte streams iterate: chunks until EOF."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> _PipeReader:
        return self

    async def __anext__(self) -> bytes:
        chunk = await self._reader.read(65536)
        if not chunk:
            raise StopAsyncIteration
        return chunk

    async def aclose(self) -> None:
        self._reader.feed_eof()


class _PipeWriter:
    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def aclose(self) -> None:
        self.writer.close()


class _AdoptedProcess:
    """A ``subprocess.Popen`` (prespawned, or spawned by ``_spawn``) with the face of anyio's
    ``Process``, on event-loop pipes."""

    def __init__(
        self, popen: subprocess.Popen[bytes], stdin: _PipeWriter, stdout: _PipeReader, stderr: _PipeReader
    ) -> None:
        self._popen = popen
        self.pid = popen.pid
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr

    @classmethod
    async def take(cls, popen: subprocess.Popen[bytes]) -> _AdoptedProcess:
        assert popen.stdin is not None and popen.stdout is not None and popen.stderr is not None
        loop = asyncio.get_running_loop()
        readers: list[_PipeReader] = []
        for pipe in (popen.stdout, popen.stderr):
            reader = asyncio.StreamReader(limit=2**24)
            await loop.connect_read_pipe(lambda r=reader: asyncio.StreamReaderProtocol(r), pipe)
            readers.append(_PipeReader(reader))
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, popen.stdin)
        writer = asyncio.StreamWriter(transport, protocol, None, loop)
        return cls(popen, _PipeWriter(writer), readers[0], readers[1])

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()

    async def wait(self) -> int:
        # Exit is seen at once through stdout's end; this only fetches the exit code.
        while (code := self._popen.poll()) is None:
            await anyio.sleep(0.05)
        return code


@asynccontextmanager
async def stdio_link(
    name: str,
    spec: StdioSpec,
    adopt: subprocess.Popen[bytes] | None = None,
    bounds: Bounds | None = None,
    *,
    fast_path: bool = True,
) -> AsyncGenerator[Link, None]:
    transport = stdio_transport(
        name,
        spec.command,
        spec.args,
        spec.env,
        spec.cwd,
        adopt=adopt,
        bounds=bounds,
        withheld=spec.withheld,
        fast_path=fast_path,
    )
    async with transport as (read, write, watch, raw):
        yield Link(read, write, closed=watch.stdout_closed, watch=watch, raw=raw)
