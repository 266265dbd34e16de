"""Faults of real stdio upstreams, table-driven.

Each case runs the proxy in-process (``Proxy`` with a parsed config, no connector) in
front of real ``tests/servers/fault_server.py`` processes, one of them faulty and one
healthy, and talks to it with an SDK ``Client``. Every case then checks the same things:

- the faulty calls got an ``isError`` result with the right code within their bound;
- the error texts shown to the model are short and hold no path, traceback or secret;
- the healthy upstream is unaffected (same process, breaker closed, its calls work);
- the session is alive (ping, tools/list);
- after the proxy stops, no process it started is left, nor any child of one.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from mcp_patchbay.calls.policies import BreakerState
from mcp_patchbay.upstreams.upstream import State
from tests.e2e_util import (
    SECRET,
    ProcessRecord,
    Rig,
    Timed,
    alive,
    assert_clean_model_text,
    fault_entry,
    proxy_rig,
    result_text,
    wait_gone,
)

pytestmark = pytest.mark.anyio

HEALTHY = "healthy"
NEVER_ANSWER_CONNECT = 8.0
"""connect_timeout where a server never answers: it also bounds the healthy server's start,
which takes several seconds on a loaded machine."""
NEVER_ANSWER_SETTINGS: dict[str, Any] = {
    "connect_timeout": NEVER_ANSWER_CONNECT,
    "startup_wait": 2,
    "restart_initial_delay": 10,
    "restart_max_delay": 10,
}
ENV_SECRET = "hunter2-patchbay-env-secret"
BASE_SETTINGS: dict[str, Any] = {
    "restart_initial_delay": 0.1,
    "restart_max_delay": 1.0,
    "connect_timeout": 15,
    "startup_wait": 15,
    "timeout": 20,
}


# --- the rig ------------------------------------------------------------------------------


@asynccontextmanager
async def fault_rig(tmp: Path, servers: dict[str, Any], settings: dict[str, Any] | None = None) -> AsyncGenerator[Rig]:
    """The proxy in-process in front of ``servers`` plus a healthy fault_server; checks the common promises."""
    record = ProcessRecord(tmp / "processes.jsonl")
    entries = {HEALTHY: fault_entry(HEALTHY, record=record.path), **servers}
    async with proxy_rig(tmp, entries, {**BASE_SETTINGS, **(settings or {})}) as rig:
        await rig.ready(HEALTHY)
        healthy_pid = await rig.pid(HEALTHY)
        yield rig
        # The healthy upstream was not touched by the fault, and the session is alive.
        assert f"{HEALTHY}__echo" in await rig.alive()
        assert await rig.ok(f"{HEALTHY}__echo", {"text": "still here"}) == "still here"
        assert await rig.pid(HEALTHY) == healthy_pid
        healthy = rig.upstream(HEALTHY)
        assert healthy.restarts == 0 and healthy.state is State.READY
        assert healthy.breaker.state is BreakerState.CLOSED
        for result in rig.results:
            if result.is_error and result.structured_content is not None:
                assert_clean_model_text(result, ENV_SECRET)
    # Nothing the proxy started outlives it: every upstream process and every child of one.
    recorded = await record.wait_all_gone(timeout=15)
    assert {e.pid for e in recorded} >= set(rig.pids)
    await wait_gone(rig.pids, timeout=5)
    assert SECRET not in rig.log.everything() and ENV_SECRET not in rig.log.everything()


# --- the cases ----------------------------------------------------------------------------

Servers = Callable[[Path, Path], dict[str, Any]]
"""(tmp dir, record file) -> config entries."""
Scenario = Callable[[Rig], Awaitable[None]]


@dataclass(frozen=True)
class Fault:
    id: str
    servers: Servers
    scenario: Scenario
    settings: dict[str, Any] = field(default_factory=lambda: dict[str, Any]())


def fs(name: str, *flags: str, **extra: Any) -> Servers:
    return lambda tmp, record: {name: fault_entry(name, *flags, record=record, **extra)}


def _not_executable(tmp: Path, record: Path) -> dict[str, Any]:
    script = tmp / "server.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o644)
    return {"noexec": {"command": str(script)}}


async def spawn_missing(rig: Rig) -> None:
    await rig.first_attempt("ghost")
    timed = await rig.call("ghost__echo", {"text": "x"}, within=3)
    info = timed.error
    assert info["code"] == "SERVER_UNAVAILABLE" and info["category"] == "configuration"
    assert info["retryable"] is False and info["server"] == "ghost"
    assert "could not start" in info["message"] and "not found" in info["message"]
    assert rig.upstream("ghost").state is State.FAILED and rig.upstream("ghost").restarts == 0
    # The next call says the same, at once: a missing command is not retried in a loop.
    again = await rig.call("ghost__echo", {"text": "x"}, within=3)
    assert again.error["code"] == "SERVER_UNAVAILABLE" and again.seconds < 1


async def spawn_not_executable(rig: Rig) -> None:
    await rig.first_attempt("noexec")
    info = (await rig.call("noexec__echo", {}, within=3)).error
    assert info["code"] == "SERVER_UNAVAILABLE" and info["retryable"] is False
    assert "not executable" in info["message"]
    assert rig.upstream("noexec").state is State.FAILED


async def exit_at_startup(rig: Rig) -> None:
    await rig.first_attempt("dies")
    timed = await rig.call("dies__echo", {}, within=3)
    info = timed.error
    assert info["code"] == "SERVER_UNAVAILABLE" and info["retryable"] is True
    assert "exited during startup with exit code 3" in info["message"]
    # The log has the stderr tail, cleaned of the secrets (the fault server printed both).
    [exited] = (await rig.log.wait_for(r"'dies' exited during startup"))[:1]
    assert "exit code 3" in exited and "cannot open the database (token=***" in exited
    assert "the configured secret is ***" in exited
    # It keeps failing the same way, with backoff, without touching the others.
    await rig.log.wait_for(r"reconnecting to 'dies'", count=2)
    assert rig.upstream("dies").first_ready_after is None


async def secrets_in_command_line_are_not_logged(rig: Rig) -> None:
    """Regression: the debug line for each spawned upstream logged its arguments as they were,
    credentials included (an ``--api-key=...`` argument, a value also given in the entry's env).
    The rig checks the whole log for the secrets afterwards."""
    await rig.ready("keyed")
    [spawned] = rig.log.messages(r"spawned pid \d+: .*--name keyed")
    assert "--api-key=***" in spawned
    assert await rig.ok("keyed__echo", {"text": "ok"}) == "ok"


async def first_failed_start_is_retried_and_says_so(rig: Rig) -> None:
    """Regression: while the proxy waited to retry a server whose first start failed, its
    state was FAILED and calls were told the error was not retryable (and nothing about the
    retry), though the proxy does retry it."""
    await rig.first_attempt("dies")
    upstream = rig.upstream("dies")
    assert upstream.restarts == 0  # waiting 5-10 s before its first retry
    info = (await rig.call("dies__echo", {}, within=3)).error
    assert info["code"] == "SERVER_UNAVAILABLE" and info["retryable"] is True, info
    assert "keeps retrying" in info["message"]
    assert upstream.restarts == 0


async def garbage_then_serves(rig: Rig) -> None:
    await rig.ready("noisy")
    assert await rig.ok("noisy__echo", {"text": "through the noise"}) == "through the noise"
    assert await rig.ok("noisy__counter") == "1"
    assert await rig.ok("noisy__counter") == "2"
    await rig.pid("noisy")
    warnings = await rig.log.wait_for(r"not JSON-RPC", count=3)
    assert "fault_server banner" in warnings[0]
    assert rig.upstream("noisy").restarts == 0


async def garbage_never_answers(rig: Rig) -> None:
    # tools/list is not held past startup_wait by a server that never answers.
    await _assert_list_not_held(rig, startup_wait=2.0)
    await rig.first_attempt("mute", within=10)
    # Bounded by connect_timeout (plus a loaded machine).
    assert time.monotonic() - rig.started < NEVER_ANSWER_CONNECT + 6.0
    info = (await rig.call("mute__echo", {}, within=3)).error
    assert info["code"] == "SERVER_UNAVAILABLE" and info["retryable"] is True
    assert f"did not finish starting within {NEVER_ANSWER_CONNECT:g}s" in info["message"]
    assert "3 line(s) to stdout that are not MCP messages" in info["message"]


async def never_answers_ignoring_sigterm(rig: Rig) -> None:
    await _assert_list_not_held(rig, startup_wait=2.0)
    # The first attempt ends after connect_timeout plus the stop: stdin closed (2 s grace),
    # SIGTERM ignored (2 s more), then SIGKILL.
    await rig.first_attempt("stubborn", within=NEVER_ANSWER_CONNECT + 4 + 6)
    info = (await rig.call("stubborn__echo", {}, within=3)).error
    assert info["code"] == "SERVER_UNAVAILABLE"
    assert f"did not finish starting within {NEVER_ANSWER_CONNECT:g}s" in info["message"]
    first = next(e for e in rig.record.entries() if e.name == "stubborn")
    assert not alive(first.pid, first.start)  # killed, not abandoned


async def _assert_list_not_held(rig: Rig, startup_wait: float) -> None:
    """Once the healthy server is up, tools/list answers within what is left of startup_wait.

    Timed from the call, not from the proxy's start: on a loaded machine the healthy
    server's own start can take seconds, and that is not what is being tested.
    """
    await rig.ready(HEALTHY)
    remaining = max(0.0, rig.started + startup_wait - time.monotonic())
    began = time.monotonic()
    with anyio.fail_after(10):
        await rig.client.list_tools()
    waited = time.monotonic() - began
    assert waited < remaining + 1.0, (waited, remaining)


async def crash_mid_call(rig: Rig) -> None:
    await rig.ready("flaky")
    old_pid = await rig.pid("flaky")
    grandchild = int(await rig.ok("flaky__child"))
    rig.pids.append(grandchild)
    assert await rig.ok("flaky__counter") == "1"
    results: dict[str, Timed] = {}

    async def call(tool: str) -> None:
        results[tool] = await rig.call(f"flaky__{tool}", {"code": 9}, within=10)

    async with anyio.create_task_group() as tg:
        tg.start_soon(call, "hang")
        await _until_running(rig, "flaky", "hang")
        tg.start_soon(call, "crash")
    for tool in ("hang", "crash"):
        info = results[tool].error
        assert info["code"] == "CONNECTION_LOST" and info["retryable"] is True, info
        assert results[tool].seconds < 5, results[tool].seconds  # at once, not at the 20 s timeout
    # The call right after: still down (a retryable error), or back already.
    after = await rig.call("flaky__echo", {"text": "x"}, within=5)
    if after.result.is_error:
        assert after.error["retryable"] is True and after.error["code"] in ("SERVER_STARTING", "CONNECTION_LOST")
    # Then it heals: a new process, with fresh state.
    await rig.ready("flaky")
    assert await rig.ok("flaky__echo", {"text": "back"}) == "back"
    assert await rig.ok("flaky__counter") == "1"
    assert await rig.pid("flaky") != old_pid
    # The crashed process and the child it left behind are gone (its process group was killed).
    await wait_gone([old_pid, grandchild], timeout=10)
    logged = await rig.log.wait_for(r"'flaky' connection lost")
    assert "exit code 9" in logged[0]


async def _until_running(rig: Rig, server: str, tool: str, count: int = 1) -> None:
    """Until the upstream says (on stderr, which the proxy logs) that ``tool`` is running."""
    await rig.log.wait_for(rf"stderr: fault_server {server}: {tool} started", count=count)


async def hang_times_out(rig: Rig) -> None:
    await rig.ready("slow")
    pid = await rig.pid("slow")
    timed = await rig.call("slow__hang", {}, within=5)
    info = timed.error
    assert info["code"] == "TIMEOUT" and info["retryable"] is True and info["category"] == "timeout"
    assert 1.0 <= timed.seconds < 1.0 + 2.0, timed.seconds
    assert "within 1s" in info["message"]
    # The upstream was told: its handler was cancelled.
    await rig.log.wait_for(r"stderr: fault_server slow: hang cancelled", timeout=5)
    assert "cancelled:hang" in json.loads(await rig.ok("slow__events"))
    # A slow call past its per-tool timeout times out within its own bound.
    slow = await rig.call("slow__sleep", {"seconds": 30}, within=5)
    assert slow.error["code"] == "TIMEOUT" and 0.5 <= slow.seconds < 0.5 + 2.0, slow.seconds
    # The next calls work, on the same process.
    assert await rig.ok("slow__sleep", {"seconds": 0.01}) == "slept"
    assert await rig.ok("slow__echo", {"text": "ok"}) == "ok"
    assert await rig.pid("slow") == pid


async def client_cancels_a_hanging_call(rig: Rig) -> None:
    await rig.ready("slow")
    pid = await rig.pid("slow")
    with pytest.raises(MCPError) as caught:
        with anyio.fail_after(10):
            await rig.client.call_tool("slow__hang", {}, read_timeout_seconds=0.5)
    assert caught.value.code == types.REQUEST_TIMEOUT
    # The client's notifications/cancelled went through the proxy to the upstream's handler.
    await rig.log.wait_for(r"stderr: fault_server slow: hang cancelled", timeout=5)
    assert rig.upstream("slow").bulkhead.in_flight == 0
    assert await rig.ok("slow__echo", {"text": "next"}) == "next"
    assert await rig.pid("slow") == pid


async def jsonrpc_errors(rig: Rig) -> None:
    await rig.ready("svc")
    pid = await rig.pid("svc")
    rig.pids.append(int(await rig.ok("svc__child")))  # a child of the upstream: must die with it
    err = (await rig.call("svc__jsonrpc_error", {"code": -32603, "message": "database on fire"})).error
    assert err["code"] == "SERVER_ERROR" and err["category"] == "server_error" and err["retryable"] is True
    assert "database on fire" in err["message"]
    bad = (await rig.call("svc__invalid_params", {"message": "days must be at most 14"})).error
    assert bad["code"] == "INVALID_ARGUMENTS" and bad["retryable"] is False
    assert "days must be at most 14" in bad["message"]
    own = (await rig.call("svc__is_error")).result
    assert own.is_error and own.structured_content is None
    assert result_text(own) == "the tool itself failed: no such order"
    assert await rig.ok("svc__echo", {"text": "fine"}) == "fine"
    assert await rig.pid("svc") == pid


async def jsonrpc_error_32000_is_not_a_lost_connection(rig: Rig) -> None:
    """Regression: an upstream's own JSON-RPC error -32000 (the spec's "server error" range)
    was taken for the SDK's "connection closed", reported as CONNECTION_LOST, and the
    healthy connection was torn down and the server restarted."""
    await rig.ready("svc")
    pid = await rig.pid("svc")
    err = (await rig.call("svc__jsonrpc_error", {"code": -32000, "message": "database is locked"})).error
    assert err["code"] == "SERVER_ERROR", err
    assert "database is locked" in err["message"]
    assert await rig.ok("svc__echo", {"text": "same"}) == "same"
    assert await rig.pid("svc") == pid
    assert rig.upstream("svc").restarts == 0


async def traceback_in_error_message_is_not_shown(rig: Rig) -> None:
    """Regression: an upstream error whose message is a Python traceback reached the model
    with the traceback and the server's file paths; only its last line is useful."""
    await rig.ready("svc")
    timed = await rig.call("svc__traceback")
    err = timed.error
    assert err["code"] == "SERVER_ERROR"
    assert "LookupError: table 'orders' does not exist" in err["message"]
    assert_clean_model_text(timed.result)
    node = await rig.call("svc__traceback", {"style": "node"})
    assert "ENOENT: no such file or directory, open 'orders.json'" in node.error["message"]
    assert "at " not in node.error["message"].split("orders.json'")[1].split(".")[0]
    assert_clean_model_text(node.result)


