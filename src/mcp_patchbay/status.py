"""The error registry: what went wrong, where, how often.

Per server and per tool: calls, errors counted by code, the last error and a short
list of recent ones, and restarts. Served to the client as the ``patchbay://status``
resource (and the optional status tool), printed by ``mcp-patchbay check``.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

from mcp_patchbay.errors import PatchbayError

RECENT = 20


@dataclass
class _Counts:
    calls: int = 0
    errors: Counter[str] = field(default_factory=lambda: Counter[str]())
    last_error: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"calls": self.calls, "errors": dict(self.errors)}
        if self.last_error is not None:
            data["last_error"] = self.last_error
        return data


@dataclass
class StatusRegistry:
    servers: dict[str, _Counts] = field(default_factory=lambda: dict[str, _Counts]())
    tools: dict[tuple[str, str], _Counts] = field(default_factory=lambda: dict[tuple[str, str], _Counts]())
    recent: deque[dict[str, Any]] = field(default_factory=lambda: deque[dict[str, Any]](maxlen=RECENT))
    unresolved: Counter[str] = field(default_factory=lambda: Counter[str]())

    def record_call(self, server: str, tool: str) -> None:
        self._server(server).calls += 1
        self._tool(server, tool).calls += 1

    def record_error(self, error: PatchbayError, *, called: str, server: str | None, tool: str | None) -> None:
        entry = {
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "code": error.code.value,
            "called": called,
            "server": server,
            "tool": tool,
            "message": error.message,
        }
        self.recent.append(entry)
        if server is None:
            self.unresolved[error.code.value] += 1
            return
        for counts in (self._server(server), *((self._tool(server, tool),) if tool else ())):
            counts.errors[error.code.value] += 1
            counts.last_error = entry

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

    def snapshot(self, upstream_status: dict[str, dict[str, Any]]) -> dict[str, Any]:
        servers: dict[str, Any] = {}
        for name, health in upstream_status.items():
            counts = self.servers.get(name, _Counts())
            tools = {t: c.as_dict() for (s, t), c in self.tools.items() if s == name}
            servers[name] = {**health, **counts.as_dict(), "tool_stats": tools}
        return {"servers": servers, "unresolved_names": dict(self.unresolved), "recent_errors": list(self.recent)}
