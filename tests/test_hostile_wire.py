"""Hostile lines, both directions: what a client or an upstream writes cannot crash the proxy,
end a connection, or cost it unbounded memory or time (issue 20).

- Pure: ``jsonrpc``'s bounds (``deeper_than``, ``peek_envelope``, ``LineSplitter``).
- The client's side, over stdio: the real ``mcp-patchbay`` process is written raw lines
  (nested 1,000 deep, longer than the limit, batches, ids of the wrong type, requests
  before ``initialize``); each gets its answer and the session goes on.
- The upstream's side: the proxy in-process in front of ``tests/servers/raw_server.py``,
  which writes answers nested 5,000 deep or longer than the limit, with the id first or
  last, while another call is in flight; and bursts of ``tools/list_changed``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import anyio
import anyio.abc
import httpx2
import mcp_types as types
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from hypothesis import given
from hypothesis import settings as examples
from hypothesis import strategies as st

from mcp_patchbay.config.settings import Settings
from mcp_patchbay.errors.tree import Code
from mcp_patchbay.wire.jsonrpc import Bounds, LineSplitter, Overlong, deeper_than, peek_envelope
from tests.e2e_util import SERVERS, Rig, proxy_rig
from tests.servers.http_fault_server import HttpFaults, serving

pytestmark = pytest.mark.anyio

RAW_SERVER = SERVERS / "raw_server.py"
ANSWER_WAIT = 30.0
SMALL_LIMIT = 65_536
"""The least ``max_message_bytes`` allows: over-long lines stay cheap to write in tests."""


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def raw_entry() -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(RAW_SERVER)]}


# --- pure: the bounds ---------------------------------------------------------------------


def test_bounds_defaults_are_the_settings_defaults() -> None:
    assert Bounds.of(Settings()) == Bounds()


def test_deeper_than_measures_nesting_not_brackets_inside_strings() -> None:
    assert deeper_than(nested(1000).encode(), 100)
    assert deeper_than(nested(101).encode(), 100)
    assert not deeper_than(nested(100).encode(), 100)
    # Brackets in strings do not nest, escaped quotes and backslashes included.
    assert not deeper_than(json.dumps({"s": "[" * 5000, "t": '\\"[[[' * 1000}).encode(), 100)
    assert not deeper_than(json.dumps({"rows": [[1]] * 500}).encode(), 100)
    assert deeper_than(json.dumps({"s": '\\"]]]', "a": json.loads(nested(150))}).encode(), 100)


@pytest.mark.parametrize(
    ("line", "request_id", "keys"),
    [
        ('{"jsonrpc":"2.0","id":"pb-7","result":{"a":' + nested(3000) + "}}", "pb-7", {"id", "result"}),
        # The id last (JSON.stringify of the TypeScript SDK's objects), a decoy id nested inside.
        ('{"result":{"id":5,"a":' + nested(3000) + '},"jsonrpc":"2.0","id":"pb-9"}', "pb-9", {"id", "result"}),
        ('{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"a":' + nested(3000) + "}}", 12, {"id", "method"}),
        ('{"method":"x","params":{"id":99,"a":' + nested(3000) + '},"jsonrpc":"2.0"}', None, {"method"}),
        ('{"method":"x","params":{"a":' + nested(3000) + '},"note":"\\"id\\":7}"}', None, {"method"}),
        ('{"jsonrpc":"2.0","id":{"a":1},"method":"x","params":' + nested(3000) + "}", None, {"id", "method"}),
        ("[" + nested(3000) + "]", None, set[str]()),
    ],
)
def test_peek_envelope_reads_the_top_level_id_from_either_end(
    line: str, request_id: str | int | None, keys: set[str]
) -> None:
    data = line.encode()
    envelope = peek_envelope(data[:8192], data[-8192:])
    assert envelope.request_id == request_id
    assert envelope.keys == keys


def test_line_splitter_skips_an_overlong_line_as_it_streams_keeping_only_its_ends() -> None:
    splitter = LineSplitter(100, window=10)
    assert splitter.feed(b"abc\nde") == [b"abc"]
    assert splitter.feed(b"f\n" + b"x" * 150) == [b"def"]
    for _ in range(1000):  # a line of 1 MB more, in pieces: nothing of it is kept
        assert splitter.feed(b"y" * 1000) == []
        assert splitter.skipping
    lines = splitter.feed(b"yz\nnext\n")
    overlong, following = lines
    assert isinstance(overlong, Overlong)
    assert (overlong.head, overlong.tail, overlong.size) == (b"x" * 10, b"yyyyyyyyyz", 150 + 1_000_000 + 2)
    assert following == b"next"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ ab:,', max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet='[]{}"\\ab', max_size=4), inner, max_size=3)
    ),
    max_leaves=30,
)


def depth_of(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((depth_of(v) for v in cast("list[Any]", value)), default=0)
    if isinstance(value, dict):
        return 1 + max((depth_of(v) for v in cast("dict[str, Any]", value).values()), default=0)
    return 0


@examples(max_examples=300, deadline=None)
@given(value=json_values, limit=st.integers(0, 6), indent=st.sampled_from([None, 1]))
def test_deeper_than_agrees_with_the_parsed_depth(value: Any, limit: int, indent: int | None) -> None:
    line = json.dumps(value, indent=indent, ensure_ascii=False).encode()
    assert deeper_than(line, limit) == (depth_of(value) > limit)


@examples(max_examples=200, deadline=None)
@given(
    lines=st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=8),
    cuts=st.lists(st.integers(1, 30), min_size=1, max_size=5),
)
def test_line_splitter_gives_back_the_lines_however_the_bytes_are_cut(lines: list[bytes], cuts: list[int]) -> None:
    data = b"".join(line + b"\n" for line in lines)
    splitter = LineSplitter(20, window=4)
    out: list[bytes | Overlong] = []
    position, turn = 0, 0
    while position < len(data):
        step = cuts[turn % len(cuts)]
        out += splitter.feed(data[position : position + step])
        position, turn = position + step, turn + 1
    assert len(out) == len(lines)
    for line, got in zip(lines, out, strict=True):
        if len(line) <= 20:
            assert got == line
        else:
            assert isinstance(got, Overlong)
            assert (got.head, got.tail, got.size) == (line[:4], line[-4:], len(line))


@examples(max_examples=200, deadline=None)
@given(
    request_id=st.integers(-(2**53), 2**53) | st.text(max_size=12),
    order=st.permutations(["jsonrpc", "id", "method", "params"]),
    filler=json_values,
    depth=st.integers(120, 400),
)
def test_peek_envelope_finds_the_id_in_any_key_order(
    request_id: int | str, order: list[str], filler: Any, depth: int
) -> None:
    """A refused request, its members in any order and its params deep and long: read from its
    ends (the id is never in the middle of a line whose other members are this short)."""
    members = {
        "jsonrpc": '"2.0"',
        "id": json.dumps(request_id),
        "method": '"tools/call"',
        "params": '{"decoy":{"id":"no"},"f":' + json.dumps(filler) + ',"a":' + nested(depth) + "}",
    }
    line = ("{" + ",".join(f'"{key}":{members[key]}' for key in order) + "}").encode()
    envelope = peek_envelope(line[:8192], line[-8192:])
    assert envelope.request_id == request_id
    assert envelope.keys == {"id", "method"}


# --- the client's side, over stdio ------------------------------------------------------------


@dataclass
class StdioProxy:
    process: anyio.abc.Process
    stdout: BufferedByteReceiveStream
    lines: list[dict[str, Any]] = field(default_factory=lambda: list[dict[str, Any]]())

    async def send(self, line: str | bytes) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send((line.encode() if isinstance(line, str) else line) + b"\n")

    async def answer(self, request_id: Any) -> dict[str, Any]:
        """The (one) answer to ``request_id``; every line read must be JSON-RPC."""
        with anyio.fail_after(ANSWER_WAIT):
            while True:
                for message in self.lines:
                    if "method" not in message and message.get("id", "none") == request_id:
                        return message
                line = await self.stdout.receive_until(b"\n", 1024 * 1024)
                types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                self.lines.append(json.loads(line))

    async def answers_with_null_id(self, count: int) -> list[dict[str, Any]]:
        with anyio.fail_after(ANSWER_WAIT):
            while len(found := [m for m in self.lines if m.get("id", "none") is None]) < count:
                line = await self.stdout.receive_until(b"\n", 1024 * 1024)
                self.lines.append(json.loads(line))
        return found


def initialize(request_id: int = 1) -> str:
    params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "hostile", "version": "1"}}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params})


def call(request_id: Any, tool: str, arguments: Any) -> str:
    params = {"name": tool, "arguments": arguments}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})


@asynccontextmanager
async def stdio_proxy(tmp_path: Path, settings: dict[str, Any] | None = None) -> AsyncGenerator[StdioProxy]:
    """``mcp-patchbay`` as a client launches it, in front of raw_server; not yet initialized.
    On the way out its stdin closes and it must exit 0 (it did not crash)."""
    config = tmp_path / "patchbay.json"
    document = {"mcpServers": {"raw": raw_entry()}, "patchbay": {"watch": False, **(settings or {})}}
    config.write_text(json.dumps(document), encoding="utf-8")
    stderr = (tmp_path / "stderr.log").open("wb")
    command = [sys.executable, "-m", "mcp_patchbay", "--config", str(config)]
    process = await anyio.open_process(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr)
    assert process.stdout is not None
    try:
        yield StdioProxy(process, BufferedByteReceiveStream(process.stdout))
        with anyio.fail_after(15):
            await process.stdin.aclose()  # type: ignore[union-attr]
            assert await process.wait() == 0, (tmp_path / "stderr.log").read_text()
    finally:
        if process.returncode is None:
            process.kill()
            with anyio.CancelScope(shield=True):
                await process.wait()
        stderr.close()
        await process.aclose()


async def handshake(proxy: StdioProxy) -> None:
    await proxy.send(initialize())
    assert "result" in await proxy.answer(1)
    await proxy.send('{"jsonrpc":"2.0","method":"notifications/initialized"}')


async def test_stdio_deeply_nested_line_is_answered_and_the_proxy_goes_on(tmp_path: Path) -> None:
    """Regression: one line of ``"[" * 1000 + "]" * 1000`` (2 KB), or a tools/call whose arguments
    nest 1,000 deep, ended the proxy (RecursionError in client_wire.read_stdin, exit 1)."""
    async with stdio_proxy(tmp_path) as proxy:
        await handshake(proxy)
        await proxy.send(nested(1000))
        await proxy.send(call(5, "raw__echo", {"a": json.loads(nested(900))}))
        await proxy.send(
            '{"jsonrpc":"2.0","id":"six","method":"tools/call","params":{"name":"raw__echo","arguments":{"a":'
            + nested(5000)
            + "}}}"
        )
        (bare,) = await proxy.answers_with_null_id(1)
        assert bare["error"]["code"] == types.INVALID_REQUEST
        for request_id in (5, "six"):
            error = (await proxy.answer(request_id))["error"]
            assert error["code"] == types.INVALID_REQUEST
            assert "max_json_depth" in error["message"] and len(error["message"]) < 500
        # Nested as deep as the limit allows: served.
        await proxy.send(call(7, "raw__echo", {"text": "fine", "a": json.loads(nested(90))}))
        assert (await proxy.answer(7))["result"]["content"][0]["text"] == "fine"


async def test_stdio_overlong_client_line_is_answered_by_its_id_and_nothing_else_is_lost(tmp_path: Path) -> None:
    """Regression: a line over the 256 MiB LINE_LIMIT was not answered (the SDK got an exception
    item) and its rest was read as further lines; the limit is now max_message_bytes."""
    async with stdio_proxy(tmp_path, {"max_message_bytes": SMALL_LIMIT}) as proxy:
        await handshake(proxy)
        await proxy.send(call(3, "raw__echo", {"text": "x" * (4 * SMALL_LIMIT)}))
        await proxy.send(call(4, "raw__echo", {"text": "after"}))
        error = (await proxy.answer(3))["error"]
        assert error["code"] == types.INVALID_REQUEST and "max_message_bytes" in error["message"]
        assert (await proxy.answer(4))["result"]["content"][0]["text"] == "after"
        assert not [m for m in proxy.lines if m.get("id", "none") is None], proxy.lines  # no stray answers


async def test_stdio_batch_and_ids_of_the_wrong_type_get_an_answer(tmp_path: Path) -> None:
    """Regression: a batch, or a request whose id is an object, array, float or bool, got no
    answer at all (the SDK read the latter as a notification); the client waited forever."""
    async with stdio_proxy(tmp_path) as proxy:
        await handshake(proxy)
        await proxy.send('[{"jsonrpc":"2.0","id":2,"method":"ping"}]')
        for bad in ('{"a":1}', "[1]", "1.5", "true"):
            await proxy.send('{"jsonrpc":"2.0","id":' + bad + ',"method":"ping"}')
        answers = await proxy.answers_with_null_id(5)
        assert {a["error"]["code"] for a in answers} == {types.INVALID_REQUEST}
        assert "batches" in answers[0]["error"]["message"]
        assert all("string or an integer" in a["error"]["message"] for a in answers[1:])
        await proxy.send('{"jsonrpc":"2.0","id":9,"method":"ping"}')
        assert (await proxy.answer(9))["result"] == {}


async def test_stdio_request_before_initialize_is_told_to_initialize_first(tmp_path: Path) -> None:
    """Regression: a request before initialize got -32602 "Invalid request parameters"; ping is
    allowed before initialize by the lifecycle and is answered."""
    async with stdio_proxy(tmp_path) as proxy:
        await proxy.send('{"jsonrpc":"2.0","id":"early","method":"tools/list"}')
        await proxy.send('{"jsonrpc":"2.0","id":"ping","method":"ping"}')
        error = (await proxy.answer("early"))["error"]
        assert error["code"] == types.INVALID_REQUEST and "initialize" in error["message"]
        assert (await proxy.answer("ping"))["result"] == {}
        await handshake(proxy)
        await proxy.send('{"jsonrpc":"2.0","id":2,"method":"tools/list"}')
        assert "raw__echo" in {t["name"] for t in (await proxy.answer(2))["result"]["tools"]}


# --- the upstream's side ---------------------------------------------------------------------------


@asynccontextmanager
async def raw_rig(tmp_path: Path, **settings: Any) -> AsyncGenerator[Rig]:
    async with proxy_rig(tmp_path, {"raw": raw_entry()}, {"restart_initial_delay": 0.1, **settings}) as rig:
        await rig.ready("raw")
        yield rig


async def refused_while_another_call_waits(rig: Rig, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call ``tool`` while a held call is in flight on the same connection; the held call must
    still be answered after, and the connection must be the same."""
    upstream = rig.upstream("raw")
    restarts = upstream.restarts
    held: list[str] = []
    error: dict[str, Any] = {}
    async with anyio.create_task_group() as tg:

        async def hold() -> None:
            held.append(await rig.ok("raw__hold", within=ANSWER_WAIT))

        tg.start_soon(hold)
        refused = await rig.call(f"raw__{tool}", arguments, within=ANSWER_WAIT)
        assert await rig.ok("raw__release") == "released"
        error = refused.error
    assert held == ["released"]
    assert upstream.restarts == restarts and upstream.state.value == "ready"
    return error