async def huge_results(rig: Rig) -> None:
    await rig.ready("big")
    pid = await rig.pid("big")
    timed = await rig.call("big__huge", {"bytes": 3_000_000}, within=15)
    result = timed.result
    assert not result.is_error
    first = result.content[0]
    assert isinstance(first, types.TextContent) and first.text == "x" * 100_000
    note = result_text(result).splitlines()[-1]
    assert "truncated" in note and "2,900,000" in note
    too_big = await rig.call("big__huge_structured", {"bytes": 200_000}, within=15)
    assert too_big.error["code"] == "RESULT_TOO_LARGE" and too_big.error["retryable"] is False
    assert await rig.ok("big__echo", {"text": "small"}) == "small"
    assert await rig.pid("big") == pid


async def restart_storm(rig: Rig) -> None:
    seen: list[dict[str, Any]] = []
    for attempt in range(1, 5):
        # Right after each crash the proxy waits before restarting: calls get a retryable error.
        await rig.log.wait_for(r"reconnecting to 'storm'", count=attempt, timeout=15)
        timed = await rig.call("storm__echo", {"text": "hi"}, within=5)
        if timed.result.is_error:
            seen.append(timed.error)
        # The healthy upstream answers all through the storm.
        assert await rig.ok(f"{HEALTHY}__echo", {"text": "calm"}, within=5) == "calm"
    assert seen and all(e["retryable"] for e in seen), seen
    assert {e["code"] for e in seen} <= {"SERVER_STARTING", "CONNECTION_LOST"}, seen
    # The delay between restarts grows: 0.1 s doubling, with jitter in [half, full].
    waits = [float(m.split(" in ")[1].split("s ")[0]) for m in rig.log.messages(r"reconnecting to 'storm'")]
    assert len(waits) >= 3, waits
    assert waits[2] >= 2 * waits[0] - 0.05, waits
    assert waits[:4] == sorted(waits[:4]), waits
    assert len(rig.record.pids("storm", "server")) >= 4


