"""The config loader: file shapes, entries, ${VAR} expansion, errors, self-reference."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mcp_patchbay.config as config_package
from mcp_patchbay.config import (
    IGNORED_ENTRY_KEYS,
    Config,
    ConfigError,
    RemoteSpec,
    ServerEntry,
    Settings,
    StdioSpec,
    ToolFilter,
    keys,
    load_config,
    parse_config,
)
from mcp_patchbay.config.models import SpecBase

CFG = Path("/etc/patchbay/patchbay.json")
CONFIGS = Path(__file__).resolve().parent.parent / "configs"
SECRET = "s3cr3t-t0ken-value"


def parse(obj: object, environ: dict[str, str] | None = None, path: Path = CFG) -> Config:
    return parse_config(json.dumps(obj), path, environ or {})


def entry(raw: object, environ: dict[str, str] | None = None, shape: str = "mcpServers") -> ServerEntry:
    (only,) = parse({shape: {"s": raw}}, environ).servers
    return only


def fatal(text: str | object, environ: dict[str, str] | None = None) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse_config(text if isinstance(text, str) else json.dumps(text), CFG, environ or {})
    return info.value


# --- shapes and entries ----------------------------------------------------------------


def test_both_shapes_in_file_order() -> None:
    config = parse(
        {
            "$schema": "https://example.com/schema.json",
            "inputs": [{"id": "x", "type": "promptString"}],
            "servers": {"v1": {"command": "a"}, "v2": {"url": "https://v.example/mcp"}},
            "mcpServers": {"m1": {"command": "b"}, "m2": {"command": "c"}},
        }
    )
    assert [e.name for e in config.servers] == ["m1", "m2", "v1", "v2"]
    assert config.path == CFG
    assert config.settings == Settings()
    assert all(e.problem is None and e.spec is not None for e in config.servers)


def test_empty_file_object_has_no_servers() -> None:
    assert parse({}).servers == ()


def test_relative_path_becomes_absolute() -> None:
    config = parse_config("{}", Path("rel/patchbay.json"), {})
    assert config.path.is_absolute()
    assert config.path == Path.cwd() / "rel" / "patchbay.json"


def test_stdio_entry_all_keys() -> None:
    e = entry(
        {
            "type": "stdio",
            "command": "npx",
            "args": ["-y", "pkg"],
            "env": {"A": "1"},
            "cwd": "/srv",
            "timeout": 12,
            "tool_timeouts": {"slow": 300.5},
            "tools": {"allow": ["get_*"], "deny": ["get_secret"]},
            "max_concurrency": 2,
        }
    )
    assert e.spec == StdioSpec(
        command="npx",
        args=("-y", "pkg"),
        env={"A": "1"},
        cwd="/srv",
        timeout=12.0,
        tool_timeouts={"slow": 300.5},
        tools=ToolFilter(allow=("get_*",), deny=("get_secret",)),
        max_concurrency=2,
    )
    assert e.problem is None and not e.disabled and not e.self_reference


def test_remote_entry_all_keys() -> None:
    e = entry(
        {"url": "https://x.example/mcp", "headers": {"Authorization": "Bearer t"}, "timeout": 5, "disabled": True}
    )
    assert e.spec == RemoteSpec(
        url="https://x.example/mcp", transport="http", headers={"Authorization": "Bearer t"}, timeout=5.0, disabled=True
    )
    assert e.disabled


@pytest.mark.parametrize(
    ("raw", "spec_type", "transport"),
    [
        ({"command": "x"}, StdioSpec, "stdio"),
        ({"command": "x", "type": "stdio"}, StdioSpec, "stdio"),
        ({"url": "http://localhost:3000/mcp"}, RemoteSpec, "http"),
        ({"url": "https://h/mcp", "type": "http"}, RemoteSpec, "http"),
        ({"url": "https://h/mcp", "type": "streamable-http"}, RemoteSpec, "http"),
        ({"url": "https://h/mcp", "type": "streamableHttp"}, RemoteSpec, "http"),
        ({"url": "https://h/mcp", "type": "streamable_http"}, RemoteSpec, "http"),
        ({"url": "https://h/sse", "type": "sse"}, RemoteSpec, "sse"),
        ({"url": "https://h/sse", "type": "SSE"}, RemoteSpec, "sse"),
        # Cline's older key, read as "type" when "type" is absent.
        ({"url": "https://h/sse", "transportType": "sse"}, RemoteSpec, "sse"),
        ({"command": "x", "transportType": "stdio"}, StdioSpec, "stdio"),
    ],
)
def test_type_spellings(raw: dict[str, Any], spec_type: type, transport: str) -> None:
    e = entry(raw)
    assert e.problem is None
    assert isinstance(e.spec, spec_type)
    assert e.spec is not None
    assert e.spec.transport == transport


@pytest.mark.parametrize("key", sorted(IGNORED_ENTRY_KEYS))
def test_client_keys_are_ignored(key: str) -> None:
    e = entry({"command": "x", key: ["anything", {"at": "all"}]})
    assert e.problem is None
    assert e.spec == StdioSpec(command="x")


def test_vscode_shape_with_inputs() -> None:
    config = parse(
        {
            "inputs": [{"type": "promptString", "id": "token", "password": True}],
            "servers": {"gh": {"type": "stdio", "command": "gh-mcp", "env": {"T": "${env:GH_TOKEN}"}}},
        },
        {"GH_TOKEN": "t"},
    )
    assert config.servers[0].spec == StdioSpec(command="gh-mcp", env={"T": "t"})


@pytest.mark.parametrize(
    ("cwd", "environ", "expected"),
    [
        ("servers/one", {}, str(CFG.parent / "servers" / "one")),
        ("/abs/dir", {}, "/abs/dir"),
        ("${D}/x", {"D": "/from/env"}, "/from/env/x"),
        ("~/proj", {"HOME": "/home/u"}, "/home/u/proj"),
        ("~", {"HOME": "/home/u"}, "/home/u"),
        ("~/proj", {}, str(CFG.parent / "~" / "proj")),
    ],
)
def test_cwd_is_made_absolute(cwd: str, environ: dict[str, str], expected: str) -> None:
    e = entry({"command": "x", "cwd": cwd}, environ)
    assert isinstance(e.spec, StdioSpec)
    assert e.spec.cwd == expected


# --- environment expansion -------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "environ", "expected"),
    [
        ("${A}", {"A": "1"}, "1"),
        ("pre-${A}-post", {"A": "1"}, "pre-1-post"),
        ("${env:A}", {"A": "1"}, "1"),
        ("${A}${B}", {"A": "1", "B": "2"}, "12"),
        ("${A:-dflt}", {}, "dflt"),
        ("${A:-dflt}", {"A": ""}, "dflt"),  # as in POSIX sh: unset or empty
        ("${A:-dflt}", {"A": "set"}, "set"),
        ("${A:-}", {}, ""),
        ("${A:-/tmp/x y}", {}, "/tmp/x y"),
        ("${A}", {"A": ""}, ""),
        ("$$", {}, "$$"),
        ("$A", {"A": "1"}, "$A"),
        ("cost: $5", {}, "cost: $5"),
        ("${ not a var }", {}, "${ not a var }"),
        ("${1}", {}, "${1}"),
        ("${A", {"A": "1"}, "${A"),
        ("${A:-${B}}", {"B": "b"}, "${B}"),  # the default "${B" is not expanded, then a literal "}"
    ],
)
def test_expansion_forms(template: str, environ: dict[str, str], expected: str) -> None:
    e = entry({"command": "x", "args": [template]}, environ)
    assert e.problem is None
    assert isinstance(e.spec, StdioSpec)
    assert e.spec.args == (expected,)


def test_expansion_places() -> None:
    env = {"V": "v"}
    stdio = entry({"command": "/opt/${V}/bin", "args": ["${V}"], "env": {"K_${V}": "${V}"}, "cwd": "/w/${V}"}, env)
    assert stdio.spec == StdioSpec(command="/opt/v/bin", args=("v",), env={"K_${V}": "v"}, cwd="/w/v")
    remote = entry({"url": "https://${V}.example/mcp", "headers": {"X-Key": "Bearer ${V}"}}, env)
    assert remote.spec == RemoteSpec(url="https://v.example/mcp", headers={"X-Key": "Bearer v"})


def test_expansion_uses_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATCHBAY_TEST_VAR", "from-os")
    config = parse_config(json.dumps({"mcpServers": {"s": {"command": "${PATCHBAY_TEST_VAR}"}}}), CFG)
    assert config.servers[0].spec == StdioSpec(command="from-os")


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (
            {"command": "x", "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}"}},
            "mcpServers.s.env.GITHUB_TOKEN: environment variable 'GITHUB_TOKEN' is not set "
            "(use ${GITHUB_TOKEN:-default} for a fallback)",
        ),
        (
            {"command": "x", "args": ["a", "--token=${env:TOK}"]},
            "mcpServers.s.args[1]: environment variable 'TOK' is not set (use ${TOK:-default} for a fallback)",
        ),
        (
            {"url": "https://h/mcp", "headers": {"Authorization": "Bearer ${TOK}"}},
            "mcpServers.s.headers.Authorization: environment variable 'TOK' is not set",
        ),
        ({"command": "${BIN}"}, "mcpServers.s.command: environment variable 'BIN' is not set"),
        ({"command": "x", "cwd": "${DIR}"}, "mcpServers.s.cwd: environment variable 'DIR' is not set"),
        ({"url": "${URL}"}, "mcpServers.s.url: environment variable 'URL' is not set"),
        ({"command": "x", "args": ["${input:token}"]}, "mcpServers.s.args[0]: '${input:token}' is a VS Code input"),
        ({"command": "x", "cwd": "${workspaceFolder}"}, "mcpServers.s.cwd: '${workspaceFolder}' is a VS Code variable"),
    ],
)
def test_undefined_variable_disables_the_entry(raw: dict[str, Any], problem: str) -> None:
    e = entry(raw, {"OTHER": SECRET})
    assert e.spec is None
    assert e.problem is not None
    assert e.problem.startswith(problem)


def test_variable_values_never_appear_in_messages() -> None:
    environ = {"TOK": SECRET, "URL": f"ftp://{SECRET}", "BAD": f"{SECRET}\r\n"}
    config = parse(
        {
            "mcpServers": {
                "a": {"command": "x", "env": {"T": "${TOK}"}, "args": ["${TOK}"], "timeout": "${TOK}"},
                "b": {"url": "${URL}", "headers": {"Authorization": "${BAD}"}},
                "c": {"url": "https://h/?key=${TOK}", "headers": {"H": "${BAD}"}, "cwd": "${TOK}"},
                "d": {"command": "${TOK}", "url": "${TOK}"},
                "e": {"command": "x", "env": {"A": "${TOK}\u0000"}},
            }
        },
        environ,
    )
    problems = [e.problem for e in config.servers]
    assert all(problems), problems
    assert not any(SECRET in p for p in problems if p)


# --- per-entry problems ----------------------------------------------------------------


def test_envfile_is_rejected() -> None:
    e = entry({"command": "x", "envFile": "${workspaceFolder}/.env"})
    assert e.spec is None
    assert e.problem == "mcpServers.s.envFile: 'envFile' is not supported; put the variables in 'env'"


def test_unknown_entry_key_disables_only_that_entry() -> None:
    config = parse(
        {
            "mcpServers": {
                "good": {"command": "a"},
                "bad": {"command": "b", "timout": 5},
                "also-good": {"url": "https://h/mcp"},
            }
        }
    )
    by_name = {e.name: e for e in config.servers}
    assert by_name["good"].spec == StdioSpec(command="a")
    assert by_name["also-good"].spec == RemoteSpec(url="https://h/mcp")
    assert by_name["bad"].spec is None
    assert by_name["bad"].problem == "mcpServers.bad: unknown key 'timout' (did you mean 'timeout'?)"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("npx server", ["mcpServers.s: expected an object with 'command' or 'url'"]),
        ({}, ["mcpServers.s: needs 'command' (a program to launch over stdio) or 'url' (a remote server)"]),
        ({"args": ["x"]}, ["needs 'command'"]),
        ({"command": "x", "url": "https://h/mcp"}, ["mcpServers.s: has both 'command' and 'url'"]),
        ({"type": "stdio"}, ["mcpServers.s: missing 'command'"]),
        ({"type": "sse"}, ["mcpServers.s: missing 'url'"]),
        ({"command": "x", "type": "http"}, ["mcpServers.s.type: type 'http' needs 'url', not 'command'"]),
        ({"url": "https://h/mcp", "type": "stdio"}, ["mcpServers.s.type: type 'stdio' needs 'command', not 'url'"]),
        ({"url": "https://h/mcp", "type": "websocket"}, ["mcpServers.s.type: expected 'stdio', 'http'"]),
        ({"url": "https://h/mcp", "type": 3}, ["mcpServers.s.type: expected 'stdio', 'http'"]),
        ({"command": "x", "headers": {}}, ["'headers' applies only to remote servers (with 'url')"]),
        ({"url": "https://h/mcp", "args": []}, ["'args' applies only to servers launched with 'command'"]),
        ({"serverUrl": "https://h/mcp"}, ["unknown key 'serverUrl' (did you mean 'url'?)"]),
        ({"command": 3}, ["mcpServers.s.command: expected a string"]),
        ({"command": ""}, ["mcpServers.s.command: must not be empty"]),
        ({"command": "x", "args": "a b"}, ["mcpServers.s.args: expected a list of strings"]),
        ({"command": "x", "args": ["a", 2]}, ["mcpServers.s.args[1]: expected a string"]),
        ({"command": "x", "env": {"A": 1}}, ["mcpServers.s.env.A: expected a string"]),
        ({"command": "x", "env": ["A=1"]}, ["mcpServers.s.env: expected an object"]),
        ({"command": "x", "env": {"A=B": "1"}}, ["mcpServers.s.env: invalid variable name 'A=B'"]),
        ({"command": "x", "cwd": ""}, ["mcpServers.s.cwd: must not be empty"]),
        ({"command": "x", "timeout": 0}, ["mcpServers.s.timeout: must be greater than 0"]),
        ({"command": "x", "timeout": "30"}, ["mcpServers.s.timeout: expected a number"]),
        ({"command": "x", "timeout": True}, ["mcpServers.s.timeout: expected a number"]),
        ({"command": "x", "tool_timeouts": {"t": -1}}, ["mcpServers.s.tool_timeouts.t: must be greater than 0"]),
        ({"command": "x", "disabled": "yes"}, ["mcpServers.s.disabled: expected true or false"]),
        ({"command": "x", "max_concurrency": 0}, ["mcpServers.s.max_concurrency: must be at least 1"]),
        ({"command": "x", "max_concurrency": 1.5}, ["mcpServers.s.max_concurrency: expected a whole number"]),
        (
            {"command": "x", "tools": {"alow": ["a"]}},
            ["mcpServers.s.tools: unknown key 'alow' (did you mean 'allow'?)"],
        ),
        ({"command": "x", "tools": {"deny": "a*"}}, ["mcpServers.s.tools.deny: expected a list of strings"]),
        ({"command": "x", "tools": ["a"]}, ["mcpServers.s.tools: expected an object"]),
        ({"url": "ftp://h/x"}, ["mcpServers.s.url: expected an http:// or https:// URL"]),
        ({"url": "https://"}, ["mcpServers.s.url: expected an http:// or https:// URL"]),
        ({"url": "https://h/mcp", "headers": {"Bad Name": "v"}}, ["mcpServers.s.headers: invalid header name"]),
        ({"url": "https://h/mcp", "headers": {"X": "a\r\nInjected: 1"}}, ["must not contain line breaks"]),
        # Several problems in one entry are all reported, joined with "; ".
        (
            {"url": "https://h/mcp", "timeout": -1, "tools": {"deny": 1}, "bogus": 1},
            [
                "mcpServers.s: unknown key 'bogus'",
                "; mcpServers.s.timeout: must be greater than 0",
                "; mcpServers.s.tools.deny: expected a list of strings",
            ],
        ),
        # With neither command nor url, the shared keys are still checked.
        ({"timeout": -1}, ["needs 'command'", "mcpServers.s.timeout: must be greater than 0"]),
    ],
)
def test_entry_problems(raw: Any, expected: list[str]) -> None:
    e = entry(raw)
    assert e.spec is None
    assert not e.self_reference
    assert e.problem is not None
    for part in expected:
        assert part in e.problem


def test_duplicate_keys_inside_an_entry_disable_it() -> None:
    text = '{"mcpServers": {"a": {"command": "x", "env": {"A": "1", "A": "2"}}, "b": {"command": "y"}}}'
    a, b = parse_config(text, CFG, {}).servers
    assert a.spec is None
    assert a.problem == "mcpServers.a.env.A: key given more than once"
    assert b.spec == StdioSpec(command="y")


def test_entry_key_paths_quote_odd_names() -> None:
    config = parse({"servers": {"my.server": {"command": 1}, "": {"command": "x"}}})
    assert config.servers[0].problem == 'servers["my.server"].command: expected a string'
    assert config.servers[1].problem == 'servers[""]: server name must not be empty'


def test_entry_names_are_any_non_empty_string() -> None:
    names = ["a", "My Server", "ünï", "x.y", "1", "-"]
    config = parse({"mcpServers": {n: {"command": "x"} for n in names}})
    assert [e.name for e in config.servers] == names
    assert all(e.problem is None for e in config.servers)


# --- a client's own file -------------------------------------------------------------------


def test_a_client_file_is_read_for_its_servers_and_its_own_keys_ignored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Claude Desktop's file as it is: its servers served, its other keys ignored with an INFO line."""
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(
        json.dumps(
            {
                "globalShortcut": "Ctrl+Space",
                "preferences": {"quickEntryShortcut": "off"},
                "mcpServers": {"time": {"command": "mcp-server-time"}},
            }
        )
    )
    with caplog.at_level(logging.INFO, logger="mcp_patchbay.config"):
        config = load_config(path)
    assert [entry.name for entry in config.servers] == ["time"]
    assert config.ignored_keys == ("globalShortcut", "preferences")
    assert "ignoring top-level keys that are not patchbay's (a client's own settings): globalShortcut, preferences" in (
        caplog.text
    )


