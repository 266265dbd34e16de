"""``mcp-patchbay import``: a fake home with the configs of Claude Desktop (and its other keys),
Claude Code (user and project scopes, and ``.mcp.json``), Cursor, VS Code, Gemini CLI and Codex (TOML
with comments), whose servers overlap, gives one config with each server once that loads back."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from mcp_patchbay import cli
from mcp_patchbay.cli import importing
from mcp_patchbay.clients.locations import Environment
from mcp_patchbay.config import load_config

TIME = {"command": "mcp-server-time", "args": ["--local-timezone", "UTC"]}
GITHUB = {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"], "env": {"GITHUB_TOKEN": "t"}}
GITHUB_DOCKER = {"command": "docker", "args": ["run", "-i", "--rm", "ghcr.io/github/github-mcp-server"]}

CODEX_TOML = """\
# Codex, as its user keeps it
model = "o4-mini"  # the model

# servers below
[mcp_servers.time]
command = "mcp-server-time"  # same as Claude Desktop's
args = ["--local-timezone", "UTC"]

[mcp_servers.linear]
url = "https://mcp.linear.app/mcp"
bearer_token_env_var = "LINEAR_TOKEN"

[profiles.fast]
model = "gpt-mini"
"""


def write(path: Path, data: Any, indent: int | str = 2) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data, indent=indent) + "\n", encoding="utf-8")


def fake_home(tmp_path: Path) -> Environment:
    """A home and a project holding every client's config (see the module doc); the environment to find them."""
    home, project = tmp_path / "home", tmp_path / "project"
    write(
        home / ".config/Claude/claude_desktop_config.json",
        {
            "globalShortcut": "Ctrl+Space",
            "mcpServers": {"time": TIME, "github": GITHUB},
            "preferences": {"menuBarEnabled": False},
        },
    )
    write(
        home / ".claude.json",
        {
            "numStartups": 12,
            "mcpServers": {"memory": {"type": "stdio", "command": "npx", "args": ["-y", "server-memory"], "env": {}}},
            "projects": {str(project): {"allowedTools": [], "mcpServers": {"github": {"type": "stdio", **GITHUB}}}},
        },
    )
    write(project / ".mcp.json", {"mcpServers": {"sentry": {"type": "http", "url": "https://mcp.sentry.dev/mcp"}}})
    write(home / ".cursor/mcp.json", {"mcpServers": {"time": {**TIME, "env": {}}, "github": GITHUB_DOCKER}}, indent=4)
    write(
        project / ".vscode/mcp.json",
        {
            "inputs": [{"type": "promptString", "id": "pat", "password": True}],
            "servers": {
                "files": {"type": "stdio", "command": "npx", "args": ["server-filesystem", "${workspaceFolder}"]},
                "copilot": {"type": "http", "url": "https://api.example.com/mcp", "headers": {"A": "${input:pat}"}},
            },
        },
        indent="\t",
    )
    write(
        home / ".gemini/settings.json",
        {
            "theme": "Default",
            "mcpServers": {
                "docs": {"httpUrl": "https://docs.example.com/mcp", "timeout": 30000, "trust": True},
                "time": TIME,
            },
        },
    )
    write(home / ".codex/config.toml", CODEX_TOML)
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    return Environment("linux", env, project)


