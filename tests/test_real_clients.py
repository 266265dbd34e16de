"""Regressions from trying the proxy in real clients (Gemini CLI, MCP Inspector, mcp-cli).

Each test is named after what a client showed. In memory: real SDK upstreams, the proxy,
a real SDK client or raw JSON-RPC messages where the exact bytes matter.
"""

from __future__ import annotations

from typing import Any, cast

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.memory import create_client_server_memory_streams
from mcp.shared.message import SessionMessage

from mcp_patchbay.errors.foreign import translate
from mcp_patchbay.errors.tree import Code
from mcp_patchbay.upstreams.transports.http import HttpStatuses
from tests.harness import (
    FakeTool,
    GatedUpstreams,
    MemoryUpstreams,
    config_from,
    connected,
    error_info,
    make_server,
    result_text,
    running_proxy,
    text,
)

pytestmark = pytest.mark.anyio


async def _ok(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
    return text("ok")


def _rich(name: str) -> Any:
    return make_server(
        name,
        {"ping": FakeTool(_ok)},
        resources=[types.Resource(uri=f"file:///{name}.txt", name=f"{name}-file")],
        prompts=[types.Prompt(name="greet")],
    )


# --- 2. list_changed nobody needed (Gemini CLI registered every prompt twice) ------------


async def test_list_changed_is_not_sent_for_lists_the_client_already_has() -> None:
    notices: list[str] = []
    tools_changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ServerNotification | types.Notification):
            method = getattr(message, "method", type(message).__name__)
            notices.append(method)
            if isinstance(message, types.ToolListChangedNotification):
                tools_changed.set()

    late_gate = anyio.Event()
    upstreams = GatedUpstreams(
        {"a": _rich("a"), "b": _rich("b"), "late": make_server("late", {"x": FakeTool(_ok)})}, {}
    )
    upstreams.gates["late"] = late_gate
    config = config_from(
        {"a": {"command": "x"}, "b": {"command": "x"}, "late": {"command": "x"}}, {"startup_wait": 0.3}
    )
    async with connected(config, upstreams, message_handler=on_message) as (proxy, client):
        # Discovery right after the handshake, as Gemini CLI does it, while 'late' is still starting.
        tools = {t.name for t in (await client.list_tools()).tools}
        prompts = {p.name for p in (await client.list_prompts()).prompts}
        await client.list_resources()
        await client.list_resource_templates()
        assert "a__ping" in tools and "late__x" not in tools
        assert prompts == {"a__greet", "b__greet"}
        # Upstreams that say their lists changed without changing them (server-everything does
        # so right after `initialized`), and a restart that brings back the same lists.
        for name in ("a", "b"):
            for kind in ("tools", "prompts", "resources"):
                await proxy.supervisor.upstreams[name].refresh(kind)
        # Then a real change: 'late' comes up with a tool. Its notice arrives after any the
        # refreshes above would have caused, on the same ordered channel.
        late_gate.set()
        with anyio.fail_after(10):
            await tools_changed.wait()
        assert notices == ["notifications/tools/list_changed"]
        # A second change before the client listed again needs no second notice.
        await proxy.supervisor.upstreams["a"].refresh("tools")
        assert "late__x" in {t.name for t in (await client.list_tools()).tools}
    assert notices == ["notifications/tools/list_changed"]


async def test_list_changed_not_sent_before_the_client_listed() -> None:
    notices: list[Any] = []

    async def on_message(message: Any) -> None:
        if not isinstance(message, Exception):
            notices.append(message)

    gate = anyio.Event()
    upstreams = GatedUpstreams({"a": _rich("a"), "late": _rich("late")}, {"late": gate})
    config = config_from({"a": {"command": "x"}, "late": {"command": "x"}}, {"startup_wait": 0.2})
    async with connected(config, upstreams, message_handler=on_message) as (proxy, client):
        gate.set()
        with anyio.fail_after(10):
            await proxy.supervisor.upstreams["late"].wait_ready(10)
        # The client never listed: nothing it holds can be stale. A ping orders the channel.
        await client.send_ping()
        tools = {t.name for t in (await client.list_tools()).tools}
        assert "late__ping" in tools
    assert [n for n in notices if "list_changed" in getattr(n, "method", "")] == []


# --- 3. The proxy's deadline must end before the client's ------------------------------


