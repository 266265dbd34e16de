"""The presence files: one per running proxy in the data folder's ``running/``, read by the page.

A file is named ``<pid>.json`` and written whole (``places.write_private``: 0600, renamed over the
old one), so a reader sees a whole snapshot or the one before. A file whose process is gone, or
that cannot be read as a snapshot, is removed by the reader that finds it.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any, cast

from mcp_patchbay import places

__all__ = ["FOLDER_NAME", "MAX_SNAPSHOT_BYTES", "alive", "default_folder", "read_all", "remove", "write"]

FOLDER_NAME = "running"
MAX_SNAPSHOT_BYTES = 8 * 1024 * 1024
"""A snapshot larger than this is not read (a proxy's thousands of tools stay well under it)."""


def default_folder() -> Path:
    return places.data_dir() / FOLDER_NAME


def _path(folder: Path, pid: int) -> Path:
    return folder / f"{pid}.json"


def write(snapshot: dict[str, Any], folder: Path | None = None) -> Path:
    """Write this process's snapshot (``snapshot["pid"]`` names the file); raises OSError."""
    path = _path(folder or default_folder(), int(snapshot["pid"]))
    places.write_private(path, json.dumps(snapshot, ensure_ascii=False, separators=(",", ":")))
    return path


def remove(pid: int, folder: Path | None = None) -> None:
    with contextlib.suppress(OSError):
        _path(folder or default_folder(), pid).unlink()


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (as this user: another user's is not a proxy of ours)."""
    if pid <= 0:
        return False
    if sys.platform == "win32":
        return _alive_on_windows(pid)
    try:
        os.kill(pid, 0)  # signal 0: nothing is sent, the kernel only checks
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # a process of another user has taken the number
    return True


def _alive_on_windows(pid: int) -> bool:  # pragma: no cover - Windows
    import ctypes

    synchronize, wait_timeout = 0x00100000, 0x00000102
    kernel32 = ctypes.windll.kernel32  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType, reportUnknownVariableType]
    handle = kernel32.OpenProcess(synchronize, False, pid)  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if not handle:
        return False
    try:
        return bool(kernel32.WaitForSingleObject(handle, 0) == wait_timeout)  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
    finally:
        kernel32.CloseHandle(handle)  # pyright: ignore[reportUnknownMemberType]


def read_all(folder: Path | None = None) -> list[dict[str, Any]]:
    """Every live proxy's snapshot, oldest proxy first; stale and unreadable files removed."""
    where = folder or default_folder()
    try:
        names = sorted(entry.name for entry in where.iterdir() if entry.name.endswith(".json"))
    except OSError:
        return []
    snapshots: list[dict[str, Any]] = []
    for name in names:
        path = where / name
        stem = name.removesuffix(".json")
        if not stem.isdigit():
            continue  # not ours (a temporary file is dotted)
        pid = int(stem)
        if not alive(pid):
            with contextlib.suppress(OSError):
                path.unlink()
            continue
        snapshot = _read(path)
        if snapshot is None or snapshot.get("pid") != pid:
            continue
        snapshots.append(snapshot)
    snapshots.sort(key=lambda s: (float(s.get("started_at") or 0), int(s["pid"])))
    return snapshots


def _read(path: Path) -> dict[str, Any] | None:
    try:
        with path.open("rb") as file:
            data = file.read(MAX_SNAPSHOT_BYTES + 1)
    except OSError:
        return None
    if len(data) > MAX_SNAPSHOT_BYTES:
        return None
    try:
        value: object = json.loads(data)
    except ValueError:
        return None  # being replaced as we read it is not possible (rename); a broken one is skipped
    return cast("dict[str, Any]", value) if isinstance(value, dict) else None
