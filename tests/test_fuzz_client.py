"""Hostile clients: malformed requests get JSON-RPC errors or isError results, and the session goes on.

Two levels:

- In memory, property-based (hypothesis): one proxy session, held for the whole
  module in a blocking portal, is sent raw JSON-RPC messages: unknown methods,
  ``tools/call`` with names of every shape (huge, unicode, empty, control
  characters, separators only) and arguments of wrong types, params missing or
  mistyped, string and integer ids, junk URIs, prompt names and completion refs,
  unparseable input (an ``Exception`` item on the read stream, which is what the
  stdio transport delivers for a line it cannot parse). Every request must get
  exactly one response within a bounded wait (a ``tools/call`` an ``isError``
  result with a code, or a JSON-RPC error with a standard code), and a ``ping``
  must still answer after every message.
- Names that cost the resolver dearly (long runs of separators), one by one: the
  answer must come at once and without a burst of memory, since the event loop,
  and so every other request, waits while a name is resolved.
- Over stdio, the real ``mcp-patchbay`` process with one real upstream
  (``mcp-server-time``) is written raw lines; every stdout line must be valid
  JSON-RPC, every request answered (one whose shape is wrong but whose id is
  readable included), and ``tools/list`` must still work.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import mcp_types as types
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from mcp.shared.exceptions import MCPError
from mcp.shared.memory import create_client_server_memory_streams
from mcp.shared.message import SessionMessage
from mcp_types.methods import SPEC_CLIENT_METHODS

from mcp_patchbay.errors.tree import Code
from mcp_patchbay.session.proxy import Proxy
from tests.harness import (
    FakeTool,
    MemoryUpstreams,
    config_from,
    connected,
    error_info,
    make_server,
    result_text,
    text,
)

ANSWER_WAIT = 10.0
"""Bound on the wait for any one response; everything in memory answers in milliseconds."""

STANDARD_CODES = frozenset(
    {types.PARSE_ERROR, types.INVALID_REQUEST, types.METHOD_NOT_FOUND, types.INVALID_PARAMS, types.INTERNAL_ERROR}
)
RESOURCE_NOT_FOUND = -32002
"""MCP's code for resources/read of a URI no server has."""
ERROR_CODES = STANDARD_CODES | {RESOURCE_NOT_FOUND}
PROXY_CODES = frozenset(c.value for c in Code)

ADD_SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer", "maximum": 100}},
    "required": ["a", "b"],
}
TOOLS = ["math__add", "math__echo", "text__echo", "patchbay__status"]
PROMPTS = ["math__greet", "text__greet"]


# --- the rig: one proxy session for the whole module ---------------------------------------


async def _add(ctx: Any, args: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=str(args["a"] + args["b"]))],
        structured_content={"ran": "add"},
    )


async def _echo(ctx: Any, args: dict[str, Any]) -> types.CallToolResult:
    result = text(repr(args)[:200])
    return result.model_copy(update={"structured_content": {"ran": "echo"}})


def _upstream(name: str) -> Any:
    return make_server(
        name,
        {"add": FakeTool(_add, ADD_SCHEMA), "echo": FakeTool(_echo)},
        resources=[types.Resource(uri=f"{name}://doc", name="doc")],
        prompts=[
            types.Prompt(name="greet", arguments=[types.PromptArgument(name="who", required=True)]),
        ],
    )


