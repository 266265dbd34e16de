"""Issue 11, part 5: flags, logs and name budgets as real clients use them.

- MCP Inspector takes ``--config`` and ``--log-level`` for itself, even after ``--``: the config
  is also a positional argument, the level also ``$PATCHBAY_LOG_LEVEL``.
- Claude Code records every stderr line of a server as an error; Inspector 2.12 and mcp-use print
  them on the user's terminal: a healthy start writes at most one line there.
- Registered as ``patchbay-proxy-server``, Claude Code sent a 76-character tool name to a model
  API that refuses names over 64: ``registered_as`` and ``check --as`` know the budget.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_patchbay import cli
from mcp_patchbay.catalog.client_quirks import CLIENT_LIMITS, name_budget, over_limits
from mcp_patchbay.catalog.naming import MIN_MAX_LENGTH
from mcp_patchbay.config import ConfigError, parse_config
from tests.e2e_util import SERVERS
from tests.test_shutdown import proxy

STUBBORN = SERVERS / "stubborn_server.py"
ISSUE_NAME = "mcp__patchbay-proxy-server__everything-demo-server__toggle-simulated-logging"


def upstream(name: str = "plain", tool: str = "pid") -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(STUBBORN), "--name", name, "--tool", tool]}


def write(tmp: Path, servers: dict[str, Any], **settings: Any) -> Path:
    path = tmp / "patchbay.json"
    path.write_text(json.dumps({"mcpServers": servers, "patchbay": {"watch": False, **settings}}))
    return path


# --- the config file and the level, however they come ------------------------------------------


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["/abs/patchbay.json"], "serve"),
        (["serve", "/abs/patchbay.json"], "serve"),
        (["check", "/abs/patchbay.json"], "check"),
        (["--config", "/abs/patchbay.json"], "serve"),
        (["check", "-c", "/abs/patchbay.json"], "check"),
        (["/abs/patchbay.json", "--config", "/abs/patchbay.json"], "serve"),
        (["--log-file", "/tmp/x.log", "/abs/patchbay.json"], "serve"),
    ],
)
def test_the_config_file_as_a_positional_argument_or_config(argv: list[str], command: str) -> None:
    options = cli.parse_options(argv, environ={})
    assert (options.command, options.config) == (command, "/abs/patchbay.json")


def test_patchbay_config_from_the_environment_and_an_argument_wins() -> None:
    assert cli.parse_options([], environ={"PATCHBAY_CONFIG": "/env.json"}).config == "/env.json"
    assert cli.parse_options(["check"], environ={"PATCHBAY_CONFIG": "/env.json"}).config == "/env.json"
    assert cli.parse_options(["/arg.json"], environ={"PATCHBAY_CONFIG": "/env.json"}).config == "/arg.json"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["/a.json", "--config", "/b.json"], "two different config files: /a.json (positional) and /b.json"),
        (["/a.json", "/b.json"], "one config file at most, got 2"),
        (["serve", "check"], "one command at most"),
        (["serve", "/a.json", "--as", "x"], "--as is for check"),
        (["--log-level", "LOUD", "/a.json"], "--log-level: unknown level 'LOUD'"),
    ],
)
def test_bad_combinations_are_clear_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(cli.UsageError, match="^" + re.escape(message)):
        cli.parse_options(argv, environ={})
    assert cli.main(argv) == cli.EXIT_CONFIG
    assert f"mcp-patchbay: {message}" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["chek", "/a.json"], "unknown command 'chek' (and no file of that name): did you mean 'check'?"),
        (["frobnicate"], "unknown command 'frobnicate' (and no file of that name): the commands are serve,"),
        (["instal"], "unknown command 'instal' (and no file of that name): did you mean 'install'?"),
    ],
)
def test_an_unknown_command_is_named_with_a_did_you_mean(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(argv) == cli.EXIT_CONFIG
    assert capsys.readouterr().err.startswith(f"mcp-patchbay: {message}")


def test_a_file_named_like_a_command_word_is_still_a_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine").write_text("{}")
    assert cli.parse_options(["mine"], environ={}).config == "mine"


def test_without_any_config_the_default_one_is_used_when_it_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert cli.parse_options([], environ={}).config is None
    (tmp_path / "mcp-patchbay").mkdir()
    (tmp_path / "mcp-patchbay" / "config.json").write_text("{}")
    assert cli.parse_options(["check"], environ={}).config == str(tmp_path / "mcp-patchbay" / "config.json")


def test_the_log_level_from_patchbay_log_level_and_the_flag_wins() -> None:
    assert cli.parse_options(["/a.json"], environ={}).level is None
    assert cli.parse_options(["/a.json"], environ={"PATCHBAY_LOG_LEVEL": "info"}).level == "INFO"
    assert cli.parse_options(["/a.json"], environ={"PATCHBAY_LOG_LEVEL": "warn"}).level == "WARNING"
    env = {"PATCHBAY_LOG_LEVEL": "DEBUG"}
    assert cli.parse_options(["/a.json", "--log-level", "error"], environ=env).level == "ERROR"
    with pytest.raises(cli.UsageError, match=r"^PATCHBAY_LOG_LEVEL: unknown level 'CHATTY'"):
        cli.parse_options(["/a.json"], environ={"PATCHBAY_LOG_LEVEL": "chatty"})


def test_no_config_anywhere_says_every_way_to_give_one(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PATCHBAY_CONFIG", raising=False)
    assert cli.main([]) == cli.EXIT_CONFIG
    err = capsys.readouterr().err
    assert "mcp-patchbay /path/to/patchbay.json" in err and "--config" in err and "PATCHBAY_CONFIG" in err


def test_check_takes_the_config_as_a_positional_argument(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write(tmp_path, {"plain": upstream()})
    assert cli.main(["check", str(config)]) == 0
    assert "1 of 1 servers ok, 1 tools" in capsys.readouterr().out


def test_an_invalid_entry_is_warned_about_once_with_the_file_and_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: the CLI and the supervisor both warned of it, the CLI without the file."""
    config = write(tmp_path, {"plain": upstream(), "typo": {"comand": "x"}})
    assert cli.main(["check", str(config)]) == 1
    warnings = [line for line in capsys.readouterr().err.splitlines() if "'typo'" in line]
    assert len(warnings) == 1, warnings
    assert "mcpServers.typo" in warnings[0] and str(config) in warnings[0]