def test_our_own_keys_misspelt_at_the_top_still_fail() -> None:
    with pytest.raises(ConfigError, match="unknown top-level key 'mcpServer' \\(did you mean 'mcpServers'\\?\\)"):
        parse_config('{"mcpServer": {"a": {"command": "x"}}, "globalShortcut": ""}', Path("/c.json"), {})


# --- fatal errors ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "key", "message"),
    [
        ("", "", "not valid JSON: Expecting value at line 1, column 1"),
        ('{\n  "mcpServers": {\n    "a": {"command": "x",}\n  }\n}', "", "at line 3, column 26 (trailing comma?)"),
        ('{\n  // comment\n  "mcpServers": {}\n}', "", "at line 2, column 3 (comments are not allowed in JSON)"),
        ('{"patchbay": {"timeout": NaN}}', "", "not valid JSON: NaN is not valid JSON"),
        ("[]", "", "expected a JSON object at the top level"),
        ('"mcpServers"', "", "expected a JSON object at the top level"),
        ('{"mcpservers": {}}', "", "unknown top-level key 'mcpservers' (did you mean 'mcpServers'?)"),
        ('{"github": {"command": "x"}}', "", "unknown top-level key 'github': server entries go inside 'mcpServers'"),
        ('{"mcp": {"servers": {}}}', "", "unknown top-level key 'mcp' (VS Code's settings.json shape)"),
        ('{"gatway": {}}', "", "unknown top-level key 'gatway' (did you mean 'gateway'?)"),
        ('{"mcpServers": []}', "mcpServers", "expected an object mapping server names to entries"),
        ('{"servers": null}', "servers", "expected an object"),
        ('{"patchbay": 5}', "patchbay", "expected an object"),
        ('{"patchbay": {"timout": 5}}', "patchbay", "unknown key 'timout' (did you mean 'timeout'?)"),
        ('{"patchbay": {"timeout": "5"}}', "patchbay.timeout", "expected a number"),
        ('{"patchbay": {"timeout": 0}}', "patchbay.timeout", "must be greater than 0"),
        ('{"patchbay": {"timeout": 1e999}}', "patchbay.timeout", "expected a finite number"),
        ('{"patchbay": {"max_name_length": 65}}', "patchbay.max_name_length", "must be at most 64"),
        ('{"patchbay": {"max_name_length": 15}}', "patchbay.max_name_length", "must be at least 16"),
        ('{"patchbay": {"max_name_length": 40.0}}', "patchbay.max_name_length", "expected a whole number"),
        ('{"patchbay": {"separator": "::"}}', "patchbay.separator", "expected 1 to 8 letters, digits"),
        ('{"patchbay": {"separator": ""}}', "patchbay.separator", "expected 1 to 8 letters, digits"),
        ('{"patchbay": {"unknown_tool": "ignore"}}', "patchbay.unknown_tool", "expected 'result' or 'error'"),
        ('{"patchbay": {"watch": 1}}', "patchbay.watch", "expected true or false"),
        ('{"patchbay": {"retry_attempts": -1}}', "patchbay.retry_attempts", "must be at least 0"),
        ('{"patchbay": {"max_concurrency": 0}}', "patchbay.max_concurrency", "must be at least 1"),
        ('{"patchbay": {"max_call_time": 10}}', "patchbay", "max_call_time (10) must be at least timeout (50)"),
        ('{"patchbay": {"restart_max_delay": 0.5}}', "patchbay", "restart_max_delay (0.5) must be at least"),
        ('{"patchbay": {"timeout": 1, "timeout": 2}}', "patchbay.timeout", "key given more than once"),
        ('{"mcpServers": {}, "mcpServers": {}}', "mcpServers", "key given more than once"),
        ('{"mcpServers": {"a": {"command": "x"}, "a": {}}}', "mcpServers.a", "server name 'a' given more than once"),
        (
            '{"mcpServers": {"a": {"command": "x"}}, "servers": {"a": {"command": "y"}}}',
            "servers.a",
            "server name 'a' is already used in mcpServers",
        ),
    ],
)
def test_fatal_errors(text: str, key: str, message: str) -> None:
    error = fatal(text)
    assert error.path == CFG
    assert error.key == key
    assert message in error.message
    prefix = f"{CFG}: {key}: " if key else f"{CFG}: "
    assert str(error).startswith(prefix)
    assert message in str(error)


