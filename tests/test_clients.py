"""The clients package's pure parts: the location table on each OS (macOS and Windows by their
logic, here on Linux), the formats kept as they were written, each client's spellings, the merge,
the command line found for the proxy, and how a running client is recognised."""

from __future__ import annotations

import json
from pathlib import PurePath, PurePosixPath, PureWindowsPath

import pytest

from mcp_patchbay.clients.entries import content, normalize, proxy_entry
from mcp_patchbay.clients.formats import (
    dump_json,
    editable_json,
    json_style,
    objects_at,
    parse,
    toml_remove,
    toml_set,
)
from mcp_patchbay.clients.launch import find_launch
from mcp_patchbay.clients.locations import CLIENTS, Environment, client_named, install_place, places_of
from mcp_patchbay.clients.merging import merge
from mcp_patchbay.clients.reading import Found
from mcp_patchbay.clients.running import matches
from mcp_patchbay.config.selfref import launches_patchbay


def files(env: Environment, client: str) -> list[str]:
    return [str(p.file) for p in places_of(client, env)]


# -- where each client keeps its servers -------------------------------------------------------------


def test_linux_paths_follow_home_and_xdg_config_home() -> None:
    env = Environment("linux", {"HOME": "/home/ann"}, PurePosixPath("/work/app"))
    assert files(env, "claude-desktop") == ["/home/ann/.config/Claude/claude_desktop_config.json"]
    assert files(env, "claude-code") == ["/home/ann/.claude.json", "/home/ann/.claude.json", "/work/app/.mcp.json"]
    assert places_of("claude-code", env)[1].keys == ("projects", "/work/app", "mcpServers")
    assert files(env, "cursor") == ["/home/ann/.cursor/mcp.json", "/work/app/.cursor/mcp.json"]
    assert files(env, "vscode") == [
        "/home/ann/.config/Code/User/mcp.json",
        "/home/ann/.config/Code/User/settings.json",
        "/work/app/.vscode/mcp.json",
    ]
    assert places_of("vscode", env)[1].keys == ("mcp", "servers")
    assert files(env, "windsurf") == ["/home/ann/.codeium/windsurf/mcp_config.json"]
    assert files(env, "gemini") == ["/home/ann/.gemini/settings.json", "/work/app/.gemini/settings.json"]
    assert files(env, "codex") == ["/home/ann/.codex/config.toml"]
    moved = Environment("linux", {"HOME": "/home/ann", "XDG_CONFIG_HOME": "/xdg"}, PurePosixPath("/p"))
    assert files(moved, "claude-desktop") == ["/xdg/Claude/claude_desktop_config.json"]
    assert files(moved, "vscode")[0] == "/xdg/Code/User/mcp.json"


def test_macos_paths_are_under_library_application_support() -> None:
    env = Environment("darwin", {"HOME": "/Users/ann", "XDG_CONFIG_HOME": "/ignored"}, PurePosixPath("/p"))
    assert files(env, "claude-desktop") == ["/Users/ann/Library/Application Support/Claude/claude_desktop_config.json"]
    assert files(env, "vscode")[:2] == [
        "/Users/ann/Library/Application Support/Code/User/mcp.json",
        "/Users/ann/Library/Application Support/Code/User/settings.json",
    ]
    assert files(env, "cursor")[0] == "/Users/ann/.cursor/mcp.json"
    assert files(env, "codex") == ["/Users/ann/.codex/config.toml"]


