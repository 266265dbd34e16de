"""What the page shows, as plain values for its templates: proxies and their servers, the log's
rows, held definitions. Pure: snapshots, statistics and rows in, dicts out (no I/O)."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from typing import Any, cast

NONE = "\u2013"
"""What a cell shows for no value (an en dash)."""

__all__ = ["NONE", "STATES", "ago", "config_id", "log_row", "milliseconds", "proxy_view", "when"]

STATES: dict[str, tuple[str, str]] = {
    "ready": ("running", "ok"),
    "starting": ("starting", "wait"),
    "restarting": ("restarting", "wait"),
    "failed": ("failed", "bad"),
    "invalid": ("config error", "bad"),
    "needs_sign_in": ("needs sign-in", "warn"),
    "not_started": ("not started", "rest"),
    "stopped_idle": ("stopped idle", "rest"),
    "disabled": ("off", "rest"),
    "stopped": ("stopped", "rest"),
}
"""An upstream's state to the words the page uses and the style class that colours it."""


def config_id(path: str) -> str:
    """A short stable id for a config file in forms and addresses (the page maps it back)."""
    return hashlib.sha256(path.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def when(at: float | None) -> str:
    if not at:
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def ago(at: float | None, now: float) -> str:
    if not at:
        return ""
    seconds = max(0, int(now - at))
    if seconds < 60:
        return f"{seconds} s ago"
    if seconds < 3600:
        return f"{seconds // 60} min ago"
    if seconds < 86400:
        return f"{seconds // 3600} h {seconds % 3600 // 60} min ago"
    return f"{seconds // 86400} d ago"


def milliseconds(value: float | None) -> str:
    if value is None:
        return NONE
    return f"{value:.0f} ms" if value >= 10 else f"{value:.1f} ms"


def _object(value: object) -> dict[str, Any]:
    return cast("dict[str, Any]", value) if isinstance(value, dict) else {}


def _client_title(snapshot: Mapping[str, Any]) -> str:
    client = _object(snapshot.get("client"))
    name = client.get("title") or client.get("name")
    if snapshot.get("transport") == "http":
        return "HTTP gateway (this replica)"
    if not name:
        parent = _object(snapshot.get("parent")).get("name")
        return f"a client not yet identified ({parent})" if parent else "a client not yet identified"
    version = client.get("version")
    return f"{name} {version}" if version else str(name)


def stats_of(stats: Mapping[tuple[str, str], Any], pid: object) -> dict[str, Any]:
    """The log's counts of the proxy of process ``pid``, by server: its rows are labelled
    ``stdio pid N`` or ``gateway HOST:PORT pid N`` (``activity.wiring``)."""
    mine = f" pid {pid}"
    return {server: counted for (proxy, server), counted in stats.items() if proxy.endswith(mine)}


def proxy_view(snapshot: Mapping[str, Any], stats: Mapping[tuple[str, str], Any], now: float) -> dict[str, Any]:
    """One proxy: who launched it, since when, its config, and each server's row (calls, errors
    and times from the log: this proxy's own)."""
    servers: list[dict[str, Any]] = []
    stats_here = stats_of(stats, snapshot.get("pid"))
    for server in snapshot.get("servers") or ():
        state = str(server.get("state") or "starting")
        label, style = STATES.get(state, (state.replace("_", " "), "wait"))
        counted = stats_here.get(str(server.get("name")))
        servers.append(
            {
                "name": server.get("name"),
                "state": state,
                "label": label,
                "style": style,
                "transport": server.get("transport"),
                "tools": server.get("tools", 0),
                "problem": server.get("problem"),
                "restarts": server.get("restarts", 0),
                "held": len(server.get("held") or ()),
                "off": bool(server.get("disabled")) or state == "disabled",
                "can_sign_in": state == "needs_sign_in" and bool(server.get("remote")),
                "calls": getattr(counted, "calls", 0) if counted is not None else 0,
                "errors": getattr(counted, "errors", 0) if counted is not None else 0,
                "p50": milliseconds(getattr(counted, "p50_ms", None)) if counted is not None else NONE,
                "p95": milliseconds(getattr(counted, "p95_ms", None)) if counted is not None else NONE,
            }
        )
    parent = _object(snapshot.get("parent"))
    client = _object(snapshot.get("client"))
    path = str(snapshot.get("config") or "")
    return {
        "pid": snapshot.get("pid"),
        "title": _client_title(snapshot),
        "client": client.get("name"),
        "parent": parent.get("name"),
        "parent_pid": parent.get("pid"),
        "since": when(snapshot.get("started_at")),
        "since_ago": ago(snapshot.get("started_at"), now),
        "config": path,
        "config_id": config_id(path),
        "profile": snapshot.get("profile"),
        "transport": snapshot.get("transport"),
        "sessions": snapshot.get("sessions"),
        "servers": servers,
        "problems": sum(1 for s in servers if s["style"] == "bad" or s["state"] == "needs_sign_in"),
        "tool_count": len(snapshot.get("tools") or ()),
    }


def log_row(row: Any, now: float) -> dict[str, Any]:
    outcome = getattr(row, "outcome", None)
    code = getattr(row, "error_code", None)
    failed = bool(code) or outcome not in (None, "", "ok")
    return {
        "id": getattr(row, "id", None),
        "at": when(getattr(row, "at", None)),
        "ago": ago(getattr(row, "at", None), now),
        "kind": str(getattr(row, "kind", "") or "").replace("_", " "),
        "proxy": getattr(row, "proxy", None),
        "client": getattr(row, "client", None),
        "server": getattr(row, "server", None),
        "tool": getattr(row, "exposed", None) or getattr(row, "upstream", None),
        "duration": milliseconds(getattr(row, "duration_ms", None)),
        "outcome": code or outcome or "",
        "failed": failed,
        "detail": getattr(row, "detail", None),
    }


def newest_id(rows: Sequence[Any]) -> int:
    return max((int(getattr(row, "id", 0) or 0) for row in rows), default=0)
