"""The answer to ``initialize`` given before the SDK is loaded (``early_handshake``): the same as
the SDK's for every version, nothing read lost, and a config that cannot be used told to the model."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.message import SessionMessage
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from mcp_patchbay.config import parse_config
from mcp_patchbay.wire.early_handshake import HANDSHAKE_VERSIONS, EarlyHandshake, Handover, initialize_answer
from tests.harness import MemoryUpstreams, config_from, proxy_transport, running_proxy

pytestmark = pytest.mark.anyio


def initialize(version: str, request_id: int | str = 1) -> dict[str, Any]:
    params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params}


def test_the_versions_are_the_sdks() -> None:
    assert HANDSHAKE_VERSIONS == HANDSHAKE_PROTOCOL_VERSIONS


@pytest.mark.parametrize("version", [*HANDSHAKE_PROTOCOL_VERSIONS, "2026-07-28", "1999-01-01"])
async def test_the_early_answer_is_the_sdks_answer(version: str) -> None:
    """What the proxy's SDK server answers to initialize, byte for byte as JSON values: an SDK
    upgrade that changes the capabilities or the negotiation fails here first."""
    config = config_from({"a": {"command": "a"}})
    async with running_proxy(config, MemoryUpstreams({})) as proxy, proxy_transport(proxy) as (read, write):
        request = types.jsonrpc_message_adapter.validate_python(initialize(version), by_name=False)
        await write.send(SessionMessage(request))
        with anyio.fail_after(10):
            answer = await read.receive()
        assert isinstance(answer, SessionMessage)
        sdk = json.loads(answer.message.model_dump_json(by_alias=True, exclude_unset=True))
    assert initialize_answer(1, initialize(version)["params"]) == sdk


@pytest.mark.parametrize(
    "params",
    [
        {"protocolVersion": 20250618, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
        {"protocolVersion": "2025-06-18", "clientInfo": {"name": "t", "version": "1"}},
        {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t"}},
        {"protocolVersion": "2025-06-18", "capabilities": {}},
    ],
)
def test_params_the_sdk_would_refuse_are_left_to_it(params: dict[str, Any]) -> None:
    assert initialize_answer(1, params) is None


def test_the_sdks_answer_to_a_request_answered_early_is_not_sent_again(caplog: pytest.LogCaptureFixture) -> None:
    given = initialize_answer("a", initialize("2025-06-18")["params"])
    assert given is not None
    handover = Handover(answered={"a": given})
    assert handover.take_answer({"jsonrpc": "2.0", "method": "notifications/message", "params": {}}) is None
    assert handover.take_answer({"jsonrpc": "2.0", "id": "b", "result": {}}) is None
    assert handover.take_answer(dict(given)) == [] and "differs" not in caplog.text
    assert handover.take_answer(dict(given)) is None  # once only: a later answer with that id is not ours
    handover.answered["c"] = given
    assert handover.take_answer({"jsonrpc": "2.0", "id": "c", "result": {}}) == []
    assert "differs from the SDK's" in caplog.text


def test_a_listing_that_changed_since_it_was_given_is_followed_by_list_changed() -> None:
    listed = {"jsonrpc": "2.0", "id": 2, "result": {"tools": [{"name": "a"}]}}
    handover = Handover(answered={2: listed})
    assert handover.take_answer({"jsonrpc": "2.0", "id": 2, "result": {"tools": [{"name": "b"}]}}) == [
        {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    ]
    handover.answered[3] = {**listed, "id": 3}
    assert handover.take_answer({**listed, "id": 3}) == []


def test_the_early_search_listing_is_the_proxys_own() -> None:
    """What early_handshake lists in search mode equals what the proxy lists once the SDK is up
    and no upstream has answered yet (exposure builds its tools from the same own_tools)."""
    from mcp_patchbay.catalog.merge import Catalog
    from mcp_patchbay.session.exposure import Exposure
    from mcp_patchbay.session.own_tools import early_search_listing

    document: dict[str, Any] = {
        "mcpServers": {"github": {"command": "x"}, "off": {"command": "x", "disabled": True}},
        "servers": {"docs": {"url": "https://example.com/mcp"}},
        "patchbay": {"expose": "search", "separator": "_"},
    }
    config = parse_config(json.dumps(document), Path("/virtual/patchbay.json"), environ={})
    early = early_search_listing(document)
    assert early is not None
    # Before any upstream answered: an empty catalog, every server not disabled described without
    # instructions, in config order (exposure.described_servers).
    proxied = Exposure(config.settings).listing(Catalog(), {"github": None, "docs": None})
    assert early == [t.model_dump(by_alias=True, mode="json", exclude_unset=True) for t in proxied]
    assert [tool["name"] for tool in early] == ["patchbay_find_tools", "patchbay_call_read", "patchbay_call_tool"]


def test_auto_mode_answers_early_when_the_last_start_of_the_file_was_over_the_threshold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp_patchbay.session.own_tools import early_search_listing
    from mcp_patchbay.upstreams import start_memory

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    config = tmp_path / "patchbay.json"
    document: dict[str, Any] = {"mcpServers": {"a": {"command": "x"}}, "patchbay": {"search_threshold": 10}}
    config.write_text(json.dumps(document))
    assert start_memory.recall(config) is None
    start_memory.remember(config, 11)
    assert start_memory.recall(config) == 11
    assert early_search_listing(document, start_memory.recall(config)) is not None
    assert early_search_listing(document, 10) is None  # not over the threshold: all mode, which waits
    assert early_search_listing({**document, "patchbay": {"expose": "all"}}, 500) is None
    config.write_text(json.dumps(document) + " ")  # the file changed: what its last start found is void
    os.utime(config, ns=(time.time_ns(), time.time_ns() + 1_000_000_000))
    assert start_memory.recall(config) is None


@pytest.mark.parametrize(
    "patchbay",
    [{}, {"expose": "auto"}, {"expose": "search", "status_tool": True}, {"expose": "search", "separator": "::"}],
)
def test_no_early_listing_unless_the_config_alone_says_what_it_is(patchbay: dict[str, Any]) -> None:
    from mcp_patchbay.session.own_tools import early_search_listing

    assert early_search_listing({"mcpServers": {"a": {"command": "x"}}, "patchbay": patchbay}) is None
    always = {"mcpServers": {"a": {"command": "x", "tools": {"always_list": ["*"]}}}, "patchbay": {"expose": "search"}}
    assert early_search_listing(always) is None


def read_lines(fd: int, count: int) -> list[dict[str, Any]]:
    data = b""
    deadline = time.monotonic() + 10
    while data.count(b"\n") < count:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        assert ready, "no answer from the early reader within 10 s"
        chunk = os.read(fd, 65536)
        assert chunk, "the early reader's output ended"
        data += chunk
    return [json.loads(line) for line in data.splitlines()]


def test_the_reader_answers_the_first_initialize_and_hands_over_every_byte_in_order() -> None:
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    early = EarlyHandshake(in_read, out_write)
    early._thread.start()  # pyright: ignore[reportPrivateUsage]
    first = json.dumps(initialize("2025-11-25", "init")).encode() + b"\n"
    rest = b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n{"jsonrpc":"2.0","id":2,"method":"tools/l'
    os.write(in_write, first[:20])
    os.write(in_write, first[20:] + rest)
    [answer] = read_lines(out_read, 1)
    assert answer["id"] == "init" and answer["result"]["protocolVersion"] == "2025-11-25"
    handover = early.handover()
    assert handover.buffered == first + rest and not handover.eof
    assert list(handover.answered) == ["init"]
    for fd in (in_read, in_write, out_read, out_write):
        os.close(fd)


def test_only_a_first_initialize_is_answered_early() -> None:
    """A ping (or anything) first: nothing is answered early; the SDK's path answers in order."""
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    early = EarlyHandshake(in_read, out_write)
    early._thread.start()  # pyright: ignore[reportPrivateUsage]
    sent = b'{"jsonrpc":"2.0","id":0,"method":"ping"}\n' + json.dumps(initialize("2025-06-18")).encode() + b"\n"
    os.write(in_write, sent)
    os.close(in_write)
    handover = early.handover()
    assert handover.answered == {}
    os.set_blocking(out_read, False)
    with pytest.raises(BlockingIOError):
        os.read(out_read, 10)
    assert handover.buffered in (sent, sent[: len(handover.buffered)])
    for fd in (in_read, out_read, out_write):
        os.close(fd)