async def slow_start(rig: Rig) -> None:
    await _assert_list_not_held(rig, startup_wait=1.0)  # not held for the 4 s the late server sleeps
    early = await rig.call("late__echo", {"text": "x"}, within=3)
    if early.result.is_error:  # still starting: a retryable error that says so
        assert early.error["code"] == "SERVER_STARTING" and early.error["retryable"] is True
        assert early.error["retry_after_ms"] > 0
    await rig.ready("late", within=15)
    assert await rig.ok("late__echo", {"text": "made it"}) == "made it"
    assert "late__echo" in {t.name for t in (await rig.client.list_tools()).tools}


FAULTS = [
    Fault(
        "spawn_missing_command",
        lambda tmp, rec: {"ghost": {"command": "/nonexistent/bin/mcp-ghost-server"}},
        spawn_missing,
    ),
    Fault("spawn_not_executable", _not_executable, spawn_not_executable),
    Fault(
        "exit_at_startup",
        fs("dies", "--exit-at-startup", "3", env={"FAULT_SECRET": ENV_SECRET}),
        exit_at_startup,
        {"restart_initial_delay": 0.2},
    ),
    Fault(
        "secrets_in_command_line_are_not_logged",
        fs("keyed", f"--label=--api-key={SECRET}", f"--label={ENV_SECRET}", env={"FAULT_SECRET": ENV_SECRET}),
        secrets_in_command_line_are_not_logged,
    ),
    Fault(
        "first_failed_start_is_retried_and_says_so",
        fs("dies", "--exit-at-startup", "3"),
        first_failed_start_is_retried_and_says_so,
        {"restart_initial_delay": 10, "restart_max_delay": 10},
    ),
    Fault("garbage_then_serves", fs("noisy", "--garbage"), garbage_then_serves),
    Fault(
        "garbage_never_answers",
        fs("mute", "--garbage", "--never-answer"),
        garbage_never_answers,
        NEVER_ANSWER_SETTINGS,
    ),
    Fault(
        "never_answers_ignoring_sigterm",
        fs("stubborn", "--never-answer", "--ignore-eof", "--ignore-sigterm"),
        never_answers_ignoring_sigterm,
        NEVER_ANSWER_SETTINGS,
    ),
    Fault("slow_start", fs("late", "--slow-start", "4"), slow_start, {"startup_wait": 1}),
    Fault("crash_mid_call", fs("flaky"), crash_mid_call, {"restart_initial_delay": 0.5}),
    Fault(
        "hang_and_slow_call_time_out",
        fs("slow", timeout=1, tool_timeouts={"sleep": 0.5}),
        hang_times_out,
    ),
    Fault("client_cancels_a_hanging_call", fs("slow"), client_cancels_a_hanging_call),
    Fault("jsonrpc_errors", fs("svc"), jsonrpc_errors),
    Fault("jsonrpc_error_32000_is_not_a_lost_connection", fs("svc"), jsonrpc_error_32000_is_not_a_lost_connection),
    Fault("traceback_in_error_message_is_not_shown", fs("svc"), traceback_in_error_message_is_not_shown),
    Fault("huge_results", fs("big"), huge_results, {"max_result_bytes": 100_000}),
    Fault(
        "restart_storm",
        fs("storm", "--crash-after", "0.3"),
        restart_storm,
        {"restart_initial_delay": 0.1, "restart_max_delay": 2.0, "breaker_threshold": 2},
    ),
]


@pytest.mark.parametrize("fault", FAULTS, ids=[f.id for f in FAULTS])
async def test_fault(fault: Fault, tmp_path: Path) -> None:
    servers = fault.servers(tmp_path, tmp_path / "processes.jsonl")
    async with fault_rig(tmp_path, servers, fault.settings) as rig:
        await fault.scenario(rig)


def test_fault_server_runs_as_a_script() -> None:
    """Each test server is runnable directly (``python tests/servers/fault_server.py --help``)."""
    import subprocess

    from tests.e2e_util import FAULT_SERVER

    command = [sys.executable, str(FAULT_SERVER), "--help"]
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and "--exit-at-startup" in done.stdout
    assert not alive(os.getpid() + 10_000_000)
