"""``mcp-patchbay install`` / ``uninstall`` on the fake home of test_import: the proxy's entry written
into each client's own file with its other keys, key order, indent and (TOML) comments kept; an
uninstall that gives the file back byte for byte, or takes out only our entry after an edit."""

from __future__ import annotations

import io
import json
import tomllib
from pathlib import Path

import pytest

from mcp_patchbay.cli import install
from mcp_patchbay.clients.launch import Launch
from mcp_patchbay.clients.locations import Environment
from tests.test_import import CODEX_TOML, fake_home, run_import, write

PROGRAM = "/opt/patchbay/bin/mcp-patchbay"
FILES = {
    "claude-desktop": ".config/Claude/claude_desktop_config.json",
    "claude-code": ".claude.json",
    "cursor": ".cursor/mcp.json",
    "vscode": ".config/Code/User/mcp.json",
    "windsurf": ".codeium/windsurf/mcp_config.json",
    "gemini": ".gemini/settings.json",
    "codex": ".codex/config.toml",
}


@pytest.fixture(autouse=True)
def _records_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))  # installs.json (places.data_dir)


@pytest.fixture
def env(tmp_path: Path) -> Environment:
    environment = fake_home(tmp_path)
    code, _, err = run_import(environment, "-o", str(tmp_path / "patchbay.json"))
    assert code == 0, err
    return environment