def test_fatal_errors_are_all_reported_at_once() -> None:
    error = fatal(
        {
            "mcpServers": {"ok": {"command": "x"}},
            "sevrers": {},
            "patchbay": {"timout": 1, "watch": "no", "max_name_length": 100},
        }
    )
    assert [(p.key, p.message) for p in error.problems] == [
        ("", "unknown top-level key 'sevrers' (did you mean 'servers'?)"),
        ("patchbay.max_name_length", "must be at most 64"),
        ("patchbay.watch", "expected true or false"),
        ("patchbay", "unknown key 'timout' (did you mean 'timeout'?)"),
    ]
    lines = str(error).splitlines()
    assert len(lines) == 4
    assert all(line.startswith(f"{CFG}: ") for line in lines)
    assert lines[1] == f"{CFG}: patchbay.max_name_length: must be at most 64"


def test_config_error_single() -> None:
    error = ConfigError("/x.json", "patchbay.timeout", "expected a number")
    assert str(error) == "/x.json: patchbay.timeout: expected a number"
    assert (error.path, error.key, error.message) == (Path("/x.json"), "patchbay.timeout", "expected a number")
    assert str(ConfigError("/x.json", "", "file not found")) == "/x.json: file not found"


def test_deeply_nested_and_huge_values_are_config_errors() -> None:
    assert "nested too deeply" in fatal("[" * 100_000).message
    assert "not valid JSON" in fatal('{"patchbay": {"max_concurrency": ' + "9" * 5000 + "}}").message
    deep: object = "x"
    for _ in range(200):
        deep = {"k": [deep]}
    e = entry({"command": "x", "env": deep, "tools": deep})
    assert e.spec is None


