"""Load with faults: many concurrent callers, several flaky upstreams, one proxy.

    scripts/load [--calls 20000] [--concurrency 100] [--upstreams 5] [--seed 1] [--runs 2] [--stdio]

The proxy (``mcp_patchbay.server.Proxy``) runs in this process. Its upstreams are
SDK ``Server``s, in memory behind a ``Connector`` (the default) or, with
``--stdio``, real subprocesses (this script again, with ``--serve NAME``). The
client side is a raw JSON-RPC session over in-memory streams, so that every
response on the wire is seen, duplicates and strays included.

Every call carries a unique ``id`` in its arguments that the upstream echoes
back. The calls, and the fault each one asks for, are drawn from a seeded RNG:

- ``work``: ``ok``, ``raise`` (an exception: a JSON-RPC error), ``rpc_error``
  (an MCP internal error), ``bad_params`` (an MCP invalid-params error),
  ``is_error`` (the tool's own ``isError`` result), ``big`` (a text larger than
  ``max_result_bytes``: truncated), ``big_structured`` (structured content
  larger than it: ``RESULT_TOO_LARGE``), ``crash`` (the upstream's connection
  dies mid-call; it is restarted);
- ``slow``: sleeps well past its 0.2 s per-tool timeout; or, as ``cancel``, the
  caller gives up after 50 ms and sends ``notifications/cancelled``;
- ``lookup``: read-only, so retried by the proxy; fails at random upstream side.

Invariants (exit status 1 if any fails):

- every request gets exactly one response: no request unanswered, no response
  twice, no response to an id never sent (a request the caller cancelled gets
  none, as MCP asks, or the one that was already on its way);
- every response is the upstream's own result for that very call (its echoed id
  and server match) or an ``isError`` result whose ``structuredContent.error``
  has a ``code`` in the set allowed for that fault (timing-dependent faults
  such as a crash that takes other calls down with it are only ever asserted
  as "a code in an allowed set");
- no non-retryable call reaches an upstream twice; every success reached it;
- once all calls are answered, no upstream has a call in flight, and (in memory)
  no upstream handler is still running: timed-out and cancelled calls were
  cancelled upstream too;
- memory settles: RSS after the second (identical) run is not materially higher
  than after the first.

Prints calls/s, p50/p99 latency, the outcome mix by code and RSS (VmRSS of this
process: proxy and client; in ``--stdio`` mode not the upstream processes).
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import math
import os
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError
from mcp.shared.memory import create_client_server_memory_streams
from mcp.shared.message import SessionMessage

from mcp_patchbay.config import Config, parse_config
from mcp_patchbay.server import Proxy

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the test rig lives in tests/
from tests.harness import MemoryUpstreams

SCRIPT = Path(__file__).resolve()
ROOT = SCRIPT.parent.parent

SLOW_TIMEOUT = 0.2
"""The per-tool timeout of ``slow``; every other tool has ``Options.timeout``."""
BIG_TEXT = 256 * 1024
MAX_RESULT_BYTES = 64 * 1024
LOOKUP_FAILURE = 0.25
CANCEL_AFTER = 0.05
"""Seconds after which a ``cancel`` call is cancelled by its caller (well before ``SLOW_TIMEOUT``)."""
CANCEL_GRACE = 0.5
"""Seconds a caller still listens after cancelling, for an answer that was already on its way."""
"""How often ``lookup`` fails upstream side (each attempt, so retries may heal it)."""

# What each fault may end in. A success is "ok" (or "ok_truncated", or "upstream_is_error"
# for the tool's own isError result); an error is its code. COLLATERAL is what any call may
# meet through no fault of its own: a crash of its upstream taking in-flight calls with it,
# the restart after it, the breaker opened by a run of failures, a full queue.
COLLATERAL = frozenset({"CONNECTION_LOST", "SERVER_STARTING", "CIRCUIT_OPEN", "BULKHEAD_FULL"})
EXPECTED: dict[str, frozenset[str]] = {
    "ok": frozenset({"ok"}),
    "raise": frozenset({"SERVER_ERROR"}),
    "rpc_error": frozenset({"SERVER_ERROR"}),
    "bad_params": frozenset({"INVALID_ARGUMENTS"}),
    "is_error": frozenset({"upstream_is_error"}),
    "big": frozenset({"ok_truncated"}),
    "big_structured": frozenset({"RESULT_TOO_LARGE"}),
    "crash": frozenset({"CONNECTION_LOST"}),
    "slow": frozenset({"TIMEOUT"}),
    "cancel": frozenset({"cancelled", "TIMEOUT"}),
    "lookup": frozenset({"ok", "SERVER_ERROR"}),
}
SUCCESSES = frozenset({"ok", "ok_truncated", "upstream_is_error"})

# Weights of the faults a call asks for: ~14% of calls fail on purpose, crashes are rare.
WORK_FAULTS: dict[str, float] = {
    "ok": 0.78,
    "raise": 0.02,
    "rpc_error": 0.02,
    "bad_params": 0.02,
    "is_error": 0.03,
    "big": 0.02,
    "big_structured": 0.01,
    "crash": 0.0015,
}
TOOL_WEIGHTS: dict[str, float] = {"work": 0.86, "slow": 0.04, "lookup": 0.10}
CANCEL_SHARE = 0.4
"""Of the calls to ``slow``, the share the caller cancels."""

ARGS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"id": {"type": "string"}, "fault": {"type": "string"}},
    "required": ["id"],
}


# --- the upstreams ---------------------------------------------------------------------


class Ledger:
    """Which call ids reached which upstream, how often (in memory, or appended to a file)."""

    def __init__(self, path: Path | None = None) -> None:
        self.counts: Counter[str] = Counter()
        self.running = 0
        """Handlers running now (in memory only)."""
        self._file = path.open("a", encoding="utf-8", buffering=1) if path is not None else None

    def arrived(self, server: str, call_id: str) -> None:
        if self._file is not None:
            self._file.write(f"{server} {call_id}\n")
        else:
            self.counts[f"{server} {call_id}"] += 1


def build_upstream(name: str, seed: int, ledger: Ledger, crash: Callable[[], None]) -> Server[Any]:
    """An SDK server with the three tools; ``crash`` ends its connection as a dying process would."""
    rng = random.Random(f"{seed}-{name}")
    tools = [
        types.Tool(name="work", description="Echoes its id, or fails as asked.", input_schema=ARGS_SCHEMA),
        types.Tool(name="slow", description="Takes far too long.", input_schema=ARGS_SCHEMA),
        types.Tool(
            name="lookup",
            description="Echoes its id; fails now and then.",
            input_schema=ARGS_SCHEMA,
            annotations=types.ToolAnnotations(read_only_hint=True),
        ),
    ]

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    def echo(call_id: str, note: str = "") -> types.CallToolResult:
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=f"{call_id} {name}{note}")],
            structured_content={"id": call_id, "server": name},
        )

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> Any:
        ledger.running += 1
        try:
            return await run_tool(params)
        finally:
            ledger.running -= 1

    async def run_tool(params: types.CallToolRequestParams) -> Any:
        args = params.arguments or {}
        call_id = str(args.get("id"))
        ledger.arrived(name, call_id)
        if params.name == "slow":
            await anyio.sleep(30)
            return echo(call_id, " (late)")
        if params.name == "lookup":
            if rng.random() < LOOKUP_FAILURE:
                raise RuntimeError(f"lookup {call_id} failed")
            return echo(call_id)
        fault = args.get("fault", "ok")
        if fault == "raise":
            raise RuntimeError(f"tool failed for {call_id}")
        if fault == "rpc_error":
            raise MCPError(types.INTERNAL_ERROR, f"internal error for {call_id}")
        if fault == "bad_params":
            raise MCPError(types.INVALID_PARAMS, f"argument 'id' of {call_id} is not acceptable")
        if fault == "is_error":
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=f"{call_id} {name} failed on its own")], is_error=True
            )
        if fault == "big":
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=f"{call_id} {name} " + "x" * BIG_TEXT)]
            )
        if fault == "big_structured":
            return types.CallToolResult(content=[], structured_content={"id": call_id, "blob": "y" * BIG_TEXT})
        if fault == "crash":
            crash()
            await anyio.sleep(30)  # cancelled by the crash
        return echo(call_id)

    return Server(name, version="1", on_list_tools=list_tools, on_call_tool=call_tool)


class MemoryConnector(MemoryUpstreams):
    """The in-memory ``Connector`` of the test rig, serving this script's faulty upstreams.

    A crash cancels the server's side of the connection; the proxy's next connect
    gets the same server again, as a restarted process would be.
    """

    def __init__(self, names: list[str], seed: int) -> None:
        super().__init__({})
        self.ledger = Ledger()
        self.servers = {n: build_upstream(n, seed, self.ledger, self._crasher(n)) for n in names}

    def _crasher(self, name: str) -> Callable[[], None]:
        return lambda: self.crash(name)


async def serve_stdio(name: str, seed: int, ledger_path: Path) -> None:
    """``--serve NAME``: one upstream over stdio; a crash is the process exiting."""
    from mcp.server.stdio import stdio_server

    server = build_upstream(name, seed, Ledger(ledger_path), lambda: os._exit(3))
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


# --- the client side ---------------------------------------------------------------------


class _Waiter:
    __slots__ = ("event", "message", "sent_at")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.message: types.JSONRPCResponse | types.JSONRPCError | None = None
        self.sent_at = time.perf_counter()


class RawSession:
    """JSON-RPC by hand over the proxy's in-memory streams; sees every response that arrives."""

    def __init__(self, read: Any, write: Any) -> None:
        self._read = read
        self._write = write
        self._next_id = 0
        self._pending: dict[int | str, _Waiter] = {}
        self.answered: set[int | str] = set()
        self.cancelled: set[int | str] = set()
        """Requests this side cancelled and stopped waiting for."""
        self.answered_after_cancel = 0
        self.duplicates: list[Any] = []
        self.strays: list[Any] = []
        self.notifications: Counter[str] = Counter()
        self.transport_errors: list[Exception] = []

    async def reader(self) -> None:
        async for item in self._read:
            if isinstance(item, Exception):
                self.transport_errors.append(item)
                continue
            message = item.message
            if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
                waiter = self._pending.pop(message.id, None) if message.id is not None else None
                if waiter is None:
                    if message.id in self.cancelled:  # the answer was on its way when the cancel arrived
                        self.cancelled.discard(message.id)
                        self.answered.add(message.id)
                        self.answered_after_cancel += 1
                        continue
                    (self.duplicates if message.id in self.answered else self.strays).append(message)
                    continue
                self.answered.add(message.id)
                waiter.message = message
                waiter.event.set()
            elif isinstance(message, types.JSONRPCRequest):
                # The proxy asks nothing of a client that declared no capabilities but ping.
                reply: Any
                if message.method == "ping":
                    reply = types.JSONRPCResponse(jsonrpc="2.0", id=message.id, result={})
                else:
                    error = types.ErrorData(code=types.METHOD_NOT_FOUND, message="not supported")
                    reply = types.JSONRPCError(jsonrpc="2.0", id=message.id, error=error)
                await self._write.send(SessionMessage(reply))
            else:
                self.notifications[message.method] += 1

    async def request(
        self, method: str, params: dict[str, Any] | None = None, *, cancel_after: float | None = None
    ) -> tuple[types.JSONRPCResponse | types.JSONRPCError | None, float]:
        """Send one request and wait for its response; returns it and the latency in seconds.

        With ``cancel_after``, give up after that long: send ``notifications/cancelled``,
        listen ``CANCEL_GRACE`` more for an answer already on its way, else return None.
        """
        self._next_id += 1
        request_id = self._next_id
        waiter = _Waiter()
        self._pending[request_id] = waiter
        message = types.JSONRPCRequest(jsonrpc="2.0", id=request_id, method=method, params=params)
        await self._write.send(SessionMessage(message))
        if cancel_after is None:
            await waiter.event.wait()
        else:
            with anyio.move_on_after(cancel_after):
                await waiter.event.wait()
            if not waiter.event.is_set():
                await self.notify("notifications/cancelled", {"requestId": request_id, "reason": "caller gave up"})
                with anyio.move_on_after(CANCEL_GRACE):
                    await waiter.event.wait()
            if not waiter.event.is_set():
                del self._pending[request_id]
                self.cancelled.add(request_id)
                return None, time.perf_counter() - waiter.sent_at
        assert waiter.message is not None
        return waiter.message, time.perf_counter() - waiter.sent_at

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        await self._write.send(SessionMessage(types.JSONRPCNotification(jsonrpc="2.0", method=method, params=params)))

    @property
    def unanswered(self) -> int:
        return len(self._pending)

    def forget(self) -> None:
        """Drop the bookkeeping of finished calls (between runs; duplicates of old ids then count as strays)."""
        self.answered.clear()
        self.cancelled.clear()
        self.answered_after_cancel = 0

    async def initialize(self) -> dict[str, Any]:
        params = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "patchbay-load", "version": "1"},
        }
        response, _ = await self.request("initialize", params)
        if not isinstance(response, types.JSONRPCResponse):
            raise RuntimeError(f"initialize failed: {response}")
        await self.notify("notifications/initialized")
        return response.result


