"""The HTTP gateway in process: a real uvicorn on a free loopback port, in-memory upstreams.

Clients of both eras over real HTTP (the SDK's ``Client``), sign-in by static tokens,
access per token, list changes per session, routing of an upstream's request to the
session whose call caused it, Host checks, health, readiness, metrics and draining.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

from mcp_patchbay.config import Config, parse_config
from mcp_patchbay.gateway.app import Gateway
from mcp_patchbay.gateway.bind import refusal
from tests.harness import FakeTool, MemoryUpstreams, error_info, logged, make_server, result_text, text

pytestmark = pytest.mark.anyio

ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdef01"


def gateway_config(gateway: dict[str, Any] | None = None, patchbay: dict[str, Any] | None = None) -> Config:
    document: dict[str, Any] = {"mcpServers": {"time": {"command": "x"}, "notes": {"command": "x"}}}
    if gateway is not None:
        document["gateway"] = gateway
    document["patchbay"] = {"watch": False, **(patchbay or {})}
    from pathlib import Path

    return parse_config(json.dumps(document), Path("/virtual/patchbay.json").resolve(), environ={})


def upstreams(extra: dict[str, FakeTool] | None = None) -> MemoryUpstreams:
    async def now(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        return text("12:00")

    async def add(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        return text(args.get("note", ""))

    notes = {"add": FakeTool(add), "delete_all": FakeTool(add), **(extra or {})}
    return MemoryUpstreams({"time": make_server("time", {"now": FakeTool(now)}), "notes": make_server("notes", notes)})


@asynccontextmanager
async def running(config: Config, memory: MemoryUpstreams) -> AsyncGenerator[tuple[Gateway, str]]:
    gateway = Gateway(config, "127.0.0.1", 0, connector=memory)
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            host, port = await tg.start(functools.partial(gateway.serve, signals=False))
            await gateway.proxy.supervisor.wait_startup()
            try:
                yield gateway, f"http://{host}:{port}"
            finally:
                gateway.stop()  # uvicorn closes its listener; serve returns and the group ends


@asynccontextmanager
async def client(base: str, *, token: str | None = None, mode: str = "legacy", **kwargs: Any) -> AsyncGenerator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(10.0)) as http:
        transport = streamable_http_client(f"{base}/mcp", http_client=http)
        async with Client(transport, mode=mode, cache=None, **kwargs) as connected:  # pyright: ignore[reportArgumentType]
            yield connected


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_both_eras_list_and_call(mode: str) -> None:
    async with running(gateway_config(), upstreams()) as (_, base):
        async with client(base, mode=mode) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            assert {"time__now", "notes__add"} <= names
            assert result_text(await c.call_tool("time__now", {})) == "12:00"
            wrong = await c.call_tool("time.nwo", {})
            assert wrong.is_error and "time__now" in result_text(wrong)


async def test_health_readiness_and_metrics() -> None:
    async with running(gateway_config({"metrics": "127.0.0.1:0"}), upstreams()) as (gateway, base):
        assert gateway.metrics_bound is not None
        metrics_base = f"http://127.0.0.1:{gateway.metrics_bound[1]}"
        async with httpx2.AsyncClient(base_url=base) as http, httpx2.AsyncClient(base_url=metrics_base) as scrape:
            assert (await http.get("/healthz")).status_code == 200
            assert (await http.get("/readyz")).json() == {"status": "ready"}
            async with client(base) as c:
                await c.call_tool("time__now", {})
                await c.call_tool("nothing__here", {})
            assert (await http.get("/metrics")).status_code == 404  # never on the clients' listener
            metrics = (await scrape.get("/metrics")).text
            assert 'patchbay_tool_calls_total{outcome="ok",server="time",tool="now"} 1.0' in metrics
            assert 'outcome="TOOL_NOT_FOUND"' in metrics
            assert 'patchbay_upstream_state{server="time",state="ready"} 1.0' in metrics
            assert 'patchbay_upstream_state{server="time",state="restarting"} 0.0' in metrics
            assert "patchbay_tool_call_duration_seconds_bucket" in metrics
            gateway.draining = True
            assert (await http.get("/readyz")).status_code == 404


async def test_tokens_admit_and_refuse() -> None:
    config = gateway_config({"tokens": {"alice": ALICE}})
    async with running(config, upstreams()) as (_, base):
        async with httpx2.AsyncClient(base_url=base) as http:
            body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
            headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
            refused = await http.post("/mcp", json=body, headers=headers)
            assert refused.status_code == 401
            assert refused.headers["www-authenticate"].startswith("Bearer")
            wrong = await http.post("/mcp", json=body, headers={**headers, "authorization": "Bearer " + BOB})
            assert wrong.status_code == 401
            assert (await http.get("/healthz")).status_code == 200  # probes need no token
        async with client(base, token=ALICE) as c:
            assert result_text(await c.call_tool("time__now", {})) == "12:00"


async def test_access_rules_hide_servers_and_tools_per_token() -> None:
    config = gateway_config(
        {
            "tokens": {"alice": ALICE, "bob": BOB},
            "access": [
                {"tokens": ["alice"], "servers": ["*"], "tools": {"notes": {"deny": ["delete_*"]}}},
                {"tokens": ["bob"], "servers": ["time"]},
            ],
        }
    )
    async with running(config, upstreams()) as (_, base):
        async with client(base, token=ALICE) as alice, client(base, token=BOB) as bob:
            alice_names = {t.name for t in (await alice.list_tools()).tools}
            bob_names = {t.name for t in (await bob.list_tools()).tools}
            assert alice_names == {"time__now", "notes__add"}
            assert bob_names == {"time__now"}
            # What a member may not use answers as a tool that does not exist (no existence oracle).
            denied = await bob.call_tool("notes__add", {"note": "x"})
            assert error_info(denied)["code"] == "TOOL_NOT_FOUND"
            assert "notes" not in result_text(denied).replace("notes__add", "")
            hidden = await alice.call_tool("notes__delete_all", {})
            assert error_info(hidden)["code"] == "TOOL_NOT_FOUND"
            near = await bob.call_tool("notes__ad", {})  # a near miss is never suggested across the line
            assert "notes__add" not in result_text(near)
            assert result_text(await alice.call_tool("notes__add", {"note": "hi"})) == "hi"


async def test_list_changes_reach_each_session_that_listed() -> None:
    tools: dict[str, FakeTool] = {}

    async def grow(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        tools["fresh"] = FakeTool(grow)
        await ctx.session.send_tool_list_changed()
        return text("grown")

    tools["grow"] = FakeTool(grow)
    memory = MemoryUpstreams({"time": make_server("time", tools), "notes": make_server("notes", {})})
    seen = {"a": anyio.Event(), "b": anyio.Event()}

    def handler(name: str) -> Any:
        async def on_message(message: Any) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                seen[name].set()

        return on_message

    async with running(gateway_config(), memory) as (_, base):
        async with client(base, message_handler=handler("a")) as a, client(base, message_handler=handler("b")) as b:
            await a.list_tools()
            await b.list_tools()
            await a.call_tool("time__grow", {})
            with anyio.fail_after(5):
                await seen["a"].wait()
                await seen["b"].wait()
            assert "time__fresh" in {t.name for t in (await b.list_tools()).tools}


async def test_upstream_requests_reach_the_calling_session_only() -> None:
    async def ask(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        answer = await ctx.session.create_message(  # pyright: ignore[reportDeprecated]
            messages=[types.SamplingMessage(role="user", content=types.TextContent(type="text", text="hi"))],
            max_tokens=5,
        )
        content = answer.content
        return text(content.text if isinstance(content, types.TextContent) else "?")

    asked: list[str] = []

    def sampler(name: str) -> Any:
        async def sampling(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
            asked.append(name)
            return types.CreateMessageResult(
                role="assistant", content=types.TextContent(type="text", text=f"from {name}"), model="m"
            )

        return sampling

    async with running(gateway_config(), upstreams({"ask": FakeTool(ask)})) as (_, base):
        async with client(base, sampling_callback=sampler("a")) as a, client(base, sampling_callback=sampler("b")) as b:
            await b.list_tools()
            assert result_text(await a.call_tool("notes__ask", {})) == "from a"
            assert result_text(await b.call_tool("notes__ask", {})) == "from b"
    assert asked == ["a", "b"]


async def test_host_checks_refuse_a_rebound_name() -> None:
    async with running(gateway_config(), upstreams()) as (_, base):
        async with httpx2.AsyncClient(base_url=base) as http:
            body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
            headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
            evil = await http.post("/mcp", json=body, headers={**headers, "host": "evil.example:80"})
            assert evil.status_code == 421
            origin = await http.post("/mcp", json=body, headers={**headers, "origin": "http://evil.example"})
            assert origin.status_code == 403


async def test_draining_lets_calls_finish_and_refuses_new_sessions() -> None:
    release = anyio.Event()
    started = anyio.Event()

    async def slow(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        started.set()
        await release.wait()
        return text("done")

    results: list[str] = []
    statuses: dict[str, int] = {}
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    async with running(gateway_config({"drain_grace": 10}), upstreams({"slow": FakeTool(slow)})) as (gateway, base):
        # The session ends with the drain, so the client's own ending may fail: checked below, not here.
        with contextlib.suppress(Exception):
            async with client(base) as c, httpx2.AsyncClient(base_url=base) as http:

                async def call() -> None:
                    results.append(result_text(await c.call_tool("notes__slow", {})))

                await c.list_tools()  # the SDK's client lists tools after a call it cannot check: not then
                async with anyio.create_task_group() as tg:
                    tg.start_soon(call)
                    await started.wait()
                    with logged("mcp_patchbay.gateway", "draining:") as draining:
                        tg.start_soon(gateway.drain)
                        with anyio.fail_after(5):
                            await draining.wait()  # said once readiness is off
                    assert (await http.get("/readyz")).status_code == 404
                    statuses["opening"] = (await http.post("/mcp", json=initialize, headers=headers)).status_code
                    release.set()
                # The drain (a task of the group just left) is over: the sessions are closed, not left to be cut.
                statuses["sessions"] = gateway.manager.sessions
    assert results == ["done"]
    assert statuses == {"opening": 503, "sessions": 0}


async def test_a_replica_with_nothing_in_flight_keeps_serving_while_the_balancer_learns_it_drains() -> None:
    """A replica with nothing in flight closed its sessions and its listener at once on SIGTERM,
    before HAProxy's next check saw /readyz answer 404: a stateless call HAProxy had just sent it
    got a bare disconnect. For ``drain_notice`` it still serves what arrives."""
    config = gateway_config({"drain_notice": 60})
    async with running(config, upstreams()) as (gateway, base):
        async with client(base) as c, httpx2.AsyncClient(base_url=base) as http:
            assert result_text(await c.call_tool("time__now", {})) == "12:00"
            async with anyio.create_task_group() as tg:
                with logged("mcp_patchbay.gateway", "draining:") as draining:
                    tg.start_soon(gateway.drain)
                    with anyio.fail_after(5):
                        await draining.wait()
                assert (await http.get("/readyz")).status_code == 404
                assert result_text(await c.call_tool("time__now", {})) == "12:00"  # still served
                tg.cancel_scope.cancel()


def test_refuses_to_serve_beyond_loopback_without_sign_in() -> None:
    problem = refusal(gateway_config(), "0.0.0.0", 8080)
    assert problem is not None and "sign-in" in problem and "gateway" in problem
    assert refusal(gateway_config(), "127.0.0.1", 8080) is None
    assert refusal(gateway_config({"tokens": {"alice": ALICE}}), "0.0.0.0", 8080) is None
    oauth = {"oauth": {"issuer": "https://id.example.com"}}
    missing_url = refusal(gateway_config(oauth), "0.0.0.0", 8080)
    assert missing_url is not None and "gateway.url" in missing_url
    assert refusal(gateway_config({**oauth, "url": "https://mcp.example.com/mcp"}), "0.0.0.0", 8080) is None


def test_lists_are_in_a_deterministic_order_whatever_the_upstreams_order() -> None:
    from mcp_patchbay.catalog.merge import Source, build_catalog

    def tool(name: str) -> types.Tool:
        return types.Tool(name=name, input_schema={"type": "object"})

    def names(order: list[str]) -> list[str]:
        sources = [Source("b", tools=[tool(n) for n in order]), Source("a", tools=[tool("z"), tool("y")])]
        catalog = build_catalog(sources, separator="__", max_length=48, validate_arguments=False)
        return [t.name for t in catalog.tools]

    assert names(["c", "a", "b"]) == names(["b", "c", "a"]) == ["b__a", "b__b", "b__c", "a__y", "a__z"]


async def test_a_question_no_one_can_be_told_the_owner_of_is_refused_and_spares_the_breaker() -> None:
    arrived: list[anyio.Event] = []
    both_in = anyio.Event()

    async def ask(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        arrived.append(anyio.Event())
        if len(arrived) % 2 == 0:
            both_in.set()
        await both_in.wait()
        await ctx.session.create_message(  # pyright: ignore[reportDeprecated]
            messages=[types.SamplingMessage(role="user", content=types.TextContent(type="text", text="secret"))],
            max_tokens=5,
        )
        return text("answered")

    asked: list[str] = []

    def sampler(name: str) -> Any:
        async def sampling(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
            asked.append(name)
            return types.CreateMessageResult(
                role="assistant", content=types.TextContent(type="text", text=name), model="m"
            )

        return sampling

    config = gateway_config({"tokens": {"alice": ALICE, "bob": BOB}}, {"breaker_threshold": 2})
    async with running(config, upstreams({"ask": FakeTool(ask)})) as (_, base):
        async with (
            client(base, token=ALICE, sampling_callback=sampler("alice")) as alice,
            client(base, token=BOB, sampling_callback=sampler("bob")) as bob,
        ):
            for _ in range(3):  # more rounds than the breaker's threshold
                both_in = anyio.Event()
                results: list[types.CallToolResult] = []

                async def call(c: Client, into: list[types.CallToolResult]) -> None:
                    into.append(await c.call_tool("notes__ask", {}))

                async with anyio.create_task_group() as tg:
                    tg.start_soon(call, alice, results)
                    tg.start_soon(call, bob, results)
                assert all(r.is_error for r in results), results
            assert asked == []  # neither member was asked the other's question
            assert result_text(await alice.call_tool("notes__add", {"note": "still open"})) == "still open"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_resources_of_a_server_a_caller_may_not_use_cannot_be_read(mode: str) -> None:
    secret = types.Resource(uri="notes://private", name="private")
    memory = MemoryUpstreams(
        {
            "time": make_server("time", {}),
            "notes": make_server("notes", {}, resources=[secret]),
        }
    )
    config = gateway_config(
        {
            "tokens": {"alice": ALICE, "bob": BOB},
            "access": [{"tokens": ["alice"], "servers": ["*"]}, {"tokens": ["bob"], "servers": ["time"]}],
        }
    )
    async with running(config, memory) as (_, base):
        async with client(base, token=ALICE, mode=mode) as alice, client(base, token=BOB, mode=mode) as bob:
            assert "notes://private" in {str(r.uri) for r in (await alice.list_resources()).resources}
            assert "notes://private" not in {str(r.uri) for r in (await bob.list_resources()).resources}
            read = await alice.read_resource("notes://private")
            assert "notes says" in read.contents[0].text  # type: ignore[union-attr]
            for uri in ("notes://private", "notes://unlisted"):  # listed by a hidden server, or by no one
                with pytest.raises(MCPError):
                    await bob.read_resource(uri)
