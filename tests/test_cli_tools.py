"""Issue 22: ``mcp-patchbay tools`` and ``mcp-patchbay call``, the proxy's tools from the terminal.

In memory: the commands' own coroutines (``tools.list_tools``, ``calling.call_tool``) run the real
``Proxy`` in front of SDK servers in this process (``tests.harness``); usage mistakes go through
``tools.run`` and ``calling.run`` as the command line does. ``tests/e2e/test_cli_tools_e2e.py`` runs the real CLI.
"""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.server.context import ServerRequestContext

from mcp_patchbay.cli import calling, terminal, tools
from mcp_patchbay.cli.calling import CallRequest, call_tool, coerce, describe, parse_arguments, server_for
from mcp_patchbay.cli.options import UsageError
from mcp_patchbay.config import Config
from tests.harness import FakeTool, MemoryUpstreams, config_from, make_server, text

pytestmark = pytest.mark.anyio

WITHIN = 10.0
"""Every command here answers well within this (upstreams in memory)."""


async def _echo(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
    return text(json.dumps(args) if args.get("raw") else str(args.get("text", "")))


async def _failing(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
    return text("no such order: 42", is_error=True)


async def _code(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
    return text(f"{type(args['code']).__name__}:{args['code']}")


def _weather() -> dict[str, FakeTool]:
    city = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    return {
        "get_forecast": FakeTool(_echo, city, description="Get the weather forecast for a city.\nMore lines."),
        "get_alerts": FakeTool(_echo, city, description="Get severe weather alerts for a region."),
    }


def _files() -> dict[str, FakeTool]:
    path = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    return {
        "read_file": FakeTool(_echo, path, description="Read a text file from disk."),
        "write_file": FakeTool(_echo, path, description="Write a text file to disk."),
        "delete_file": FakeTool(_echo, path, description="Delete a file."),
    }


def _svc() -> dict[str, FakeTool]:
    text_schema = {"type": "object", "properties": {"text": {"type": "string"}, "raw": {"type": "boolean"}}}
    return {
        "echo": FakeTool(_echo, text_schema, description="Return the text given."),
        "fail": FakeTool(_failing, description="Fail as the tool itself."),
        "code": FakeTool(_code, {"type": "object", "properties": {"code": {"type": "string"}}}),
    }


def _world(**patchbay: Any) -> tuple[Config, MemoryUpstreams]:
    servers = {"weather": _weather(), "files": _files(), "svc": _svc()}
    entries: dict[str, Any] = {name: {"command": "x"} for name in servers}
    entries["down"] = {"command": "x"}
    entries["files"]["tools"] = {"deny": ["delete_file"]}
    upstreams = MemoryUpstreams({name: make_server(name, t) for name, t in servers.items()})
    upstreams.refuse.add("down")
    return config_from(entries, {"watch": False, **patchbay}), upstreams


async def _list(config: Config, upstreams: MemoryUpstreams, **options: Any) -> int:
    with anyio.fail_after(WITHIN):
        return await tools.list_tools(config, connector=upstreams, **options)


async def _call(config: Config, upstreams: MemoryUpstreams, request: CallRequest) -> int:
    with anyio.fail_after(WITHIN):
        return await call_tool(config, request, connector=upstreams)


# --- tools -------------------------------------------------------------------------------------


async def test_tools_lists_each_server_s_tools_with_its_state(capsys: pytest.CaptureFixture[str]) -> None:
    config, upstreams = _world()
    assert await _list(config, upstreams) == terminal.EXIT_FAILED  # 'down' is not ready
    out = capsys.readouterr().out
    lines = out.splitlines()
    weather = lines.index("weather: ready, 2 tools")
    name, description = lines[weather + 1].split(maxsplit=1)
    assert (name, description) == ("weather__get_alerts", "Get severe weather alerts for a region.  [needs: city]")
    assert "Get the weather forecast for a city.  [needs: city]" in lines[weather + 2]  # the first line only
    assert "files: ready, 2 tools" in lines and "delete_file" not in out  # turned off by the config
    down = next(line for line in lines if line.startswith("down: "))
    assert down.startswith("down: failed: ") and "next: run: mcp-patchbay check" in out
    assert "3 of 4 servers ready, 7 tools (/virtual/patchbay.json)" in out
    assert "A client lists every one of these tools." in out


async def test_tools_all_names_the_tools_the_config_turns_off(capsys: pytest.CaptureFixture[str]) -> None:
    config, upstreams = _world()
    await _list(config, upstreams, show_all=True)
    assert "  turned off in the config: delete_file" in capsys.readouterr().out.splitlines()


async def test_tools_json_shape(capsys: pytest.CaptureFixture[str]) -> None:
    config, upstreams = _world(search_threshold=3)
    await _list(config, upstreams, as_json=True)
    report = json.loads(capsys.readouterr().out)
    assert report["config"] == "/virtual/patchbay.json" and report["mode"] == "search"
    assert report["listed"] == ["patchbay__find_tools", "patchbay__call_read", "patchbay__call_tool"]
    assert [s["name"] for s in report["servers"]] == ["weather", "files", "svc", "down"]
    weather, _, _, down = report["servers"]
    assert set(weather) == {"name", "state", "label", "problem", "next", "tools"}
    assert weather["tools"][0] == {
        "name": "weather__get_alerts",
        "server": "weather",
        "tool": "get_alerts",
        "description": "Get severe weather alerts for a region.",
        "required": ["city"],
    }
    assert down["state"] == "failed" and down["tools"] == [] and down["problem"] and down["next"]


async def test_tools_server_starts_only_that_server(capsys: pytest.CaptureFixture[str]) -> None:
    config, upstreams = _world()
    assert await _list(config, upstreams, server="weather") == terminal.EXIT_OK
    assert upstreams.connects == {"weather": 1}
    out = capsys.readouterr().out
    assert "weather: ready, 2 tools" in out and "svc" not in out
    assert "1 of 1 servers ready, 2 tools" in out and "A client lists" not in out  # one server cannot tell


async def test_a_search_ranks_as_find_tools_does(capsys: pytest.CaptureFixture[str]) -> None:
    config, upstreams = _world()
    query = "weather alerts for a region"
    assert await _list(config, upstreams, query=query, as_json=True) == terminal.EXIT_FAILED  # 'down'
    report = json.loads(capsys.readouterr().out)
    async with terminal.running(config, connector=upstreams) as proxy:  # a Proxy, searched through its find_tools
        found = await proxy.run_tool("patchbay__find_tools", {"query": query})
    ranked = [tool["name"] for tool in found["structuredContent"]["tools"]]
    assert [match["name"] for match in report["matches"]] == ranked
    assert ranked[0] == "weather__get_alerts"
    assert report["unavailable"] == [{"server": "down", "state": "down", "match": 0.0}]


async def test_a_search_for_a_person_names_the_best_and_what_was_not_searched(
    capsys: pytest.CaptureFixture[str],
) -> None:
    config, upstreams = _world()
    await _list(config, upstreams, query="read a file")
    out = capsys.readouterr().out.splitlines()
    assert out[0] == 'Best matches for "read a file", ranked as patchbay__find_tools ranks them:'
    assert out[1].split()[0] == "files__read_file"
    assert "Not searched (not ready):" in out and any(line.startswith("  down: failed") for line in out)
    assert out[-1] == "Call one: mcp-patchbay call files__read_file KEY=VALUE ..."


async def test_a_search_that_finds_nothing_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    config, upstreams = _world()
    assert await _list(config, upstreams, query="zzqx") == terminal.EXIT_FAILED
    assert 'No tool matches "zzqx".' in capsys.readouterr().out


# --- call --------------------------------------------------------------------------------------


async def test_call_prints_the_text_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    config, upstreams = _world()
    assert await _call(config, upstreams, CallRequest("svc__echo", {"text": "hello there"})) == 0
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("hello there\n", "")
    assert upstreams.connects == {"svc": 1}  # an exact name: only its server started


async def test_a_mistaken_name_that_resolves_runs_and_says_which_tool(capsys: pytest.CaptureFixture[str]) -> None:
    config, upstreams = _world()
    assert await _call(config, upstreams, CallRequest("svc_echo", {"text": "hi"})) == 0
    captured = capsys.readouterr()
    assert captured.out == "hi\n"
    assert captured.err == "mcp-patchbay call: calling svc__echo ('svc_echo' is not its exact name)\n"


async def test_an_unknown_name_exits_1_with_the_proxy_s_suggestions(capsys: pytest.CaptureFixture[str]) -> None:
    config, upstreams = _world()
    assert await _call(config, upstreams, CallRequest("weather__get_forcast", {"city": "Paris"})) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    first, second = captured.err.splitlines()
    assert first == "mcp-patchbay call: no tool is named 'weather__get_forcast'. Did you mean: weather__get_forecast?"
    assert "mcp-patchbay tools lists every tool" in second
    assert set(upstreams.connects) == {"weather", "files", "svc", "down"}  # suggested among every server's tools


async def test_an_unknown_name_without_a_close_one(capsys: pytest.CaptureFixture[str]) -> None:
    config, upstreams = _world()
    assert await _call(config, upstreams, CallRequest("zzqx")) == 1
    assert "no tool is named 'zzqx'. No tool has a similar name." in capsys.readouterr().err


async def test_the_tool_s_own_error_exits_1_with_its_text_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    config, upstreams = _world()
    assert await _call(config, upstreams, CallRequest("svc__fail")) == 1
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", "no such order: 42\n")


async def test_a_failing_upstream_exits_1_with_the_proxy_s_text_and_the_server_s_state(
    capsys: pytest.CaptureFixture[str],
) -> None:
    config, upstreams = _world()
    assert await _call(config, upstreams, CallRequest("down__anything")) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("Could not connect to server 'down'")  # the proxy's own result text
    assert err[1].startswith("  down: failed: ") and err[2] == "  next: run: mcp-patchbay check"


async def test_invalid_arguments_exit_1_saying_what_the_tool_takes(capsys: pytest.CaptureFixture[str]) -> None:
    config, upstreams = _world()
    assert await _call(config, upstreams, CallRequest("weather__get_forecast", {"town": "Paris"})) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("Invalid arguments for 'weather__get_forecast'")
    assert err[1] == "  weather__get_forecast takes: city: string"


async def test_call_json_prints_the_whole_result(capsys: pytest.CaptureFixture[str]) -> None:
    config, upstreams = _world()
    assert await _call(config, upstreams, CallRequest("svc__echo", {"text": "hi"}, as_json=True)) == 0
    assert json.loads(capsys.readouterr().out) == {"content": [{"type": "text", "text": "hi"}], "isError": False}
    assert await _call(config, upstreams, CallRequest("nope__nothing", as_json=True)) == 1
    captured = capsys.readouterr()
    error = json.loads(captured.out)["structuredContent"]["error"]
    assert error["code"] == "TOOL_NOT_FOUND" and json.loads(captured.out)["isError"] is True
    assert "no tool is named 'nope__nothing'" in captured.err


async def test_a_string_property_given_a_number_gets_the_text_as_typed(capsys: pytest.CaptureFixture[str]) -> None:
    config, upstreams = _world()
    arguments, texts = parse_arguments(["code=1e3"])
    assert arguments == {"code": 1000.0}
    assert await _call(config, upstreams, CallRequest("svc__code", arguments, texts)) == 0
    assert capsys.readouterr().out == "str:1e3\n"


async def test_the_timeout_is_the_call_s(capsys: pytest.CaptureFixture[str]) -> None:
    started = anyio.Event()

    async def hang(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        started.set()
        await anyio.sleep_forever()
        raise AssertionError

    config = config_from({"slow": {"command": "x", "timeout": 60}}, {"watch": False, "retry_attempts": 0})
    upstreams = MemoryUpstreams({"slow": make_server("slow", {"hang": FakeTool(hang)})})
    assert await _call(config, upstreams, CallRequest("slow__hang", timeout=0.2)) == 1
    err = capsys.readouterr().err.splitlines()
    assert started.is_set() and "did not finish within 0.2s" in err[0]
    assert err[1] == "  give it longer with --timeout SECONDS"


# --- progress: one updating line on a terminal, nothing elsewhere --------------------------------


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


async def _progress_call(monkeypatch: pytest.MonkeyPatch, stderr: io.StringIO) -> str:
    async def work(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        for step in range(3):
            await ctx.session.report_progress(step + 1, 3, f"step {step + 1}")
        return text("done")

    monkeypatch.setattr("sys.stderr", stderr)
    config = config_from({"svc": {"command": "x"}}, {"watch": False})
    upstreams = MemoryUpstreams({"svc": make_server("svc", {"work": FakeTool(work)})})
    assert await _call(config, upstreams, CallRequest("svc__work")) == 0
    return stderr.getvalue()


async def test_progress_is_one_updating_line_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    shown = await _progress_call(monkeypatch, _Terminal())
    assert "\n" not in shown
    assert "\r\x1b[Ksvc__work: 3/3 (100%) step 3" in shown
    assert shown.endswith("\r\x1b[K")  # cleared before the result is printed


async def test_progress_writes_nothing_when_stderr_is_no_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    assert await _progress_call(monkeypatch, io.StringIO()) == ""


# --- the result, for a person ------------------------------------------------------------------


def test_images_audio_and_resources_are_summarised() -> None:
    assert describe({"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"}) == "[image: image/png, 5 bytes]"
    assert describe({"type": "audio", "data": "A" * 4000, "mimeType": "audio/wav"}) == "[audio: audio/wav, 3.0 kB]"
    blob = {"type": "resource", "resource": {"uri": "file:///a.gz", "mimeType": "application/gzip", "blob": "AAAA"}}
    assert describe(blob) == "[resource: file:///a.gz, application/gzip, 3 bytes]"
    assert describe({"type": "resource", "resource": {"uri": "mem://n", "text": "héllo"}}) == (
        "[resource: mem://n, 6 bytes of text]"
    )
    assert describe({"type": "resource_link", "uri": "file:///x", "name": "x"}) == "[resource link: file:///x]"


def test_structured_content_is_shown_only_without_text(capsys: pytest.CaptureFixture[str]) -> None:
    request = CallRequest("t")
    assert calling.show_result({"content": [], "structuredContent": {"a": 1}}, request) == 0
    assert json.loads(capsys.readouterr().out) == {"a": 1}
    both = {"content": [{"type": "text", "text": "one"}], "structuredContent": {"a": 1}}
    calling.show_result(both, request)
    assert capsys.readouterr().out == "one\n"


# --- arguments ---------------------------------------------------------------------------------


def test_key_value_is_json_when_it_parses_else_text(tmp_path: Path) -> None:
    (tmp_path / "note.txt").write_text("line one\nline two\n")
    pairs = ["n=3", "f=1.5", "on=true", "none=null", 'obj={"a":1}', "word=hello", "sp=a b", "empty=", "nan=NaN"]
    arguments, texts = parse_arguments([*pairs, f"body=@{tmp_path / 'note.txt'}"])
    assert arguments == {
        "n": 3,
        "f": 1.5,
        "on": True,
        "none": None,
        "obj": {"a": 1},
        "word": "hello",
        "sp": "a b",
        "empty": "",
        "nan": "NaN",
        "body": "line one\nline two\n",
    }
    assert texts["n"] == "3"


def test_args_json_is_merged_under_key_value() -> None:
    arguments, _ = parse_arguments(["a=2"], '{"a": 1, "b": [1, 2]}')
    assert arguments == {"a": 2, "b": [1, 2]}


def test_coercion_only_where_the_schema_leaves_no_doubt() -> None:
    schema = {
        "properties": {
            "s": {"type": "string"},
            "n": {"type": "number"},
            "either": {"type": ["integer", "string"]},
            "maybe": {"type": ["string", "null"]},
            "free": {},
        }
    }
    arguments, texts = parse_arguments(["s=42", "n=42", "either=42", "maybe=true", "free=42"])
    assert coerce(arguments, texts, schema) == {"s": "42", "n": 42, "either": 42, "maybe": "true", "free": 42}
    assert coerce({"s": 1}, {}, schema) == {"s": 1}  # --args' JSON is taken as given


def test_the_server_a_name_names() -> None:
    config = config_from({"time": {"command": "x"}, "sequential-thinking": {"command": "x"}}, {"watch": False})
    assert server_for("time__get_current_time", config) == "time"
    assert server_for("mcp__patchbay__time__now", config) == "time"
    assert server_for("sequential_thinking__think", config) == "sequential-thinking"
    assert server_for("get_current_time", config) is None
    assert server_for("time__sequential-thinking", config) is None  # two servers named: start both


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["svc__echo", "hello"], "expected KEY=VALUE, got 'hello': arguments are KEY=VALUE"),
        (["svc__echo", "=x"], "expected KEY=VALUE, got '=x'"),
        (["svc__echo", "a=1", "a=2"], "'a' is given twice"),
        (["svc__echo", "--args", "{bad"], "--args is not valid JSON: Expecting property name enclosed in double"),
        (["svc__echo", "--args", "[1]"], '--args must be a JSON object, like \'{"text": "hello"}\'; got an array'),
        (["svc__echo", "text=@/no/such/file"], "text=@/no/such/file: no such file (text that starts with @: use"),
        (["svc__echo", "--timeout", "0"], "argument --timeout: expected a number of seconds above 0, got '0'"),
        (["svc__echo", "--log-level", "chatty"], "--log-level: unknown level 'CHATTY'"),
        ([], "the following arguments are required: NAME"),
    ],
)
def test_call_usage_mistakes_exit_2_with_a_clear_message(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert calling.run("call", argv) == terminal.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith(f"mcp-patchbay call: {message}"), err


def test_no_config_anywhere_names_every_way_to_give_one(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PATCHBAY_CONFIG", raising=False)
    assert tools.run("tools", []) == terminal.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("mcp-patchbay tools: no config file.")
    for way in ("--config PATH", "-c PATH", "PATCHBAY_CONFIG=PATH", "mcp-patchbay import", "config.json"):
        assert way in err, way


def test_a_config_that_cannot_be_used_says_where_it_came_from(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATCHBAY_CONFIG", str(tmp_path / "missing.json"))
    assert calling.run("call", ["x__y"]) == terminal.EXIT_USAGE
    err = capsys.readouterr().err
    assert (
        err
        == f"mcp-patchbay call: the config ($PATCHBAY_CONFIG) cannot be used: {tmp_path}/missing.json: file not found\n"
    )


def test_a_config_given_as_a_word_is_pointed_to_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "patchbay.json"
    path.write_text('{"mcpServers": {}}')
    assert tools.run("tools", [str(path)]) == terminal.EXIT_USAGE
    assert f"the config comes with --config (or -c): mcp-patchbay tools -c {path}" in capsys.readouterr().err


def test_an_unknown_server_is_named_with_the_config_s_servers() -> None:
    config, _ = _world()
    assert terminal.server_named("Weather", config) == "weather"
    with pytest.raises(
        UsageError, match=r"^no server is named 'wether' in /virtual/patchbay.json; its servers: weather"
    ):
        terminal.server_named("wether", config)


class _MissingCommand(MemoryUpstreams):
    """``gone``'s command is not installed: connecting raises what spawning it would, a moment
    after it is asked (a real spawn takes that long; the moment is the scenario, no wait)."""

    def __call__(self, name: str, spec: Any) -> Any:
        if name != "gone":
            return super().__call__(name, spec)

        @asynccontextmanager
        async def spawn() -> AsyncIterator[Any]:
            await anyio.sleep(0.05)
            raise FileNotFoundError(2, "No such file or directory")
            yield

        return spawn()


async def test_a_missing_command_is_told_with_where_it_was_looked_for_and_what_next(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Regression: the state shown was the retried server's ("not ready: it did not finish starting
    within 30 s"), not why it failed: starting the other servers (a reload) starts a failed one again,
    and only the servers not yet there were waited for."""
    config = config_from({"svc": {"command": "x"}, "gone": {"command": "gone-mcp"}}, {"watch": False})
    upstreams = _MissingCommand({"svc": make_server("svc", _svc())})
    assert await _call(config, upstreams, CallRequest("gone__anything")) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("Server 'gone' could not start: its command was not found.")  # the proxy's text
    assert err[1].startswith("  gone: failed: its command 'gone-mcp' was not found on PATH (") and ", nor in " in err[1]
    assert (
        err[2] == '  next: install gone-mcp, or fix the entry "gone" in /virtual/patchbay.json ("command": a full path)'
    )


async def test_a_run_on_part_of_the_config_is_not_remembered_as_a_start() -> None:
    """Regression: ``call`` starting only the server a name names kept that one server's tool count
    as the config's last start (``start_memory``), so the next start in auto mode guessed from it."""
    config, upstreams = _world()
    with anyio.fail_after(WITHIN):
        async with terminal.running(config, only={"svc"}, connector=upstreams) as proxy:
            assert not proxy.remembers_start
        async with terminal.running(config, connector=upstreams) as proxy:
            assert proxy.remembers_start  # every server: a start like any