@dataclass
class Wire:
    """The client's end of the proxy's streams, spoken by hand: every response is seen, strays too."""

    read: Any
    write: Any
    pending: dict[Any, anyio.Event] = field(default_factory=lambda: dict[Any, anyio.Event]())
    answers: dict[Any, list[types.JSONRPCResponse | types.JSONRPCError]] = field(
        default_factory=lambda: dict[Any, list[types.JSONRPCResponse | types.JSONRPCError]]()
    )
    strays: list[Any] = field(default_factory=lambda: list[Any]())
    used_ids: set[Any] = field(default_factory=lambda: set[Any]())
    next_id: int = 0

    async def reader(self) -> None:
        async for item in self.read:
            message = item.message if isinstance(item, SessionMessage) else item
            if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
                key = _key(message.id)
                if key not in self.answers:
                    self.strays.append(message)
                    continue
                self.answers[key].append(message)
                self.pending[key].set()
            elif isinstance(message, types.JSONRPCRequest):
                self.strays.append(message)  # the client declared no capabilities: nothing to ask of it

    def fresh_id(self, wanted: int | str | None = None) -> int | str:
        """An id not used before on this session, of the wanted type (and value, when free)."""
        self.next_id += 1
        if wanted is None:
            wanted = 10**12 + self.next_id
        while _key(wanted) in self.used_ids:
            wanted = wanted + 7_919 * self.next_id if isinstance(wanted, int) else f"{wanted}#{self.next_id}"
        self.used_ids.add(_key(wanted))
        return wanted

    async def send_raw(self, item: SessionMessage | Exception) -> None:
        await self.write.send(item)

    async def request(self, message: dict[str, Any]) -> types.JSONRPCResponse | types.JSONRPCError:
        """Send a request dict and wait (boundedly) for its one response."""
        key = _key(message["id"])
        self.answers[key] = []
        self.pending[key] = anyio.Event()
        await self.write.send(SessionMessage(types.JSONRPCRequest.model_validate(message)))
        with anyio.move_on_after(ANSWER_WAIT):
            await self.pending[key].wait()
        answers = self.answers[key]
        assert answers, f"no response within {ANSWER_WAIT}s to {_short(message)}"
        return answers[0]

    async def ping(self) -> None:
        response = await self.request({"jsonrpc": "2.0", "id": self.fresh_id(), "method": "ping"})
        assert isinstance(response, types.JSONRPCResponse), f"ping failed: {response}"
        assert not set(response.result) - {"_meta"}, f"ping answered with {response.result}"

    async def exchange(self, message: dict[str, Any] | Exception) -> types.JSONRPCResponse | types.JSONRPCError | None:
        """One fuzzed message, then a ping; returns the message's response when it was a request."""
        response = None
        if isinstance(message, Exception):
            await self.send_raw(message)
        elif "id" in message:
            response = await self.request(message)
        else:
            await self.send_raw(SessionMessage(types.JSONRPCNotification.model_validate(message)))
        await self.ping()
        duplicates = {k: v for k, v in self.answers.items() if len(v) > 1}
        assert not duplicates, f"answered more than once: {duplicates}"
        assert not self.strays, f"messages for no request of ours: {self.strays[:3]}"
        return response


def _key(request_id: Any) -> tuple[str, Any]:
    return (type(request_id).__name__, request_id)


def _short(message: Any) -> str:
    shown = repr(message)
    return shown if len(shown) < 300 else shown[:300] + f"... ({len(shown):,} chars)"


@asynccontextmanager
async def _live_session() -> AsyncIterator[Wire]:
    config = config_from({"math": {"command": "x"}, "text": {"command": "x"}}, {"status_tool": True})
    proxy = Proxy(config, connector=MemoryUpstreams({"math": _upstream("math"), "text": _upstream("text")}))
    async with create_client_server_memory_streams() as (client_streams, server_streams):
        async with anyio.create_task_group() as tg:
            tg.start_soon(proxy.serve, server_streams[0], server_streams[1])
            wire = Wire(client_streams[0], client_streams[1])
            tg.start_soon(wire.reader)
            init = await wire.request(
                {
                    "jsonrpc": "2.0",
                    "id": wire.fresh_id(),
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {},
                        "clientInfo": {"name": "fuzz", "version": "1"},
                    },
                }
            )
            assert isinstance(init, types.JSONRPCResponse), init
            await wire.send_raw(
                SessionMessage(types.JSONRPCNotification(jsonrpc="2.0", method="notifications/initialized"))
            )
            listed = await wire.request({"jsonrpc": "2.0", "id": wire.fresh_id(), "method": "tools/list"})
            assert isinstance(listed, types.JSONRPCResponse)
            assert set(TOOLS) <= {t["name"] for t in listed.result["tools"]}, listed.result
            try:
                yield wire
            finally:
                tg.cancel_scope.cancel()


