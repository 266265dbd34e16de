"""Whether a client is running, so ``install`` can tell the user to restart it: best effort, never fails.

The command lines of the user's processes come from ``/proc`` on Linux, ``ps`` on macOS and
``tasklist`` on Windows (bounded to a few seconds); :func:`matches` decides from a command line
alone, so its rules are tested on any OS. Any error means "not seen running".
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path

from mcp_patchbay.clients.locations import Client, Platform

__all__ = ["command_lines", "is_running", "matches"]

_INTERPRETERS = frozenset({"node", "nodejs", "bun", "deno", "python", "python3"})
_LIST_TIMEOUT = 3.0


def _base(word: str) -> str:
    name = word.replace("\\", "/").rsplit("/", 1)[-1]
    return name[:-4] if name.lower().endswith(".exe") else name


def _is_folder(marker: str) -> bool:
    """An app bundle or an npm package (matched anywhere in the path), not a program's name."""
    return "/" in marker or marker.endswith(".app")


def matches(client: Client, argv: Sequence[str]) -> bool:
    """Whether the process with this command line is ``client`` (see ``Client.processes``)."""
    if not argv:
        return False
    programs = [argv[0]]
    if _base(argv[0]).lower() in _INTERPRETERS and len(argv) > 1:
        programs.append(argv[1])  # a node CLI: the script is what names it
    for program in programs:
        base = _base(program)
        path = "/" + program.replace("\\", "/") + "/"
        if any(base == marker or (_is_folder(marker) and f"/{marker}/" in path) for marker in client.processes):
            return True
    return False


def _linux() -> Iterable[list[str]]:
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        with contextlib.suppress(OSError):
            words = (entry / "cmdline").read_bytes().split(b"\0")
            argv = [w.decode("utf-8", "replace") for w in words if w]
            if argv:
                yield argv


def _run(argv: list[str]) -> str:
    return subprocess.run(argv, capture_output=True, text=True, timeout=_LIST_TIMEOUT, check=False).stdout


def command_lines(platform: Platform) -> list[list[str]]:
    """The command lines of running processes (Windows and macOS: the program only)."""
    try:
        if platform == "linux":
            return list(_linux())
        if platform == "darwin":
            return [[line.strip()] for line in _run(["ps", "-axo", "comm="]).splitlines() if line.strip()]
        rows = csv.reader(io.StringIO(_run(["tasklist", "/fo", "csv", "/nh"])))
        return [[row[0]] for row in rows if row]
    except (OSError, subprocess.SubprocessError, ValueError):
        return []


def is_running(client: Client, platform: Platform) -> bool:
    return any(matches(client, argv) for argv in command_lines(platform))
