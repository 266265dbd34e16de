"""What a running proxy says of itself (``snapshot``), and the task that keeps its file current.

``publish`` runs beside the proxy (``cli.serve`` starts it): it looks every ``LOOK_EVERY``
seconds whether anything a reader shows has changed (the catalog is rebuilt on every change of
an upstream's state or lists, so its identity tells; and the client, once it has said who it
is), writes a snapshot when it has, at most once every ``MIN_GAP`` seconds, and removes the file
when the proxy stops. A look costs a comparison; a write builds the snapshot and hands it to a
worker thread.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from mcp_patchbay.presence import folder as files

if TYPE_CHECKING:
    from mcp_patchbay.session.proxy import Proxy
    from mcp_patchbay.upstreams.upstream import Upstream
__all__ = ["LOOK_EVERY", "MIN_GAP", "VERSION", "publish", "snapshot"]

logger = logging.getLogger(__name__)

VERSION = 1
LOOK_EVERY = 0.5
"""Seconds between two looks for a change (a comparison, nothing written)."""
MIN_GAP = 1.0
"""The least time between two writes: a burst of changes (servers starting) is one write."""
SCHEMA_CHARS = 4_000
"""An input schema longer than this as JSON is cut to its properties' names and descriptions
(search reads no more of a field: ``search.documents.FIELD_CHARS``)."""
DESCRIPTION_CHARS = 4_000


def _state(upstream: Upstream) -> str:
    return upstream.state.value


def _problem(upstream: Upstream, config_path: Path | None) -> str | None:
    """What is wrong, in a person's words (``check``'s), None while it serves or starts."""
    from mcp_patchbay.upstreams.availability import State
    from mcp_patchbay.upstreams.diagnosis import of_upstream

    if upstream.state in (State.STARTING, State.RESTARTING) and upstream.error is None:
        return None
    text = of_upstream(upstream, config_path).text()
    return text or None


def _trimmed_schema(schema: dict[str, Any]) -> dict[str, Any]:
    try:
        if len(json.dumps(schema, ensure_ascii=False)) <= SCHEMA_CHARS:
            return schema
    except (TypeError, ValueError):
        return {}
    properties = schema.get("properties")
    kept: dict[str, Any] = {}
    if isinstance(properties, dict):
        for key, value in list(properties.items())[:50]:  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
            said = value.get("description") if isinstance(value, dict) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            kept[str(key)] = {"description": said[:200]} if isinstance(said, str) else {}  # pyright: ignore[reportUnknownArgumentType]
    return {"type": "object", "properties": kept}


def _client(proxy: Proxy) -> dict[str, Any] | None:
    session = proxy.channel.session
    params = getattr(session, "client_params", None) if session is not None else None
    info = getattr(params, "client_info", None)
    if info is not None:
        return {"name": str(info.name), "version": str(info.version), "title": getattr(info, "title", None)}
    name = proxy.lane.client_name
    return {"name": name, "version": None, "title": None} if name else None


def _parent() -> dict[str, Any]:
    pid = os.getppid()
    name: str | None = None
    if sys.platform.startswith("linux"):
        try:
            name = Path(f"/proc/{pid}/comm").read_text(encoding="utf-8", errors="replace").strip() or None
        except OSError:
            name = None
    return {"pid": pid, "name": name}


def snapshot(proxy: Proxy, *, started_at: float, transport: str = "stdio") -> dict[str, Any]:
    """The proxy as the page shows it (the module docstring of ``presence`` has the shape)."""
    from mcp_patchbay.catalog import apps
    from mcp_patchbay.session.exposure import described_servers

    supervisor = proxy.supervisor
    described = described_servers(supervisor.upstreams)
    config = supervisor.config
    held = supervisor.status.held
    servers: list[dict[str, Any]] = []
    for entry in config.servers:
        upstream = supervisor.upstreams.get(entry.name)
        spec = entry.spec
        tool_filter = spec.tools if spec is not None else None
        listed = upstream.listing.tools if upstream is not None else ()
        servers.append(
            {
                "name": entry.name,
                "state": _state(upstream) if upstream is not None else "starting",
                "transport": spec.transport if spec is not None else "-",
                "tools": len(listed),
                "problem": _problem(upstream, config.path) if upstream is not None else None,
                "restarts": upstream.restarts if upstream is not None else 0,
                "described": described.get(entry.name),
                "remote": spec is not None and spec.transport != "stdio",
                "disabled": bool(spec is not None and spec.disabled),
                "held": sorted(name for kind, name in held.get(entry.name, ()) if kind == "tool"),
                "tools_off": sorted(
                    tool.name for tool in listed if tool_filter is not None and not tool_filter.permits(tool.name)
                ),
            }
        )
    catalog = supervisor.catalog
    tools: list[dict[str, Any]] = []
    for tool in catalog.tools:
        if apps.app_only(tool):
            continue
        where = catalog.by_exposed.get(tool.name)
        tools.append(
            {
                "name": tool.name,
                "server": where.server if where is not None else None,
                "tool": where.upstream_name if where is not None else tool.name,
                "title": tool.title or (tool.annotations.title if tool.annotations is not None else None),
                "description": (tool.description or "")[:DESCRIPTION_CHARS],
                "input_schema": _trimmed_schema(dict(tool.input_schema)),
            }
        )
    return {
        "version": VERSION,
        "pid": os.getpid(),
        "started_at": started_at,
        "updated_at": time.time(),
        "transport": transport,
        "client": _client(proxy),
        "parent": _parent(),
        "config": str(config.path),
        "profile": config.profile,
        "servers": servers,
        "tools": tools,
    }


async def publish(proxy: Proxy, where: Path | None = None, *, transport: str = "stdio") -> None:
    """Keep this proxy's presence file current until cancelled, then remove it. Never raises for
    a file it cannot write (said once in the log): the proxy serves whatever happens here."""
    started_at = time.time()
    seen: tuple[object, object] | None = None
    last_write = float("-inf")
    warned = False
    pid = os.getpid()
    try:
        while True:
            now = (proxy.supervisor.catalog, _client(proxy) is not None)
            if now != seen and time.monotonic() - last_write >= MIN_GAP:
                seen, last_write = now, time.monotonic()
                data = snapshot(proxy, started_at=started_at, transport=transport)
                try:
                    await anyio.to_thread.run_sync(files.write, data, where)
                except OSError as exc:
                    if not warned:
                        logger.warning("could not write this proxy's presence file for mcp-patchbay ui: %s", exc)
                        warned = True
            await anyio.sleep(LOOK_EVERY)
    finally:
        files.remove(pid, where)