@dataclass
class Live:
    portal: anyio.from_thread.BlockingPortal
    wire: Wire

    def exchange(self, message: dict[str, Any] | Exception) -> types.JSONRPCResponse | types.JSONRPCError | None:
        return self.portal.call(self.wire.exchange, message)


@pytest.fixture(scope="module")
def live() -> Iterator[Live]:
    # Every rejected call is logged with the name it was called by (up to 100k characters here).
    quiet = logging.getLogger("mcp_patchbay")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        with anyio.from_thread.start_blocking_portal("asyncio") as portal:
            with portal.wrap_async_context_manager(_live_session()) as wire:
                yield Live(portal, wire)
    finally:
        quiet.setLevel(level)


# --- strategies ------------------------------------------------------------------------------

json_scalars = (
    st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.floats(allow_nan=False, allow_infinity=False)
)
junk = st.recursive(
    json_scalars | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
"""Any JSON value, nested."""

huge_names = st.one_of(
    st.builds(
        lambda piece, count: (piece * count)[:100_000],
        st.sampled_from(["a", "é", "🙂", "\x00", " ", "-", "ab/", "\u202e", "m.a.t.h"]),
        st.integers(500, 100_000),
    ),
    # Names full of separators stay short here: at 100k characters they take seconds each (see
    # test_a_long_name_full_of_separators_is_answered_at_once, which covers them).
    st.builds(
        lambda piece, count: piece * count, st.sampled_from(["_", "__", "a__", "math__add"]), st.integers(50, 300)
    ),
    st.sampled_from(["a" * 100_000, "🙂" * 100_000, "m" * 99_999 + "_", "math__" + "x" * 99_994]),
)
names = st.one_of(
    st.text(max_size=200),
    st.just(""),
    st.text(alphabet=st.characters(categories=["Cc", "Cf", "Zs", "Zl", "Zp"]), min_size=1, max_size=40),
    st.text(alphabet="_-./:\\ |", min_size=1, max_size=40),
    huge_names,
    st.sampled_from(
        [
            "math__add",
            "MATH__ADD",
            "math.add",
            "add",
            "echo",
            "math__",
            "__add",
            "__",
            "math____add",
            "mcp__patchbay__math__add",
            "patchbay__status",
            "math__add\x00",
            "math__add ",
            " math__add",
            "math__ådd",
            "\uff4d\uff41\uff54\uff48__\uff41\uff44\uff44",  # fullwidth letters
            "math__add" + "\u200b",
            "text__echo/../math__add",
        ]
    ),
    st.builds(lambda t, n: f"{t}{n}", st.sampled_from(TOOLS), st.text(max_size=20)),
)
arguments = st.one_of(
    st.none(),
    junk,
    st.dictionaries(st.sampled_from(["a", "b", "text", "", "__proto__", "a" * 1000]), junk, max_size=4),
    st.fixed_dictionaries({"a": junk, "b": junk}),
)
request_ids = st.integers(-(2**53), 2**53) | st.text(max_size=40)
metas = st.one_of(
    st.none(),
    st.none(),
    st.fixed_dictionaries({"_meta": st.fixed_dictionaries({"progressToken": st.integers() | st.text(max_size=20)})}),
    st.fixed_dictionaries({"_meta": st.dictionaries(st.sampled_from(["progressToken", "x", ""]), junk)}),
)


def _params(
    good: dict[str, st.SearchStrategy[Any]], optional: dict[str, st.SearchStrategy[Any]] | None = None
) -> st.SearchStrategy[dict[str, Any] | None]:
    """Params for one method: mostly well-formed with hostile values, else fields missing or junk, or none at all."""
    optional = optional or {}
    well_formed = st.builds(
        lambda chosen, meta: {**chosen, **(meta or {})},
        st.fixed_dictionaries(good, optional=optional),
        metas,
    )
    anything = {name: strategy | junk for name, strategy in {**good, **optional}.items()}
    mangled = st.fixed_dictionaries({}, optional=anything)
    return st.one_of(well_formed, well_formed, well_formed, mangled, st.none())


junk_uris = st.one_of(
    st.text(max_size=200),
    st.sampled_from(
        [
            "",
            "patchbay://status",
            "math://doc",
            "text://doc",
            "math://doc/../../etc/passwd",
            "file:///etc/passwd",
            "://",
            "\x00",
            "text://" + "x" * 10_000,
            "http://[::1",
            "data:,hi",
        ]
    ),
    huge_names,
)
refs = st.one_of(
    st.fixed_dictionaries({"type": st.just("ref/prompt"), "name": names | st.sampled_from(PROMPTS)}),
    st.fixed_dictionaries({"type": st.just("ref/resource"), "uri": junk_uris}),
    st.fixed_dictionaries({"type": st.text(max_size=20)}, optional={"name": names, "uri": junk_uris}),
    junk,
)
valid_sums = st.fixed_dictionaries({"a": st.integers(-1000, 1000), "b": st.integers(-1000, 100)})
KNOWN_METHODS: dict[str, st.SearchStrategy[dict[str, Any] | None]] = {
    "tools/call": st.one_of(
        _params({"name": names}, {"arguments": arguments}),
        _params({"name": st.sampled_from(TOOLS)}, {"arguments": arguments | valid_sums}),
    ),
    "tools/list": _params({}, {"cursor": st.text(max_size=50)}),
    "resources/read": _params({"uri": junk_uris}),
    "resources/list": _params({}, {"cursor": st.text(max_size=50)}),
    "resources/templates/list": _params({}, {"cursor": st.text(max_size=50)}),
    "resources/subscribe": _params({"uri": junk_uris}),
    "resources/unsubscribe": _params({"uri": junk_uris}),
    "prompts/get": _params(
        {"name": names | st.sampled_from(PROMPTS)},
        {"arguments": st.dictionaries(st.text(max_size=10), st.text(max_size=100), max_size=3)},
    ),
    "prompts/list": _params({}, {"cursor": st.text(max_size=50)}),
    "completion/complete": _params(
        {"ref": refs, "argument": st.fixed_dictionaries({"name": st.text(max_size=20), "value": st.text(max_size=50)})},
        {"context": st.fixed_dictionaries({}, optional={"arguments": st.dictionaries(st.text(), st.text())})},
    ),
    "logging/setLevel": _params({"level": st.sampled_from(["debug", "info", "emergency", "loud", ""])}),
    "ping": _params({}),
    "initialize": _params(
        {
            "protocolVersion": st.sampled_from(["2025-06-18", "2024-11-05", "1999-01-01", ""]),
            "capabilities": st.just({}) | st.dictionaries(st.text(max_size=10), st.just({})),
            "clientInfo": st.fixed_dictionaries({"name": st.text(max_size=20), "version": st.text(max_size=10)}),
        }
    ),
}
unknown_methods = st.one_of(
    st.text(max_size=100).filter(lambda m: m not in KNOWN_METHODS and m not in SPEC_CLIENT_METHODS),
    st.sampled_from(
        [
            "",
            "/",
            "tools/cal",
            "TOOLS/LIST",
            "tools/call/",
            "rpc.discover",
            "$/cancelRequest",
            "sampling/createMessage",
            "roots/list",
            "elicitation/create",
            "notifications/initialized",
        ]
    ),
    huge_names,
)
requests = st.one_of(
    [st.builds(lambda p, m=method: (m, p), strategy) for method, strategy in KNOWN_METHODS.items()]
    + [st.tuples(unknown_methods, st.none() | st.dictionaries(st.text(max_size=10), junk, max_size=3))]
)
notifications = st.tuples(
    st.sampled_from(
        [
            "notifications/cancelled",
            "notifications/progress",
            "notifications/initialized",
            "notifications/roots/list_changed",
            "notifications/message",
            "notifications/whatever",
        ]
    )
    | st.text(max_size=50),
    _params({}, {"requestId": request_ids, "progressToken": request_ids, "progress": junk, "level": junk}),
)
unparseable = st.builds(
    lambda kind, raw: ValueError(f"not JSON: {raw[:50]!r}") if kind == "value" else _validation_error(raw),
    st.sampled_from(["value", "validation"]),
    st.text(max_size=200),
)


def _validation_error(raw: str) -> Exception:
    try:
        types.jsonrpc_message_adapter.validate_json(raw or "{", by_name=False)
    except Exception as exc:
        return exc
    return ValueError("unexpectedly valid")


def _message(method: str, params: dict[str, Any] | None, request_id: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if request_id is not None:
        message["id"] = request_id
    if params is not None:
        message["params"] = params
    return message


# --- the properties --------------------------------------------------------------------------

FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    derandomize=True,
)


def _check_answer(method: str, sent: dict[str, Any], response: types.JSONRPCResponse | types.JSONRPCError) -> None:
    assert response.id == sent["id"] and type(response.id) is type(sent["id"]), (sent["id"], response.id)
    shown = method if method in KNOWN_METHODS else "(unknown method)"
    if isinstance(response, types.JSONRPCError):
        event(f"{shown}: JSON-RPC error {response.error.code}")
        assert response.error.code in ERROR_CODES, f"{method}: non-standard error code {response.error}"
        return
    if method != "tools/call":
        event(f"{shown}: result")
        return
    result = types.CallToolResult.model_validate(response.result)
    if result.is_error:
        assert result.structured_content is not None, f"isError without a code: {result}"
        event(f"tools/call: isError {result.structured_content['error']['code']}")
        assert result.structured_content["error"]["code"] in PROXY_CODES, result.structured_content
    else:
        event("tools/call: ran")
        # Only a name that resolved to a real tool, with arguments it accepts, runs (and says so).
        structured = result.structured_content or {}
        assert "ran" in structured or "servers" in structured, f"a success from nowhere: {result}"


@FUZZ
@given(request=requests, request_id=request_ids)
def test_any_request_gets_exactly_one_proper_answer_and_the_session_goes_on(
    live: Live, request: tuple[str, dict[str, Any] | None], request_id: int | str
) -> None:
    method, params = request
    sent = _message(method, params, live.portal.call(_fresh, live.wire, request_id))
    response = live.exchange(sent)
    assert response is not None
    _check_answer(method, sent, response)


@FUZZ
@given(params=KNOWN_METHODS["tools/call"], request_id=request_ids)
def test_tools_call_with_hostile_names_and_arguments(
    live: Live, params: dict[str, Any] | None, request_id: int | str
) -> None:
    sent = _message("tools/call", params, live.portal.call(_fresh, live.wire, request_id))
    name = params.get("name") if isinstance(params, dict) else None
    if isinstance(name, str):
        event(f"name of {'100k' if len(name) > 50_000 else '1k+' if len(name) > 1000 else 'up to 1k'} characters")
    response = live.exchange(sent)
    assert response is not None
    _check_answer("tools/call", sent, response)
    if isinstance(response, types.JSONRPCError):
        # The proxy answers every call it can read with a result; only unreadable params are JSON-RPC errors.
        assert response.error.code == types.INVALID_PARAMS, response.error
        readable = (
            isinstance(params, dict)
            and isinstance(params.get("name"), str)
            and isinstance(params.get("arguments", {}), dict | None)
        )
        assert not readable, f"a readable call got a JSON-RPC error, not an isError result: {response.error}"


@FUZZ
@given(message=notifications | unparseable)
def test_notifications_and_unparseable_input_leave_the_session_working(
    live: Live, message: tuple[str, dict[str, Any] | None] | Exception
) -> None:
    if isinstance(message, Exception):
        event(f"unparseable: {type(message).__name__}")
        assert live.exchange(message) is None
    else:
        method, params = message
        event(f"notification {method if method.startswith('notifications/') else '(other)'}")
        assert live.exchange(_message(method, params, None)) is None


async def _fresh(wire: Wire, wanted: int | str) -> int | str:
    return wire.fresh_id(wanted)


def test_the_session_survived_everything(live: Live) -> None:
    """After all the fuzzing: the tools still work, on the same session."""
    wire = live.wire
    response = live.exchange(
        {
            "jsonrpc": "2.0",
            "id": live.portal.call(_fresh, wire, 1),
            "method": "tools/call",
            "params": {"name": "math__add", "arguments": {"a": 2, "b": 3}},
        }
    )
    assert isinstance(response, types.JSONRPCResponse), response
    assert response.result["content"][0]["text"] == "5"


# --- names that cost the resolver dearly -----------------------------------------------------

NAME_ANSWER_BOUND = 1.0
"""Seconds a call with an unknown name may take. Resolution is in-process work: it blocks the
event loop, so every other request of every client waits as long as it runs."""
NAME_MEMORY_BOUND = 16 * 1024 * 1024
"""Bytes (traced peak) a call with an unknown name may allocate, far above what a 100k name needs."""


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("method", "name", "with_disabled_server"),
    [
        ("tools/call", "_" * 60_000, False),
        ("tools/call", "_" * 600, True),
        ("prompts/get", "_" * 600, True),
    ],
    ids=["60k-underscores", "600-underscores-one-server-disabled", "prompt-600-underscores-one-server-disabled"],
)
async def test_a_long_name_full_of_separators_is_answered_at_once(
    method: str, name: str, with_disabled_server: bool
) -> None:
    """Hostile names must not stall the proxy or eat its memory.

    Every separator in a called name is a split point the resolver tries. With all servers
    up that costs time quadratic in the name's length (60,000 underscores: seconds of CPU,
    during which no other request is served). While any server is unavailable (a
    ``disabled`` entry is enough) ``Resolver._unavailable_server`` slices every pair of
    split points: cubic time and quadratic memory (600 underscores: ~45 MB; 2,000: ~1.4 GB
    and 10 s; a few thousand exhaust the machine).
    """
    servers: dict[str, Any] = {"math": {"command": "x"}}
    if with_disabled_server:
        servers["off"] = {"command": "x", "disabled": True}
    config = config_from(servers)
    async with connected(config, MemoryUpstreams({"math": _upstream("math")})) as (_, client):
        if with_disabled_server:  # the memory is the symptom there (tracing would slow the other case)
            tracemalloc.start()
        try:
            started = time.perf_counter()
            if method == "tools/call":
                result = await client.call_tool(name, {})
                assert error_info(result)["code"] == "TOOL_NOT_FOUND"
            else:
                with pytest.raises(MCPError) as caught:
                    await client.get_prompt(name)
                assert caught.value.code == types.INVALID_PARAMS
            elapsed = time.perf_counter() - started
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < NAME_MEMORY_BOUND, (
            f"a {len(name):,}-character name made the proxy allocate {peak / 2**20:.0f} MiB"
        )
        assert elapsed < NAME_ANSWER_BOUND, f"a {len(name):,}-character name took {elapsed:.1f}s to reject"
        assert result_text(await client.call_tool("math__add", {"a": 1, "b": 2})) == "3"