# --- load_config -----------------------------------------------------------------------


def test_load_config_reads_file(tmp_path: Path) -> None:
    path = tmp_path / "patchbay.json"
    path.write_text(json.dumps({"mcpServers": {"a": {"command": "${X:-y}"}}}), encoding="utf-8")
    config = load_config(path, {})
    assert config.path == path
    assert config.servers == (ServerEntry("a", StdioSpec(command="y")),)
    assert load_config(str(path), {}) == config


def test_load_config_accepts_bom(tmp_path: Path) -> None:
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"mcpServers": {}}')
    assert load_config(path, {}).servers == ()


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("missing", "file not found"),
        ("directory", "not a regular file (a directory)"),
        ("latin1", "not UTF-8 text"),
    ],
)
def test_load_config_file_errors(tmp_path: Path, setup: str, message: str) -> None:
    path = tmp_path / "patchbay.json"
    if setup == "directory":
        path.mkdir()
    elif setup == "latin1":
        path.write_bytes('{"mcpServers": {"caf\xe9": {}}}'.encode("latin-1"))
    with pytest.raises(ConfigError) as info:
        load_config(path, {})
    assert info.value.path == path
    assert info.value.key == ""
    assert message in info.value.message
    assert str(info.value).startswith(f"{path}: ")


def test_load_config_relative_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "p.json").write_text("{}", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert load_config("p.json", {}).path == tmp_path / "p.json"


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.json")), ids=lambda p: p.name)
def test_shipped_configs_load_without_problems(path: Path) -> None:
    config = load_config(path)
    assert config.servers
    assert [(e.name, e.problem) for e in config.servers if e.problem] == []
    assert all(e.spec is not None for e in config.servers)


def test_shipped_configs_exist() -> None:
    assert (CONFIGS / "example.json").is_file()


def test_example_config_contents() -> None:
    config = load_config(CONFIGS / "example.json", {"TMPDIR": "/var/tmp"})
    by_name = {e.name: e.spec for e in config.servers}
    assert set(by_name) == {"everything", "memory", "sequential-thinking", "time"}
    memory = by_name["memory"]
    assert isinstance(memory, StdioSpec)
    assert memory.env == {"MEMORY_FILE_PATH": "/var/tmp/patchbay-example-memory.jsonl"}
    assert config.settings.timeout == 50.0
    assert config.settings.startup_wait == 10.0


# --- settings ----------------------------------------------------------------------------


def test_settings_defaults() -> None:
    s = Settings()
    assert (s.timeout, s.max_call_time, s.connect_timeout, s.startup_wait) == (50.0, 300.0, 30.0, 10.0)
    assert (s.separator, s.max_name_length, s.unknown_tool) == ("__", 48, "result")
    assert (s.validate_arguments, s.max_result_bytes, s.status_tool) == (True, 1_048_576, False)
    assert (s.max_concurrency, s.queue_timeout) == (16, 10.0)
    assert (s.breaker_threshold, s.breaker_cooldown) == (5, 30.0)
    assert (s.retry_attempts, s.retry_backoff) == (2, 0.2)
    assert (s.restart_initial_delay, s.restart_max_delay, s.watch) == (1.0, 60.0, True)


def test_settings_from_file() -> None:
    config = parse({"patchbay": {"timeout": 20, "separator": "-", "unknown_tool": "error", "status_tool": True}})
    assert config.settings == Settings(timeout=20.0, separator="-", unknown_tool="error", status_tool=True)
    assert hash(config.settings) == hash(Settings(timeout=20, separator="-", unknown_tool="error", status_tool=True))


def test_settings_are_frozen() -> None:
    with pytest.raises(ValueError, match="frozen"):
        Settings().timeout = 1  # type: ignore[misc]


# --- tool filter ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("allow", "deny", "name", "permitted"),
    [
        (None, (), "anything", True),
        (None, ("delete_*",), "delete_repo", False),
        (None, ("delete_*",), "list_repos", True),
        (("get_*", "list_*"), (), "get_file", True),
        (("get_*", "list_*"), (), "list_x", True),
        (("get_*", "list_*"), (), "create_x", False),
        (("get_*",), ("get_secret",), "get_secret", False),  # deny wins
        (("get_secret",), ("get_*",), "get_secret", False),  # deny wins, whatever the order
        (("exact",), (), "exact", True),
        (("exact",), (), "exactly", False),
        (("exact",), (), "EXACT", False),  # case-sensitive
        (("Get*",), (), "get_x", False),
        (("a?c",), (), "abc", True),
        (("a?c",), (), "abbc", False),
        (("[ab]x",), (), "bx", True),
        (("[!ab]x",), (), "cx", True),
        (("[!ab]x",), (), "ax", False),
        (("a.b",), (), "axb", False),  # '.' is literal
        (("*",), (), "", True),
        ((), (), "anything", False),  # an empty allow list allows nothing
        (None, ("*",), "anything", False),
        (("x*",), (), "x\ny", True),
    ],
)
def test_tool_filter(allow: tuple[str, ...] | None, deny: tuple[str, ...], name: str, permitted: bool) -> None:
    f = ToolFilter(allow=allow, deny=deny)
    assert f.permits(name) is permitted
    assert f.permits(name) is permitted  # compiled once, same answer


