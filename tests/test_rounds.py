"""A 2025-era upstream asks mid-call; a 2026-07-28 client answers through input_required rounds.

In memory: real SDK upstream ``Server``s of the 2025 era (the proxy connects with the
``initialize`` handshake), the real proxy, and the SDK's ``Client`` in its default mode,
which speaks 2026-07-28 and drives the retries itself. Every wait is bounded; time is
injected where a suspension has to expire.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

from mcp_patchbay.config import Config
from mcp_patchbay.session.proxy import Proxy
from mcp_patchbay.session.request_state import AUDIENCE, state_security
from mcp_patchbay.session.rounds import EXPIRED_MESSAGE, Exchange, Rounds
from tests.harness import (
    FakeTool,
    MemoryUpstreams,
    config_from,
    error_info,
    make_server,
    proxy_transport,
    result_text,
    running_proxy,
    text,
    until,
)

pytestmark = pytest.mark.anyio

MODERN = "2026-07-28"


def _message(prompt: str) -> list[types.SamplingMessage]:
    return [types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))]


class Asker:
    """The upstream's tools: each asks the client something mid-call, as 2025 servers do."""

    def __init__(self) -> None:
        self.refusals: list[str] = []
        self.refused = anyio.Event()

    async def _sample(self, ctx: ServerRequestContext[Any, Any], prompt: str) -> str:
        try:
            answer = await ctx.session.create_message(messages=_message(prompt), max_tokens=5)  # pyright: ignore[reportDeprecated]
        except MCPError as exc:
            self.refusals.append(exc.error.message)
            self.refused.set()
            return f"refused: {exc.error.message}"
        content = answer.content
        return content.text if isinstance(content, types.TextContent) else "?"

    async def sample(self, ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        return text(await self._sample(ctx, str(args.get("prompt", "hi"))))

    async def twice(self, ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        first = await self._sample(ctx, "first")
        second = await self._sample(ctx, f"after {first}")
        return text(f"{first} | {second}")

    async def elicit(self, ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        schema = {"type": "object", "properties": {"name": {"type": "string"}}}
        answer = await ctx.session.elicit_form("Your name?", schema)  # pyright: ignore[reportDeprecated]
        return text(f"{answer.action}: {(answer.content or {}).get('name')}")

    async def roots(self, ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        listed = await ctx.session.list_roots()  # pyright: ignore[reportDeprecated]
        return text(",".join(str(root.uri) for root in listed.roots))

    def upstreams(self) -> MemoryUpstreams:
        tools = {
            "sample": FakeTool(self.sample),
            "twice": FakeTool(self.twice),
            "elicit": FakeTool(self.elicit),
            "roots": FakeTool(self.roots),
        }
        return MemoryUpstreams({"ask": make_server("ask", tools)})


def _config() -> Config:
    return config_from({"ask": {"command": "x"}}, {"watch": False})


def proxy_for(asker: Asker, *, shared: bool = False) -> AbstractAsyncContextManager[Proxy]:
    return running_proxy(_config(), asker.upstreams(), shared=shared)


@asynccontextmanager
async def modern_client(proxy: Proxy, **callbacks: Any) -> AsyncGenerator[Client]:
    async with Client(proxy_transport(proxy), cache=None, **callbacks) as client:  # pyright: ignore[reportArgumentType]
        assert client.session.protocol_version == MODERN  # pyright: ignore[reportAttributeAccessIssue]
        yield client


def reply(said: str) -> types.CreateMessageResult:
    return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text=said), model="m")


def sampler(said: str, seen: list[str] | None = None) -> Any:
    async def sampling(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        content = params.messages[0].content
        if seen is not None:
            seen.append(content.text if isinstance(content, types.TextContent) else "?")
        return reply(said)

    return sampling


async def test_a_2026_client_gets_a_sampling_answer_through_to_a_2025_upstream() -> None:
    asker = Asker()
    seen: list[str] = []
    async with proxy_for(asker) as proxy, modern_client(proxy, sampling_callback=sampler("hello back", seen)) as c:
        result = await c.call_tool("ask__sample", {"prompt": "say hello"})
        assert not result.is_error, result
        assert result_text(result) == "hello back"
        assert seen == ["say hello"]
        assert proxy.rounds.suspended == {}
        assert not proxy.channel._calls.get("ask")  # pyright: ignore[reportPrivateUsage]


async def test_an_elicitation_and_a_roots_request_take_the_same_road() -> None:
    async def elicitation(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert params.message == "Your name?"
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def roots(ctx: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri="file:///work")])  # pyright: ignore[reportArgumentType]

    asker = Asker()
    async with (
        proxy_for(asker) as proxy,
        modern_client(proxy, elicitation_callback=elicitation, list_roots_callback=roots) as c,
    ):
        assert result_text(await c.call_tool("ask__elicit", {})) == "accept: Ada"
        assert result_text(await c.call_tool("ask__roots", {})) == "file:///work"
        assert proxy.rounds.suspended == {}


async def test_two_questions_in_one_call_take_two_rounds() -> None:
    asker = Asker()
    seen: list[str] = []
    async with proxy_for(asker) as proxy, modern_client(proxy, sampling_callback=sampler("yes", seen)) as c:
        assert result_text(await c.call_tool("ask__twice", {})) == "yes | yes"
        assert seen == ["first", "after yes"]
        assert proxy.rounds.suspended == {}


async def test_two_suspended_calls_from_two_clients_each_get_their_own_answer() -> None:
    asker = Asker()
    a_asked, b_asked = anyio.Event(), anyio.Event()
    both_suspended: list[int] = []

    async with proxy_for(asker, shared=True) as proxy:

        async def sampling_a(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
            a_asked.set()
            await b_asked.wait()  # a stays suspended while b's call asks and is answered
            return reply("A")

        async def sampling_b(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
            both_suspended.append(len(proxy.rounds.suspended))
            b_asked.set()
            return reply("B")

        results: dict[str, str] = {}
        async with (
            modern_client(proxy, sampling_callback=sampling_a) as a,
            modern_client(proxy, sampling_callback=sampling_b) as b,
        ):

            async def call(name: str, client: Client) -> None:
                results[name] = result_text(await client.call_tool("ask__sample", {"prompt": name}))

            async with anyio.create_task_group() as tg:
                tg.start_soon(call, "a", a)
                await a_asked.wait()
                tg.start_soon(call, "b", b)
        assert results == {"a": "A", "b": "B"}
        assert both_suspended == [2]
        assert proxy.rounds.suspended == {}


async def test_a_forged_request_state_gets_a_clear_error_result() -> None:
    asker = Asker()
    async with proxy_for(asker) as proxy, modern_client(proxy, sampling_callback=sampler("x")) as c:
        result = await c.call_tool("ask__sample", {"prompt": "p"}, request_state="v1.forged-by-the-client")
        assert result.is_error
        assert result_text(result) == EXPIRED_MESSAGE and len(EXPIRED_MESSAGE) < 500
        assert error_info(result)["retryable"] is True


async def test_a_state_is_bound_to_its_call_arguments() -> None:
    asker = Asker()
    async with proxy_for(asker) as proxy, modern_client(proxy, sampling_callback=sampler("x")) as c:
        first = await c.session.call_tool("ask__sample", {"prompt": "p"}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult) and first.request_state is not None
        (key,) = first.input_requests or {}
        answer: types.InputResponses = {key: reply("a")}
        other = await c.session.call_tool(
            "ask__sample",
            {"prompt": "q"},
            input_responses=answer,
            request_state=first.request_state,
            allow_input_required=True,
        )
        assert isinstance(other, types.CallToolResult) and result_text(other) == EXPIRED_MESSAGE
        assert len(proxy.rounds.suspended) == 1  # the real one still waits for its own retry
        done = await c.session.call_tool(
            "ask__sample",
            {"prompt": "p"},
            input_responses=answer,
            request_state=first.request_state,
            allow_input_required=True,
        )
        assert isinstance(done, types.CallToolResult) and result_text(done) == "a"
        again = await c.session.call_tool(
            "ask__sample",
            {"prompt": "p"},
            input_responses=answer,
            request_state=first.request_state,
            allow_input_required=True,
        )
        assert isinstance(again, types.CallToolResult) and result_text(again) == EXPIRED_MESSAGE
        assert proxy.rounds.suspended == {}


async def test_a_client_that_never_retries_leaves_the_upstream_an_error_and_nothing_behind() -> None:
    asker = Asker()
    now = [1000.0]
    async with proxy_for(asker) as proxy, modern_client(proxy, sampling_callback=sampler("x")) as c:
        proxy.rounds.clock = lambda: now[0]
        first = await c.session.call_tool("ask__sample", {"prompt": "p"}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        (exchange,) = proxy.rounds.suspended.values()
        now[0] += proxy.rounds.ttl - 1
        assert proxy.rounds.expire() == 0
        now[0] += 1
        assert proxy.rounds.expire() == 1
        with anyio.fail_after(5):
            await asker.refused.wait()
            while exchange.outcome is None:
                await exchange.changed()
        assert asker.refusals == ["The client did not answer in time; it gave up."]
        assert proxy.rounds.suspended == {}
        assert not proxy.channel._calls.get("ask")  # pyright: ignore[reportPrivateUsage]
        late = await c.session.call_tool("ask__sample", {"prompt": "p"}, request_state=first.request_state)
        assert isinstance(late, types.CallToolResult) and late.is_error
        assert result_text(late) == EXPIRED_MESSAGE


async def test_a_client_that_cancels_its_call_takes_the_upstream_call_with_it() -> None:
    asker = Asker()
    asked = anyio.Event()

    async def sampling(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        asked.set()
        await anyio.sleep_forever()
        raise AssertionError

    async with proxy_for(asker) as proxy, modern_client(proxy, sampling_callback=sampling) as c:
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(c.call_tool, "ask__sample", {"prompt": "p"})
                await asked.wait()
                tg.cancel_scope.cancel()
            (exchange,) = proxy.rounds.suspended.values()  # the client gives up between rounds: nothing tells the proxy
            now = proxy.rounds.clock() + proxy.rounds.ttl
            proxy.rounds.clock = lambda: now
            assert proxy.rounds.expire() == 1
            while exchange.outcome is None:
                await exchange.changed()
        assert proxy.rounds.suspended == {}


async def test_a_2026_client_without_sampling_leaves_the_upstream_a_clear_refusal() -> None:
    asker = Asker()
    async with proxy_for(asker, shared=True) as proxy, modern_client(proxy) as c:
        result = await c.call_tool("ask__sample", {"prompt": "p"})
        assert result_text(result).startswith("refused: The client cannot answer sampling/createMessage")
        assert proxy.rounds.suspended == {}


async def test_a_2025_client_is_still_asked_on_its_session() -> None:
    asker = Asker()
    async with (
        proxy_for(asker) as proxy,
        Client(proxy_transport(proxy), mode="legacy", cache=None, sampling_callback=sampler("old")) as c,  # pyright: ignore[reportArgumentType]
    ):
        assert result_text(await c.call_tool("ask__twice", {})) == "old | old"
        assert proxy.rounds.suspended == {}


async def test_an_answer_of_the_wrong_kind_is_refused_to_the_upstream() -> None:
    exchange = Exchange(types.ClientCapabilities(sampling=types.SamplingCapability()), None)
    request = types.CreateMessageRequest(params=types.CreateMessageRequestParams(messages=_message("p"), max_tokens=1))
    answers: list[object] = []

    async def ask() -> None:
        answers.append(await exchange.ask(request))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(ask)
            while not exchange.pending:
                await exchange.changed()
            (key,) = exchange.pending
            exchange.deliver(
                {"unknown": types.ElicitResult(action="decline"), key: types.ElicitResult(action="accept")}
            )
    (answer,) = answers
    assert isinstance(answer, types.ErrorData) and "wrong kind" in answer.message
    elicit = types.ElicitRequest(
        params=types.ElicitRequestFormParams(message="m", requested_schema={"type": "object", "properties": {}})
    )
    refused = await exchange.ask(elicit)
    assert isinstance(refused, types.ErrorData) and "did not declare elicitation" in refused.message


def test_the_state_key_comes_from_the_environment_or_is_made_at_start(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "mcp_patchbay.session.request_state")
    key = "k" * 32
    sealed = state_security((), environ={"PATCHBAY_STATE_KEY": key}).codec.seal(b"state")
    assert state_security([key]).codec.unseal(sealed) == b"state"
    assert state_security((), environ={}).audience == AUDIENCE
    assert "set PATCHBAY_STATE_KEY" in caplog.text
    short = state_security((), environ={"PATCHBAY_STATE_KEY": "short"})
    assert short.codec.unseal(short.codec.seal(b"s")) == b"s"
    assert "PATCHBAY_STATE_KEY cannot seal requestState" in caplog.text


async def test_rounds_without_their_task_group_run_the_call_in_place() -> None:
    rounds = Rounds(ttl=60)

    async def call(progress: Any) -> dict[str, Any]:
        return {"content": []}

    assert await rounds.start(call, None, None) == {"content": []}


async def test_calls_still_suspended_end_when_the_proxy_stops() -> None:
    asker = Asker()
    async with proxy_for(asker) as proxy, modern_client(proxy, sampling_callback=sampler("x")) as c:
        first = await c.session.call_tool("ask__sample", {"prompt": "p"}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        (exchange,) = proxy.rounds.suspended.values()
    assert exchange.outcome is not None and exchange.closed
    assert not proxy.rounds._tasks  # pyright: ignore[reportPrivateUsage]


async def test_on_the_gateway_a_state_is_bound_to_the_caller_who_got_it(caplog: pytest.LogCaptureFixture) -> None:
    from tests.test_gateway import ALICE, BOB, client, running

    asker = Asker()
    config = config_from({"ask": {"command": "x"}}, {"watch": False}, gateway={"tokens": {"alice": ALICE, "bob": BOB}})
    async with running(config, asker.upstreams()) as (_, base):
        async with (
            client(base, token=ALICE, mode="auto", sampling_callback=sampler("x")) as alice,
            client(base, token=BOB, mode="auto", sampling_callback=sampler("x")) as bob,
        ):
            first = await alice.session.call_tool("ask__sample", {"prompt": "p"}, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult) and first.input_requests
            answer: types.InputResponses = {key: reply("for alice") for key in first.input_requests}
            stolen = await bob.session.call_tool(
                "ask__sample", {"prompt": "p"}, input_responses=answer, request_state=first.request_state
            )
            assert stolen.is_error and result_text(stolen) == EXPIRED_MESSAGE
            assert "requestState rejected on tools/call: principal" in caplog.text
            done = await alice.session.call_tool(
                "ask__sample", {"prompt": "p"}, input_responses=answer, request_state=first.request_state
            )
            assert not done.is_error and result_text(done) == "for alice"


def _member_of(ctx: ServerRequestContext[Any, Any]) -> str:
    """In memory there is no sign-in: the member is the client's name."""
    params = ctx.session.client_params
    return params.client_info.name if params is not None else "?"


def _slow_config(**gateway: Any) -> Config:
    servers = {"ask": {"command": "x", "timeout": 0.5, "max_concurrency": 2}}
    return config_from(servers, {"watch": False, "queue_timeout": 0}, gateway=gateway)


async def _suspended_calls_ended(rounds: Rounds) -> None:
    """Until every call suspended now has ended, woken by each call's own change (its end is
    one), not polled: what ends them is their deadline passing, the scenario itself."""
    for exchange in list(rounds.suspended.values()):
        while exchange.outcome is None:
            await exchange.changed()


async def test_suspended_calls_that_are_never_resumed_free_their_slots_at_their_deadline() -> None:
    """Issue 20: a 2026 client that starts calls asking for input (an elicitation) and never
    resumes them held the server's concurrency slots past the call's timeout (the deadline was
    paused for the elicitation), so another member got BULKHEAD_FULL."""
    asker = Asker()

    async def never(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        raise AssertionError("never resumed: the client's library is not asked")

    async with running_proxy(_slow_config(), asker.upstreams(), shared=True, identity_of=_member_of) as proxy:
        upstream = proxy.supervisor.upstreams["ask"]
        async with modern_client(proxy, elicitation_callback=never) as mallory:
            for _ in range(2):
                first = await mallory.session.call_tool("ask__elicit", {}, allow_input_required=True)
                assert isinstance(first, types.InputRequiredResult)
            assert upstream.bulkhead.in_flight == 2
            with anyio.fail_after(5):  # the deadline (0.5 s) passes while they wait: the slots are freed
                await _suspended_calls_ended(proxy.rounds)
                await until(lambda: not upstream.bulkhead.in_flight)
            assert upstream.bulkhead.in_flight == 0

        async def answer(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            return types.ElicitResult(action="accept", content={"name": "Bea"})

        async with modern_client(proxy, elicitation_callback=answer) as other:
            assert result_text(await other.call_tool("ask__elicit", {})) == "accept: Bea"


async def test_a_member_holds_at_most_its_quota_of_suspended_calls() -> None:
    """Issue 20: one member could suspend calls without bound; past
    gateway.max_waiting_calls_per_identity a new call is refused before it takes a slot."""
    asker = Asker()
    config = _slow_config(max_waiting_calls_per_identity=1)
    async with running_proxy(config, asker.upstreams(), shared=True, identity_of=_member_of) as proxy:
        upstream = proxy.supervisor.upstreams["ask"]
        info = types.Implementation(name="mallory", version="1")
        async with modern_client(proxy, sampling_callback=sampler("x"), client_info=info) as mallory:
            first = await mallory.session.call_tool("ask__sample", {}, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            assert proxy.rounds.waiting("mallory") == 1
            refused = await mallory.session.call_tool("ask__sample", {}, allow_input_required=True)
            assert isinstance(refused, types.CallToolResult)
            assert error_info(refused)["code"] == "RATE_LIMITED"
            assert "waiting for your answers" in result_text(refused) and len(result_text(refused)) < 500
            assert upstream.bulkhead.in_flight == 1  # the refused call took no slot
        # Until mallory's suspended call ends (its 0.5 s deadline), a question from the server could be
        # hers or another member's, and is put to no one; then another member is served in full.
        with anyio.fail_after(5):
            await _suspended_calls_ended(proxy.rounds)
            await until(lambda: not proxy.rounds.waiting("mallory") and not upstream.bulkhead.in_flight)
        other = types.Implementation(name="bea", version="1")
        async with modern_client(proxy, sampling_callback=sampler("for bea"), client_info=other) as bea:
            assert result_text(await bea.call_tool("ask__sample", {})) == "for bea"


async def test_a_call_whose_client_hung_up_before_its_input_required_was_written_ends_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 20: a client that hung up kept its slot until the timeout. The gateway asks the
    request whether its client is still there (starlette's ``is_disconnected``) before it
    leaves a call suspended; here that request says it is gone."""
    import mcp_patchbay.calls.path as call_path_module

    async def gone(ctx: Any) -> bool:
        return True

    monkeypatch.setattr(call_path_module, "_hung_up", gone)
    asker = Asker()
    async with running_proxy(_config(), asker.upstreams(), shared=True) as proxy:
        upstream = proxy.supervisor.upstreams["ask"]
        async with modern_client(proxy, sampling_callback=sampler("x")) as c:
            first = await c.session.call_tool("ask__sample", {}, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            assert proxy.rounds.suspended == {}
            await until(lambda: not upstream.bulkhead.in_flight)  # the call ended at once, its slot freed


async def test_hung_up_reads_the_starlette_request() -> None:
    from mcp_patchbay.calls.path import _hung_up  # pyright: ignore[reportPrivateUsage]

    class Request:
        def __init__(self, gone: bool) -> None:
            self.gone = gone

        async def is_disconnected(self) -> bool:
            return self.gone

    class Ctx:
        def __init__(self, request: object) -> None:
            self.request = request

    assert await _hung_up(Ctx(Request(True))) is True  # pyright: ignore[reportArgumentType]
    assert await _hung_up(Ctx(Request(False))) is False  # pyright: ignore[reportArgumentType]
    assert await _hung_up(Ctx(None)) is False  # pyright: ignore[reportArgumentType]