@pytest.mark.anyio
async def test_a_huge_name_does_not_make_huge_log_lines(caplog: pytest.LogCaptureFixture) -> None:
    """The proxy logs every rejected call with the name it was called by; a client must not
    be able to write megabytes into the log (or a --log-file) with one call."""
    config = config_from({"math": {"command": "x"}})
    async with connected(config, MemoryUpstreams({"math": _upstream("math")})) as (_, client):
        with caplog.at_level(logging.INFO, logger="mcp_patchbay"):
            result = await client.call_tool("a" * 100_000, {})
    assert error_info(result)["code"] == "TOOL_NOT_FOUND"
    longest = max((len(r.getMessage()) for r in caplog.records), default=0)
    assert longest < 10_000, f"a log line of {longest:,} characters"


# --- over stdio: the real process, raw lines ---------------------------------------------------


@dataclass
class Process:
    process: anyio.abc.Process
    stdout: BufferedByteReceiveStream
    lines: list[bytes] = field(default_factory=lambda: list[bytes]())
    """Every line the proxy wrote to stdout, in order."""

    async def send(self, line: str | bytes) -> None:
        assert self.process.stdin is not None
        data = line.encode() if isinstance(line, str) else line
        await self.process.stdin.send(data + b"\n")

    async def answer(self, request_id: Any, wait: float = ANSWER_WAIT) -> dict[str, Any]:
        """Read stdout lines until the response to ``request_id``; every line must be JSON-RPC."""
        with anyio.fail_after(wait):
            while True:
                for line in self.lines:
                    message = json.loads(line)
                    if message.get("id") == request_id and "method" not in message:
                        return message
                await self.read_line()

    async def read_line(self) -> bytes:
        line = await self.stdout.receive_until(b"\n", 16 * 1024 * 1024)
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)  # raises when it is not JSON-RPC
        self.lines.append(line)
        return line

    async def drain(self, seconds: float) -> None:
        with anyio.move_on_after(seconds):
            while True:
                await self.read_line()

    def answers_to(self, request_id: Any) -> list[dict[str, Any]]:
        found = [json.loads(line) for line in self.lines]
        return [m for m in found if "method" not in m and m.get("id", "missing") == request_id]