@pytest.mark.parametrize("id_last", [False, True], ids=["id_first", "id_last"])
async def test_deeply_nested_upstream_answer_fails_only_its_call(tmp_path: Path, id_last: bool) -> None:
    """Regression: an answer nested 5,000 deep raised RecursionError in the stdio reader, which
    dropped and restarted the connection and failed every other call in flight (CONNECTION_LOST)."""
    async with raw_rig(tmp_path) as rig:
        error = await refused_while_another_call_waits(rig, "deep", {"depth": 5000, "id_last": id_last})
        assert error["code"] == Code.PROTOCOL_ERROR
        assert "nested too deeply" in error["message"]


@pytest.mark.parametrize("id_last", [False, True], ids=["id_first", "id_last"])
async def test_overlong_upstream_answer_fails_only_its_call(tmp_path: Path, id_last: bool) -> None:
    """Regression: an upstream's line had no cap (a 100 MB result took 35 s and 230 MiB before it
    was cut, the buffer grown chunk by chunk); past max_message_bytes it is skipped as it streams."""
    async with raw_rig(tmp_path, max_message_bytes=SMALL_LIMIT) as rig:
        error = await refused_while_another_call_waits(rig, "long", {"bytes": 3_000_000, "id_last": id_last})
        assert error["code"] == Code.RESULT_TOO_LARGE
        assert await rig.ok("raw__echo", {"text": "still here"}) == "still here"


