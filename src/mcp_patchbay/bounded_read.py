"""Reading a named file whole, within a limit: the one reader of every file the proxy reads by path.

A path that a user, a config or a client names, or one in the proxy's data folder, may name
anything: ``/dev/zero`` (read for ever), a FIFO (opening it waits for a writer), a directory, a
file of gigabytes. :func:`read_bytes` opens the path without waiting (``O_NONBLOCK``), looks at
what it opened (``fstat`` of the descriptor: what is checked is what is read), refuses anything
but a regular file, naming what it is, refuses a file over the caller's limit before reading it,
and reads at most one byte more than the limit (a file growing as it is read is refused too).
Every refusal is :class:`FileRefused`, an ``OSError``: code that copes with a file it cannot read
copes with it already, and code that words it for a person branches on it.
:func:`read_changed` is the same reading, skipped when the caller knows the file opened already
(its ``fstat``: the pins file, looked at again under its lock).

The limits, each a caller's:

- a config file: ``$PATCHBAY_MAX_CONFIG_BYTES``, :data:`DEFAULT_MAX_CONFIG_BYTES` when unset (an
  environment variable, not a setting: it is needed before the file is read);
- another MCP client's config file (``import``, ``install``): :data:`CLIENT_FILE_BYTES`;
- a file of the proxy's own data folder (sign-ins, install records, start memory):
  :data:`DATA_FILE_BYTES`; the saved listings and the pins file keep limits of their own;
- ``call``'s ``--args @FILE``: :data:`ARGUMENTS_FILE_BYTES`.

The standard library only: ``early_start.early`` reads the config before anything else is imported.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

__all__ = [
    "ARGUMENTS_FILE_BYTES",
    "CLIENT_FILE_BYTES",
    "DATA_FILE_BYTES",
    "DEFAULT_MAX_CONFIG_BYTES",
    "MAX_CONFIG_ENV",
    "FileRefused",
    "config_limit",
    "read_bytes",
    "read_changed",
    "read_config",
    "read_text",
]

MiB: Final = 1024 * 1024

MAX_CONFIG_ENV: Final = "PATCHBAY_MAX_CONFIG_BYTES"
DEFAULT_MAX_CONFIG_BYTES: Final = 4 * MiB
"""A config of a thousand servers is about 300 KiB."""
CLIENT_FILE_BYTES: Final = 64 * MiB
"""Claude Code keeps its projects' history in ``~/.claude.json``, which grows to some megabytes."""
DATA_FILE_BYTES: Final = 16 * MiB
"""The proxy writes these itself, each some kilobytes: only a damaged or replaced one is larger."""
ARGUMENTS_FILE_BYTES: Final = 32 * MiB
"""The default ``max_message_bytes``: no upstream would take a larger call."""

_KINDS: Final = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
)


class FileRefused(OSError):
    """A file not read: not a regular file, or over its limit. ``str()`` is ``why`` (callers name the path)."""

    def __init__(self, path: str | os.PathLike[str], why: str, *, kind: str | None = None) -> None:
        super().__init__(why)
        self.path = os.fspath(path)
        self.why = why
        self.kind = kind
        """What the path names when it is not a regular file ("a directory"), else None (too large)."""


def _size(count: int) -> str:
    if count >= MiB:
        return f"{count // MiB} MiB" if count % MiB == 0 else f"{count / MiB:.1f} MiB"
    if count >= 1024:
        return f"{count // 1024} KiB" if count % 1024 == 0 else f"{count / 1024:.1f} KiB"
    return f"{count:,} bytes"


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _not_regular(path: str | os.PathLike[str], mode: int) -> FileRefused:
    kind = _kind(mode)
    return FileRefused(path, f"not a regular file ({kind})", kind=kind)


def _too_large(path: str | os.PathLike[str], size: str, limit: int, what: str, setting: str | None) -> FileRefused:
    how = f" (set {setting} to read a larger one)" if setting else ""
    return FileRefused(path, f"{size}, over the {_size(limit)} limit for {what}{how}")


def _open(path: str | os.PathLike[str]) -> int:
    """A descriptor for reading ``path``, opened without waiting for a FIFO's writer."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        return os.open(path, flags)
    except OSError as exc:
        # A socket cannot be opened (ENXIO); Windows refuses to open a directory (EACCES).
        if exc.errno in (errno.ENXIO, errno.EACCES, errno.EISDIR, errno.EOPNOTSUPP):
            try:
                mode = Path(path).stat().st_mode
            except OSError:
                raise exc from None
            if not stat.S_ISREG(mode):
                raise _not_regular(path, mode) from None
        raise


def read_bytes(path: str | os.PathLike[str], limit: int, what: str, setting: str | None = None) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them.

    ``what`` names the kind of file in a refusal ("a config file"), ``setting`` what raises its
    limit. Raises :class:`FileRefused`, else what ``open`` raises (``FileNotFoundError`` ...).
    """
    _, read = _read(path, limit, what, setting, None)
    assert read is not None
    return read


def read_changed(
    path: str | os.PathLike[str], limit: int, what: str, known: Callable[[os.stat_result], bool]
) -> tuple[os.stat_result, bytes | None]:
    """:func:`read_bytes`, unless ``known`` says the file opened is one the caller read already
    (given its ``fstat``): then nothing is read (None). Its status either way. The file is opened
    to be looked at, not ``stat``-ed by name: an NFS client revalidates a file at its opening
    (close-to-open), where a ``stat`` may answer from its attribute cache for seconds."""
    return _read(path, limit, what, None, known)


def _read(
    path: str | os.PathLike[str],
    limit: int,
    what: str,
    setting: str | None,
    known: Callable[[os.stat_result], bool] | None,
) -> tuple[os.stat_result, bytes | None]:
    descriptor = _open(path)
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise _not_regular(path, status.st_mode)
        if known is not None and known(status):
            return status, None
        if status.st_size > limit:
            raise _too_large(path, _size(status.st_size), limit, what, setting)
        if os.name == "posix":
            os.set_blocking(descriptor, True)
        chunks: list[bytes] = []
        left = limit + 1  # one more: a file that grew since fstat is refused, not cut
        while left > 0 and (chunk := os.read(descriptor, min(left, MiB))):
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(descriptor)
    if left <= 0:
        raise _too_large(path, f"more than {_size(limit)}", limit, what, setting)
    return status, b"".join(chunks)


def read_text(
    path: str | os.PathLike[str], limit: int, what: str, setting: str | None = None, *, encoding: str = "utf-8"
) -> str:
    """:func:`read_bytes`, decoded (``UnicodeDecodeError`` as ``bytes.decode`` raises it)."""
    return read_bytes(path, limit, what, setting).decode(encoding)


def config_limit(environ: Mapping[str, str] | None = None) -> int:
    """The largest config file read: ``$PATCHBAY_MAX_CONFIG_BYTES``, else the default; ValueError
    when the variable is not a positive whole number of bytes."""
    text = (os.environ if environ is None else environ).get(MAX_CONFIG_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_CONFIG_BYTES
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{MAX_CONFIG_ENV} is not a number of bytes (the default is {DEFAULT_MAX_CONFIG_BYTES})")
    return int(text)


def read_config(path: str | os.PathLike[str], environ: Mapping[str, str] | None = None) -> str:
    """The text of the config file ``path`` (a byte-order mark tolerated), within :func:`config_limit`."""
    return read_text(path, config_limit(environ), "a config file", MAX_CONFIG_ENV, encoding="utf-8-sig")