@asynccontextmanager
async def _stdio_proxy(tmp_path: Path, log_level: str = "WARNING") -> AsyncIterator[Process]:
    config = tmp_path / "patchbay.json"
    upstream = {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}
    config.write_text(json.dumps({"mcpServers": {"t": upstream}, "patchbay": {"watch": False}}), encoding="utf-8")
    stderr = (tmp_path / "stderr.log").open("wb")
    command = [sys.executable, "-m", "mcp_patchbay", "--config", str(config), "--log-level", log_level]
    process = await anyio.open_process(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr)
    assert process.stdout is not None
    proc = Process(process, BufferedByteReceiveStream(process.stdout))
    try:
        with anyio.fail_after(60):
            await proc.send(
                json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "initialize",
                        "params": {
                            "protocolVersion": "2025-06-18",
                            "capabilities": {},
                            "clientInfo": {"name": "fuzz", "version": "1"},
                        },
                    }
                )
            )
            init = await proc.answer(1, wait=30)
            assert init["result"]["serverInfo"]["name"] == "mcp-patchbay", init
            await proc.send('{"jsonrpc": "2.0", "method": "notifications/initialized"}')
            await proc.send('{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}')
            listed = await proc.answer(2, wait=30)
            assert "t__get_current_time" in {t["name"] for t in listed["result"]["tools"]}, listed
        yield proc
        with anyio.fail_after(15):
            await process.stdin.aclose()  # type: ignore[union-attr]
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            with anyio.CancelScope(shield=True):
                await process.wait()
        stderr.close()
        await process.aclose()