def run_import(env: Environment, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = importing.main(list(argv), env, out, err)
    return code, out.getvalue(), err.getvalue()


def test_every_server_once_merged_renamed_with_origins_and_it_loads_back(tmp_path: Path) -> None:
    env = fake_home(tmp_path)
    target = tmp_path / "patchbay.json"
    code, out, err = run_import(env, "-o", str(target))
    assert (code, err) == (0, "")
    servers = json.loads(target.read_text())["mcpServers"]
    assert list(servers) == [
        "time",
        "github",
        "github-cursor",
        "memory",
        "sentry",
        "files",
        "copilot",
        "docs",
        "linear",
    ]
    assert servers["time"] == {
        **TIME,
        "origin": "Claude Desktop ~/.config/Claude/claude_desktop_config.json; Cursor ~/.cursor/mcp.json; "
        "Gemini CLI ~/.gemini/settings.json; Codex ~/.codex/config.toml",
    }
    assert servers["github"]["origin"].endswith(f"Claude Code ~/.claude.json (project {env.project})")
    assert servers["github-cursor"]["command"] == "docker"
    assert servers["files"]["args"] == ["server-filesystem", str(env.project)]
    assert servers["docs"] == {
        "type": "http",
        "url": "https://docs.example.com/mcp",
        "timeout": 30.0,
        "origin": "Gemini CLI ~/.gemini/settings.json",
    }
    assert servers["linear"]["headers"] == {"Authorization": "Bearer ${LINEAR_TOKEN}"}
    config = load_config(target, {"LINEAR_TOKEN": "x"})
    assert [e.name for e in config.servers] == list(servers)
    assert config.settings.registered_as == "patchbay"
    unusable = {e.name for e in config.servers if e.spec is None}
    assert unusable == {"copilot"}  # its ${input:pat} cannot be carried
    time_spec = next(e.spec for e in config.servers if e.name == "time")
    assert time_spec is not None and time_spec.origin is not None and "Codex" in time_spec.origin
    # What the person reads: a line per server, then merged, renamed, left out, and what next.
    assert "  time           stdio  Claude Desktop" in out
    assert "  docs           http   Gemini CLI ~/.gemini/settings.json" in out
    assert "Merged: time: the same server in Claude Desktop, Cursor, Gemini CLI and Codex" in out
    assert "Renamed: Cursor's 'github' is 'github-cursor'" in out
    assert "Left out of docs: 'trust'" in out
    assert "Note: copilot uses ${input:pat}" in out
    assert "No servers in: Windsurf (~/.codeium/windsurf/mcp_config.json)" in out
    assert f"Wrote {target} (9 servers)." in out
    assert f"mcp-patchbay check {target}" in out
    assert f"mcp-patchbay install CLIENT --config {target} --replace" in out
    assert target.stat().st_mode & 0o777 == 0o600  # it may hold tokens


def test_an_entry_that_launches_the_proxy_itself_is_skipped(tmp_path: Path) -> None:
    env = fake_home(tmp_path)
    claude = Path(env.env["HOME"]) / ".claude.json"
    data = json.loads(claude.read_text())
    data["mcpServers"]["patchbay"] = {"type": "stdio", "command": "/opt/pb/bin/mcp-patchbay", "args": ["/c.json"]}
    data["mcpServers"]["pb-module"] = {"command": "python3", "args": ["-m", "mcp_patchbay", "/c.json"]}
    claude.write_text(json.dumps(data))
    code, out, _ = run_import(env, "--from", "claude-code", "-o", str(tmp_path / "c.json"))
    assert code == 0
    assert "Skipped: patchbay in Claude Code ~/.claude.json: launches mcp-patchbay itself" in out
    assert "Skipped: pb-module in Claude Code ~/.claude.json: launches mcp-patchbay itself" in out
    assert set(json.loads((tmp_path / "c.json").read_text())["mcpServers"]) == {"memory", "github", "sentry"}


def test_dry_run_writes_nothing_and_prints_the_config(tmp_path: Path) -> None:
    env = fake_home(tmp_path)
    target = tmp_path / "out" / "patchbay.json"
    code, out, _ = run_import(env, "--dry-run", "-o", str(target))
    assert code == 0
    assert not target.parent.exists()
    assert "nothing was written" in out
    printed = json.loads(out[out.index("\n{") :])
    assert "time" in printed["mcpServers"]


def test_an_existing_file_is_kept_without_force_and_backed_up_with_it(tmp_path: Path) -> None:
    env = fake_home(tmp_path)
    target = tmp_path / "patchbay.json"
    target.write_text('{"mcpServers": {}}\n')
    code, _, err = run_import(env, "-o", str(target))
    assert code == 2
    assert f"{target} already exists; nothing written. Add --force" in err
    assert target.read_text() == '{"mcpServers": {}}\n'
    code, out, _ = run_import(env, "-o", str(target), "--force")
    assert code == 0
    backups = list(tmp_path.glob("patchbay.json.patchbay-backup-*"))
    assert len(backups) == 1 and backups[0].read_text() == '{"mcpServers": {}}\n'
    assert f"the file it replaced is kept as {backups[0]}" in out
    assert "time" in json.loads(target.read_text())["mcpServers"]


def test_from_reads_only_the_clients_named(tmp_path: Path) -> None:
    env = fake_home(tmp_path)
    target = tmp_path / "c.json"
    code, out, _ = run_import(env, "--from", "codex,gemini", "-o", str(target))
    assert code == 0
    assert list(json.loads(target.read_text())["mcpServers"]) == ["time", "linear", "docs"]  # in the order named
    assert "Claude" not in out.split("Next:")[0]
    code, _, err = run_import(env, "--from", "notepad")
    assert code == 2 and "unknown client 'notepad'; the clients are claude-desktop" in err


def test_nothing_found_says_where_it_looked_and_exits_1(tmp_path: Path) -> None:
    env = Environment("linux", {"HOME": str(tmp_path)}, tmp_path / "project")
    code, out, _ = run_import(env, "-o", str(tmp_path / "c.json"))
    assert code == 1
    assert "No MCP servers found. Looked in: ~/.config/Claude/claude_desktop_config.json, ~/.claude.json" in out
    assert not (tmp_path / "c.json").exists()


def test_a_file_that_cannot_be_read_is_named_and_nothing_is_written(tmp_path: Path) -> None:
    env = fake_home(tmp_path)
    cursor = Path(env.env["HOME"]) / ".cursor/mcp.json"
    cursor.write_text('{"mcpServers": {"x": }')
    code, _, err = run_import(env, "-o", str(tmp_path / "c.json"))
    assert code == 2
    assert f"cannot read {cursor}: not valid JSON: Expecting value at line 1, column 22" in err
    assert "--from" in err
    assert not (tmp_path / "c.json").exists()


def test_import_through_the_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = fake_home(tmp_path)
    for name, value in env.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(env.project)
    assert cli.main(["import", "--from", "cursor"]) == 0  # to the default config, places.default_config()
    from mcp_patchbay import places

    written = json.loads(places.default_config().read_text())
    assert list(written["mcpServers"]) == ["time", "github"]
    assert cli.main(["import", "--from", "cursor"]) == 2  # it exists now
