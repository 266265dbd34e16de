"""Where the page's facts come from: ``LocalSources`` (``mcp-patchbay ui``: every proxy of this
user on this machine, through their presence files) or ``ReplicaSources`` (the gateway's ``/ui``:
this replica's own proxy). Both give the proxies' snapshots, the config files the page may act
on (by id), and the activity log."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from mcp_patchbay.ui.log import Log
from mcp_patchbay.ui.views import config_id

if TYPE_CHECKING:
    from mcp_patchbay.session.proxy import Proxy
__all__ = ["ConfigServer", "LocalSources", "ReplicaSources", "Sources", "config_servers"]

ConfigServer = tuple[str, dict[str, Any]]
"""A server entry as the file has it: name, and its object (nothing expanded)."""

_parsed: dict[Path, tuple[tuple[float, int], list[ConfigServer]]] = {}


def config_servers(path: Path) -> list[ConfigServer]:
    """The entries of a config file, read as JSON only (no ``${VAR}``, no secret looked up: the
    page shows names and switches), cached while the file is unchanged; [] when it cannot be read."""
    from mcp_patchbay import bounded_read

    try:
        status = path.stat()
        stamp = (status.st_mtime, status.st_size)
        known = _parsed.get(path)
        if known is not None and known[0] == stamp:
            return known[1]
        data: object = json.loads(bounded_read.read_config(path))
    except (OSError, ValueError):
        return []
    servers: list[ConfigServer] = []
    if isinstance(data, dict):
        for shape in ("mcpServers", "servers"):
            entries = cast("dict[str, Any]", data).get(shape)
            if isinstance(entries, dict):
                for name, entry in cast("dict[str, Any]", entries).items():
                    if isinstance(entry, dict):
                        servers.append((name, cast("dict[str, Any]", entry)))
    _parsed[path] = (stamp, servers)
    return servers


class Sources(Protocol):
    log: Log
    replica: bool
    """The gateway's page: one replica's own proxy; no sign-in from the page."""

    def proxies(self) -> list[dict[str, Any]]: ...

    def configs(self) -> dict[str, Path]: ...


class LocalSources:
    """``mcp-patchbay ui``: the presence folder, the config named on its command line, the log."""

    replica = False

    def __init__(self, config: Path | None, log: Log, presence: Path | None = None) -> None:
        self.config = config.absolute() if config is not None else None
        self.log = log
        self.presence = presence

    def proxies(self) -> list[dict[str, Any]]:
        from mcp_patchbay.presence.folder import read_all

        return read_all(self.presence)

    def configs(self) -> dict[str, Path]:
        """The config named, then each running proxy's, by id."""
        paths = [self.config] if self.config is not None else []
        paths += [Path(str(p["config"])) for p in self.proxies() if p.get("config")]
        return {config_id(str(path)): path for path in paths}


class ReplicaSources:
    """The gateway's ``/ui``: this replica's proxy, its config, its data folder's log."""

    replica = True

    def __init__(self, proxy: Proxy, log: Log, sessions: Callable[[], int] | None = None) -> None:
        self.proxy = proxy
        self.log = log
        self.sessions = sessions
        self.started_at = time.time()

    def proxies(self) -> list[dict[str, Any]]:
        from mcp_patchbay.presence.publish import snapshot

        data = snapshot(self.proxy, started_at=self.started_at, transport="http")
        data["client"] = None
        data["parent"] = {"pid": os.getppid(), "name": None}
        data["sessions"] = self.sessions() if self.sessions is not None else None
        return [data]

    def configs(self) -> dict[str, Path]:
        path = self.proxy.supervisor.config.path
        return {config_id(str(path)): path}