@pytest.mark.anyio
async def test_stdio_lane_missed_the_handshake_when_initialize_was_waiting_at_start(tmp_path: Path) -> None:
    """Regression: the client's initialize, written at launch, was read before the tool-call lane
    was installed, so the lane never opened and every call took the SDK's slow path."""
    async with _stdio_proxy(tmp_path, log_level="DEBUG") as proc:
        call = {"name": "t__get_current_time", "arguments": {"timezone": "UTC"}}
        await proc.send(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call}))
        answer = await proc.answer(3)
        assert answer["result"]["isError"] is False and "datetime" in answer["result"]["content"][0]["text"]
        log = (tmp_path / "stderr.log").read_text(encoding="utf-8")
        assert "tool calls now take the lane" in log
        # A call the lane does not take (its name is not a string) still gets the SDK's error answer.
        await proc.send('{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": 7}}')
        assert "error" in await proc.answer(4)


@pytest.mark.anyio
async def test_stdio_raw_lines_get_answers_and_the_session_goes_on(tmp_path: Path) -> None:
    async with _stdio_proxy(tmp_path) as proc:
        with anyio.fail_after(60):
            for line in ("not json", '{"jsonrpc": "2.0"}', "[]", "{", '"just a string"', "null", "x" * 1_000_000):
                await proc.send(line)
            huge = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "t" * 1_000_000}}
            await proc.send(json.dumps(huge))
            await proc.send('{"jsonrpc": "2.0", "id": 4, "method": "no/such/method", "params": {}}')
            await proc.send(
                json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": "five",
                        "method": "tools/call",
                        "params": {"name": "t__get_current_time", "arguments": ["not", "an", "object"]},
                    }
                )
            )
            await proc.send(
                json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": 6,
                        "method": "tools/call",
                        "params": {"name": "t__get_current_time", "arguments": {"timezone": "Nowhere/Never"}},
                    }
                )
            )
            await proc.send('{"jsonrpc": "2.0", "id": 7, "method": "tools/list"}')

            assert (await proc.answer(3))["result"]["isError"] is True
            assert (await proc.answer(3))["result"]["structuredContent"]["error"]["code"] == "TOOL_NOT_FOUND"
            assert (await proc.answer(4))["error"]["code"] == types.METHOD_NOT_FOUND
            five = await proc.answer("five")
            assert five.get("error", {}).get("code") == types.INVALID_PARAMS or five["result"]["isError"], five
            six = await proc.answer(6)
            assert six["result"]["isError"] is True, six  # the upstream's own error, passed through
            assert "t__get_current_time" in {t["name"] for t in (await proc.answer(7))["result"]["tools"]}
            await proc.drain(0.5)
        for request_id in (3, 4, "five", 6, 7):
            assert len(proc.answers_to(request_id)) == 1, request_id
        assert all(len(line) < 200_000 for line in proc.lines), "an answer echoed a 1 MB input back"