def test_windows_paths_come_from_appdata_and_userprofile() -> None:
    env = Environment(
        "win32",
        {"USERPROFILE": "C:\\Users\\ann", "APPDATA": "C:\\Users\\ann\\AppData\\Roaming", "HOME": "/wrong"},
        PureWindowsPath("D:\\src\\app"),
    )
    assert files(env, "claude-desktop") == ["C:\\Users\\ann\\AppData\\Roaming\\Claude\\claude_desktop_config.json"]
    assert files(env, "claude-code")[0] == "C:\\Users\\ann\\.claude.json"
    assert files(env, "claude-code")[2] == "D:\\src\\app\\.mcp.json"
    assert files(env, "vscode")[0] == "C:\\Users\\ann\\AppData\\Roaming\\Code\\User\\mcp.json"
    assert files(env, "cursor") == ["C:\\Users\\ann\\.cursor\\mcp.json", "D:\\src\\app\\.cursor\\mcp.json"]
    assert files(env, "gemini")[0] == "C:\\Users\\ann\\.gemini\\settings.json"
    assert files(env, "windsurf") == ["C:\\Users\\ann\\.codeium\\windsurf\\mcp_config.json"]
    # Without APPDATA: the roaming folder under the profile; without USERPROFILE: HOMEDRIVE + HOMEPATH.
    bare = Environment("win32", {"HOMEDRIVE": "E:", "HOMEPATH": "\\Users\\bo"}, PureWindowsPath("E:\\p"))
    assert files(bare, "claude-desktop") == ["E:\\Users\\bo\\AppData\\Roaming\\Claude\\claude_desktop_config.json"]
    assert bare.shorten(PureWindowsPath("E:\\Users\\bo\\.cursor\\mcp.json")) == "~\\.cursor\\mcp.json"


def test_codex_home_and_claude_config_dir_move_those_files() -> None:
    env = Environment("linux", {"HOME": "/h", "CODEX_HOME": "/c", "CLAUDE_CONFIG_DIR": "/cc"}, PurePosixPath("/p"))
    assert files(env, "codex") == ["/c/config.toml"]
    assert files(env, "claude-code")[0] == "/cc/.claude.json"
    relative = Environment("linux", {"HOME": "/h", "CODEX_HOME": "rel"}, PurePosixPath("/p"))
    assert files(relative, "codex") == ["/h/.codex/config.toml"]  # a relative folder is no folder


def test_install_places_per_scope() -> None:
    env = Environment("linux", {"HOME": "/h"}, PurePosixPath("/p"))
    assert str(install_place("claude-code", env, "user").file) == "/h/.claude.json"  # type: ignore[union-attr]
    assert str(install_place("claude-code", env, "project").file) == "/p/.mcp.json"  # type: ignore[union-attr]
    assert str(install_place("vscode", env, "user").file) == "/h/.config/Code/User/mcp.json"  # type: ignore[union-attr]
    assert install_place("codex", env, "project") is None
    assert install_place("claude-desktop", env, "project") is None


@pytest.mark.parametrize(
    ("word", "client"),
    [("claude", "claude-code"), ("Claude_Desktop", "claude-desktop"), ("code", "vscode"), ("gemini-cli", "gemini")],
)
def test_clients_by_their_other_names(word: str, client: str) -> None:
    found = client_named(word)
    assert found is not None and found.id == client
    assert client_named("notepad") is None


# -- formats ------------------------------------------------------------------------------------------


def test_json_with_comments_and_trailing_commas_is_read_but_not_rewritten() -> None:
    text = '{\n  // a comment\n  "url": "http://x//y", /* more */\n  "a": [1, 2,],\n}\n'
    assert parse(text, "json") == {"url": "http://x//y", "a": [1, 2]}
    assert not editable_json(text)
    assert editable_json('{"a": 1}')


@pytest.mark.parametrize(
    "text",
    [
        '{\n  "a": 1,\n  "b": {\n    "c": [\n      "x"\n    ]\n  }\n}\n',  # JSON.stringify(..., 2) and a newline
        '{\n    "a": 1,\n    "b": {}\n}',  # four spaces, no final newline
        '{\n\t"a": 1,\n\t"b": []\n}\n',  # tabs
        '{"a": 1, "b": {"c": 2}}',  # one line
        '{"a":1,"b":{"c":2}}',  # compact
        '{\r\n  "a": "\u00e9"\r\n}\r\n',  # CRLF, raw non-ASCII
        '{\n  "a": "\\u00e9"\n}\n',  # ASCII escapes
    ],
)
def test_json_written_back_in_its_own_style_is_the_same_text(text: str) -> None:
    assert dump_json(parse(text, "json"), json_style(text)) == text