def _busy_server(finished: list[str]) -> Any:
    async def work(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        # Reports progress whenever the caller asked for it, for 20 steps of 50 ms (1 s in all).
        for step in range(20):
            await ctx.session.report_progress(step + 1, 20)
            await anyio.sleep(0.05)
        finished.append("done")
        return text("done")

    return make_server("svc", {"work": FakeTool(work)})


async def test_progress_without_client_token_does_not_extend_the_deadline() -> None:
    """A client that sent no progressToken keeps its own timer: the proxy's timeout holds."""
    finished: list[str] = []
    config = config_from({"svc": {"command": "x", "timeout": 0.3}}, {"max_call_time": 60})
    async with connected(config, MemoryUpstreams({"svc": _busy_server(finished)})) as (_, client):
        with anyio.fail_after(5):
            result = await client.call_tool("svc__work", {})
    assert error_info(result)["code"] == "TIMEOUT"
    assert finished == []


async def test_progress_with_client_token_extends_the_deadline() -> None:
    finished: list[str] = []
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    config = config_from({"svc": {"command": "x", "timeout": 0.3}}, {"max_call_time": 60})
    async with connected(config, MemoryUpstreams({"svc": _busy_server(finished)})) as (_, client):
        with anyio.fail_after(10):
            result = await client.call_tool("svc__work", {}, progress_callback=on_progress)
    assert result_text(result) == "done"
    assert len(seen) == 20


# --- 4. Protocol details ---------------------------------------------------------------


def _meta_echo() -> Any:
    async def echo(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        meta = dict(ctx.meta or {})
        return types.CallToolResult(content=[], structured_content={"meta": meta})

    return make_server("svc", {"echo": FakeTool(echo)})


async def test_client_meta_reaches_the_upstream_on_the_lane() -> None:
    config = config_from({"svc": {"command": "x"}})
    meta: Any = {"traceparent": "00-abc-def-01", "com.example/tenant": {"id": 7}}
    async with connected(config, MemoryUpstreams({"svc": _meta_echo()})) as (_, client):
        result = await client.call_tool("svc__echo", {}, meta=meta)
    assert result.structured_content == {"meta": meta}


async def test_client_meta_reaches_the_upstream_with_the_proxys_progress_token() -> None:
    config = config_from({"svc": {"command": "x"}})

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        pass

    async with connected(config, MemoryUpstreams({"svc": _meta_echo()})) as (_, client):
        result = await client.call_tool("svc__echo", {}, progress_callback=on_progress, meta={"traceparent": "t"})
    assert result.structured_content is not None
    got = result.structured_content["meta"]
    assert got["traceparent"] == "t"
    assert str(got["progress_token"]).startswith("pb-") or isinstance(got["progress_token"], int)


async def test_client_meta_reaches_the_upstream_on_a_2026_connection() -> None:
    config = config_from({"svc": {"command": "x"}})
    async with connected(config, MemoryUpstreams({"svc": _meta_echo()}), mode="auto") as (_, client):
        result = await client.call_tool("svc__echo", {}, meta={"traceparent": "00-1-2-01"})
    assert result.structured_content is not None
    got = result.structured_content["meta"]
    assert got["traceparent"] == "00-1-2-01"
    assert not any(key.startswith("io.modelcontextprotocol/") for key in got)  # the client's stamps stay


async def _raw_call(proxy: Any, params: dict[str, Any], *, handshake: bool = True) -> dict[str, Any]:
    """A tools/call sent as a 2025-11-25 client sends it; the answer as the client reads it."""
    async with create_client_server_memory_streams() as (client_streams, server_streams):
        async with anyio.create_task_group() as tg:
            tg.start_soon(proxy.serve_client, *server_streams)
            read, write = client_streams

            async def send(message: dict[str, Any]) -> None:
                await write.send(SessionMessage(types.jsonrpc_message_adapter.validate_python(message)))

            async def answer(request_id: int) -> dict[str, Any]:
                with anyio.fail_after(10):
                    async for item in read:
                        message = cast(SessionMessage, item).message  # the stream carries no exceptions here
                        data = message.model_dump(by_alias=True, mode="json", exclude_none=True)
                        if data.get("id") == request_id:
                            return data
                raise AssertionError("no answer")

            init = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"roots": {}},
                "clientInfo": {"name": "inspector-like", "version": "0"},
            }
            await send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
            await answer(1)
            if handshake:
                await send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            await send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params})
            reply = await answer(2)
            tg.cancel_scope.cancel()
            return reply
    raise AssertionError("the task group ended before the answer")  # unreachable: for the type checker