@pytest.mark.anyio
async def test_stdio_request_with_a_readable_id_but_a_bad_shape_gets_an_error_answer(tmp_path: Path) -> None:
    """A client waits for an answer to every id it sent; the proxy must not drop a request silently.

    JSON-RPC 2.0: "the Server MUST reply with a Response, except for in the case of
    Notifications"; an invalid Request object gets error -32600.
    """
    bad = {
        41: {"jsonrpc": "2.0", "id": 41, "method": "tools/call", "params": ["t__get_current_time"]},
        42: {"jsonrpc": "2.0", "id": 42, "method": 7},
        43: {"jsonrpc": "1.0", "id": 43, "method": "ping"},
        44: {"jsonrpc": "2.0", "id": 44, "method": "tools/call", "params": "t__get_current_time"},
    }
    async with _stdio_proxy(tmp_path) as proc:
        with anyio.fail_after(60):
            for message in bad.values():
                await proc.send(json.dumps(message))
            await proc.send('{"jsonrpc": "2.0", "id": 50, "method": "ping"}')
            await proc.answer(50)
            await proc.drain(1.0)
        unanswered = [i for i in bad if not proc.answers_to(i)]
        assert not unanswered, f"requests dropped without an answer (the client waits forever): {unanswered}"
        for request_id in bad:
            (answer,) = proc.answers_to(request_id)
            assert answer["error"]["code"] in (types.INVALID_REQUEST, types.INVALID_PARAMS), answer


@pytest.mark.anyio
async def test_stdio_line_that_is_not_a_jsonrpc_message_gets_an_error_with_null_id(tmp_path: Path) -> None:
    """JSON-RPC 2.0: unparseable input gets -32700 Parse error, an invalid Request object -32600; id null."""
    async with _stdio_proxy(tmp_path) as proc:
        with anyio.fail_after(60):
            for line in ("not json", "[]", '{"jsonrpc": "2.0"}'):
                await proc.send(line)
            await proc.send('{"jsonrpc": "2.0", "id": 50, "method": "ping"}')
            await proc.answer(50)
            await proc.drain(1.0)
        codes = sorted(m["error"]["code"] for m in proc.answers_to(None) if "error" in m)
        assert codes == sorted([types.PARSE_ERROR, types.INVALID_REQUEST, types.INVALID_REQUEST]), codes
