"""What ``/metrics`` reports, in Prometheus' text format (the ``prometheus_client`` library).

Counted as they happen: tool calls by server, tool and outcome (``ok``, ``tool_error``, or
the proxy's error code, ``TIMEOUT``, ``SERVER_UNAVAILABLE``...) and their latency per
server and tool; HTTP requests in flight. Read at scrape time from the proxy itself (a
custom collector, so nothing can drift): every upstream's state and circuit breaker as
one-hot gauges, calls in flight per upstream, open 2025-era sessions, readiness and
draining, connections the HTTP edge refused by reason. Served on a listener of its own
(``gateway.metrics``), never the clients'. A registry of its own, so nothing of the library's process defaults leaks in
twice when tests build several gateways.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from mcp_patchbay.calls.policies import BreakerState
from mcp_patchbay.upstreams.upstream import State

if TYPE_CHECKING:
    from mcp_patchbay.session.proxy import Proxy
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
UPSTREAM_STATES = tuple(state.value for state in State)
"""Every state an upstream can be in (a state left out here would read as all zeros)."""
BREAKER_STATES = tuple(state.value for state in BreakerState)
REFUSAL_REASONS = ("header_too_large", "header_timeout", "body_timeout", "made_room", "too_many_connections")
"""Why the HTTP edge closes a connection (``gateway.edge``)."""
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
"""Seconds: a fast upstream answers in a millisecond or two; slow tools take tens of seconds."""


class Metrics:
    """The gateway's metrics over one proxy."""

    def __init__(
        self,
        proxy: Proxy,
        *,
        sessions: Callable[[], int],
        ready: Callable[[], bool],
        draining: Callable[[], bool],
        refusals: Mapping[str, int] | None = None,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.calls = Counter(
            "patchbay_tool_calls",
            "Tool calls by server, tool and outcome (ok, tool_error, or the proxy's error code).",
            ("server", "tool", "outcome"),
            registry=self.registry,
        )
        self.latency = Histogram(
            "patchbay_tool_call_duration_seconds",
            "Tool call latency through the gateway, by server and tool.",
            ("server", "tool"),
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(_ProxyCollector(proxy, sessions, ready, draining, refusals or {}))
        self.in_flight = 0
        """HTTP requests to /mcp being answered (GET streams excluded)."""

    def observe_call(self, server: str | None, tool: str | None, outcome: str, seconds: float) -> None:
        server_label, tool_label = server or "", tool or ""
        self.calls.labels(server_label, tool_label, outcome).inc()
        if server is not None:
            self.latency.labels(server_label, tool_label).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _ProxyCollector(Collector):
    def __init__(
        self,
        proxy: Proxy,
        sessions: Callable[[], int],
        ready: Callable[[], bool],
        draining: Callable[[], bool],
        refusals: Mapping[str, int],
    ) -> None:
        self._proxy = proxy
        self._refusals = refusals
        self._sessions = sessions
        self._ready = ready
        self._draining = draining

    def collect(self) -> Iterator[Metric]:
        states = GaugeMetricFamily(
            "patchbay_upstream_state", "1 for each upstream's current state.", labels=("server", "state")
        )
        breakers = GaugeMetricFamily(
            "patchbay_upstream_breaker_state",
            "1 for each upstream's circuit breaker state.",
            labels=("server", "state"),
        )
        in_flight = GaugeMetricFamily(
            "patchbay_upstream_calls_in_flight", "Calls in flight per upstream.", labels=("server",)
        )
        tools = GaugeMetricFamily("patchbay_upstream_tools", "Tools each upstream lists.", labels=("server",))
        for name, upstream in self._proxy.supervisor.upstreams.items():
            status = upstream.status()
            for state in UPSTREAM_STATES:
                states.add_metric((name, state), 1.0 if status["state"] == state else 0.0)
            for state in BREAKER_STATES:
                breakers.add_metric((name, state), 1.0 if status["breaker"] == state else 0.0)
            in_flight.add_metric((name,), float(status["in_flight"]))
            tools.add_metric((name,), float(status["tools"]))
        yield states
        yield breakers
        yield in_flight
        yield tools
        yield GaugeMetricFamily("patchbay_sessions", "Open 2025-era MCP sessions.", value=float(self._sessions()))
        yield GaugeMetricFamily(
            "patchbay_ready", "1 when the gateway is ready for traffic.", value=float(self._ready())
        )
        yield GaugeMetricFamily(
            "patchbay_draining", "1 while the gateway drains on SIGTERM.", value=float(self._draining())
        )
        refused = CounterMetricFamily(
            "patchbay_http_refused",
            "Connections closed at the HTTP edge, by reason (header_too_large, header_timeout, body_timeout, "
            "made_room, too_many_connections).",
            labels=("reason",),
        )
        for reason in REFUSAL_REASONS:
            refused.add_metric((reason,), float(self._refusals.get(reason, 0)))
        yield refused