def run(env: Environment, command: str, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    config = (
        []
        if command == "uninstall" or "--config" in argv
        else ["--config", str(Path(env.env["HOME"]).parent / "patchbay.json")]
    )
    code = install.main(command, [*argv, *config], env=env, launch=Launch(PROGRAM), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def home_file(env: Environment, client: str) -> Path:
    return Path(env.env["HOME"]) / FILES[client]


def servers_in(env: Environment, client: str) -> dict[str, dict[str, object]]:
    path = home_file(env, client)
    if client == "codex":
        return tomllib.loads(path.read_text())["mcp_servers"]
    return json.loads(path.read_text())["servers" if client == "vscode" else "mcpServers"]


@pytest.mark.parametrize("client", list(FILES))
@pytest.mark.parametrize("replace", [False, True])
def test_install_then_uninstall_gives_every_file_back_byte_for_byte(
    env: Environment, client: str, replace: bool
) -> None:
    path = home_file(env, client)
    before = path.read_bytes() if path.exists() else None
    code, out, err = run(env, "install", client, *(["--replace"] if replace else []))
    assert (code, err) == (0, ""), err
    entry = servers_in(env, client)["patchbay"]
    assert entry["command"] == PROGRAM
    assert entry["args"] == [str(Path(env.env["HOME"]).parent / "patchbay.json")]
    assert f"runs: {PROGRAM} " in out
    code, out, err = run(env, "uninstall", client)
    assert (code, err) == (0, "")
    if before is None:
        assert not path.exists()
        assert "install had created it" in out
    else:
        assert path.read_bytes() == before
        assert "byte for byte" in out
        assert not list(path.parent.glob(path.name + ".patchbay-backup-*"))  # the backup was the file restored


def test_the_other_keys_and_the_file_s_indent_are_kept(env: Environment) -> None:
    assert run(env, "install", "claude-desktop")[0] == 0
    desktop = json.loads(home_file(env, "claude-desktop").read_text())
    assert list(desktop) == ["globalShortcut", "mcpServers", "preferences"]
    assert list(desktop["mcpServers"]) == ["time", "github", "patchbay"]
    assert run(env, "install", "cursor")[0] == 0
    cursor = home_file(env, "cursor").read_text()
    assert cursor.startswith('{\n    "mcpServers": {\n        "time": {')  # four spaces, as it was
    assert run(env, "install", "vscode", "--scope", "project")[0] == 0
    vscode = (Path(str(env.project)) / ".vscode/mcp.json").read_text()
    assert vscode.startswith('{\n\t"inputs": [')  # tabs, and "inputs" still first
    assert json.loads(vscode)["servers"]["patchbay"] == {
        "type": "stdio",
        "command": PROGRAM,
        "args": [vscode_config(env)],
    }


def vscode_config(env: Environment) -> str:
    return str(Path(env.env["HOME"]).parent / "patchbay.json")


def test_codex_gets_required_and_a_startup_timeout_with_its_comments_and_order_kept(env: Environment) -> None:
    assert run(env, "install", "codex")[0] == 0
    text = home_file(env, "codex").read_text()
    assert text.startswith(CODEX_TOML.split("[profiles.fast]")[0])  # comments, tables, spacing as they were
    assert text.endswith('[profiles.fast]\nmodel = "gpt-mini"\n')
    entry = tomllib.loads(text)["mcp_servers"]["patchbay"]
    assert entry["required"] is True
    assert entry["startup_timeout_sec"] >= 30
    assert list(tomllib.loads(text)["mcp_servers"]) == ["time", "linear", "patchbay"]


def test_replace_takes_out_only_what_the_config_serves_under_the_same_name_and_content(env: Environment) -> None:
    code, out, _ = run(env, "install", "cursor", "--replace")
    assert code == 0
    # Cursor's time is the config's time; its github (docker) is the config's github-cursor, not its github.
    assert list(servers_in(env, "cursor")) == ["github", "patchbay"]
    assert "took out the servers the proxy now serves: time" in out
    assert run(env, "install", "codex", "--replace")[0] == 0
    assert list(servers_in(env, "codex")) == ["patchbay"]
    assert "# Codex, as its user keeps it" in home_file(env, "codex").read_text()


def test_an_edit_after_install_is_kept_and_only_our_entry_goes(env: Environment) -> None:
    path = home_file(env, "claude-desktop")
    assert run(env, "install", "claude-desktop", "--replace")[0] == 0
    data = json.loads(path.read_text())
    assert list(data["mcpServers"]) == ["patchbay"]
    data["globalShortcut"] = "Alt+Space"  # the user (or the app) changes the file meanwhile
    data["mcpServers"]["notes"] = {"command": "notes-server"}
    write(path, data)
    code, out, _ = run(env, "uninstall", "claude-desktop")
    assert code == 0
    assert "changed since install: took out only the proxy's entry 'patchbay'; put back: time, github" in out
    after = json.loads(path.read_text())
    assert after["globalShortcut"] == "Alt+Space"
    original = json.loads(json.dumps({"time": after["mcpServers"]["time"], "github": after["mcpServers"]["github"]}))
    assert list(after["mcpServers"]) == ["notes", "time", "github"]
    assert original["time"]["command"] == "mcp-server-time"
    assert original["github"]["env"] == {"GITHUB_TOKEN": "t"}


def test_a_toml_edit_after_install_is_kept_with_its_comments(env: Environment) -> None:
    path = home_file(env, "codex")
    assert run(env, "install", "codex")[0] == 0
    path.write_text(path.read_text().replace('model = "o4-mini"  # the model', 'model = "o5"  # changed'))
    assert run(env, "uninstall", "codex")[0] == 0
    text = path.read_text()
    assert 'model = "o5"  # changed' in text
    assert "patchbay" not in text
    assert text == CODEX_TOML.replace('model = "o4-mini"  # the model', 'model = "o5"  # changed')


def test_permissions_are_kept_and_a_backup_is_taken(env: Environment) -> None:
    path = home_file(env, "gemini")
    path.chmod(0o640)
    before = path.read_bytes()
    code, out, _ = run(env, "install", "gemini")
    assert code == 0
    assert path.stat().st_mode & 0o777 == 0o640
    (backup,) = path.parent.glob("settings.json.patchbay-backup-*")
    assert backup.read_bytes() == before
    assert f"backup of the file before: {backup}" in out
    assert "run 'gemini mcp list' in a folder Gemini trusts: it should say patchbay: ... Connected" in out


def test_installing_twice_is_nothing_to_do_and_a_second_config_updates_the_entry(
    env: Environment, tmp_path: Path
) -> None:
    path = home_file(env, "claude-code")
    original = path.read_bytes()
    assert run(env, "install", "claude-code")[0] == 0
    code, out, _ = run(env, "install", "claude-code")
    assert code == 1 and "nothing to do" in out
    other = tmp_path / "other.json"
    other.write_text('{"mcpServers": {}}')
    code, out, _ = run(env, "install", "claude-code", "--config", str(other))
    assert code == 0 and out.startswith("Updated the proxy in Claude Code")
    assert servers_in(env, "claude-code")["patchbay"]["args"] == [str(other)]
    assert run(env, "uninstall", "claude-code")[0] == 0  # both installs undone, newest first
    assert path.read_bytes() == original


def test_an_import_after_install_skips_the_proxy_s_own_entry(env: Environment, tmp_path: Path) -> None:
    assert run(env, "install", "claude-code")[0] == 0
    code, out, _ = run_import(env, "--from", "claude-code", "-o", str(tmp_path / "again.json"))
    assert code == 0
    assert "Skipped: patchbay in Claude Code ~/.claude.json: launches mcp-patchbay itself" in out


def test_refusals_say_why_and_change_nothing(env: Environment, tmp_path: Path) -> None:
    code, _, err = run(env, "install", "cursor", "--config", str(tmp_path / "missing.json"))
    assert code == 2 and "no patchbay config at" in err and "run 'mcp-patchbay import' first" in err
    code, _, err = run(env, "install", "cursor", "--name", "time")
    assert code == 2 and "already has a server named 'time' that is not patchbay" in err
    code, _, err = run(env, "install", "cursor", "--name", "two words")
    assert code == 2 and "use only letters, digits" in err
    code, _, err = run(env, "install", "cursor", "--name", "x" * 50)
    assert code == 2 and "is too long: Claude Code allows 64" in err
    code, _, err = run(env, "install", "codex", "--scope", "project")
    assert code == 2 and "Codex has no project file" in err
    code, _, err = run(env, "install", "notepad")
    assert code == 2 and "unknown client 'notepad'" in err
    gemini = home_file(env, "gemini")
    gemini.write_text('{\n  // mine\n  "mcpServers": {}\n}\n')
    code, _, err = run(env, "install", "gemini")
    assert code == 2 and "has comments" in err and '"command": "/opt/patchbay/bin/mcp-patchbay"' in err
    assert gemini.read_text() == '{\n  // mine\n  "mcpServers": {}\n}\n'
    code, out, _ = run(env, "uninstall", "cursor")
    assert code == 1 and "nothing to do" in out


def test_uninstall_without_a_record_takes_out_an_entry_that_runs_patchbay(env: Environment) -> None:
    path = home_file(env, "windsurf")
    write(path, {"mcpServers": {"patchbay": {"command": PROGRAM, "args": ["/c.json"]}, "x": {"command": "x"}}})
    code, out, _ = run(env, "uninstall", "windsurf")
    assert code == 0 and "Took the proxy's entry 'patchbay' out of" in out
    assert json.loads(path.read_text()) == {"mcpServers": {"x": {"command": "x"}}}
