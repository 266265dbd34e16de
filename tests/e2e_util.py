"""Helpers shared by the suites that run real processes and sockets (faults, HTTP, end to end).

- ``fault_entry``: a config entry launching ``tests/servers/fault_server.py``.
- ``ProcessRecord``: every fault_server process (and child it starts) writes a line to a
  record file; after the proxy stops, ``wait_gone`` proves each one is dead.
- ``wait_gone``: waits on a pidfd (an event, not a poll) for each process to exit.
- ``assert_clean_model_text``: what the model is shown is short, and holds no file path,
  traceback or secret.
"""

from __future__ import annotations

import json
import os
import re
import select
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types

ROOT = Path(__file__).resolve().parent.parent
SERVERS = ROOT / "tests" / "servers"
FAULT_SERVER = SERVERS / "fault_server.py"
NODE_MODULES = ROOT / "tests" / "e2e" / "node_modules"
SECRET = "abc123"

_PATH = re.compile(r"(?:^|[\s'\"(=:])(?:~|[A-Za-z]:)?[/\\](?:[\w.@-]+[/\\])+[\w.@-]*")


def fault_entry(name: str, *flags: str, record: Path | None = None, **extra: Any) -> dict[str, Any]:
    """A config entry for a fault_server named ``name`` with the given startup flags."""
    args = [str(FAULT_SERVER), "--name", name, *flags]
    if record is not None:
        args += ["--record", str(record)]
    return {"command": sys.executable, "args": args, **extra}


def result_text(result: types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))


def error_info(result: types.CallToolResult) -> dict[str, Any]:
    assert result.is_error, result
    assert result.structured_content is not None, result
    return result.structured_content["error"]


def assert_clean_model_text(result: types.CallToolResult, *secrets: str) -> None:
    """An error shown to the model: under 500 characters, no path, no traceback, no secret."""
    text = result_text(result)
    info = error_info(result)
    for shown in (text, info["message"]):
        assert len(shown) < 500, shown
        assert "Traceback" not in shown and 'File "' not in shown, shown
        assert not _PATH.search(shown), f"file path in model text: {shown!r}"
        for secret in (SECRET, *secrets):
            assert secret not in shown, shown


@dataclass(frozen=True)
class Recorded:
    kind: str
    name: str
    pid: int
    start: int | None


class ProcessRecord:
    """The record file the fault servers append to (``--record``)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def entries(self) -> list[Recorded]:
        if not self.path.exists():
            return []
        rows = [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]
        return [Recorded(r["kind"], r["name"], r["pid"], r["start"]) for r in rows]

    def pids(self, name: str | None = None, kind: str | None = None) -> list[int]:
        return [
            e.pid
            for e in self.entries()
            if (name is None or e.name == name) and (kind is None or e.kind == kind)
        ]

    async def wait_all_gone(self, timeout: float = 10.0) -> list[Recorded]:
        entries = self.entries()
        await wait_gone([(e.pid, e.start) for e in entries], timeout)
        return entries


def start_time(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def alive(pid: int, start: int | None = None) -> bool:
    """Running (a zombie is dead; a later process reusing the pid is not ours)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):
        return False
    return start is None or int(fields[19]) == start


async def wait_gone(pids: Iterable[int | tuple[int, int | None]], timeout: float = 10.0) -> None:
    """Every process has exited, waited for on pidfds, within ``timeout`` seconds in all."""
    with anyio.fail_after(timeout):
        for item in pids:
            pid, start = item if isinstance(item, tuple) else (item, None)
            await _wait_exit(pid, start)
    survivors = [p for p in pids if alive(*(p if isinstance(p, tuple) else (p, None)))]
    assert not survivors, survivors


async def _wait_exit(pid: int, start: int | None) -> None:
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        if not alive(pid, start):  # gone, a zombie, or the pid now names another process
            return
        if not select.select([fd], [], [], 0)[0]:
            await anyio.wait_readable(fd)  # readable once the process has exited
    finally:
        os.close(fd)


def children_of(pid: int) -> list[int]:
    """Direct children of a process, from /proc (psutil is not installed)."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def descendants_of(pid: int) -> list[int]:
    result: list[int] = []
    todo = [pid]
    while todo:
        for child in children_of(todo.pop()):
            result.append(child)
            todo.append(child)
    return result
