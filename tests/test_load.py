"""Load with injected faults, the short version of ``scripts/load`` for CI.

2,000 calls from 100 concurrent callers across 5 in-memory upstreams whose tools
fail as each call asks (seeded): exceptions, MCP errors, their own isError, big
results, sleeps past a 0.2 s timeout, crashes of the connection, calls their
caller cancels. Two identical
runs on one proxy session. The invariants are those of ``tests/fixtures/load.py``; a
fault whose outcome depends on timing (a crash taking other calls with it, the
breaker opening) is only ever asserted as "an isError result with a code in an
allowed set".
"""

from __future__ import annotations

import time
from collections import Counter

import anyio
import pytest

from tests.fixtures import load

pytestmark = pytest.mark.anyio


def test_the_plan_is_seeded_and_has_every_fault() -> None:
    names = [f"u{i}" for i in range(5)]
    first = load.plan(2000, names, 7, 1)
    assert [(c.server, c.tool, c.fault) for c in first] == [
        (c.server, c.tool, c.fault) for c in load.plan(2000, names, 7, 2)
    ]
    assert len({c.call_id for c in first} | {c.call_id for c in load.plan(2000, names, 7, 2)}) == 4000
    faults = Counter(c.fault for c in first)
    assert set(faults) == set(load.EXPECTED), faults
    assert {c.server for c in first} == set(names)


async def test_thousands_of_calls_with_faults_each_get_exactly_one_proper_response() -> None:
    options = load.Options(calls=2000, concurrency=100, upstreams=5, seed=7, runs=2)
    started = time.monotonic()
    with load.quiet_logs(), anyio.fail_after(90):
        report = await load.run_load(options)
    print(load.format_report(report))
    print(f"wall time {time.monotonic() - started:.1f}s")
    assert report.ok, "\n".join(report.all_problems())
    for run in report.runs:
        assert sum(run.outcomes.values()) == 2000 == len(run.latencies) + run.outcomes["cancelled"]
        assert run.outcomes["ok"] > 0
        for fault, outcomes in run.by_fault.items():
            assert set(outcomes) <= load.EXPECTED[fault] | load.COLLATERAL, (fault, outcomes)
    # Both runs asked for the same faults in the same order.
    assert {f: sum(c.values()) for f, c in report.runs[0].by_fault.items()} == {
        f: sum(c.values()) for f, c in report.runs[1].by_fault.items()
    }


def test_classify_catches_crossed_results_and_codeless_errors() -> None:
    """The checker itself: another call's result or an isError without a code are violations."""
    import mcp_types as types

    call = load.Planned("r1-5-abc", "u1", "work", "ok")

    def response(result: dict[str, object]) -> types.JSONRPCResponse:
        return types.JSONRPCResponse(jsonrpc="2.0", id=1, result=result)

    own = {
        "content": [{"type": "text", "text": "r1-5-abc u1"}],
        "structuredContent": {"id": "r1-5-abc", "server": "u1"},
    }
    assert load.classify(call, response(own)) == ("ok", None)
    other = {
        "content": [{"type": "text", "text": "r1-6-def u1"}],
        "structuredContent": {"id": "r1-6-def", "server": "u1"},
    }
    assert load.classify(call, response(other))[0] == "crossed"
    wrong_server = {**own, "structuredContent": {"id": "r1-5-abc", "server": "u2"}}
    assert load.classify(call, response(wrong_server))[0] == "crossed"
    codeless = {"content": [{"type": "text", "text": "something broke"}], "isError": True}
    assert load.classify(call, response(codeless))[0] == "is_error_without_code"
    coded = {"content": [], "isError": True, "structuredContent": {"error": {"code": "TIMEOUT"}}}
    assert load.classify(call, response(coded)) == ("TIMEOUT", None)
    error = types.JSONRPCError(jsonrpc="2.0", id=1, error=types.ErrorData(code=-32603, message="x"))
    assert load.classify(call, error)[1] is not None
