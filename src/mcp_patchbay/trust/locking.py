"""An exclusive lock on a file shared by processes: ``fcntl.lockf`` on POSIX, ``msvcrt.locking`` on Windows.

Held on a lock file of its own beside the data (the data file is replaced whole at each write,
so a lock on it would lock a file nobody opens next). ``lockf`` takes POSIX record locks,
which NFS carries to the server (NLM, or NFSv4's own locks), so replicas sharing a volume
exclude each other too; they belong to the process, so a thread lock is taken first for the
threads of one process. Waiting is bounded (``WAIT``): a holder that is stuck makes the
caller fail (``TimeoutError``), never hang. The ``filelock`` package does the same over the
same calls; these few lines spare a dependency.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Generator
from pathlib import Path

__all__ = ["WAIT", "locked"]

WAIT = 10.0
"""Seconds to wait for another process's lock (a write takes milliseconds)."""
_POLL = 0.02
_THREADS = threading.Lock()


@contextlib.contextmanager
def locked(path: Path, wait: float = WAIT) -> Generator[None]:
    """Hold the lock on ``path`` (created 0600) for the block."""
    if not _THREADS.acquire(timeout=wait):
        raise TimeoutError(f"another thread holds {path}")
    try:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            _acquire(descriptor, path, wait)
            try:
                yield
            finally:
                _release(descriptor)
        finally:
            os.close(descriptor)
    finally:
        _THREADS.release()


if os.name == "nt":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def _acquire(descriptor: int, path: Path, wait: float) -> None:
        deadline = time.monotonic() + wait
        while True:
            try:
                msvcrt.locking(descriptor, msvcrt.LK_NBLCK, 1)
                return
            except OSError:
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"another process holds {path}") from None
                time.sleep(_POLL)

    def _release(descriptor: int) -> None:
        os.lseek(descriptor, 0, os.SEEK_SET)
        msvcrt.locking(descriptor, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _acquire(descriptor: int, path: Path, wait: float) -> None:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.lockf(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except OSError:
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"another process holds {path}") from None
                time.sleep(_POLL)

    def _release(descriptor: int) -> None:
        fcntl.lockf(descriptor, fcntl.LOCK_UN)
