"""Processes, free ports and ``/proc`` readings: the one copy the benchmarks and the tests share.

Linux only, like the benchmarks (psutil is not a dependency). Every reading returns ``None``
(or an empty list) for a process that is gone, never raises for it.
"""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path


def free_ports(count: int) -> list[int]:
    """``count`` distinct loopback ports free now (all bound at once, so none repeats)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def free_port() -> int:
    """A loopback port free now."""
    return free_ports(1)[0]


def stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name: ``[0]`` is the state, ``[1]`` the
    parent's pid, ``[11]`` and ``[12]`` user and system time in clock ticks (man 5 proc's
    fields 3 on). The name is in parentheses and may hold spaces or ``)``: split after the last one."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 :].split()


def running(pid: int) -> bool:
    """Whether the process exists and is not a zombie."""
    fields = stat_fields(pid)
    return fields is not None and fields[0] != "Z"


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of one process (not its children)."""
    fields = stat_fields(pid)
    if fields is None:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid: int) -> int | None:
    """VmRSS of one process (not its children), from /proc/PID/status."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def pids() -> list[int]:
    """Every process id /proc shows."""
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]


def children_of(pid: int) -> list[int]:
    """Direct children of a process."""
    return [child for child in pids() if (fields := stat_fields(child)) is not None and int(fields[1]) == pid]


def cmdline(pid: int) -> str:
    """A process's command line, arguments joined by spaces ("" once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def find_child(marker: str) -> int:
    """The pid of this process's child whose command line contains ``marker``."""
    for pid in children_of(os.getpid()):
        if marker in cmdline(pid):
            return pid
    raise RuntimeError(f"no child process running {marker!r}")


def has_environ(pid: int, entry: str) -> bool:
    """Whether ``NAME=value`` is in the process's environment (readable for our own processes)."""
    with contextlib.suppress(OSError):
        return entry.encode() in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return False