def spawn(config: Path, *extra_env: tuple[str, str]) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PATCHBAY_LOG_LEVEL": "WARNING", **dict(extra_env)}
    return subprocess.Popen(
        [sys.executable, "-m", "mcp_patchbay", str(config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )


def exchange(process: subprocess.Popen[bytes], *messages: dict[str, Any], answers: int) -> list[dict[str, Any]]:
    """Send ``messages``; the ``answers`` next lines, in the order of the requests' ids (the
    tool-call lane may answer before the SDK does)."""
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
    process.stdin.flush()
    lines = [json.loads(process.stdout.readline()) for _ in range(answers)]
    return sorted(lines, key=lambda line: str(line.get("id")))


def stop(process: subprocess.Popen[bytes]) -> None:
    assert process.stdin is not None and process.stdout is not None
    process.stdin.close()
    try:
        assert process.wait(timeout=15) == 0
    finally:
        process.kill()
        process.stdout.close()


def test_a_real_start_answers_initialize_before_the_sdk_is_loaded_and_serves_on(tmp_path: Path) -> None:
    """The whole way: spawned as a client spawns it, the answer comes first and once; then the
    same session lists and calls as always (the SDK took the initialize too)."""
    config = tmp_path / "patchbay.json"
    config.write_text(json.dumps({"mcpServers": {}, "patchbay": {"status_tool": True, "watch": False}}))
    process = spawn(config)
    try:
        [answer] = exchange(process, initialize("2025-06-18"), answers=1)
        assert answer["id"] == 1 and answer["result"]["serverInfo"]["name"] == "mcp-patchbay"
        listed, status = exchange(
            process,
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "patchbay__status"}},
            answers=2,
        )
        assert [t["name"] for t in listed["result"]["tools"]] == ["patchbay__status"]
        assert status["id"] == 3 and not status["result"].get("isError")
    finally:
        stop(process)


