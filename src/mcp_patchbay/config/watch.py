"""Pick up config edits while running.

Polls the file's identity (inode, size, mtime) once a second: that sees editors that
save in place and editors that write a new file and rename it over the old one, on
every platform, with no dependency. ``reload_on_sighup`` reloads on SIGHUP where the
system has it (the CLI installs it even when watching is off).
A broken edit keeps the last good config and logs why. The file is read in a worker thread.
"""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import anyio

from mcp_patchbay.config import Config, ConfigError, load_config

logger = logging.getLogger(__name__)

POLL_SECONDS = 1.0


def _identity(path: Path) -> tuple[int, int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns)


async def reload(path: Path, apply: Callable[[Config], None]) -> bool:
    """Read the file again and apply it. Read in a worker thread: reading may ask the OS keyring for a
    ``${secret:NAME}`` (a locked keyring or a Keychain dialog must not stop every client's requests)."""
    try:
        config = await anyio.to_thread.run_sync(load_config, path)
    except ConfigError as exc:
        logger.error("config change ignored, keeping the last good config:\n%s", exc)
        return False
    logger.info("config file changed; applying it")
    apply(config)
    return True


async def watch_config(path: Path, apply: Callable[[Config], None], poll: float = POLL_SECONDS) -> None:
    last = _identity(path)
    while True:
        await anyio.sleep(poll)
        current = _identity(path)
        if current is None or current == last:
            continue  # a missing file is mid-rename or deleted: keep serving what we have
        last = current
        await reload(path, apply)


async def reload_on_sighup(path: Path, apply: Callable[[Config], None]) -> None:
    if sys.platform == "win32":  # no SIGHUP there
        return
    with anyio.open_signal_receiver(signal.SIGHUP) as signals:
        async for _ in signals:
            logger.info("SIGHUP: reloading %s", path)
            await reload(path, apply)