def test_tool_filter_from_file_and_value_semantics() -> None:
    e = entry({"command": "x", "tools": {"allow": ["a*"], "deny": ["ab"]}})
    assert isinstance(e.spec, StdioSpec)
    f = e.spec.tools
    assert f == ToolFilter(allow=("a*",), deny=("ab",))
    assert hash(f) == hash(ToolFilter(allow=("a*",), deny=("ab",)))
    assert f != ToolFilter(allow=("a*",))
    assert [f.permits(n) for n in ("a", "ab", "abc", "b")] == [True, False, True, False]
    copied = f.model_copy(update={"deny": ("abc",)})
    assert [copied.permits(n) for n in ("a", "ab", "abc", "b")] == [True, True, False, False]


# --- self-reference ----------------------------------------------------------------------


def _self_ref_cases(cfg: Path) -> list[tuple[dict[str, Any], dict[str, str], bool]]:
    c = str(cfg)
    return [
        ({"command": "mcp-patchbay", "args": ["--config", c]}, {}, True),
        ({"command": "/usr/local/bin/mcp-patchbay", "args": ["serve", f"--config={c}"]}, {}, True),
        ({"command": "C:\\tools\\MCP-PATCHBAY.EXE", "args": ["-c", c]}, {}, True),
        ({"command": "mcp-patchbay.cmd", "args": [f"-c{c}"]}, {}, True),
        ({"command": "mcp-patchbay", "args": ["--conf", c]}, {}, True),  # argparse prefix
        ({"command": "python3", "args": ["-m", "mcp_patchbay", "serve", "--config", c]}, {}, True),
        ({"command": "/venv/bin/python", "args": ["-u", "-X", "utf8", "-m", "mcp_patchbay", "-c", c]}, {}, True),
        ({"command": "python3.12", "args": ["-mmcp_patchbay", "--config", c]}, {}, True),
        ({"command": "py.exe", "args": ["-m", "mcp_patchbay", "--config", c]}, {}, True),
        ({"command": "uvx", "args": ["mcp-patchbay", "--config", c]}, {}, True),
        ({"command": "uvx", "args": ["mcp-patchbay@latest", "--config", c]}, {}, True),
        ({"command": "uvx", "args": ["--python", "3.12", "mcp-patchbay==0.1.0", "--config", c]}, {}, True),
        ({"command": "uvx", "args": ["--from", "mcp-patchbay", "mcp-patchbay", "--config", c]}, {}, True),
        ({"command": "pipx", "args": ["run", "mcp-patchbay", "--config", c]}, {}, True),
        ({"command": "uv", "args": ["tool", "run", "mcp-patchbay", "--config", c]}, {}, True),
        ({"command": "uv", "args": ["run", "python", "-m", "mcp_patchbay", "--config", c]}, {}, True),
        ({"command": "mcp-patchbay", "args": ["--config", "${DIR}/patchbay.json"]}, {"DIR": str(cfg.parent)}, True),
        ({"command": "mcp-patchbay", "args": ["--config", "patchbay.json"], "cwd": str(cfg.parent)}, {}, True),
        ({"command": "mcp-patchbay", "args": ["--config", "../patchbay.json"], "cwd": "sub"}, {}, True),
        ({"command": "mcp-patchbay", "env": {"PATCHBAY_CONFIG": c}}, {}, True),
        ({"command": "mcp-patchbay"}, {"PATCHBAY_CONFIG": c}, True),
        ({"command": "mcp-patchbay", "args": ["--config", c], "disabled": True}, {}, True),
        ({"command": "/opt/bin/mcp-patchbay", "args": [c]}, {}, True),  # install's own form: positional
        ({"command": "mcp-patchbay", "args": ["serve", "--log-level", "INFO", c]}, {}, True),
        # Not the same file, or not patchbay.
        ({"command": "mcp-patchbay", "args": ["--config", c + ".other"]}, {}, False),
        ({"command": "mcp-patchbay", "args": ["--config", c + ".other"]}, {"PATCHBAY_CONFIG": c}, False),
        ({"command": "mcp-patchbay", "env": {"PATCHBAY_CONFIG": "/elsewhere.json"}}, {"PATCHBAY_CONFIG": c}, False),
        ({"command": "mcp-patchbay"}, {}, False),
        ({"command": "mcp-patchbay", "args": ["--", "--config", c]}, {}, False),  # two "config files": refused
        ({"command": "mcp-patchbay", "args": ["--log-file", c, "other.json"]}, {}, False),  # c is the log file
        ({"command": "python3", "args": ["-m", "other_module", "--config", c]}, {}, False),
        ({"command": "python3", "args": ["script.py", "-m", "mcp_patchbay", "--config", c]}, {}, False),
        ({"command": "python3", "args": ["-c", "import mcp_patchbay", "--config", c]}, {}, False),
        ({"command": "uvx", "args": ["mcp-server-time", "--config", c]}, {}, False),
        ({"command": "pipx", "args": ["install", "mcp-patchbay", "--config", c]}, {}, False),
        ({"command": "npx", "args": ["-y", "mcp-patchbay", "--config", c]}, {}, False),
        ({"command": "mcp-patchbay-helper", "args": ["--config", c]}, {}, False),
    ]