def test_in_search_mode_a_first_listing_is_answered_before_the_sdk_and_corrected_by_list_changed(
    tmp_path: Path,
) -> None:
    """Sent at once, as a client sends them: initialize and tools/list are both answered early;
    when the upstream's tools then change find_tools' description, the client is told."""
    config = tmp_path / "patchbay.json"
    time_server = [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]
    document = {
        "mcpServers": {"time": {"command": time_server[0], "args": time_server[1:]}},
        "patchbay": {"expose": "search", "watch": False},
    }
    config.write_text(json.dumps(document))
    process = spawn(config)
    try:
        started = time.monotonic()
        answers = exchange(
            process,
            initialize("2025-06-18"),
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            answers=2,
        )
        assert [a["id"] for a in answers] == [1, 2]
        [find, read, call] = answers[1]["result"]["tools"]
        assert (find["name"], read["name"], call["name"]) == (
            "patchbay__find_tools",
            "patchbay__call_read",
            "patchbay__call_tool",
        )
        assert read["annotations"]["readOnlyHint"] is True and call["annotations"]["destructiveHint"] is True
        assert "- time (0): not available now" in find["description"]
        assert process.stdout is not None
        changed = json.loads(process.stdout.readline())  # once the time server has listed its tools
        assert changed["method"] == "notifications/tools/list_changed", changed
        [relisted] = exchange(process, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, answers=1)
        assert "- time (2): " in relisted["result"]["tools"][0]["description"]
        assert time.monotonic() - started < 30
    finally:
        stop(process)


def test_a_config_that_cannot_be_used_is_told_to_the_model_and_applied_once_fixed(tmp_path: Path) -> None:
    config = tmp_path / "patchbay.json"
    config.write_text('{"mcpServers": {"a": {"command": "x",}}}')
    process = spawn(config)
    try:
        exchange(process, initialize("2025-06-18"), answers=1)
        listed, called = exchange(
            process,
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "anything", "arguments": {}}},
            answers=2,
        )
        [tool] = listed["result"]["tools"]
        assert "config file has a mistake" in tool["description"] and "trailing comma" in tool["description"]
        assert str(tmp_path) not in tool["description"]  # the model never sees the user's paths
        result = called["result"]
        assert result["isError"] and result["structuredContent"]["error"]["code"] == "CONFIG_INVALID"
        assert len(result["content"][0]["text"]) < 500
        # Fixed and saved: the watched file is applied, and the client is told the list changed.
        started = time.monotonic()
        config.write_text(json.dumps({"mcpServers": {}, "patchbay": {"status_tool": True}}))
        assert process.stdout is not None
        changed = json.loads(process.stdout.readline())
        assert changed["method"] == "notifications/tools/list_changed", changed
        assert time.monotonic() - started < 10
        [relisted] = exchange(process, {"jsonrpc": "2.0", "id": 4, "method": "tools/list"}, answers=1)
        assert "config file has a mistake" not in json.dumps(relisted)
    finally:
        stop(process)
