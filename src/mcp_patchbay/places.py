"""Where the proxy keeps its own files on this OS: the one owner of those paths.

``platformdirs`` gives each platform's convention (imported only when a path is asked for):

========  ===========================================  ==========================================
OS        config (``default_config``)                  data (sign-ins, ``data_dir``)
========  ===========================================  ==========================================
Linux     ``$XDG_CONFIG_HOME/mcp-patchbay/config.json``  ``$XDG_DATA_HOME/mcp-patchbay``
macOS     ``~/Library/Application Support/mcp-patchbay``  the same folder
Windows   ``%LOCALAPPDATA%\\mcp-patchbay``               the same folder
========  ===========================================  ==========================================

Where each MCP client keeps its config is ``clients``' to say, not this module's. ``write_private``
is how every file in the data folder is written (sign-ins, pins, saved listings, start memory).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["APP_NAME", "CONFIG_NAME", "config_dir", "data_dir", "default_config", "write_private"]

APP_NAME = "mcp-patchbay"
CONFIG_NAME = "config.json"
"""The file name ``import`` writes and every command reads when no config is named."""


def config_dir() -> Path:
    """The folder of the user's patchbay config."""
    import platformdirs

    return Path(platformdirs.user_config_dir(APP_NAME, appauthor=False))


def default_config() -> Path:
    """The config every command reads when none is named (``import`` writes it)."""
    return config_dir() / CONFIG_NAME


def data_dir() -> Path:
    """The folder of the proxy's data: sign-in tokens, pinned definitions, saved listings, start memory."""
    import platformdirs

    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def write_private(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` at once, readable by this user alone: the folder made 0700 (and
    narrowed to it if it was wider), a temporary file created 0600 beside it, renamed over the old one,
    so a reader sees the old file or the new one, never half of one. Raises OSError (the temporary file
    removed)."""
    folder = path.parent
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    if os.name != "nt" and folder.stat().st_mode & 0o077:
        folder.chmod(0o700)  # ours alone, whoever made it (mkdir's mode obeys the umask)
    temporary = folder / f".{path.name}.{os.getpid()}.tmp"
    with contextlib.suppress(FileNotFoundError):
        temporary.unlink()
    try:
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(text)
        temporary.replace(path)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