def test_self_reference(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg_dir = tmp_path / "cfg"
    cfg_dir.mkdir()
    cfg = cfg_dir / "patchbay.json"
    cfg.write_text("{}", encoding="utf-8")
    (cfg_dir / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    for raw, environ, expected in _self_ref_cases(cfg):
        config = parse({"mcpServers": {"me": raw, "other": {"command": "x"}}}, environ, path=cfg)
        me, other = config.servers
        assert other.spec == StdioSpec(command="x")
        assert me.self_reference is expected, raw
        if expected:
            assert me.spec is None
            assert me.problem == "launches mcp-patchbay with this same config; skipped to avoid a loop"
        else:
            assert me.spec is not None and me.problem is None, raw


def test_self_reference_through_symlink_and_relative_config_arg(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = tmp_path / "real.json"
    real.write_text("{}", encoding="utf-8")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    monkeypatch.chdir(tmp_path)
    raw = {"command": "mcp-patchbay", "args": ["--config", "link.json"]}
    assert parse({"mcpServers": {"me": raw}}, path=real).servers[0].self_reference
    raw = {"command": "mcp-patchbay", "args": ["--config", "real.json"]}
    assert parse({"mcpServers": {"me": raw}}, path=Path("link.json")).servers[0].self_reference


# --- comparing configs for reload -----------------------------------------------------------


def test_entries_compare_by_value() -> None:
    doc = {
        "mcpServers": {
            "a": {"command": "x", "args": ["1"], "env": {"K": "${V}"}, "tools": {"deny": ["d*"]}},
            "b": {"url": "https://h/mcp", "headers": {"H": "v"}, "tool_timeouts": {"t": 3}},
            "c": {"command": "y", "bogus": 1},
        }
    }
    first, second = parse(doc, {"V": "1"}), parse(doc, {"V": "1"})
    assert first == second
    assert hash(first) == hash(second)
    assert set(first.servers) == set(second.servers)
    assert first.servers[0].spec is not second.servers[0].spec

    changed = json.loads(json.dumps(doc))
    changed["mcpServers"]["b"]["headers"]["H"] = "w"
    del changed["mcpServers"]["c"]
    changed["mcpServers"]["d"] = {"command": "z"}
    third = parse(changed, {"V": "1"})
    old, new = {e.name: e for e in first.servers}, {e.name: e for e in third.servers}
    assert [n for n in old if n in new and old[n] == new[n]] == ["a"]
    assert [n for n in old if n in new and old[n] != new[n]] == ["b"]
    assert sorted(old.keys() - new.keys()) == ["c"]
    assert sorted(new.keys() - old.keys()) == ["d"]
    # A changed environment variable changes the entry.
    assert parse(doc, {"V": "2"}).servers[0] != first.servers[0]


def test_specs_are_frozen_and_hashable() -> None:
    spec = StdioSpec(command="x", env={"A": "1"}, tool_timeouts={"t": 1.0})
    assert hash(spec) == hash(StdioSpec(command="x", env={"A": "1"}, tool_timeouts={"t": 1.0}))
    assert spec != StdioSpec(command="x", env={"A": "2"}, tool_timeouts={"t": 1.0})
    assert len({spec, StdioSpec(command="x", env={"A": "1"}, tool_timeouts={"t": 1.0})}) == 1
    with pytest.raises(ValueError, match="frozen"):
        spec.command = "y"  # type: ignore[misc]
    remote = RemoteSpec(url="https://h/mcp", headers={"A": "b"})
    assert hash(remote) == hash(RemoteSpec(url="https://h/mcp", headers={"A": "b"}))
    assert remote != RemoteSpec(url="https://h/mcp", headers={"A": "b"}, transport="sse")


def test_server_entry_disabled() -> None:
    assert ServerEntry("a", StdioSpec(command="x", disabled=True)).disabled
    assert not ServerEntry("a", StdioSpec(command="x")).disabled
    assert not ServerEntry("a", None, "broken").disabled


# --- properties ----------------------------------------------------------------------------

_KEYS = st.sampled_from(
    [
        "mcpServers",
        "servers",
        "patchbay",
        "inputs",
        "$schema",
        "command",
        "url",
        "type",
        "transportType",
        "args",
        "env",
        "cwd",
        "headers",
        "timeout",
        "tool_timeouts",
        "tools",
        "allow",
        "deny",
        "disabled",
        "max_concurrency",
        "envFile",
        "separator",
        "max_name_length",
        "unknown_tool",
        "PATCHBAY_CONFIG",
        "s",
    ]
)
_STRINGS: st.SearchStrategy[str] = st.one_of(
    st.text(max_size=12),
    st.sampled_from(
        [
            "stdio",
            "http",
            "sse",
            "streamableHttp",
            "mcp-patchbay",
            "python",
            "-m",
            "mcp_patchbay",
            "--config",
            str(CFG),
            "uvx",
            "https://h/mcp",
            "${SECRET}",
            "${UNSET}",
            "${UNSET:-d}",
            "${input:x}",
        ]
    ),
)
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    _STRINGS,
)
_JSON: st.SearchStrategy[object] = st.recursive(
    _SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.one_of(_KEYS, st.text(max_size=8)), children, max_size=5),
    ),
    max_leaves=30,
)
# Documents shaped like configs, so that the entry code is reached often.
_ENTRY: st.SearchStrategy[object] = st.dictionaries(_KEYS, _JSON, max_size=6)
_DOCUMENT: st.SearchStrategy[object] = st.one_of(
    _JSON,
    st.fixed_dictionaries(
        cast("dict[str, st.SearchStrategy[object]]", {}),
        optional={
            "mcpServers": st.dictionaries(_STRINGS, st.one_of(_ENTRY, _JSON), max_size=3),
            "servers": st.dictionaries(_STRINGS, st.one_of(_ENTRY, _JSON), max_size=3),
            "patchbay": st.one_of(st.dictionaries(_KEYS, _JSON, max_size=3), _JSON),
        },
    ),
)


