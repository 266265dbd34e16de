"""Writing a client's file safely: a timestamped backup first, then an atomic replace.

:func:`backup` copies the file beside itself as ``NAME.patchbay-backup-YYYYMMDDTHHMMSS`` (bytes and
permissions). :func:`write_atomic` writes a temporary file in the same folder, fsyncs it, gives it
the original's permissions and ``os.replace``\\s the original with it, so a reader sees the old
file or the new one, never half of one. :func:`digest` is the sha256 ``uninstall`` compares with.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import os
import shutil
import stat
import tempfile
from pathlib import Path

from mcp_patchbay import bounded_read

__all__ = ["BACKUP_MARK", "backup", "digest", "read_bytes", "write_atomic"]

BACKUP_MARK = ".patchbay-backup-"
NEW_FILE_MODE = 0o600
"""A file the proxy creates (a client's config may come to hold tokens): its owner's only."""


def read_bytes(path: Path) -> bytes | None:
    """The client's file's bytes (a regular file within ``CLIENT_FILE_BYTES``), or None when there
    is no such file; other errors raise ``OSError`` (``bounded_read.FileRefused`` among them)."""
    try:
        return bounded_read.read_bytes(path, bounded_read.CLIENT_FILE_BYTES, "a client's config file")
    except FileNotFoundError:
        return None


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def backup(path: Path, now: datetime.datetime | None = None) -> Path:
    """Copy ``path`` beside itself under a timestamped name (never over another backup), with its
    permissions and times. Read as ``read_bytes`` reads: ``-o /dev/zero --force`` is refused, not copied
    for ever."""
    data = bounded_read.read_bytes(path, bounded_read.CLIENT_FILE_BYTES, "a client's config file")
    stamp = (now or datetime.datetime.now()).strftime("%Y%m%dT%H%M%S")
    target = path.with_name(f"{path.name}{BACKUP_MARK}{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}{BACKUP_MARK}{stamp}-{n}")
    with os.fdopen(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, NEW_FILE_MODE), "wb") as file:
        file.write(data)
    shutil.copystat(path, target)  # the original's mode: the backup is never readable by more
    return target


def write_atomic(path: Path, data: bytes, mode: int | None = None) -> None:
    """Replace ``path`` with ``data`` at once; permissions: ``mode``, else the original's, else 0600."""
    if mode is None:
        try:
            mode = stat.S_IMODE(path.stat().st_mode)
        except FileNotFoundError:
            mode = NEW_FILE_MODE
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        Path(temp).chmod(mode)
        Path(temp).replace(path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    if hasattr(os, "O_DIRECTORY"):  # the rename itself on disk (POSIX); Windows has no folder fsync
        with contextlib.suppress(OSError):
            folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(folder)
            finally:
                os.close(folder)