async def test_deeply_nested_answer_to_the_sdk_session_fails_only_that_request(tmp_path: Path) -> None:
    """The SDK's own requests (integer ids: here the tools/list after a list_changed) get an error
    answer for their id, so the re-read fails alone; the connection and the catalog stay."""
    async with raw_rig(tmp_path) as rig:
        upstream = rig.upstream("raw")
        assert await rig.ok("raw__poison_list") == "poisoned"
        await rig.log.wait_for("re-reading tools of 'raw' failed", timeout=ANSWER_WAIT)
        assert upstream.restarts == 0
        assert "raw__echo" in await rig.alive()
        assert await rig.ok("raw__echo", {"text": "ok"}) == "ok"


async def test_a_burst_of_list_changed_costs_a_few_tools_list_not_one_each(tmp_path: Path) -> None:
    """Regression: 5,000 tools/list_changed made 5,000 tools/list requests. Now at most one
    re-read is in flight and one owed per kind, and the last change is always read."""
    async with raw_rig(tmp_path) as rig:
        latest = anyio.Event()

        def names() -> set[str]:
            return {tool.name for tool in rig.proxy.supervisor.catalog.tools}

        def on_change(kinds: set[str]) -> None:
            if "raw__v2000" in names():
                latest.set()

        rig.proxy.supervisor.listeners.append(on_change)
        assert await rig.ok("raw__burst", {"count": 2000}) == "sent; version 2000"
        with anyio.fail_after(ANSWER_WAIT):
            await latest.wait()
        lists = int(await rig.ok("raw__lists"))
        assert lists <= 4, f"{lists} tools/list for 2,000 notices (1 at startup)"
        assert [name for name in names() if name.startswith("raw__v")] == ["raw__v2000"]


