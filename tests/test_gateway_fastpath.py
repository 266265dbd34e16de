"""The fast path and the SDK's path keep the same behaviours (issue 26).

The gateway in process on a real uvicorn (as tests/test_gateway.py), in front of an SDK
upstream served by a real uvicorn on loopback (``streamable_http_app``), so a call crosses
both HTTP hops. Each test runs on both paths (``path``, chosen with ``$PATCHBAY_FAST_PATH`` as a
user would): ``fast``, where the gateway answers a ``tools/call`` past the SDK's server
(``fastpath.gateway_calls``) and sends it to the HTTP upstream on its lane (``fastpath.http_calls``),
and ``sdk``, where both are off and the SDK carries it. Upstream-side faults (HTTP statuses, expiry,
an oversized answer) run through the stdio proxy in process (``proxy_rig``), against the
HTTP fault server.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, cast

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

from mcp_patchbay.config import Config, parse_config
from mcp_patchbay.fastpath import http1
from mcp_patchbay.fastpath.http_calls import HttpLane
from mcp_patchbay.gateway.app import Gateway
from mcp_patchbay.wire.jsonrpc import Bounds
from tests.e2e_util import proxy_rig
from tests.harness import FakeTool, make_server, result_text, text
from tests.servers.http_fault_server import HttpFaults, serving
from tests.test_http_lane_faults import lane_to

pytestmark = pytest.mark.anyio

PATHS = ["fast", "sdk"]


@pytest.fixture(params=PATHS)
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The path, chosen as users choose it: ``$PATCHBAY_FAST_PATH`` (``patchbay.fast_path``)."""
    chosen = cast(str, request.param)
    monkeypatch.setenv("PATCHBAY_FAST_PATH", "1" if chosen == "fast" else "0")
    return chosen


