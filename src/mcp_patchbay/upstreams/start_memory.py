"""What the last start of a config found: how many tools its catalog had, so that the next
start can answer a first listing before any upstream does.

With ``"expose": "auto"`` the mode depends on the catalog's size, which no one knows until
the upstreams have listed. A catalog that was over ``search_threshold`` last time almost
always is again, so ``session.own_tools.early_search_listing`` answers in search mode when the last
start of the same file (same path, same modification time) found more tools than that; a
wrong guess costs a ``list_changed`` (``wire.early_handshake``). Kept in the data folder
(``places.data_dir()/starts.json``), one entry per config file, the ``MAX_ENTRIES`` most
recent. Plain ``json``: read before the SDK is loaded. Never fails its caller.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any, cast

from mcp_patchbay import places
from mcp_patchbay.bounded_read import DATA_FILE_BYTES, read_bytes

__all__ = ["MAX_ENTRIES", "recall", "remember"]

logger = logging.getLogger(__name__)

MAX_ENTRIES = 50


def _file() -> Path:
    return places.data_dir() / "starts.json"


def _read() -> dict[str, Any]:
    try:
        value = json.loads(read_bytes(_file(), DATA_FILE_BYTES, "the start memory"))
    except (OSError, ValueError):
        return {}
    return cast("dict[str, Any]", value) if isinstance(value, dict) else {}


def _stamp(config: Path) -> int | None:
    try:
        return config.stat().st_mtime_ns
    except OSError:
        return None


def recall(config: str | Path) -> int | None:
    """The tool count the last start of this very file found, if it is known and the file has
    not changed since."""
    path = Path(config).absolute()
    entry = _read().get(str(path))
    if not isinstance(entry, dict):
        return None
    found = cast("dict[str, Any]", entry)
    tools = found.get("tools")
    if found.get("mtime_ns") != _stamp(path) or not isinstance(tools, int) or isinstance(tools, bool):
        return None
    return tools


def remember(config: str | Path, tools: int) -> None:
    """Keep the tool count this start found (written atomically; a failure is only logged)."""
    path = Path(config).absolute()
    stamp = _stamp(path)
    if stamp is None:
        return
    entries = _read()
    entries[str(path)] = {"tools": tools, "mtime_ns": stamp, "at": time.time()}
    newest = sorted(entries.items(), key=lambda item: -float(cast("dict[str, Any]", item[1]).get("at", 0)))
    target = _file()
    try:
        places.write_private(target, json.dumps(dict(newest[:MAX_ENTRIES])))
    except OSError as exc:
        logger.debug("could not keep what this start found: %r", exc)