# --- stderr: at most one line for a healthy start ------------------------------------------------


async def _session(tmp: Path, servers: dict[str, Any], **kwargs: Any) -> tuple[str, set[str]]:
    """Handshake, tools/list, the client leaves; the proxy's stderr and the tools it listed."""
    async with proxy(tmp, servers, **kwargs) as running:
        tools = await running.handshake({"roots": {}})
        assert running.process.stdin is not None
        await running.process.stdin.aclose()
        with anyio.fail_after(10):
            assert await running.process.wait() == 0
    return (tmp / "stderr.txt").read_text(), tools


@pytest.mark.anyio
async def test_a_healthy_start_writes_at_most_one_line_on_stderr(tmp_path: Path) -> None:
    servers = {"plain": upstream("plain"), "other": upstream("other")}
    stderr, tools = await _session(tmp_path, servers, arguments=("--log-file", "proxy.log"))
    assert tools == {"plain__pid", "other__pid"}
    assert len(stderr.splitlines()) <= 1, stderr
    logged = (tmp_path / "proxy.log").read_text()  # the details are in the log file, at INFO
    assert "INFO" in logged and "serving 2 servers" in logged and "server 'plain' ready" in logged
    assert "startup complete" in logged


@pytest.mark.anyio
async def test_a_healthy_start_without_a_log_file_writes_at_most_one_line_on_stderr(tmp_path: Path) -> None:
    stderr, _ = await _session(tmp_path, {"plain": upstream()}, arguments=())
    assert len(stderr.splitlines()) <= 1, stderr


@pytest.mark.anyio
async def test_patchbay_log_level_info_brings_the_details_back_to_stderr(tmp_path: Path) -> None:
    stderr, _ = await _session(tmp_path, {"plain": upstream()}, arguments=(), env={"PATCHBAY_LOG_LEVEL": "INFO"})
    assert "server 'plain' ready" in stderr and "startup complete" in stderr


@pytest.mark.anyio
async def test_log_format_json_writes_one_object_a_line_on_stderr_and_in_the_file(tmp_path: Path) -> None:
    servers = {"plain": upstream(), "missing": {"command": str(tmp_path / "no-such-server")}}
    arguments = ("--log-format", "json", "--log-file", "proxy.log")
    stderr, _ = await _session(tmp_path, servers, arguments=arguments, env={"PATCHBAY_LOG_LEVEL": "INFO"})
    for text in (stderr, (tmp_path / "proxy.log").read_text()):
        lines = [json.loads(line) for line in text.splitlines() if line.startswith("{") is not False]
        assert lines and all(set(line) >= {"ts", "level", "logger", "message"} for line in lines), text
        assert any(line["level"] == "ERROR" and "missing" in line["message"] for line in lines), text
        assert any("server 'plain' ready" in line["message"] for line in lines)
        assert all(line["ts"].endswith("Z") for line in lines)