# --- one run ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Planned:
    call_id: str
    server: str
    tool: str
    fault: str


def plan(calls: int, servers: list[str], seed: int, run: int) -> list[Planned]:
    """The calls of one run and the fault each asks for; the same for the same seed (ids differ by run)."""
    rng = random.Random(seed)
    tools, tool_weights = list(TOOL_WEIGHTS), list(TOOL_WEIGHTS.values())
    faults, fault_weights = list(WORK_FAULTS), list(WORK_FAULTS.values())
    planned: list[Planned] = []
    for i in range(calls):
        server = rng.choice(servers)
        tool = rng.choices(tools, tool_weights)[0]
        if tool == "work":
            fault = rng.choices(faults, fault_weights)[0]
        elif tool == "slow" and rng.random() < CANCEL_SHARE:
            fault = "cancel"
        else:
            fault = tool
        planned.append(Planned(f"r{run}-{i}-{rng.getrandbits(32):08x}", server, tool, fault))
    return planned


@dataclass
class RunResult:
    run: int
    calls: int
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    latencies: list[float] = field(default_factory=lambda: list[float]())
    outcomes: Counter[str] = field(default_factory=lambda: Counter[str]())
    by_fault: dict[str, Counter[str]] = field(default_factory=lambda: dict[str, Counter[str]]())
    problems: list[str] = field(default_factory=lambda: list[str]())
    answered_after_cancel: int = 0
    rss_start: int = 0
    rss_mid: int = 0
    rss_after: int = 0
    gc_objects_after: int = 0

    @property
    def calls_per_second(self) -> float:
        return self.calls / self.seconds if self.seconds else math.nan

    def percentile_ms(self, q: float) -> float:
        if not self.latencies:
            return math.nan
        ordered = sorted(self.latencies)
        return ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1] * 1000