def test_toml_edits_keep_comments_order_and_spacing() -> None:
    text = (
        '# mine\nmodel = "o4"  # the model\n\n[mcp_servers.time]\ncommand = "t"  # why\n\n[profiles.x]\nmodel = "m"\n'
    )
    added = toml_set(text, ("mcp_servers",), "patchbay", {"command": "/pb", "args": ["/c.json"], "required": True})
    assert added.startswith('# mine\nmodel = "o4"  # the model\n\n[mcp_servers.time]\ncommand = "t"  # why\n')
    assert '[mcp_servers.patchbay]\ncommand = "/pb"\nargs = ["/c.json"]\nrequired = true\n\n[profiles.x]' in added
    assert parse(added, "toml")["mcp_servers"]["patchbay"]["required"] is True
    back, removed = toml_remove(added, ("mcp_servers",), ["patchbay"])
    assert (back, removed) == (text, ["patchbay"])
    fresh = toml_set("", ("mcp_servers",), "p", {"command": "/pb"})
    assert fresh == '[mcp_servers.p]\ncommand = "/pb"\n'


def test_a_project_key_of_claude_code_matches_in_another_spelling() -> None:
    data = {"projects": {"C:/Src/App": {"mcpServers": {"x": {}}}}}
    assert objects_at(data, ("projects", "c:\\src\\app", "mcpServers")) == {"x": {}}
    assert objects_at(data, ("projects", "c:\\other", "mcpServers")) is None


# -- each client's spellings --------------------------------------------------------------------------


def test_gemini_http_url_is_streamable_http_and_url_is_sse_timeout_in_milliseconds() -> None:
    http = normalize(
        "gemini",
        {
            "httpUrl": "https://d/mcp",
            "headers": {"Authorization": "Bearer $TOKEN"},
            "timeout": 30000,
            "includeTools": ["search"],
            "excludeTools": ["delete"],
            "trust": True,
        },
    )
    assert http.entry == {
        "type": "http",
        "url": "https://d/mcp",
        "headers": {"Authorization": "Bearer ${TOKEN}"},
        "timeout": 30.0,
        "tools": {"allow": ["search"], "deny": ["delete"]},
    }
    assert "trust" in http.dropped
    sse = normalize("gemini", {"url": "https://d/sse"})
    assert (sse.transport, sse.entry) == ("sse", {"type": "sse", "url": "https://d/sse"})


def test_codex_bearer_token_headers_timeouts_and_tool_lists() -> None:
    got = normalize(
        "codex",
        {
            "url": "https://l/mcp",
            "bearer_token_env_var": "LINEAR_TOKEN",
            "http_headers": {"X-Team": "core"},
            "env_http_headers": {"X-Key": "KEY_VAR"},
            "tool_timeout_sec": 90,
            "startup_timeout_sec": 20,
            "enabled": False,
            "enabled_tools": ["a"],
            "disabled_tools": ["b"],
        },
    )
    assert got.entry == {
        "type": "http",
        "url": "https://l/mcp",
        "headers": {"Authorization": "Bearer ${LINEAR_TOKEN}", "X-Team": "core", "X-Key": "${KEY_VAR}"},
        "timeout": 90,
        "tools": {"allow": ["a"], "deny": ["b"]},
        "disabled": True,
    }
    assert list(got.dropped) == ["startup_timeout_sec"]
    stdio = normalize("codex", {"command": "npx", "args": ["-y", "x"], "env": {"N": 1}, "env_vars": ["PATH"]})
    assert stdio.entry == {"command": "npx", "args": ["-y", "x"], "env": {"N": "1"}}
    assert "env_vars" in stdio.dropped


def test_vscode_fills_its_folder_variables_and_reports_inputs() -> None:
    got = normalize(
        "vscode",
        {
            "type": "stdio",
            "command": "npx",
            "args": ["${workspaceFolder}/x", "${userHome}/y"],
            "env": {"K": "${input:key}"},
            "envFile": "${workspaceFolder}/.env",
            "dev": {"watch": "src/**"},
        },
        project="/work/app",
        home="/home/ann",
    )
    assert got.entry == {"command": "npx", "args": ["/work/app/x", "/home/ann/y"], "env": {"K": "${input:key}"}}
    assert set(got.dropped) == {"envFile", "dev"}
    assert len(got.notes) == 1 and "${input:key}" in got.notes[0]
    in_user_file = normalize("vscode", {"command": "npx", "args": ["${workspaceFolder}"]}, home="/h")
    assert in_user_file.entry == {"command": "npx", "args": ["${workspaceFolder}"]}  # no project: left for the loader