def test_the_log_format_from_the_environment_and_a_bad_one_is_named() -> None:
    assert cli.parse_options(["/a.json"], environ={}).log_format == "text"
    assert cli.parse_options(["/a.json"], environ={"PATCHBAY_LOG_FORMAT": "JSON"}).log_format == "json"
    with pytest.raises(cli.UsageError, match="PATCHBAY_LOG_FORMAT: unknown format 'xml'"):
        cli.parse_options(["/a.json"], environ={"PATCHBAY_LOG_FORMAT": "xml"})


@pytest.mark.anyio
async def test_a_failing_upstream_still_reaches_stderr(tmp_path: Path) -> None:
    servers = {"plain": upstream(), "missing": {"command": str(tmp_path / "no-such-server")}}
    stderr, tools = await _session(tmp_path, servers, arguments=())
    assert tools >= {"plain__pid"}
    assert "missing" in stderr and ("ERROR" in stderr or "WARNING" in stderr), stderr


# --- registered_as and check --as: the name budget ------------------------------------------------


def test_the_issue_s_name_is_76_characters_in_claude_code() -> None:
    over = over_limits(["everything-demo-server__toggle-simulated-logging"], "patchbay-proxy-server")
    claude = next(o for o in over if o.client == "Claude Code")
    assert (claude.sent, claude.length, claude.limit) == (ISSUE_NAME, 76, 64)
    assert {o.client for o in over} == {"Claude Code", "Cursor", "Gemini CLI"}


def test_the_name_budget_follows_the_registered_name() -> None:
    assert name_budget(48, None) == 48  # unchanged when the name is not known
    assert name_budget(48, "patchbay") == 48  # the default leaves room for a name of 9
    assert name_budget(48, "patchbay-proxy-server") == 64 - len("mcp__patchbay-proxy-server__")
    assert name_budget(30, "pb") == 30  # max_name_length stays an upper bound
    assert name_budget(48, "x" * 60) == MIN_MAX_LENGTH
    for registered in ("pb", "patchbay", "patchbay-proxy-server"):
        budget = name_budget(64, registered)
        assert not over_limits(["t" * budget], registered)
        assert over_limits(["t" * (budget + 1)], registered)
    assert {c.client for c in CLIENT_LIMITS} == {"Claude Code", "Cursor", "Gemini CLI"}


def test_registered_as_in_the_config(tmp_path: Path) -> None:
    path = tmp_path / "patchbay.json"
    text = '{"mcpServers": {}, "patchbay": {"registered_as": "patchbay-proxy-server"}}'
    assert parse_config(text, path, environ={}).settings.registered_as == "patchbay-proxy-server"
    assert parse_config('{"mcpServers": {}}', path, environ={}).settings.registered_as is None
    for bad in ('""', '"has space"', "5", '"' + "n" * 65 + '"'):
        with pytest.raises(ConfigError, match=r"patchbay\.registered_as"):
            parse_config('{"mcpServers": {}, "patchbay": {"registered_as": ' + bad + "}}", path, environ={})


LONG = {"everything-demo-server": upstream("everything", "toggle-simulated-logging")}