def classify(planned: Planned, response: types.JSONRPCResponse | types.JSONRPCError | None) -> tuple[str, str | None]:
    """(outcome, problem): the outcome is a success kind or an error code; problem when an invariant fails."""
    if response is None:
        if planned.fault == "cancel":
            return "cancelled", None
        return "unanswered", f"{planned.call_id}: no response"
    if isinstance(response, types.JSONRPCError):
        return f"jsonrpc_error {response.error.code}", f"{planned.call_id}: a JSON-RPC error, not a result"
    result = response.result
    content = result.get("content")
    texts = [b.get("text", "") for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    first = texts[0] if texts else ""
    if result.get("isError"):
        structured = result.get("structuredContent")
        error = structured.get("error") if isinstance(structured, dict) else None
        if isinstance(error, dict) and isinstance(error.get("code"), str):
            return str(error["code"]), None
        # No code: it must be the upstream's own isError for this very call.
        if first.startswith(f"{planned.call_id} {planned.server} "):
            return "upstream_is_error", None
        return "is_error_without_code", f"{planned.call_id}: isError with no code and not this call's: {first[:80]!r}"
    structured = result.get("structuredContent")
    if first.startswith(f"{planned.call_id} {planned.server} ") and any("truncated" in t for t in texts[1:]):
        return "ok_truncated", None
    if structured != {"id": planned.call_id, "server": planned.server} or first != (
        f"{planned.call_id} {planned.server}"
    ):
        return "crossed", f"{planned.call_id} on {planned.server}: answered with another call's result: {first[:80]!r}"
    return "ok", None


async def run_once(
    session: RawSession, planned: list[Planned], concurrency: int, run: int, *, exposed: Callable[[Planned], str]
) -> RunResult:
    """All planned calls, ``concurrency`` at a time; checks each response as it comes."""
    report = RunResult(run=run, calls=len(planned))
    report.rss_start = rss_kib()
    queue = iter(planned)
    done = 0
    half = len(planned) // 2

    async def caller() -> None:
        nonlocal done
        for call in queue:
            arguments = {"id": call.call_id, "fault": call.fault} if call.tool == "work" else {"id": call.call_id}
            response, latency = await session.request(
                "tools/call",
                {"name": exposed(call), "arguments": arguments},
                cancel_after=CANCEL_AFTER if call.fault == "cancel" else None,
            )
            outcome, problem = classify(call, response)
            if response is not None:
                report.latencies.append(latency)
            report.outcomes[outcome] += 1
            report.by_fault.setdefault(call.fault, Counter())[outcome] += 1
            if problem is not None:
                report.problems.append(problem)
            elif outcome not in EXPECTED[call.fault] | COLLATERAL:
                report.problems.append(f"{call.call_id} ({call.fault}) ended in {outcome}")
            done += 1
            if done == half:
                report.rss_mid = rss_kib()

    started, cpu_started = time.perf_counter(), time.process_time()
    async with anyio.create_task_group() as tg:
        for _ in range(concurrency):
            tg.start_soon(caller)
    report.seconds = time.perf_counter() - started
    report.cpu_seconds = time.process_time() - cpu_started
    if done != len(planned):
        report.problems.append(f"{len(planned) - done} calls got no response")
    return report


# --- the whole load --------------------------------------------------------------------


@dataclass
class Options:
    calls: int = 20_000
    concurrency: int = 100
    upstreams: int = 5
    seed: int = 1
    runs: int = 2
    stdio: bool = False
    timeout: float = 20.0
    """Tool timeout of every tool but ``slow``: long, so that only ``slow`` times out."""
    settle_kib: int = 16 * 1024
    """RSS growth from the first run's end to the last's that still counts as settled."""


@dataclass
class LoadReport:
    options: Options
    runs: list[RunResult]
    problems: list[str]
    restarts: dict[str, int]
    rss_before_kib: int

    @property
    def ok(self) -> bool:
        return not self.problems and not any(r.problems for r in self.runs)

    def all_problems(self) -> list[str]:
        return [*self.problems, *(p for r in self.runs for p in r.problems)]


def make_config(options: Options, names: list[str], ledger_dir: Path | None) -> Config:
    servers: dict[str, Any] = {}
    for name in names:
        if options.stdio:
            assert ledger_dir is not None
            args = [str(SCRIPT), "--serve", name, "--seed", str(options.seed), "--ledger", str(ledger_dir / name)]
            command = sys.executable
        else:
            args, command = [], "in-memory"
        servers[name] = {"command": command, "args": args, "tool_timeouts": {"slow": SLOW_TIMEOUT}}
    patchbay = {
        "timeout": options.timeout,
        "max_call_time": options.timeout,
        "startup_wait": 30,
        "max_result_bytes": MAX_RESULT_BYTES,
        "max_concurrency": 16,
        "queue_timeout": 5,
        "breaker_threshold": 5,
        "breaker_cooldown": 0.3,
        "retry_attempts": 2,
        "retry_backoff": 0.01,
        "restart_initial_delay": 0.05,
        "restart_max_delay": 0.2,
        "watch": False,
    }
    document = {"mcpServers": servers, "patchbay": patchbay}
    return parse_config(json.dumps(document), ROOT / "load.json", environ=dict(os.environ))


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


@contextmanager
def quiet_logs(level: int = logging.CRITICAL) -> Iterator[None]:
    """Thousands of failing calls log thousands of lines; keep them out of the figures (and of memory)."""
    loggers = [logging.getLogger(n) for n in ("mcp_patchbay", "mcp")]
    saved = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(level)
    try:
        yield
    finally:
        for lg, old in zip(loggers, saved, strict=True):
            lg.setLevel(old)


async def run_load(options: Options, progress: Callable[[str], None] | None = None) -> LoadReport:
    """Start the proxy and its upstreams, run the load ``options.runs`` times on one session, check it all."""
    say = progress or (lambda _: None)
    names = [f"u{i}" for i in range(options.upstreams)]
    rss_before = rss_kib()
    with tempfile.TemporaryDirectory(prefix="patchbay-load-") as tmp:
        ledger_dir = Path(tmp) if options.stdio else None
        connector = None if options.stdio else MemoryConnector(names, options.seed)
        proxy = Proxy(make_config(options, names, ledger_dir), connector=connector)
        runs: list[RunResult] = []
        problems: list[str] = []
        async with create_client_server_memory_streams() as (client_streams, server_streams):
            async with anyio.create_task_group() as tg:
                tg.start_soon(proxy.serve, server_streams[0], server_streams[1])
                session = RawSession(client_streams[0], client_streams[1])
                tg.start_soon(session.reader)
                await session.initialize()
                await _wait_for_tools(session, names)
                say(f"{len(names)} upstreams ready ({'stdio' if options.stdio else 'in memory'})")
                for run in range(1, options.runs + 1):
                    planned = plan(options.calls, names, options.seed, run)
                    result = await run_once(
                        session, planned, options.concurrency, run, exposed=lambda c: f"{c.server}__{c.tool}"
                    )
                    if connector is not None:  # cancelled upstream work unwinds in a moment
                        with anyio.move_on_after(5):
                            while connector.ledger.running:
                                await anyio.sleep(0.01)
                    result.answered_after_cancel = session.answered_after_cancel
                    result.problems.extend(_check_after_run(proxy, session, planned, connector, ledger_dir))
                    session.forget()
                    del planned
                    gc.collect()
                    result.rss_after = rss_kib()
                    result.gc_objects_after = len(gc.get_objects())
                    runs.append(result)
                    say(
                        f"run {run}: {result.calls:,} calls in {result.seconds:.1f}s "
                        f"({result.calls_per_second:,.0f}/s), {len(result.problems)} problem(s)"
                    )
                if len(runs) >= 2:
                    growth = runs[-1].rss_after - runs[0].rss_after
                    if growth > options.settle_kib:
                        problems.append(
                            f"memory did not settle: RSS grew by {growth / 1024:.1f} MiB from the end of run 1 to "
                            f"the end of run {len(runs)} (allowed {options.settle_kib / 1024:.0f} MiB)"
                        )
                restarts = {n: u.restarts for n, u in proxy.supervisor.upstreams.items()}
                if session.transport_errors:
                    problems.append(f"{len(session.transport_errors)} transport errors: {session.transport_errors[:3]}")
                tg.cancel_scope.cancel()
    return LoadReport(options, runs, problems, restarts, rss_before)


async def _wait_for_tools(session: RawSession, names: list[str]) -> None:
    wanted = {f"{n}__{t}" for n in names for t in TOOL_WEIGHTS}
    with anyio.fail_after(60):
        while True:
            response, _ = await session.request("tools/list")
            if isinstance(response, types.JSONRPCResponse):
                listed = {t["name"] for t in response.result.get("tools", [])}
                if wanted <= listed:
                    return
            await anyio.sleep(0.1)


def _check_after_run(
    proxy: Proxy,
    session: RawSession,
    planned: list[Planned],
    connector: MemoryConnector | None,
    ledger_dir: Path | None,
) -> list[str]:
    problems: list[str] = []
    if session.unanswered:
        problems.append(f"{session.unanswered} requests still unanswered")
    if session.duplicates:
        problems.append(f"{len(session.duplicates)} responses arrived twice: {session.duplicates[:3]}")
    if session.strays:
        problems.append(f"{len(session.strays)} responses to ids never sent: {session.strays[:3]}")
    session.duplicates.clear()
    session.strays.clear()
    for name, upstream in proxy.supervisor.upstreams.items():
        if upstream.bulkhead.in_flight or upstream.bulkhead.waiting:
            problems.append(
                f"{name}: {upstream.bulkhead.in_flight} calls in flight, {upstream.bulkhead.waiting} queued after "
                "every call was answered"
            )
    arrivals = _arrivals(connector, ledger_dir)
    for call in planned:
        seen = arrivals.get(f"{call.server} {call.call_id}", 0)
        if call.tool != "lookup" and seen > 1:
            problems.append(f"{call.call_id} ({call.tool}, not retry-safe) reached {call.server} {seen} times")
        if call.tool == "lookup" and seen > 3:
            problems.append(f"{call.call_id} (lookup) reached {call.server} {seen} times, more than 1 + 2 retries")
    if connector is not None:
        if connector.ledger.running:
            problems.append(f"{connector.ledger.running} upstream calls still running after every call was settled")
        connector.ledger.counts.clear()
    return problems


def _arrivals(connector: MemoryConnector | None, ledger_dir: Path | None) -> Counter[str]:
    if connector is not None:
        return Counter(connector.ledger.counts)
    counts: Counter[str] = Counter()
    if ledger_dir is not None:
        for path in ledger_dir.iterdir():
            counts.update(line for line in path.read_text(encoding="utf-8").splitlines() if line)
            path.write_text("", encoding="utf-8")
    return counts


# --- the report -----------------------------------------------------------------------


def format_report(report: LoadReport) -> str:
    o = report.options
    mode = "stdio subprocesses" if o.stdio else "in memory"
    lines = [
        f"mcp-patchbay load: {o.calls:,} calls x {o.runs} run(s), {o.concurrency} concurrent callers, "
        f"{o.upstreams} upstreams ({mode}), seed {o.seed}",
        "",
        f"{'run':>3}  {'seconds':>7}  {'CPU s':>6}  {'calls/s':>8}  {'p50 ms':>7}  {'p99 ms':>7}  "
        f"{'RSS start':>9}  {'RSS mid':>8}  {'RSS after':>9}  {'gc objects':>10}",
    ]
    for r in report.runs:
        lines.append(
            f"{r.run:>3}  {r.seconds:>7.2f}  {r.cpu_seconds:>6.2f}  {r.calls_per_second:>8,.0f}  "
            f"{r.percentile_ms(50):>7.1f}  {r.percentile_ms(99):>7.1f}  "
            f"{_mib(r.rss_start):>9}  {_mib(r.rss_mid):>8}  {_mib(r.rss_after):>9}  {r.gc_objects_after:>10,}"
        )
    lines += ["", f"RSS before the proxy started: {_mib(report.rss_before_kib)}"]
    late = sum(r.answered_after_cancel for r in report.runs)
    cancelled = sum(r.outcomes["cancelled"] for r in report.runs)
    lines.append(f"calls cancelled by their caller: {cancelled} unanswered, {late} answered before the cancel landed")
    if len(report.runs) >= 2:
        growth = report.runs[-1].rss_after - report.runs[0].rss_after
        lines.append(f"RSS growth from the end of run 1 to the end of run {len(report.runs)}: {growth / 1024:+.1f} MiB")
    lines.append(
        f"upstream restarts after crashes: {sum(report.restarts.values())} "
        f"({', '.join(f'{n} {c}' for n, c in sorted(report.restarts.items()))})"
    )
    total: Counter[str] = Counter()
    for r in report.runs:
        total.update(r.outcomes)
    calls = sum(total.values())
    lines += ["", f"{'outcome (all runs)':<22}  {'count':>7}  {'share':>6}"]
    for outcome, count in sorted(total.items(), key=lambda kv: (kv[0] not in SUCCESSES, -kv[1])):
        lines.append(f"{outcome:<22}  {count:>7,}  {count / calls:>6.1%}")
    problems = report.all_problems()
    lines.append("")
    if problems:
        lines.append(f"FAILED: {len(problems)} invariant violation(s):")
        lines += [f"  - {p}" for p in problems[:20]]
        if len(problems) > 20:
            lines.append(f"  ... and {len(problems) - 20} more")
    else:
        lines.append(
            "OK: one response per request, none lost, none duplicated, none crossed; every error carries an "
            "allowed code; no call reached an upstream more often than allowed; nothing left in flight"
            + ("; memory settled" if len(report.runs) >= 2 else "")
        )
    return "\n".join(lines)


def _mib(kib: int) -> str:
    return f"{kib / 1024:.1f} MiB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=Options.calls, help="calls per run (default %(default)s)")
    parser.add_argument("--concurrency", type=int, default=Options.concurrency, help="default %(default)s")
    parser.add_argument("--upstreams", type=int, default=Options.upstreams, help="default %(default)s")
    parser.add_argument("--seed", type=int, default=Options.seed, help="default %(default)s")
    parser.add_argument("--runs", type=int, default=Options.runs, help="identical runs (default %(default)s)")
    parser.add_argument("--stdio", action="store_true", help="upstreams as real subprocesses over stdio")
    parser.add_argument("--serve", metavar="NAME", help=argparse.SUPPRESS)
    parser.add_argument("--ledger", help=argparse.SUPPRESS)
    parser.add_argument("--verbose", action="store_true", help="show the proxy's warnings")
    args = parser.parse_args(argv)
    if args.serve:
        anyio.run(serve_stdio, args.serve, args.seed, Path(args.ledger))
        return 0
    options = Options(
        calls=args.calls,
        concurrency=args.concurrency,
        upstreams=args.upstreams,
        seed=args.seed,
        runs=args.runs,
        stdio=args.stdio,
    )
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    with quiet_logs(logging.WARNING if args.verbose else logging.CRITICAL):
        report = anyio.run(run_load, options, lambda m: print(m, file=sys.stderr, flush=True))
    print(format_report(report))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
