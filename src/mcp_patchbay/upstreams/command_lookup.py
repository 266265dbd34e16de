"""Finding the program a server entry's ``command`` names: the one lookup, on every OS.

A bare name is looked for on the child's ``PATH``, then beside patchbay's own interpreter
(``bin``, or ``Scripts`` on Windows), so a config can name tools installed in patchbay's own
virtualenv (``mcp-server-time``) without the client activating it. On Windows a name without
an extension is tried with each of ``PATHEXT``'s, as the shell does, and no execute bit is
needed; elsewhere the file must be executable. ``platform`` is a parameter, so every branch
is tested on any OS. Used by ``spawn`` (POSIX starts), ``transports.stdio`` (Windows
starts), ``upstreams.diagnosis`` (where a command was looked for) and ``clients.launch`` (the proxy's
own command). Standard library only: it runs before the SDK is imported.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

__all__ = ["resolve_command", "search_path", "which"]


def search_path(env: Mapping[str, str], platform: str = sys.platform) -> list[str]:
    """Where a bare command is looked for: the child's PATH, then the folder of patchbay's own
    interpreter (``bin``, or ``Scripts`` on Windows), so a config can name tools installed in
    patchbay's own virtualenv (``mcp-server-time``) without the client activating it."""
    separator = ";" if platform == "win32" else ":"
    folders = [p for p in env.get("PATH", os.defpath).split(separator) if p]
    return [*folders, str(Path(sys.executable).parent)]


def which(command: str, env: Mapping[str, str], platform: str = sys.platform) -> str | None:
    """The file a bare ``command`` names on ``search_path``, or None. On Windows a name without
    an extension is tried with each of ``PATHEXT``'s (``.COM;.EXE;.BAT;.CMD`` by default), as
    the shell does, and no execute bit is needed; elsewhere the file must be executable.
    ``platform`` is a parameter so both branches are tested on any OS."""
    windows = platform == "win32"
    names = [command]
    if windows and not Path(command).suffix:
        extensions = env.get("PATHEXT") or ".COM;.EXE;.BAT;.CMD"
        names = [command + ext for ext in extensions.split(";") if ext] + [command]
    for folder in search_path(env, platform):
        for name in names:
            candidate = Path(folder) / name
            if candidate.is_file() and (windows or os.access(candidate, os.X_OK)):
                return str(candidate)
    return None


def resolve_command(command: str, env: Mapping[str, str]) -> str:
    """``command`` as a path: a bare name found on ``search_path`` (else left as it is, and
    the spawn's error names it); a path is used as given."""
    if Path(command).name != command:
        return command
    return which(command, env) or command
