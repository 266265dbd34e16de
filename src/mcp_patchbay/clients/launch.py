"""The command a client runs to start this installation of the proxy: an absolute path, per OS.

``mcp-patchbay`` is looked for beside the running interpreter (a virtualenv's ``bin``, Windows'
``Scripts``, where installers put ``mcp-patchbay.exe``), then as the program this process was started
as, then on ``PATH`` (``upstreams.command_lookup.which``, the proxy's one command lookup, with ``PATHEXT`` on Windows);
failing all, the interpreter itself with ``-m mcp_patchbay``. The lookups come in as functions so each
OS's branch is tested anywhere.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePath, PurePosixPath, PureWindowsPath

from mcp_patchbay.clients.locations import Platform
from mcp_patchbay.upstreams.command_lookup import which

__all__ = ["Launch", "find_launch", "this_launch"]

PROGRAM = "mcp-patchbay"


@dataclass(frozen=True)
class Launch:
    command: str
    args: tuple[str, ...] = ()
    """Words before the config's path (``-m mcp_patchbay`` for the interpreter)."""
    temporary: bool = False
    """The program lives in a cache that is emptied (``uvx``'s): the entry will break one day."""


def _temporary(path: str) -> bool:
    spelt = path.replace("\\", "/").lower()
    return "/.cache/uv/" in spelt or "/uv/cache/" in spelt or "/archive-v" in spelt


def find_launch(
    platform: Platform,
    *,
    executable: str,
    argv0: str,
    exists: Callable[[PurePath], bool],
    which: Callable[[str], str | None],
) -> Launch:
    """How to start the proxy (see the module doc); ``exists`` and ``which`` do the looking."""
    path = PureWindowsPath if platform == "win32" else PurePosixPath
    names = [PROGRAM + ".exe"] if platform == "win32" else [PROGRAM]  # pip's and uv's launchers are .exe
    interpreter = path(executable)
    folders = [interpreter.parent]
    if platform == "win32":
        folders.append(interpreter.parent / "Scripts")  # a base install keeps scripts there
    candidates = [folder / name for folder in folders for name in names]
    started_as = path(argv0)
    if started_as.is_absolute() and started_as.name.lower() in (PROGRAM, *names):
        candidates.append(started_as)
    for candidate in candidates:
        if exists(candidate):
            return Launch(str(candidate), temporary=_temporary(str(candidate)))
    found = which(PROGRAM)
    if found:
        return Launch(found, temporary=_temporary(found))
    return Launch(executable, ("-m", "mcp_patchbay"), temporary=_temporary(executable))


def this_launch() -> Launch:
    """How to start this installation, from this process's interpreter, arguments and ``PATH``."""
    platform: Platform = "win32" if sys.platform == "win32" else "darwin" if sys.platform == "darwin" else "linux"
    return find_launch(
        platform,
        executable=str(Path(sys.executable).absolute()),  # not resolved: a virtualenv's python is a symlink
        argv0=str(Path(sys.argv[0]).absolute()) if sys.argv and sys.argv[0] else "",
        exists=lambda p: Path(p).is_file(),
        which=lambda name: which(name, os.environ),
    )