# --- HTTP upstreams: the SDK's client parses; the proxy bounds what it reads -----------------------


@asynccontextmanager
async def http_rig(tmp_path: Path, **settings: Any) -> AsyncGenerator[Rig]:
    async with serving(HttpFaults()) as url:
        servers = {"web": {"url": f"{url}/mcp", "type": "http"}}
        async with proxy_rig(tmp_path, servers, {"restart_initial_delay": 0.1, "timeout": 20, **settings}) as rig:
            await rig.ready("web")
            yield rig


async def test_http_upstream_answer_over_the_limit_fails_only_its_call(tmp_path: Path) -> None:
    """Regression: a streamable-HTTP answer had no cap from the proxy's setting (a JSON body was
    read whole; an SSE event had the SDK's own 1 MiB, and the SDK's answer to it read as the
    connection's end: CONNECTION_LOST and a reconnect). Past max_message_bytes it fails its call
    alone; the connection stays."""
    async with http_rig(tmp_path, max_message_bytes=SMALL_LIMIT) as rig:
        refused = await rig.call("web__echo", {"text": "x" * (2 * SMALL_LIMIT)}, within=ANSWER_WAIT)
        assert refused.result.is_error
        # Told as what it is, not as a retryable SERVER_ERROR (which a read-only tool would be sent again for).
        assert refused.error["code"] == Code.RESULT_TOO_LARGE, refused.error
        assert not refused.error["retryable"]
        assert "more data than the proxy accepts" in refused.error["message"], refused.error
        assert '"tool": "echo"' in await rig.ok("web__echo", {"text": "small"})
        assert rig.upstream("web").restarts == 0


