"""The error registry: what went wrong, where, how often.

Per server and per tool: calls, errors counted by code, the last error and a short
list of recent ones, and restarts; per server, how many tools and prompts the proxy holds back
until the user approves them (``held_tools``, ``held_prompts``: ``trust``), and what it serves although the scan
flagged it (``flagged``: ``patchbay.scan: "warn"``, each with the scan's sentences). Served to the client as the ``patchbay://status``
resource (and the optional status tool), printed by ``mcp-patchbay check``.

Each error remembers who made the call (``caller``: the gateway's member, None on stdio).
A member restricted by the gateway's access rules (``Viewer``) sees:

- its own errors whole, on servers and tools it may use or on no server at all (a name it
  got wrong);
- other members' errors on servers it may use as health only: when, which code, which
  server, and the tool if it may use it. Not the name they called nor the message: the
  called name and the upstream's text can carry the other member's data (a path, a
  query), and an error on a shared server is all the health a member needs;
- nothing of servers or tools it may not use, and none of the names others got wrong.

Everyone else (stdio, an open gateway, a member who may use everything) sees it all.

This module is the one owner of the status: the registry, what a reader may see of it
(``visible``), and its three forms: the resource (``STATUS_URI``, read in ``session.passthrough``),
the optional tool (``STATUS_TOOL``, answered on the tool path) and the text ``check`` prints
(``cli``, from the same registry).
"""

from __future__ import annotations

import json
import time
from collections import Counter, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import mcp_types as types

from mcp_patchbay.catalog.restriction import Permits
from mcp_patchbay.errors.tree import PatchbayError

if TYPE_CHECKING:
    from mcp_patchbay.upstreams.upstream import Upstream
STATUS_URI = "patchbay://status"
"""The status as a resource, always listed (readable even while servers start)."""
STATUS_TOOL = "patchbay__status"
"""The status as a tool, listed with ``"status_tool": true``."""

RECENT = 20

CALLERS = 1024
"""Members whose unresolved-name counts are kept (the oldest is forgotten past this)."""

_HEALTH = ("at", "code", "server", "tool")
"""What a member is shown of another member's error on a server it may use."""


@dataclass(frozen=True, slots=True)
class Viewer:
    """Who reads the status: what it may use, and who it is (to know its own errors)."""

    access: Permits
    caller: str | None


@dataclass(frozen=True, slots=True)
class _Error:
    entry: dict[str, Any]
    caller: str | None


@dataclass
class _Counts:
    calls: int = 0
    errors: Counter[str] = field(default_factory=lambda: Counter[str]())
    last_error: _Error | None = None

    def as_dict(self, viewer: Viewer | None) -> dict[str, Any]:
        data: dict[str, Any] = {"calls": self.calls, "errors": dict(self.errors)}
        shown = _shown(self.last_error, viewer) if self.last_error is not None else None
        if shown is not None:
            data["last_error"] = shown
        return data