def _check_outcome(text: str) -> None:
    try:
        config = parse_config(text, CFG, {"SECRET": SECRET})
    except ConfigError as exc:
        assert exc.problems
        assert SECRET not in str(exc)
        return
    assert isinstance(config, Config)
    names = [e.name for e in config.servers]
    assert len(names) == len(set(names))
    for e in config.servers:
        assert (e.spec is None) == (e.problem is not None)
        assert e.problem is None or SECRET not in e.problem
        hash(e)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_DOCUMENT)
def test_parse_config_never_raises_anything_else_on_json(document: object) -> None:
    _check_outcome(json.dumps(document))


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_parse_config_never_raises_anything_else_on_text(text: str) -> None:
    _check_outcome(text)


_EXAMPLE_TEXT = (CONFIGS / "example.json").read_text(encoding="utf-8") if (CONFIGS / "example.json").exists() else "{}"


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_parse_config_never_raises_anything_else_on_damaged_json(data: st.DataObject) -> None:
    text = _EXAMPLE_TEXT
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(text)))
        cut = data.draw(st.integers(0, 5))
        insert = data.draw(st.sampled_from(["", ",", "}", "]", '"', "{", "[", ":", "1", "null", "\\", "//"]))
        text = text[:at] + insert + text[at + cut :]
    _check_outcome(text)


def test_os_environ_is_not_modified() -> None:
    before = dict(os.environ)
    parse_config('{"mcpServers": {"a": {"command": "${NOPE_NOT_SET}"}}}', CFG)
    assert dict(os.environ) == before


# --- the package ---------------------------------------------------------------------------


def test_the_key_names_are_the_models_fields() -> None:
    assert set(keys.COMMON_ENTRY_KEYS) == set(SpecBase.model_fields)
    assert set(keys.STDIO_ENTRY_KEYS) == set(StdioSpec.model_fields) - {"transport", "withheld"}
    assert set(keys.REMOTE_ENTRY_KEYS) == set(RemoteSpec.model_fields) - {"transport"}
    assert keys.IGNORED_ENTRY_KEYS is IGNORED_ENTRY_KEYS


def test_the_key_names_import_without_pydantic() -> None:
    code = "import sys, mcp_patchbay.config.keys; assert 'pydantic' not in sys.modules, sorted(sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_every_public_name_resolves() -> None:
    assert all(getattr(config_package, name) is not None for name in config_package.__all__)
    assert set(config_package.__all__) <= set(dir(config_package))
    with pytest.raises(AttributeError):
        _ = config_package.no_such_name  # pyright: ignore[reportAttributeAccessIssue]