async def test_http_upstream_answer_under_the_limit_but_over_one_mib_is_served(tmp_path: Path) -> None:
    """Regression: the SDK's streamable-HTTP client caps an SSE event at 1 MiB by default, so a
    2 MiB answer failed though max_message_bytes (32 MiB) allows it; it reaches the result limit."""
    async with http_rig(tmp_path) as rig:
        result = await rig.call("web__echo", {"text": "y" * (2 * 2**20)}, within=ANSWER_WAIT)
        assert not result.result.is_error or result.error["code"] == Code.RESULT_TOO_LARGE, result.result


@pytest.mark.parametrize("content_type", ["application/json", "text/html", ""])
async def test_http_bodies_the_sdk_reads_whole_are_cut_at_the_limit(content_type: str) -> None:
    """A JSON answer, a sign-in's metadata or token answer, an error page: every body but an SSE
    stream is refused once past max_message_bytes, as it streams, instead of being read whole."""
    from mcp_patchbay.upstreams.transports.http import MessageTooLarge, capped

    sent: list[int] = []

    class Endless(httpx2.AsyncByteStream):
        async def __aiter__(self) -> AsyncGenerator[bytes]:
            while True:
                sent.append(1)
                yield b"x" * 1024

    headers = {"content-type": content_type} if content_type else {}
    response = capped(httpx2.Response(200, headers=headers, stream=Endless()), Bounds(max_bytes=SMALL_LIMIT))
    with anyio.fail_after(10), pytest.raises(MessageTooLarge, match="max_message_bytes"):
        await response.aread()
    assert len(sent) <= SMALL_LIMIT // 1024 + 2
    stream = httpx2.Response(200, headers={"content-type": "text/event-stream"}, stream=Endless())
    assert capped(stream, Bounds(max_bytes=SMALL_LIMIT)).stream is stream.stream  # events are bounded one by one