@dataclass
class StatusRegistry:
    servers: dict[str, _Counts] = field(default_factory=lambda: dict[str, _Counts]())
    tools: dict[tuple[str, str], _Counts] = field(default_factory=lambda: dict[tuple[str, str], _Counts]())
    recent: deque[_Error] = field(default_factory=lambda: deque[_Error](maxlen=RECENT))
    unresolved: Counter[str] = field(default_factory=lambda: Counter[str]())
    unresolved_by: dict[str, Counter[str]] = field(default_factory=lambda: dict[str, Counter[str]]())
    """Per member, its own unresolved names by code (at most ``CALLERS`` members)."""
    held: dict[str, list[tuple[str, str]]] = field(default_factory=lambda: dict[str, list[tuple[str, str]]]())
    """Per server, what the proxy holds back until the user approves it (``trust``): (kind, name)."""
    flagged: dict[str, list[tuple[str, str, tuple[str, ...]]]] = field(
        default_factory=lambda: dict[str, list[tuple[str, str, tuple[str, ...]]]]()
    )
    """Per server, what it serves although the scan flagged it (``patchbay.scan: "warn"``): (kind,
    name, the findings' sentences: what was found and where)."""

    def record_call(self, server: str, tool: str) -> None:
        self._server(server).calls += 1
        self._tool(server, tool).calls += 1

    def record_error(
        self, error: PatchbayError, *, called: str, server: str | None, tool: str | None, caller: str | None = None
    ) -> None:
        """``caller``: the member whose call failed (the gateway's identity), None off the gateway."""
        entry = {
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "code": error.code.value,
            "called": called,
            "server": server,
            "tool": tool,
            "message": error.message,
        }
        recorded = _Error(entry, caller)
        self.recent.append(recorded)
        if server is None:
            self.unresolved[error.code.value] += 1
            if caller is not None:
                self._unresolved_of(caller)[error.code.value] += 1
            return
        for counts in (self._server(server), *((self._tool(server, tool),) if tool else ())):
            counts.errors[error.code.value] += 1
            counts.last_error = recorded

    def _unresolved_of(self, caller: str) -> Counter[str]:
        counts = self.unresolved_by.pop(caller, None)  # re-inserted last: the oldest goes first
        if counts is None:
            counts = Counter[str]()
            if len(self.unresolved_by) >= CALLERS:
                del self.unresolved_by[next(iter(self.unresolved_by))]
        self.unresolved_by[caller] = counts
        return counts

    def _server(self, server: str) -> _Counts:
        counts = self.servers.get(server)
        if counts is None:
            counts = self.servers[server] = _Counts()
        return counts

    def _tool(self, server: str, tool: str) -> _Counts:
        counts = self.tools.get((server, tool))
        if counts is None:
            counts = self.tools[(server, tool)] = _Counts()
        return counts

    def snapshot(self, upstream_status: dict[str, dict[str, Any]], viewer: Viewer | None = None) -> dict[str, Any]:
        """The status of the servers in ``upstream_status`` (those the reader may use), as
        ``viewer`` may see it (None: everything; see the module docstring)."""
        servers: dict[str, Any] = {}
        for name, health in upstream_status.items():
            if viewer is not None and not viewer.access.permits_server(name):
                continue
            counts = self.servers.get(name, _Counts())
            tools = {
                t: c.as_dict(viewer)
                for (s, t), c in self.tools.items()
                if s == name and (viewer is None or viewer.access.permits(s, t))
            }
            held = self.held.get(name, ())
            servers[name] = {
                **health,
                **counts.as_dict(viewer),
                "held_tools": sum(
                    1 for k, t in held if k == "tool" and (viewer is None or viewer.access.permits(name, t))
                ),
                "held_prompts": sum(1 for k, _ in held if k == "prompt"),
                "flagged": [
                    {"kind": k, "name": n, "findings": list(found)}
                    for k, n, found in self.flagged.get(name, ())
                    if k != "tool" or viewer is None or viewer.access.permits(name, n)
                ],
                "tool_stats": tools,
            }
        if viewer is None:
            unresolved = dict(self.unresolved)
        else:
            unresolved = dict(self.unresolved_by.get(viewer.caller, {})) if viewer.caller is not None else {}
        recent = [shown for error in self.recent if (shown := _shown(error, viewer)) is not None]
        return {
            "running": _running(servers),
            "servers": servers,
            "unresolved_names": unresolved,
            "recent_errors": recent,
        }


