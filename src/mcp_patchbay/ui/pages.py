"""The page's views (GET): the overview of proxies and servers, held definitions, tools, the log.

Each reads the sources afresh: the presence files (a few small JSON files), one statistics query
and one page of the log, and the pins file while something may be held. The log's new rows are
fetched by id (``log_new``) every second by htmx; with scripts off the page has a Refresh link.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from mcp_patchbay.ui.sources import config_servers
from mcp_patchbay.ui.views import STATES, config_id, log_row, newest_id, proxy_view

if TYPE_CHECKING:
    from mcp_patchbay.ui.app import Ui
__all__ = ["held", "log", "log_new", "overview", "tools"]

LOG_ROWS = 100
"""Rows the log page shows when it loads."""
OVERVIEW_LOG_ROWS = 8


def _held(ui: Ui, configs: dict[str, Path], *, served: bool = False) -> tuple[list[Any], str | None]:
    """What is held (``served``: what is served although the scan flagged it), and why the pins
    file could not be read (else None)."""
    from mcp_patchbay.trust.store import PinsUnreadable
    from mcp_patchbay.ui.held import flagged_items, held_items

    wanted = [(path, [name for name, _ in config_servers(path)]) for path in configs.values()]
    try:
        return (flagged_items(wanted) if served else held_items(wanted)), None
    except PinsUnreadable as exc:
        return [], str(exc)
    except OSError as exc:
        return [], f"the pins file could not be read: {exc}"


async def overview(ui: Ui, request: Request) -> Response:
    now = time.time()
    snapshots = ui.sources.proxies()
    stats = ui.sources.log.stats(now)
    proxies = [proxy_view(snapshot, stats, now) for snapshot in snapshots]
    configs = ui.sources.configs()
    running = {p["config_id"] for p in proxies}
    idle_configs = [
        {
            "id": cid,
            "path": str(path),
            "servers": [
                {"name": name, "off": entry.get("disabled") is True, "remote": "url" in entry}
                for name, entry in config_servers(path)
            ],
        }
        for cid, path in configs.items()
        if cid not in running
    ]
    held_items, held_problem = _held(ui, configs)
    rows = [log_row(row, now) for row in ui.sources.log.rows(limit=OVERVIEW_LOG_ROWS)]
    return ui.render(
        request,
        "overview.html",
        page="overview",
        title="Overview",
        proxies=proxies,
        idle_configs=idle_configs,
        held_count=len(held_items),
        held_problem=held_problem,
        rows=rows,
        log_available=ui.sources.log.available,
        log_why_not=ui.sources.log.why_not,
    )


async def held(ui: Ui, request: Request) -> Response:
    configs = ui.sources.configs()
    items, problem = _held(ui, configs)
    shown = [
        {
            "config": str(item.config),
            "config_id": config_id(str(item.config)),
            "server": item.server,
            "kind": item.kind,
            "name": item.name,
            "why": item.why,
            "first_seen": time.strftime("%Y-%m-%d %H:%M", time.localtime(item.first_seen)),
            "diff": [_diff_line(line) for line in item.diff.splitlines()],
            "findings": item.findings,
            "fingerprint": item.fingerprint,
            "short": item.fingerprint[:8],
            "command": item.command,
        }
        for item in items
    ]
    served, _ = _held(ui, configs, served=True) if problem is None else ([], None)
    flagged = [
        {
            "config": str(item.config),
            "server": item.server,
            "kind": item.kind,
            "name": item.name,
            "since": time.strftime("%Y-%m-%d %H:%M", time.localtime(item.since)),
            "findings": item.findings,
            "short": item.fingerprint[:8],
        }
        for item in served
    ]
    return ui.render(
        request, "held.html", page="held", title="Held for approval", items=shown, flagged=flagged, problem=problem
    )


def _diff_line(line: str) -> dict[str, str]:
    from mcp_patchbay.trust.wording import printable

    if line.startswith(("+++", "---")):
        style = "head"
    elif line.startswith("+"):
        style = "add"
    elif line.startswith("-"):
        style = "del"
    elif line.startswith("@@"):
        style = "hunk"
    else:
        style = "same"
    return {"style": style, "text": printable(line, 2000)}


async def tools(ui: Ui, request: Request) -> Response:
    snapshots = ui.sources.proxies()
    wanted = request.query_params.get("proxy", "")
    chosen = next((s for s in snapshots if str(s.get("pid")) == wanted), snapshots[0] if snapshots else None)
    query = request.query_params.get("q", "").strip()[:200]
    listed: list[dict[str, Any]] = []
    servers: list[dict[str, Any]] = []
    if chosen is not None:
        by_name = {str(t.get("name")): t for t in chosen.get("tools") or ()}
        if query:
            names = await ui.search.search(chosen, query)
            listed = [by_name[name] for name in names if name in by_name]
        else:
            listed = list(by_name.values())
        for server in chosen.get("servers") or ():
            state = str(server.get("state"))
            servers.append(
                {
                    "name": server.get("name"),
                    "label": STATES.get(state, (state, ""))[0],
                    "off": server.get("tools_off") or [],
                    "held": server.get("held") or [],
                }
            )
    proxies = [{"pid": s.get("pid"), "title": proxy_view(s, {}, time.time())["title"]} for s in snapshots]
    values: dict[str, Any] = {
        "page": "tools",
        "title": "Tools",
        "proxies": proxies,
        "chosen": chosen.get("pid") if chosen is not None else None,
        "config_id": config_id(str(chosen.get("config"))) if chosen is not None else "",
        "query": query,
        "tools": listed,
        "total": len(chosen.get("tools") or ()) if chosen is not None else 0,
        "servers": servers,
    }
    if request.headers.get("hx-request") and request.headers.get("hx-target") == "tool-results":
        return ui.render(request, "_tool_results.html", **values)
    return ui.render(request, "tools.html", **values)


def _log_filters(request: Request) -> dict[str, Any]:
    params = request.query_params
    return {
        "server": params.get("server", "").strip()[:200],
        "client": params.get("client", "").strip()[:200],
        "errors": params.get("errors") == "1",
    }


async def log(ui: Ui, request: Request) -> Response:
    now = time.time()
    filters = _log_filters(request)
    rows = ui.sources.log.rows(
        server=filters["server"], client=filters["client"], errors_only=filters["errors"], limit=LOG_ROWS
    )
    return ui.render(
        request,
        "log.html",
        page="log",
        title="Activity log",
        rows=[log_row(row, now) for row in rows],
        after=newest_id(rows),
        filters=filters,
        log_available=ui.sources.log.available,
        log_why_not=ui.sources.log.why_not,
    )


async def log_new(ui: Ui, request: Request) -> Response:
    """htmx's poll: the rows after ``after`` (as an out-of-band swap into the table) and the
    poller itself, now after the newest."""
    now = time.time()
    filters = _log_filters(request)
    try:
        after = max(0, int(request.query_params.get("after", "0")))
    except ValueError:
        after = 0
    rows = ui.sources.log.rows(
        server=filters["server"], client=filters["client"], errors_only=filters["errors"], after_id=after, limit=200
    )
    if not request.headers.get("hx-request"):
        return HTMLResponse("", status_code=204)
    return ui.render(
        request,
        "_log_new.html",
        rows=[log_row(row, now) for row in rows],
        after=max(after, newest_id(rows)),
        filters=filters,
    )