def test_a_tool_listing_without_schema_types_is_repaired_and_named() -> None:
    from mcp_patchbay.wire.jsonrpc import first_names, untyped_tool_schemas

    result = {
        "tools": [
            {"name": "a", "inputSchema": {"$schema": "http://json-schema.org/draft-07/schema#"}},
            {"name": "b"},
            {"name": "c", "inputSchema": {"type": "object"}},
            {"name": "d", "inputSchema": {"type": "string"}},  # says what it is, wrongly: left to be refused
        ]
    }
    assert untyped_tool_schemas(result) == ["a", "b"]
    assert [t.get("inputSchema", {}).get("type") for t in result["tools"]] == ["object", "object", "object", "string"]
    assert untyped_tool_schemas({"content": [], "tools": [{"name": "x"}]}) == []  # a call's result is not a listing
    assert untyped_tool_schemas(None) == [] and untyped_tool_schemas({"tools": "no"}) == []
    assert first_names(["a\nFAKE LOG LINE", "x" * 500]) == "'a\\nFAKE LOG LINE', '" + "x" * 80 + "'"


async def test_a_server_listing_tools_without_schema_types_is_served_whole(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Regression: @modelcontextprotocol/server-gitlab lists every tool with an inputSchema that has
    no "type"; the SDK refused the whole listing and the proxy reconnected forever, serving none."""
    entry = {"command": sys.executable, "args": [str(RAW_SERVER), "--untyped"]}
    async with proxy_rig(tmp_path, {"raw": entry}, {"restart_initial_delay": 0.1}) as rig:
        await rig.ready("raw")
        names = {tool.name for tool in rig.upstream("raw").listing.tools}
        assert {"echo", "untyped", "schemaless"} <= names
        assert "'untyped', 'schemaless'" in caplog.text and 'has no "type"' in caplog.text
        assert rig.upstream("raw").restarts == 0
        assert "hi" in await rig.ok("raw__echo", {"text": "hi"})


def test_an_http_links_listing_without_schema_types_is_repaired_before_the_session_reads_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Both HTTP links pass what they read through ``typed_schemas`` (an SDK server cannot send
    such a listing, so the link's step is tested here and the stdio link end to end above)."""
    from mcp.shared.message import SessionMessage

    from mcp_patchbay.upstreams.transports.http import typed_schemas

    listing = {"tools": [{"name": "untyped", "inputSchema": {"$schema": "x"}}]}
    message = SessionMessage(types.JSONRPCResponse(jsonrpc="2.0", id=3, result=listing))
    assert typed_schemas("https://h.example/mcp?token=s3cret")(message) is message
    assert listing["tools"][0]["inputSchema"] == {"$schema": "x", "type": "object"}
    assert types.ListToolsResult.model_validate(listing).tools[0].name == "untyped"
    assert "https://h.example/mcp' listed 1 tools" in caplog.text and "s3cret" not in caplog.text