def test_claude_code_types_oauth_and_windsurf_server_url() -> None:
    got = normalize(
        "claude-code",
        {
            "type": "sse",
            "url": "https://s/sse",
            "oauth": {"clientId": "abc", "callbackPort": 8123},
            "headersHelper": "x",
        },
    )
    assert got.entry == {"type": "sse", "url": "https://s/sse", "oauth": {"client_id": "abc", "callback_port": 8123}}
    assert "headersHelper" in got.dropped
    assert normalize("windsurf", {"serverUrl": "https://w/mcp"}).entry == {"type": "http", "url": "https://w/mcp"}
    assert normalize("claude-code", {"type": "ws", "url": "ws://x"}).skipped is not None
    assert normalize("cursor", {"command": "a", "url": "https://b"}).skipped is not None
    assert normalize("cursor", {"args": ["x"]}).skipped is not None
    assert normalize("cursor", {"command": "a", "args": "not a list"}).skipped is not None


def test_an_empty_args_or_env_is_the_same_server_as_none() -> None:
    desktop = normalize("claude-desktop", {"command": "t", "args": [], "env": {}})
    code = normalize("claude-code", {"type": "stdio", "command": "t"})
    assert desktop.entry is not None and code.entry is not None
    assert content(desktop.entry) == content(code.entry)
    assert content({"type": "http", "url": "u", "origin": "x"}) == content({"url": "u"})


@pytest.mark.parametrize(
    ("command", "args", "launches"),
    [
        ("mcp-patchbay", ["/c.json"], True),
        ("/home/a/.venv/bin/mcp-patchbay", [], True),
        ("C:\\Tools\\mcp-patchbay.exe", ["C:\\c.json"], True),
        ("python3", ["-m", "mcp_patchbay", "serve"], True),
        ("uvx", ["mcp-patchbay", "/c.json"], True),
        ("npx", ["-y", "@modelcontextprotocol/server-memory"], False),
        ("python3", ["server.py"], False),
    ],
)
def test_an_entry_that_launches_patchbay_is_recognised(command: str, args: list[str], launches: bool) -> None:
    assert launches_patchbay(command, args) is launches


def test_the_proxy_entry_in_each_client_spelling() -> None:
    assert proxy_entry("codex", "/pb", ["/c"], 30) == {
        "command": "/pb",
        "args": ["/c"],
        "required": True,
        "startup_timeout_sec": 30,
    }
    assert proxy_entry("vscode", "/pb", ["/c"], 30)["type"] == "stdio"
    assert proxy_entry("claude-desktop", "/pb", ["/c"], 30) == {"command": "/pb", "args": ["/c"]}
    for client in CLIENTS:  # each is read back as a patchbay launch, so import skips it
        entry = proxy_entry(client.id, "/x/bin/mcp-patchbay", ["/c.json"], 30)
        normalized = normalize(client.id, entry)
        assert normalized.entry is not None
        assert launches_patchbay(normalized.entry["command"], normalized.entry["args"])


# -- merging -----------------------------------------------------------------------------------------


def found(client: str, name: str, raw: dict[str, object], scope: str = "user") -> Found:
    from mcp_patchbay.clients.locations import Place

    place = Place(client, PurePosixPath(f"/{client}/{scope}.json"), "json", ("mcpServers",), scope)  # type: ignore[arg-type]
    return Found(place, name, normalize(client, raw))


def test_identical_entries_merge_and_the_same_name_with_other_content_is_renamed() -> None:
    items = [
        found("claude-desktop", "time", {"command": "t"}),
        found("cursor", "time", {"command": "t", "args": []}),
        found("claude-desktop", "github", {"command": "npx", "args": ["gh"]}),
        found("cursor", "github", {"command": "docker", "args": ["gh"]}),
        found("cursor", "github-cursor", {"command": "other"}),
        found("claude-code", "github", {"command": "a"}, "user"),
        found("claude-code", "github", {"command": "b"}, "project"),
    ]
    servers = merge(items, lambda place: f"{place.client}:{place.scope}")
    by_name = {s.name: s for s in servers}
    assert list(by_name) == [
        "time",
        "github",
        "github-cursor-2",
        "github-claude-code-user",
        "github-claude-code-project",
        "github-cursor",
    ]
    assert by_name["time"].entry == {"command": "t", "origin": "claude-desktop:user; cursor:user"}
    assert by_name["github-cursor-2"].renamed_from == "github"
    assert by_name["github-cursor-2"].entry["command"] == "docker"
    assert by_name["github-cursor"].entry["command"] == "other"  # a name a client uses is never taken