def _running(servers: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    """How many of the servers shown run now, and how many do not by the config's choice: lazy
    and not needed yet (``not_started``), stopped after ``idle_stop`` (``stopped_idle``)."""
    states = Counter(str(health.get("state")) for health in servers.values())
    return {
        "running": sum(1 for health in servers.values() if health.get("running")),
        "not_started": states["not_started"],
        "stopped_idle": states["stopped_idle"],
    }


def _shown(error: _Error, viewer: Viewer | None) -> dict[str, Any] | None:
    """An error as ``viewer`` may see it: whole, as health only, or not at all (None)."""
    entry = error.entry
    if viewer is None:
        return dict(entry)
    server, tool = entry["server"], entry["tool"]
    if server is not None and not viewer.access.permits_server(server):
        return None
    own = viewer.caller is not None and error.caller == viewer.caller
    if server is None and not own:
        return None  # a name another member got wrong: theirs alone
    shown = dict(entry) if own else {key: entry[key] for key in _HEALTH}
    if server is not None and tool is not None and not viewer.access.permits(server, tool):
        shown["tool"] = None
    return shown


def upstream_health(upstream: Upstream) -> dict[str, Any]:
    """One server's health: its state (``not_started``: lazy, not needed yet; ``stopped_idle``:
    stopped after ``idle_stop``), whether it runs now, when it starts (``eager``/``lazy``), its
    tools, restarts, breaker and calls in flight; and what it said of itself at ``initialize``
    (``title``, ``version``, ``website_url``, ``icons``, the ``extensions`` it declared), once known."""
    first = upstream.first_ready_after
    info, capabilities = upstream.server_info, upstream.capabilities
    return {
        "title": info.title if info is not None else None,
        "version": info.version if info is not None else None,
        "website_url": info.website_url if info is not None else None,
        "icons": [icon.model_dump(by_alias=True, mode="json", exclude_none=True) for icon in info.icons]
        if info is not None and info.icons
        else None,
        "extensions": dict(capabilities.extensions) if capabilities is not None and capabilities.extensions else None,
        "state": upstream.state.value,
        "running": upstream.running,
        "start": "lazy" if upstream.demand.lazy else "eager",
        "transport": upstream.transport,
        "tools": len(upstream.listing.tools),
        "restarts": upstream.restarts,
        "reason": upstream.reason() or None,
        "breaker": upstream.breaker.state.value,
        "in_flight": upstream.bulkhead.in_flight,
        "ready_after_ms": None if first is None else round(first * 1000),
    }


def visible(
    registry: StatusRegistry,
    health: Mapping[str, dict[str, Any]],
    access: Permits | None,
    caller: str | None,
) -> dict[str, Any]:
    """The status a reader sees: ``health`` holds the servers it may use (each ``Upstream.status()``);
    ``access`` None is a reader who may use everything, who sees it all."""
    return registry.snapshot(dict(health), None if access is None else Viewer(access, caller))


def as_text(snapshot: dict[str, Any]) -> str:
    return json.dumps(snapshot, indent=1)


def status_resource() -> types.Resource:
    return types.Resource(
        uri=STATUS_URI,
        name="patchbay-status",
        title="mcp-patchbay status",
        description="Health of every upstream server: state, errors by code, restarts, breaker state.",
        mime_type="application/json",
    )


def status_tool() -> types.Tool:
    return types.Tool(
        name=STATUS_TOOL,
        description="Health of the proxy's upstream servers: state, errors by code, restarts. Takes no arguments.",
        input_schema={"type": "object", "properties": {}},
        annotations=types.ToolAnnotations(read_only_hint=True),
    )


def config_problem_text(problem: str) -> str:
    """What the model is told while the config cannot be used (every call, and the one tool listed)."""
    from mcp_patchbay.errors.tree import clip

    return clip(
        f"No tools are available: the patchbay proxy's config file has a mistake, so none of its servers were "
        f"started ({clip(problem, 240)}). Tell the user to fix the file; 'mcp-patchbay check' shows every "
        "mistake. The tools come back by themselves once the file is fixed and saved."
    )


def config_problem_tool(problem: str) -> types.Tool:
    """The only tool listed while the config cannot be used: its description says why."""
    return types.Tool(
        name=STATUS_TOOL,
        description=config_problem_text(problem),
        input_schema={"type": "object", "properties": {}},
        annotations=types.ToolAnnotations(read_only_hint=True),
    )


def tool_result(snapshot: dict[str, Any]) -> dict[str, Any]:
    """The status tool's result, as JSON values."""
    return {"content": [{"type": "text", "text": as_text(snapshot)}], "structuredContent": snapshot}