def test_check_as_warns_of_names_too_long_naming_tool_client_and_length(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write(tmp_path, LONG)
    assert cli.main(["check", str(config), "--as", "patchbay-proxy-server"]) == 0  # a warning, not a failure
    out = capsys.readouterr().out
    assert "registered as 'patchbay-proxy-server' (as given)" in out
    line = next(x for x in out.splitlines() if "Claude Code" in x)
    assert "everything-demo-server__toggle-simulated-logging" in line and "76 characters" in line
    assert ISSUE_NAME in line and "limit of 64" in line
    assert any("Cursor" in x and "limit of 60" in x for x in out.splitlines())
    assert any("Gemini CLI" in x and "limit of 63" in x for x in out.splitlines())
    assert '"registered_as": "patchbay-proxy-server"' in out  # the fix


def test_check_without_a_name_assumes_patchbay_and_the_default_budget_fits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write(tmp_path, LONG)
    assert cli.main(["check", str(config), "--json"]) == 0
    names = json.loads(capsys.readouterr().out)["names"]
    assert names == {"registered_as": "patchbay", "assumed": True, "too_long": []}


def test_registered_as_shortens_the_exposed_names_to_fit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write(tmp_path, LONG, registered_as="patchbay-proxy-server")
    assert cli.main(["check", str(config), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["tools"] == 1
    assert report["names"] == {"registered_as": "patchbay-proxy-server", "assumed": False, "too_long": []}
    # and through the protocol, as a client sees them
    (tmp_path / "served").mkdir()
    stderr, tools = anyio.run(_listed, tmp_path / "served", LONG)
    assert stderr == ""
    (name,) = tools
    assert name.startswith("everything-demo-server__toggl") and len(name) == 36, name
    assert not over_limits([name], "patchbay-proxy-server")


async def _listed(tmp: Path, servers: dict[str, Any]) -> tuple[str, set[str]]:
    async with proxy(tmp, servers, arguments=(), settings={"registered_as": "patchbay-proxy-server"}) as running:
        tools = await running.handshake()
        assert running.process.stdin is not None
        await running.process.stdin.aclose()
        with anyio.fail_after(10):
            await running.process.wait()
    return (tmp / "stderr.txt").read_text(), tools


# --- check: which listing the config gets, and what each costs ---------------------------------


def test_check_reports_the_exposure_mode_and_the_listing_cost_of_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    servers = {f"s{i}": upstream(f"s{i}", "pid") for i in range(3)}
    config = write(tmp_path, servers, search_threshold=2)
    assert cli.main(["check", str(config), "--json"]) == 0
    exposure = json.loads(capsys.readouterr().out)["exposure"]
    assert exposure["mode"] == "search" and exposure["expose"] == "auto" and exposure["threshold"] == 2
    assert exposure["all"]["tools"] == 3 and exposure["search"]["tools"] == 3
    assert exposure["all"]["tokens"] == -(-exposure["all"]["chars"] // 4)
    assert cli.main(["check", str(config)]) == 0
    out = capsys.readouterr().out
    assert "exposed as: search mode" in out and "search_threshold 2" in out
    assert any(line.strip().startswith("all mode:") and "3 tools listed" in line for line in out.splitlines())


# --- profiles: --profile and $PATCHBAY_PROFILE (issue 24) ----------------------------------------


def test_the_profile_from_the_flag_or_the_environment_and_the_flag_wins() -> None:
    assert cli.parse_options(["/a.json"], environ={}).profile is None
    assert cli.parse_options(["/a.json", "--profile", "coding"], environ={}).profile == "coding"
    assert cli.parse_options(["check", "/a.json"], environ={"PATCHBAY_PROFILE": "writing"}).profile == "writing"
    assert cli.parse_options(["/a.json"], environ={"PATCHBAY_PROFILE": " "}).profile is None
    env = {"PATCHBAY_PROFILE": "writing"}
    assert cli.parse_options(["/a.json", "--profile", "coding"], environ=env).profile == "coding"
    # A sign-in is the server's whichever profile serves it: the variable is ignored, the flag refused.
    assert cli.parse_options(["login", "github", "/a.json"], environ=env).profile is None
    with pytest.raises(cli.UsageError, match=r"^--profile is for serve and check, not login"):
        cli.parse_options(["login", "github", "/a.json", "--profile", "coding"], environ={})


def _with_profiles(tmp: Path, servers: dict[str, Any], profiles: dict[str, Any]) -> Path:
    path = tmp / "patchbay.json"
    path.write_text(json.dumps({"mcpServers": servers, "profiles": profiles, "patchbay": {"watch": False}}))
    return path


def test_check_with_a_profile_shows_only_what_it_exposes_and_its_listing_cost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    servers = {"code": upstream("code", "pid"), "docs": upstream("docs", "pid"), "mail": upstream("mail", "pid")}
    profiles = {
        "coding": {"servers": ["code"]},
        "writing": {"servers": ["docs", "mail"], "tools": {"mail": {"deny": ["*"]}}},
    }
    config = _with_profiles(tmp_path, servers, profiles)
    assert cli.main(["check", str(config), "--profile", "coding"]) == 0
    out = capsys.readouterr().out
    assert "1 of 1 servers ok, 1 tools" in out and "profile 'coding')" in out
    assert "code" in out and "docs" not in out and "mail" not in out
    monkeypatch.setenv("PATCHBAY_PROFILE", "writing")
    assert cli.main(["check", str(config), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["profile"] == "writing" and [r["name"] for r in document["servers"]] == ["docs", "mail"]
    assert document["tools"] == 1 and document["exposure"]["all"]["tools"] == 1  # mail's only tool is denied
    monkeypatch.delenv("PATCHBAY_PROFILE")
    assert cli.main(["check", str(config), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["profile"] is None and document["exposure"]["all"]["tools"] == 3


def test_an_unknown_profile_is_a_config_mistake_naming_the_file_with_a_did_you_mean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _with_profiles(tmp_path, {"code": upstream("code")}, {"coding": {"servers": ["code"]}})
    assert cli.main(["check", str(config), "--profile", "codng"]) == cli.EXIT_CONFIG
    err = capsys.readouterr().err
    assert f"{config}: profiles: unknown profile 'codng' (did you mean 'coding'?)" in err