# -- the command line a client runs ------------------------------------------------------------------


def exists_in(*paths: str):
    return lambda p: str(p) in paths


def test_the_program_beside_the_interpreter_on_linux() -> None:
    launch = find_launch(
        "linux",
        executable="/h/.venv/bin/python",
        argv0="/h/.venv/bin/mcp-patchbay",
        exists=exists_in("/h/.venv/bin/mcp-patchbay"),
        which=lambda _: "/usr/bin/mcp-patchbay",
    )
    assert (launch.command, launch.args, launch.temporary) == ("/h/.venv/bin/mcp-patchbay", (), False)


def test_windows_finds_the_exe_in_scripts() -> None:
    launch = find_launch(
        "win32",
        executable="C:\\Python312\\python.exe",
        argv0="",
        exists=exists_in("C:\\Python312\\Scripts\\mcp-patchbay.exe"),
        which=lambda _: None,
    )
    assert launch.command == "C:\\Python312\\Scripts\\mcp-patchbay.exe"
    venv = find_launch(
        "win32",
        executable="C:\\app\\.venv\\Scripts\\python.exe",
        argv0="C:\\app\\.venv\\Scripts\\mcp-patchbay",
        exists=exists_in("C:\\app\\.venv\\Scripts\\mcp-patchbay.exe"),
        which=lambda _: None,
    )
    assert venv.command == "C:\\app\\.venv\\Scripts\\mcp-patchbay.exe"


def test_path_then_the_interpreter_itself_and_uvx_s_cache_is_named_temporary() -> None:
    nowhere = exists_in()
    on_path = find_launch(
        "darwin",
        executable="/usr/bin/python3",
        argv0="",
        exists=nowhere,
        which=lambda _: "/opt/bin/mcp-patchbay",
    )
    assert on_path.command == "/opt/bin/mcp-patchbay"
    fallback = find_launch("linux", executable="/usr/bin/python3", argv0="", exists=nowhere, which=lambda _: None)
    assert (fallback.command, fallback.args) == ("/usr/bin/python3", ("-m", "mcp_patchbay"))
    cached = "/home/a/.cache/uv/archive-v0/x/bin/mcp-patchbay"
    uvx = find_launch(
        "linux",
        executable="/home/a/.cache/uv/archive-v0/x/bin/python",
        argv0="",
        exists=exists_in(cached),
        which=lambda _: None,
    )
    assert uvx.temporary


# -- a client running ---------------------------------------------------------------------------------


def client(id_: str):
    return next(c for c in CLIENTS if c.id == id_)


@pytest.mark.parametrize(
    ("id_", "argv", "running"),
    [
        ("claude-code", ["/home/a/.local/bin/claude", "--resume"], True),
        ("claude-code", ["node", "/usr/lib/node_modules/@anthropic-ai/claude-code/cli.js"], True),
        ("claude-desktop", ["/home/a/.local/bin/claude"], False),
        ("claude-desktop", ["/Applications/Claude.app/Contents/MacOS/Claude"], True),
        ("claude-desktop", ["Claude.exe"], True),
        ("claude-code", ["claude.exe"], True),
        ("claude-code", ["Claude.exe"], False),
        ("gemini", ["node", "/usr/local/bin/gemini"], True),
        ("gemini", ["node", "/x/node_modules/@google/gemini-cli/dist/index.js"], True),
        ("codex", ["/home/a/src/codex/tool.sh"], False),
        ("vscode", ["/Applications/Visual Studio Code.app/Contents/MacOS/Electron"], True),
        ("cursor", ["/usr/bin/vim", "cursor"], False),
    ],
)
def test_a_running_client_is_told_by_its_command_line(id_: str, argv: list[str], running: bool) -> None:
    assert matches(client(id_), argv) is running


def test_json_docs_in_the_client_table_load_as_json() -> None:
    # Every client's user file is JSON or TOML as the table says (a guard on the table's spelling).
    env = Environment("linux", {"HOME": "/h"}, PurePosixPath("/p"))
    for c in CLIENTS:
        for place in places_of(c.id, env):
            assert place.format == ("toml" if c.id == "codex" else "json")
            assert isinstance(place.file, PurePath)
    assert json.loads(dump_json({}, json_style(""))) == {}