async def test_proxy_error_results_carry_no_2026_fields_on_2025_sessions() -> None:
    """Inspector showed ``"resultType": "complete"`` on the proxy's own isError results."""
    config = config_from({"svc": {"command": "x"}})
    async with running_proxy(config, MemoryUpstreams({"svc": _meta_echo()})) as proxy:
        for handshake in (True, False):  # the lane, and the SDK's path for an early call
            unknown = await _raw_call(proxy, {"name": "svc__nope"}, handshake=handshake)
            assert unknown["result"]["isError"] is True
            assert "resultType" not in unknown["result"], unknown
            ok = await _raw_call(proxy, {"name": "svc__echo", "arguments": {}}, handshake=handshake)
            assert "resultType" not in ok["result"], ok


async def test_proxy_error_results_carry_result_type_on_2026_sessions() -> None:
    config = config_from({"svc": {"command": "x"}})
    async with connected(config, MemoryUpstreams({"svc": _meta_echo()}), mode="auto") as (_, client):
        result = await client.call_tool("svc__nope", {})
    assert result.is_error and result.result_type == "complete"


def _post(request_id: int | None, status: int, retry_after: str | None = None) -> httpx2.Response:
    body = b'{"jsonrpc":"2.0","method":"tools/call","params":{}' + (
        b',"id":%d}' % request_id if request_id is not None else b"}"
    )
    request = httpx2.Request("POST", "http://upstream/mcp", content=body)
    headers = {"retry-after": retry_after} if retry_after else {}
    return httpx2.Response(status, headers=headers, request=request)


def _stand_in(request_id: int) -> SessionMessage:
    error = types.ErrorData(code=types.INTERNAL_ERROR, message="Server returned an error response")
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


def _code_of(message: SessionMessage | Exception) -> tuple[Code, int | None]:
    assert isinstance(message, SessionMessage) and isinstance(message.message, types.JSONRPCError)
    error = translate(MCPError.from_error_data(message.message.error), server="remote", tool="t")
    return error.code, error.retry_after_ms


async def test_http_status_is_tied_to_its_own_request() -> None:
    """Two calls in flight on one HTTP upstream: each error gets its own request's status."""
    statuses = HttpStatuses()
    await statuses.hook(_post(7, 429, "3"))
    await statuses.hook(_post(8, 401))
    await statuses.hook(_post(None, 500))  # a notification's POST: no request to tie it to
    # Answers arrive in the other order than the statuses did.
    assert _code_of(statuses.stamp(_stand_in(8))) == (Code.AUTH_FAILED, None)
    assert _code_of(statuses.stamp(_stand_in(7))) == (Code.RATE_LIMITED, 3000)
    # A stand-in for a request whose POST saw no error status stays what it was.
    assert _code_of(statuses.stamp(_stand_in(9)))[0] is not Code.RATE_LIMITED


async def test_http_statuses_forget_abandoned_requests() -> None:
    statuses = HttpStatuses()
    for request_id in range(HttpStatuses.LIMIT + 50):
        await statuses.hook(_post(request_id, 429))
    assert _code_of(statuses.stamp(_stand_in(0)))[0] is not Code.RATE_LIMITED  # forgotten
    assert _code_of(statuses.stamp(_stand_in(HttpStatuses.LIMIT + 49)))[0] is Code.RATE_LIMITED


async def test_an_upstream_error_cannot_pose_as_an_http_status() -> None:
    """Only the SDK's HTTP stand-ins carry a status: a stdio upstream's own error with the same
    data key stays the upstream's error (it would have dropped the session as a 404)."""
    forged = types.ErrorData(code=-32000, message="my own error", data={"patchbay/httpStatus": 404})
    error = translate(MCPError.from_error_data(forged), server="s", tool="t")
    assert error.code is not Code.CONNECTION_LOST


async def test_a_malformed_upstream_result_on_the_sdk_path_is_an_is_error_result() -> None:
    """A 2026-07-28 client (the SDK's typed path): a result the SDK's model refuses used to come
    back as a JSON-RPC invalid-params error, blaming the client."""
    config = config_from({"svc": {"command": "x"}})
    async with running_proxy(config, MemoryUpstreams({"svc": _meta_echo()})) as proxy:

        async def bogus(*args: Any, **kwargs: Any) -> dict[str, Any]:
            return {"content": [{"type": "bogus"}]}

        proxy.run_tool = bogus  # type: ignore[method-assign]
        from mcp import Client

        from tests.harness import proxy_transport

        async with Client(proxy_transport(proxy), mode="auto", cache=None) as client:  # pyright: ignore[reportArgumentType]
            result = await client.call_tool("svc__echo", {})
    assert result.is_error and "malformed" in result_text(result)
