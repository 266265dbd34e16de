"""The proxy end to end in memory: real upstream Servers, the proxy, a real Client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

from tests.harness import (
    FakeTool,
    GatedUpstreams,
    MemoryUpstreams,
    config_from,
    connected,
    error_info,
    make_server,
    proxy_transport,
    result_text,
    text,
)

pytestmark = pytest.mark.anyio

ADD_SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer", "maximum": 100}},
    "required": ["a", "b"],
}


async def _add(ctx: Any, args: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=str(args["a"] + args["b"]))],
        structured_content={"sum": args["a"] + args["b"]},
    )


async def _fail(ctx: Any, args: dict[str, Any]) -> types.CallToolResult:
    return text("the tool itself failed", is_error=True)


async def _upper(ctx: Any, args: dict[str, Any]) -> types.CallToolResult:
    return text(str(args.get("text", "")).upper())


def _math() -> Any:
    return make_server(
        "math",
        {
            "add": FakeTool(_add, ADD_SCHEMA),
            "fail": FakeTool(_fail),
            "read_file": FakeTool(_upper),
        },
    )


def _text() -> Any:
    return make_server("text", {"upper": FakeTool(_upper), "read_file": FakeTool(_upper)})


def _two() -> tuple[Any, MemoryUpstreams]:
    config = config_from({"math": {"command": "x"}, "text": {"command": "x"}})
    return config, MemoryUpstreams({"math": _math(), "text": _text()})


async def test_tools_are_merged_under_namespaced_names() -> None:
    config, upstreams = _two()
    async with connected(config, upstreams) as (_, client):
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == {"math__add", "math__fail", "math__read_file", "text__upper", "text__read_file"}
    assert tools["math__add"].input_schema == ADD_SCHEMA
    assert tools["math__add"].description == "add on math"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_calls_are_forwarded_in_both_protocol_eras(mode: str) -> None:
    config, upstreams = _two()
    async with connected(config, upstreams, mode=mode) as (_, client):
        result = await client.call_tool("math__add", {"a": 2, "b": 3})
        assert not result.is_error
        assert result_text(result) == "5"
        assert result.structured_content == {"sum": 5}
        assert result_text(await client.call_tool("text__upper", {"text": "hi"})) == "HI"


async def test_upstream_is_error_passes_through_unchanged() -> None:
    config, upstreams = _two()
    async with connected(config, upstreams) as (_, client):
        result = await client.call_tool("math__fail", {})
    assert result.is_error
    assert result_text(result) == "the tool itself failed"
    assert result.structured_content is None


async def test_unknown_tool_gets_suggestion_and_session_goes_on() -> None:
    config, upstreams = _two()
    async with connected(config, upstreams) as (_, client):
        result = await client.call_tool("math__ad", {"a": 1, "b": 1})
        info = error_info(result)
        assert info["code"] == "TOOL_NOT_FOUND"
        assert info["suggestions"][0] == "math__add"
        assert "Did you mean 'math__add'" in result_text(result)
        assert len(result_text(result)) < 500
        assert result_text(await client.call_tool("math__add", {"a": 1, "b": 1})) == "2"


@pytest.mark.parametrize(("client", "structured"), [("gemini-cli-mcp-client", False), ("claude-code", True)])
async def test_an_error_says_its_message_once_in_the_form_the_client_shows(client: str, structured: bool) -> None:
    """Gemini CLI shows the model an error's text and then its structured content: to it an
    error is text alone. Claude Code shows the structured content instead of the text: it keeps
    both (the message is in each)."""
    config, upstreams = _two()
    info = types.Implementation(name=client, version="1")
    async with connected(config, upstreams, client_info=info) as (_, connection):
        result = await connection.call_tool("math__ad", {"a": 1, "b": 1})
    assert result.is_error and "Did you mean 'math__add'" in result_text(result)
    assert (result.structured_content is not None) is structured
    if structured:
        assert result.structured_content is not None
        assert result.structured_content["error"]["code"] == "TOOL_NOT_FOUND"


async def test_unambiguous_mistaken_names_run_the_tool() -> None:
    config, upstreams = _two()
    async with connected(config, upstreams) as (_, client):
        for name in ("add", "Math__Add", "math.add", "mcp__patchbay__math__add", "upper"):
            result = await client.call_tool(name, {"a": 1, "b": 2, "text": "x"} if name != "upper" else {"text": "x"})
            assert not result.is_error, (name, result)


async def test_ambiguous_bare_name_runs_nothing() -> None:
    config, upstreams = _two()
    async with connected(config, upstreams) as (_, client):
        result = await client.call_tool("read_file", {})
    info = error_info(result)
    assert info["code"] == "TOOL_AMBIGUOUS"
    assert set(info["suggestions"]) == {"math__read_file", "text__read_file"}


async def test_unknown_tool_error_policy_gives_jsonrpc_error() -> None:
    config = config_from({"math": {"command": "x"}}, {"unknown_tool": "error"})
    async with connected(config, MemoryUpstreams({"math": _math()})) as (_, client):
        with pytest.raises(MCPError) as caught:
            await client.call_tool("math__ad", {})
        assert caught.value.code == types.INVALID_PARAMS
        assert caught.value.data["suggestions"][0] == "math__add"


async def test_bad_arguments_never_reach_the_upstream() -> None:
    calls: list[Any] = []

    async def add(ctx: Any, args: dict[str, Any]) -> types.CallToolResult:
        calls.append(args)
        return text("ran")

    config = config_from({"math": {"command": "x"}})
    upstreams = MemoryUpstreams({"math": make_server("math", {"add": FakeTool(add, ADD_SCHEMA)})})
    async with connected(config, upstreams) as (_, client):
        result = await client.call_tool("math__add", {"a": 1, "b": 1000})
        info = error_info(result)
        assert info["code"] == "INVALID_ARGUMENTS"
        assert "'b'" in result_text(result) and "100" in result_text(result)
        missing = await client.call_tool("math__add", {"a": 1})
        assert "Missing required parameter 'b'" in result_text(missing)
    assert calls == []


async def test_broken_and_disabled_entries_do_not_stop_the_others() -> None:
    config = config_from(
        {
            "math": {"command": "x"},
            "broken": {"command": "x", "bogus_key": 1},
            "off": {"command": "x", "disabled": True},
        }
    )
    upstreams = MemoryUpstreams({"math": _math(), "broken": _text(), "off": _text()})
    async with connected(config, upstreams) as (_, client):
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == {"math__add", "math__fail", "math__read_file"}
        broken = error_info(await client.call_tool("broken__upper", {}))
        assert broken["code"] == "SERVER_UNAVAILABLE"
        off = await client.call_tool("off__upper", {})
        assert error_info(off)["code"] == "SERVER_UNAVAILABLE"
        assert "disabled" in result_text(off)
        assert result_text(await client.call_tool("math__add", {"a": 1, "b": 1})) == "2"
    assert "broken" not in upstreams.connects and "off" not in upstreams.connects


async def test_an_upstream_that_never_answers_does_not_block_past_startup_wait() -> None:
    config = config_from({"math": {"command": "x"}, "mute": {"command": "x"}}, {"startup_wait": 0.5})

    class Mute(MemoryUpstreams):
        def __call__(self, name: str, spec: Any) -> Any:
            if name != "mute":
                return super().__call__(name, spec)
            return _silent_link()

    async with connected(config, Mute({"math": _math()})) as (_, client):
        with anyio.fail_after(3):
            names = {t.name for t in (await client.list_tools()).tools}
        assert "math__add" in names
        result = await client.call_tool("mute__anything", {})
        assert error_info(result)["code"] in ("SERVER_STARTING", "TOOL_NOT_FOUND")


def _silent_link() -> Any:
    from contextlib import asynccontextmanager

    from mcp_patchbay.upstreams.transports import Link

    @asynccontextmanager
    async def link() -> AsyncIterator[Any]:
        send, receive = anyio.create_memory_object_stream[Any](100)
        send2, receive2 = anyio.create_memory_object_stream[Any](100)
        async with send, receive, send2, receive2:
            yield Link(receive, send2)

    return link()


async def test_slow_call_times_out_with_is_error_and_upstream_is_cancelled() -> None:
    cancelled = anyio.Event()

    async def slow(ctx: Any, args: dict[str, Any]) -> types.CallToolResult:
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            cancelled.set()
            raise
        return text("late")

    config = config_from({"slow": {"command": "x", "timeout": 0.3}})
    upstreams = MemoryUpstreams({"slow": make_server("slow", {"wait": FakeTool(slow)})})
    async with connected(config, upstreams) as (_, client):
        with anyio.fail_after(5):
            result = await client.call_tool("slow__wait", {})
        info = error_info(result)
        assert info["code"] == "TIMEOUT" and info["retryable"] is True
        with anyio.fail_after(5):
            await cancelled.wait()


async def test_crash_mid_call_fails_in_flight_calls_at_once_and_heals() -> None:
    started = anyio.Event()
    entered: list[int] = []

    async def hang(ctx: Any, args: dict[str, Any]) -> types.CallToolResult:
        entered.append(1)
        if len(entered) == 2:  # both calls are in flight at the upstream
            started.set()
        await anyio.sleep_forever()
        return text("never")

    server = make_server("flaky", {"hang": FakeTool(hang), "ping": FakeTool(_upper)})
    config = config_from({"flaky": {"command": "x"}}, {"restart_initial_delay": 0.05})
    upstreams = MemoryUpstreams({"flaky": server})
    async with connected(config, upstreams) as (proxy, client):
        # The restart's backoff ends when the test says: the call in between meets the restart.
        upstream = proxy.supervisor.upstreams["flaky"]
        backing_off = anyio.Event()
        backoff_over = anyio.Event()

        async def backoff_sleep(seconds: float) -> None:
            backing_off.set()
            await backoff_over.wait()

        upstream.restart_backoff.sleep = backoff_sleep
        results: list[types.CallToolResult] = []

        async def call() -> None:
            results.append(await client.call_tool("flaky__hang", {}))

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                tg.start_soon(call)
                await started.wait()
                upstreams.crash("flaky")
        assert [error_info(r)["code"] for r in results] == ["CONNECTION_LOST", "CONNECTION_LOST"]
        with anyio.fail_after(5):
            await backing_off.wait()
            result = await client.call_tool("flaky__ping", {"text": "back"})
            assert result.is_error and error_info(result)["code"] == "SERVER_STARTING"
            backoff_over.set()
            assert await upstream.wait_ready(5)
            result = await client.call_tool("flaky__ping", {"text": "back"})
        assert not result.is_error
        assert result_text(result) == "BACK"
    assert upstreams.connects["flaky"] >= 2


async def test_jsonrpc_errors_from_upstream_become_is_error_results() -> None:
    async def boom(ctx: Any, args: dict[str, Any]) -> types.CallToolResult:
        raise RuntimeError("database on fire")

    async def picky(ctx: Any, args: dict[str, Any]) -> types.CallToolResult:
        raise MCPError(types.INVALID_PARAMS, "days must be at most 14")

    server = make_server("svc", {"boom": FakeTool(boom), "picky": FakeTool(picky)})
    config = config_from({"svc": {"command": "x"}})
    async with connected(config, MemoryUpstreams({"svc": server})) as (_, client):
        boom_info = error_info(await client.call_tool("svc__boom", {}))
        assert boom_info["code"] == "SERVER_ERROR"
        picky_result = await client.call_tool("svc__picky", {})
        assert error_info(picky_result)["code"] == "INVALID_ARGUMENTS"
        assert "days must be at most 14" in result_text(picky_result)


async def test_oversize_text_is_truncated_with_a_note() -> None:
    async def big(ctx: Any, args: dict[str, Any]) -> types.CallToolResult:
        return text("x" * 5000)

    async def big_structured(ctx: Any, args: dict[str, Any]) -> types.CallToolResult:
        return types.CallToolResult(content=[], structured_content={"blob": "y" * 5000})

    server = make_server("big", {"text": FakeTool(big), "data": FakeTool(big_structured)})
    config = config_from({"big": {"command": "x"}}, {"max_result_bytes": 1000})
    async with connected(config, MemoryUpstreams({"big": server})) as (_, client):
        result = await client.call_tool("big__text", {})
        assert not result.is_error
        assert result.content[0].text == "x" * 1000  # type: ignore[union-attr]
        assert "truncated" in result_text(result) and "4,000" in result_text(result)
        assert error_info(await client.call_tool("big__data", {}))["code"] == "RESULT_TOO_LARGE"


async def test_breaker_opens_after_consecutive_failures() -> None:
    async def boom(ctx: Any, args: dict[str, Any]) -> types.CallToolResult:
        raise RuntimeError("no")

    server = make_server("svc", {"boom": FakeTool(boom)})
    config = config_from({"svc": {"command": "x"}}, {"breaker_threshold": 2, "breaker_cooldown": 30})
    async with connected(config, MemoryUpstreams({"svc": server})) as (_, client):
        codes = [error_info(await client.call_tool("svc__boom", {}))["code"] for _ in range(3)]
        assert codes == ["SERVER_ERROR", "SERVER_ERROR", "CIRCUIT_OPEN"]
        info = error_info(await client.call_tool("svc__boom", {}))
        assert info["retry_after_ms"] > 0 and info["retryable"] is True


async def test_concurrency_limit_sheds_load_with_bulkhead_full() -> None:
    release = anyio.Event()
    holding = anyio.Event()
    shed = anyio.Event()

    async def hold(ctx: Any, args: dict[str, Any]) -> types.CallToolResult:
        holding.set()
        await release.wait()
        return text("done")

    server = make_server("svc", {"hold": FakeTool(hold)})
    config = config_from({"svc": {"command": "x", "max_concurrency": 1}}, {"queue_timeout": 0.2})
    async with connected(config, MemoryUpstreams({"svc": server})) as (_, client):
        results: list[types.CallToolResult] = []

        async def call() -> None:
            results.append(await client.call_tool("svc__hold", {}))
            shed.set()

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                await holding.wait()  # the one slot is taken
                tg.start_soon(call)
                await shed.wait()  # the second gave up after queue_timeout
                release.set()
    codes = sorted("ok" if not r.is_error else error_info(r)["code"] for r in results)
    assert codes == ["BULKHEAD_FULL", "ok"]


async def test_progress_reaches_the_client() -> None:
    async def work(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        for step in range(3):
            await ctx.session.report_progress(step + 1, 3, f"step {step + 1}")
        return text("done")

    server = make_server("svc", {"work": FakeTool(work)})
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    config = config_from({"svc": {"command": "x"}})
    async with connected(config, MemoryUpstreams({"svc": server})) as (_, client):
        result = await client.call_tool("svc__work", {}, progress_callback=on_progress)
    assert result_text(result) == "done"
    assert seen == [1, 2, 3]


async def test_late_upstream_triggers_tools_list_changed() -> None:
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    gate = anyio.Event()

    config = config_from({"math": {"command": "x"}, "late": {"command": "x"}}, {"startup_wait": 0.2})
    async with connected(
        config, GatedUpstreams({"math": _math(), "late": _text()}, {"late": gate}), message_handler=on_message
    ) as (_, client):
        first = {t.name for t in (await client.list_tools()).tools}
        assert "text__upper" not in first and "late__upper" not in first
        gate.set()
        with anyio.fail_after(5):
            await changed.wait()
        assert "late__upper" in {t.name for t in (await client.list_tools()).tools}


async def test_status_resource_reports_errors_by_code() -> None:
    config, upstreams = _two()
    async with connected(config, upstreams) as (_, client):
        await client.call_tool("math__nope", {})
        await client.call_tool("math__add", {"a": 1})
        result = await client.read_resource("patchbay://status")
    import json

    status = json.loads(result.contents[0].text)  # type: ignore[union-attr]
    assert status["servers"]["math"]["state"] == "ready"
    assert status["servers"]["math"]["errors"] == {"INVALID_ARGUMENTS": 1}
    assert status["unresolved_names"] == {"TOOL_NOT_FOUND": 1}


async def test_missing_working_directory_is_named_as_such(tmp_path: Any) -> None:
    """Regression: a missing cwd was reported as a missing command."""
    from mcp import Client

    from mcp_patchbay.session.proxy import Proxy

    config = config_from({"ghost": {"command": "python3", "cwd": str(tmp_path / "nope")}})
    proxy = Proxy(config)  # no connector: a real spawn, to reach the OS
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            await tg.start(proxy.run)
            async with Client(proxy_transport(proxy), mode="legacy", cache=None) as client:  # pyright: ignore[reportArgumentType]
                result = await client.call_tool("ghost__anything", {})
            tg.cancel_scope.cancel()
    assert error_info(result)["code"] == "SERVER_UNAVAILABLE"
    assert "working directory" in result_text(result)