class Remote:
    """The upstream's tools, and what they saw."""

    def __init__(self) -> None:
        self.cancelled = anyio.Event()
        self.hanging = anyio.Event()

    def tools(self) -> dict[str, FakeTool]:
        async def echo(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
            return text(str(args.get("text", "")))

        async def work(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
            token = cast(dict[str, Any], ctx.meta).get("progress_token") if ctx.meta else None
            for step in range(3):
                if token is not None:
                    await ctx.session.send_progress_notification(
                        token, step + 1, 3, f"step {step + 1}", related_request_id=cast(str, ctx.request_id)
                    )
            return text("done")

        async def ask(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
            answer = await ctx.session.create_message(  # pyright: ignore[reportDeprecated]
                messages=[types.SamplingMessage(role="user", content=types.TextContent(type="text", text="hi"))],
                max_tokens=5,
                related_request_id=cast(str, ctx.request_id),
            )
            content = answer.content
            return text(content.text if isinstance(content, types.TextContent) else "?")

        async def hang(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
            self.hanging.set()
            try:
                await anyio.sleep_forever()
            finally:
                self.cancelled.set()
            raise AssertionError("unreachable")

        async def big(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
            return text("x" * 300_000)

        tools = {
            name: FakeTool(fn)
            for name, fn in (("echo", echo), ("work", work), ("ask", ask), ("hang", hang), ("big", big))
        }
        region = {"type": "string", "x-mcp-header": "Region"}
        tools["routed"] = FakeTool(echo, schema={"type": "object", "properties": {"text": region}})
        return tools


def config_for(url: str, patchbay: dict[str, Any] | None = None, gateway: dict[str, Any] | None = None) -> Config:
    document: dict[str, Any] = {
        "mcpServers": {"remote": {"type": "http", "url": url}},
        "patchbay": {"watch": False, "timeout": 10, **(patchbay or {})},
    }
    if gateway is not None:
        document["gateway"] = gateway
    return parse_config(json.dumps(document), Path("/virtual/patchbay.json").resolve(), environ=dict(os.environ))


@asynccontextmanager
async def gateway_before(
    remote: Remote, patchbay: dict[str, Any] | None = None, gateway_settings: dict[str, Any] | None = None
) -> AsyncGenerator[tuple[Gateway, str]]:
    server = make_server("remote", remote.tools())
    async with serving(server.streamable_http_app(host="127.0.0.1")) as upstream_base:
        gateway = Gateway(config_for(f"{upstream_base}/mcp", patchbay, gateway_settings), "127.0.0.1", 0)
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                host, port = await tg.start(functools.partial(gateway.serve, signals=False))
                await gateway.proxy.supervisor.wait_startup()
                try:
                    yield gateway, f"http://{host}:{port}"
                finally:
                    gateway.stop()


@asynccontextmanager
async def client(base: str, *, mode: str = "legacy", token: str | None = None, **kwargs: Any) -> AsyncGenerator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(10.0)) as http:
        transport = streamable_http_client(f"{base}/mcp", http_client=http)
        async with Client(transport, mode=mode, cache=None, **kwargs) as connected:  # pyright: ignore[reportArgumentType]
            yield connected


def lane_of(gateway: Gateway) -> HttpLane | None:
    raw = gateway.proxy.supervisor.upstreams["remote"]._raw  # pyright: ignore[reportPrivateUsage]
    return raw if isinstance(raw, HttpLane) else None


def assert_path(gateway: Gateway, path: str, served: int, fast: int | None = None) -> None:
    """The calls took the path: ``served`` by the upstream lane, ``fast`` (default: as many)
    answered by the gateway's fast path."""
    lane = lane_of(gateway)
    if path == "sdk":
        assert lane is None
        assert gateway.fast.served == 0
        return
    assert gateway.fast.served == (served if fast is None else fast)
    assert lane is not None
    assert lane.served == served
    assert lane.fell_back == 0


# --- the upstream side: the raw lane to an HTTP upstream ---------------------------------------


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_calls_of_both_eras_on_one_kept_connection(
    path: str, mode: str, opened_connections: list[object]
) -> None:
    async with gateway_before(Remote()) as (gateway, base), client(base, mode=mode) as c:
        for n in range(5):
            assert result_text(await c.call_tool("remote__echo", {"text": f"hi {n}"})) == f"hi {n}"
        assert_path(gateway, path, 5)
        lane = lane_of(gateway)
        if lane is not None:
            assert len(opened_connections) == 1  # keep-alive: one connection


async def test_progress_reaches_the_caller(path: str) -> None:
    seen: list[tuple[float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, message))

    async with gateway_before(Remote()) as (gateway, base), client(base) as c:
        result = await c.call_tool("remote__work", {}, progress_callback=on_progress)
        assert result_text(result) == "done"
        assert seen == [(1, "step 1"), (2, "step 2"), (3, "step 3")]
        assert_path(gateway, path, 1)


async def test_sampling_mid_call_reaches_the_calling_session(path: str) -> None:
    asked: list[str] = []

    def sampler(name: str) -> Any:
        async def sampling(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
            asked.append(name)
            content = types.TextContent(type="text", text=f"from {name}")
            return types.CreateMessageResult(role="assistant", content=content, model="m")

        return sampling

    async with gateway_before(Remote()) as (gateway, base):
        async with client(base, sampling_callback=sampler("a")) as a, client(base, sampling_callback=sampler("b")) as b:
            assert result_text(await a.call_tool("remote__ask", {})) == "from a"
            assert result_text(await b.call_tool("remote__ask", {})) == "from b"
        assert_path(gateway, path, 2)
    assert asked == ["a", "b"]


async def test_a_call_the_client_cancels_is_cancelled_upstream(path: str) -> None:
    remote = Remote()
    async with gateway_before(remote) as (gateway, base), client(base) as c:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(c.call_tool, "remote__hang", {})
                await remote.hanging.wait()
                tg.cancel_scope.cancel()  # the SDK's client sends notifications/cancelled
            await remote.cancelled.wait()
        assert result_text(await c.call_tool("remote__echo", {"text": "after"})) == "after"
        if path == "fast":
            lane = lane_of(gateway)
            assert lane is not None and lane.served == 1


async def test_an_answer_over_the_size_limit_fails_that_call_alone(path: str) -> None:
    async with gateway_before(Remote(), {"max_message_bytes": 200_000}) as (gateway, base), client(base) as c:
        refused = await c.call_tool("remote__big", {})
        assert refused.is_error
        assert "more data than the proxy accepts" in result_text(refused)
        assert result_text(await c.call_tool("remote__echo", {"text": "still"})) == "still"
        assert gateway.proxy.supervisor.upstreams["remote"].restarts == 0


# --- the client side: the gateway's fast path ---------------------------------------------------

ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdef01"
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


async def open_session(http: httpx2.AsyncClient) -> str:
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
    opened = await http.post(
        "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}, headers=HEADERS
    )
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    with_session = {**HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
    done = await http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=with_session)
    assert done.status_code == 202
    return session


def call_body(tool: str, arguments: dict[str, Any], request_id: int = 7) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }


async def test_sign_in_and_access_rules_hold(path: str) -> None:
    settings = {
        "tokens": {"alice": ALICE, "bob": BOB},
        "access": [{"tokens": ["alice"], "servers": ["remote"], "tools": {"remote": {"allow": ["echo"]}}}],
    }
    async with gateway_before(Remote(), gateway_settings=settings) as (gateway, base):
        async with client(base, token=ALICE) as alice:
            assert result_text(await alice.call_tool("remote__echo", {"text": "mine"})) == "mine"
            hidden = await alice.call_tool("remote__work", {})
            assert hidden.is_error and "remote__work" in result_text(hidden)
        async with client(base, token=BOB) as bob:
            refused = await bob.call_tool("remote__echo", {"text": "not bob's"})
            assert refused.is_error
        async with httpx2.AsyncClient(base_url=base, headers={"authorization": f"Bearer {ALICE}"}) as http:
            session = await open_session(http)
            as_bob = {**HEADERS, "mcp-session-id": session, "authorization": f"Bearer {BOB}"}
            stolen = await http.post("/mcp", json=call_body("remote__echo", {"text": "x"}), headers=as_bob)
            assert stolen.status_code == 404  # another member's session: as if unknown
            unsigned = {**HEADERS, "mcp-session-id": session, "authorization": ""}
            assert (
                await http.post("/mcp", json=call_body("remote__echo", {"text": "x"}), headers=unsigned)
            ).status_code == 401
            with_session = {**HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
            answer = await http.post("/mcp", json=call_body("remote__echo", {"text": "raw"}), headers=with_session)
            assert answer.status_code == 200
            body = (
                answer.json()
                if answer.headers["content-type"].startswith("application/json")
                else _sse_answer(answer.text)
            )
            assert body["id"] == 7 and body["result"]["content"][0]["text"] == "raw"
        assert gateway.fast.served == (4 if path == "fast" else 0)


def _sse_answer(text: str) -> dict[str, Any]:
    for line in text.splitlines():
        if line.startswith("data:") and line[5:].strip():
            return json.loads(line[5:])
    raise AssertionError(f"no answer in {text!r}")


async def test_a_client_that_hangs_up_cancels_its_call_and_the_session_is_held_meanwhile(path: str) -> None:
    remote = Remote()
    async with gateway_before(remote) as (gateway, base):
        async with httpx2.AsyncClient(base_url=base, timeout=10) as http:
            session = await open_session(http)
            transport = gateway.manager._server_instances[session]  # pyright: ignore[reportPrivateUsage]
            with_session = {**HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
            with anyio.fail_after(10):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(
                        functools.partial(http.post, "/mcp", json=call_body("remote__hang", {}), headers=with_session)
                    )
                    await remote.hanging.wait()
                    assert transport._requests_in_flight == 1  # pyright: ignore[reportPrivateUsage] - idle timer held
                    tg.cancel_scope.cancel()  # the client goes away mid-call
            if path == "fast":
                with anyio.fail_after(10):
                    await remote.cancelled.wait()  # told upstream
            with anyio.fail_after(10):
                while transport._requests_in_flight:  # pyright: ignore[reportPrivateUsage]
                    await anyio.sleep(0.01)
            answer = await http.post("/mcp", json=call_body("remote__echo", {"text": "on"}, 8), headers=with_session)
            assert answer.status_code == 200


async def test_the_client_s_cancel_notice_ends_the_call_and_its_post(path: str) -> None:
    remote = Remote()
    async with gateway_before(remote) as (_, base):
        async with httpx2.AsyncClient(base_url=base, timeout=10) as http:
            session = await open_session(http)
            with_session = {**HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
            ended: list[int] = []

            async def hanging_call() -> None:
                answer = await http.post("/mcp", json=call_body("remote__hang", {}, 21), headers=with_session)
                ended.append(answer.status_code)

            with anyio.fail_after(10):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(hanging_call)
                    await remote.hanging.wait()
                    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 21}}
                    assert (await http.post("/mcp", json=cancel, headers=with_session)).status_code == 202
                    await remote.cancelled.wait()  # told upstream
                    if path == "sdk":
                        tg.cancel_scope.cancel()  # the SDK's stream may stay open: not this test's business
            if path == "fast":
                assert ended == [202]  # no JSON-RPC answer to a cancelled request
            answer = await http.post("/mcp", json=call_body("remote__echo", {"text": "on"}, 22), headers=with_session)
            assert answer.status_code == 200


async def test_metrics_count_calls(path: str) -> None:
    async with gateway_before(Remote()) as (gateway, base), client(base) as c:
        await c.call_tool("remote__echo", {"text": "a"})
        await c.call_tool("nothing__here", {})
        metrics = gateway.metrics.render().decode()
        assert 'patchbay_tool_calls_total{outcome="ok",server="remote",tool="echo"} 1.0' in metrics
        assert 'outcome="TOOL_NOT_FOUND"' in metrics
        assert gateway.fast.served == (2 if path == "fast" else 0)


async def test_a_body_nested_too_deep_is_refused(path: str) -> None:
    async with gateway_before(Remote(), {"max_json_depth": 20}) as (gateway, base):
        async with httpx2.AsyncClient(base_url=base, timeout=10) as http:
            session = await open_session(http)
            with_session = {**HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
            deep: Any = "x"
            for _ in range(30):
                deep = [deep]
            refused = await http.post("/mcp", json=call_body("remote__echo", {"text": deep}), headers=with_session)
            assert refused.status_code == 400
            assert "max_json_depth" in refused.text
        assert gateway.fast.served == 0


async def test_a_lone_surrogate_is_refused_without_tripping_the_breaker(path: str) -> None:
    """JSON that pydantic-core refuses (a lone surrogate escape) goes to the SDK's path, which
    answers 400; it never reaches the upstream, so its breaker stays closed for everyone."""
    async with gateway_before(Remote()) as (gateway, base):
        async with httpx2.AsyncClient(base_url=base, timeout=10) as http:
            session = await open_session(http)
            with_session = {**HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
            bad = [
                b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"remote__echo",'
                b'"arguments":{"text":"\\ud800"}}}',
                b'{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"x\\ud800"}}',
            ]
            for _ in range(4):
                for body in bad:
                    refused = await http.post("/mcp", content=body, headers=with_session)
                    assert refused.status_code == 400, refused.text
            answer = await http.post(
                "/mcp", json=call_body("remote__echo", {"text": "still here"}), headers=with_session
            )
            assert answer.status_code == 200
            assert "still here" in answer.text and "in a row" not in answer.text
        assert gateway.fast.served == (1 if path == "fast" else 0)


async def test_a_chunked_body_over_the_size_limit_is_refused(path: str) -> None:
    """A body sent chunked (no Content-Length) that grows past ``max_request_body_size`` is the
    SDK's 413 on both paths: the fast path is not offered it."""
    async with gateway_before(Remote()) as (gateway, base):
        manager = gateway.fast.manager
        manager.max_request_body_size = manager.asgi_app.max_body_size = 250  # the SDK's limit, and ours
        async with httpx2.AsyncClient(base_url=base, timeout=10) as http:
            session = await open_session(http)
            with_session = {**HEADERS, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
            body = json.dumps(call_body("remote__echo", {"text": "x" * 300})).encode()

            async def chunked() -> AsyncGenerator[bytes]:
                yield body[:200]
                yield body[200:]  # past the limit with its last part: the whole call was read

            refused = await http.post("/mcp", content=chunked(), headers=with_session)
            assert refused.status_code == 413
        assert gateway.fast.served == 0


MODERN = "2026-07-28"
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def modern_call(tool: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    body = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    body["params"]["_meta"] = MODERN_META
    headers = {**HEADERS, "mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": tool}
    return body, headers


async def test_a_stateless_call_gets_what_the_sdk_s_entry_answers(path: str) -> None:
    async with gateway_before(Remote()) as (gateway, base):
        async with httpx2.AsyncClient(base_url=base, timeout=10) as http:
            body, headers = modern_call("remote__echo", {"text": "now"})
            answer = await http.post("/mcp", json=body, headers=headers)
            assert answer.status_code == 200 and answer.headers["content-type"].startswith("application/json")
            result = answer.json()["result"]
            assert result["content"] == [{"type": "text", "text": "now"}] or result["content"][0]["text"] == "now"
            assert result["resultType"] == "complete"
            assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "mcp-patchbay"
            unknown = (
                await http.post("/mcp", json=modern_call("nope__x", {})[0], headers={**headers, "mcp-name": "nope__x"})
            ).json()
            assert unknown["result"]["isError"] is True
            mismatched = await http.post("/mcp", json=body, headers={**headers, "mcp-name": "remote__work"})
            assert mismatched.status_code == 400  # the Mcp-Name header says another tool: the SDK's refusal
            envelope = {**body, "params": {"name": "remote__echo", "arguments": {"text": "x"}}}
            assert (await http.post("/mcp", json=envelope, headers=headers)).status_code == 400  # no _meta envelope
        assert gateway.fast.served == (2 if path == "fast" else 0)


async def test_a_stateless_call_s_progress_streams_before_its_result(path: str) -> None:
    async with gateway_before(Remote()) as (gateway, base):
        async with httpx2.AsyncClient(base_url=base, timeout=10) as http:
            body, headers = modern_call("remote__work", {})
            body["params"]["_meta"] = {**MODERN_META, "progressToken": "tok"}
            answer = await http.post("/mcp", json=body, headers=headers)
            assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/event-stream")
            events = [json.loads(line[5:]) for line in answer.text.splitlines() if line.startswith("data:")]
            progress = [e["params"] for e in events if e.get("method") == "notifications/progress"]
            assert [p["progressToken"] for p in progress] == ["tok"] * len(progress) and progress
            assert progress[-1]["progress"] == 3 and progress[-1]["message"] == "step 3"
            assert events[-1]["id"] == 9 and events[-1]["result"]["content"][0]["text"] == "done"
            assert events[-1]["result"]["resultType"] == "complete"
        assert gateway.fast.served == (1 if path == "fast" else 0)


async def test_a_stateless_call_s_mcp_param_header_is_checked_against_its_argument(path: str) -> None:
    async with gateway_before(Remote()) as (gateway, base):
        async with httpx2.AsyncClient(base_url=base, timeout=10) as http:
            body, headers = modern_call("remote__routed", {"text": "eu"})
            agreeing = await http.post("/mcp", json=body, headers={**headers, "mcp-param-region": "eu"})
            assert agreeing.status_code == 200 and agreeing.json()["result"]["content"][0]["text"] == "eu"
            disagreeing = await http.post("/mcp", json=body, headers={**headers, "mcp-param-region": "us"})
            assert disagreeing.status_code == 400
            missing = await http.post("/mcp", json=body, headers=headers)
            assert missing.status_code == 400
        assert gateway.fast.served == (1 if path == "fast" else 0)


async def test_a_stateless_client_that_can_answer_is_asked_through_its_call(path: str) -> None:
    async def sampling(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="modern"), model="m"
        )

    async with gateway_before(Remote()) as (gateway, base), client(base, mode="auto", sampling_callback=sampling) as c:
        assert result_text(await c.call_tool("remote__ask", {})) == "modern"
        assert gateway.fast.served == 0  # rounds may suspend it: the SDK's entry
        if path == "fast":
            lane = lane_of(gateway)
            assert lane is not None and lane.served == 1


# --- upstream faults, through the stdio proxy (the same Upstream and link) ---------------------

SETTINGS: dict[str, Any] = {
    "restart_initial_delay": 0.1,
    "restart_max_delay": 1.0,
    "connect_timeout": 10,
    "startup_wait": 10,
    "timeout": 10,
    "retry_attempts": 0,
}


@asynccontextmanager
async def faulty(tmp: Path, faults: HttpFaults, **settings: Any) -> AsyncGenerator[Any]:
    async with serving(faults) as url:
        servers = {"fake": {"type": "http", "url": f"{url}/mcp"}}
        async with proxy_rig(tmp, servers, {**SETTINGS, **settings}) as rig:
            await rig.ready("fake")
            yield rig


def rig_lane(rig: Any) -> HttpLane | None:
    raw = rig.upstream("fake")._raw
    return raw if isinstance(raw, HttpLane) else None


@pytest.mark.parametrize(("status", "code"), [(500, "SERVER_ERROR"), (503, "SERVER_ERROR"), (400, "PROTOCOL_ERROR")])
async def test_an_error_status_is_its_code(tmp_path: Path, path: str, status: int, code: str) -> None:
    faults = HttpFaults(statuses={"boom": (status, {})})
    async with faulty(tmp_path, faults) as rig:
        timed = await rig.call("fake__boom")
        assert timed.result.is_error and timed.error["code"] == code
        assert f"HTTP {status}" in result_text(timed.result)
        assert '"tool": "echo"' in await rig.ok("fake__echo")
        if path == "fast":
            lane = rig_lane(rig)
            assert lane is not None and lane.served == 2 and lane.fell_back == 0


async def test_rate_limited_keeps_its_retry_after(tmp_path: Path, path: str) -> None:
    faults = HttpFaults(statuses={"limited": (429, {"retry-after": "7"})})
    async with faulty(tmp_path, faults) as rig:
        timed = await rig.call("fake__limited")
        assert timed.error["code"] == "RATE_LIMITED"
        assert timed.error.get("retry_after_ms") == 7000


async def test_the_server_s_own_json_rpc_error_is_kept(tmp_path: Path, path: str) -> None:
    async with faulty(tmp_path, HttpFaults()) as rig:
        timed = await rig.call("fake__boom")
        assert timed.error["code"] == "SERVER_ERROR"
        assert "database on fire" in result_text(timed.result)


@pytest.mark.parametrize("body", ["none", "json"])
async def test_an_expired_session_is_rebuilt_and_the_call_sent_again(tmp_path: Path, path: str, body: str) -> None:
    faults = HttpFaults(expire={"expire"}, session_error_body=body == "json")
    async with faulty(tmp_path, faults, retry_attempts=2, retry_backoff=0.01) as rig:
        assert '"tool": "expire"' in await rig.ok("fake__expire", within=15)
        assert faults.initializes() == 2


async def test_credentials_refused_mid_session(tmp_path: Path, path: str) -> None:
    faults = HttpFaults(statuses={"unauthorized": (401, {}), "forbidden": (403, {})})
    async with faulty(tmp_path, faults) as rig:
        for tool in ("unauthorized", "forbidden"):
            timed = await rig.call(f"fake__{tool}")
            assert timed.error["code"] == "AUTH_FAILED"
        if path == "fast":
            lane = rig_lane(rig)
            assert lane is not None and lane.fell_back == 1  # the 401 went through the SDK's auth flow
        assert faults.calls.get("unauthorized") is None


# --- the lane's own connections ------------------------------------------------------------------


async def _kept_connection_lane(
    close_after_answer: bool,
) -> tuple[HttpLane, list[str], list[asyncio.StreamWriter], asyncio.Server, asyncio.Event]:
    """A lane to a server that answers the first connection's first request, then either closes
    that connection at once (``close_after_answer``: its idle timeout) or reads the next request
    on it and closes it unanswered (it may have run it). ``seen``: the requests it read."""
    seen: list[str] = []
    writers: list[asyncio.StreamWriter] = []
    closed = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        first = len(writers) == 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                body = json.loads(await reader.readexactly(length))
                seen.append(body["params"]["name"])
                if first and len(seen) == 2:
                    return  # read, maybe run, never answered
                answer = json.dumps({"jsonrpc": "2.0", "id": body["id"], "result": {"content": []}}).encode()
                head_out = f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(answer)}\r\n\r\n"
                writer.write(head_out.encode() + answer)
                await writer.drain()
                if first and close_after_answer:
                    return
        except asyncio.IncompleteReadError:
            pass
        finally:
            writer.close()
            if first:
                closed.set()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return lane_to(server), seen, writers, server, closed


async def _stop(lane: HttpLane, writers: list[asyncio.StreamWriter], server: asyncio.Server) -> None:
    lane.close()
    server.close()
    for writer in writers:
        writer.close()
    await server.wait_closed()


async def test_a_kept_connection_the_server_closed_while_idle_is_replaced(opened_connections: list[object]) -> None:
    """A keep-alive connection the server closed while it sat in the pool (its idle timeout):
    the request never left, so it goes on a new connection."""
    lane, seen, writers, server, closed = await _kept_connection_lane(close_after_answer=True)
    try:
        with anyio.fail_after(10):
            assert await lane.request("tools/call", {"name": "a"}) == {"content": []}
            await closed.wait()
            kept = lane._pool._idle  # pyright: ignore[reportPrivateUsage]
            while kept and not kept[0]._reader.at_eof():  # pyright: ignore[reportPrivateUsage]
                await asyncio.sleep(0)  # the client's side reads the close
            assert await lane.request("tools/call", {"name": "b"}) == {"content": []}
        assert seen == ["a", "b"]
        assert len(opened_connections) == 2
        assert lane.served == 2 and lane.fell_back == 0
    finally:
        await _stop(lane, writers, server)


async def test_a_request_the_server_read_before_closing_is_not_sent_twice(opened_connections: list[object]) -> None:
    """A kept connection that dies once the request was written: the server may have run it,
    so the call fails (the connection is lost) rather than running twice."""
    lane, seen, writers, server, _ = await _kept_connection_lane(close_after_answer=False)
    try:
        with anyio.fail_after(10):
            assert await lane.request("tools/call", {"name": "a"}) == {"content": []}
            with pytest.raises(ConnectionError):
                await lane.request("tools/call", {"name": "b"})
        assert seen == ["a", "b"]
        assert len(opened_connections) == 1
    finally:
        await _stop(lane, writers, server)


async def test_a_connection_idle_too_long_is_not_reused(
    monkeypatch: pytest.MonkeyPatch, opened_connections: list[object]
) -> None:
    monkeypatch.setattr(http1, "IDLE_SECONDS", -1.0)  # every idle connection is too old
    lane, seen, writers, server, _ = await _kept_connection_lane(close_after_answer=False)
    try:
        with anyio.fail_after(10):
            assert await lane.request("tools/call", {"name": "a"}) == {"content": []}
            assert await lane.request("tools/call", {"name": "b"}) == {"content": []}
        assert seen == ["a", "b"]
        assert len(opened_connections) == 2
    finally:
        await _stop(lane, writers, server)


async def test_a_json_answer_without_the_response_fails_the_call() -> None:
    writers: list[asyncio.StreamWriter] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        head = await reader.readuntil(b"\r\n\r\n")
        await reader.readexactly(int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0]))
        answer = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}'
        out = f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(answer)}\r\n\r\n"
        writer.write(out.encode() + answer)
        await writer.drain()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    injected: list[Any] = []

    async def inject(message: Any) -> None:
        injected.append(message)

    lane = HttpLane(f"http://127.0.0.1:{port}/mcp", {}, Bounds(), 5, send=inject, inject=inject, spawn=print)
    lane._learnt = {"mcp-protocol-version": "2025-11-25"}  # pyright: ignore[reportPrivateUsage] - as learnt from the SDK
    try:
        with anyio.fail_after(10), pytest.raises(MCPError, match="no response"):
            await lane.request("tools/call", {"name": "a"})
        assert len(injected) == 1  # the notice went on to the SDK's session
    finally:
        lane.close()
        server.close()
        for writer in writers:
            writer.close()
        await server.wait_closed()
