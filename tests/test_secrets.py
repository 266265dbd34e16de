"""``${secret:NAME}``: config values from the OS keyring, the ``secret`` command, and ``import``
moving values that look like secrets into the keyring.

Each test sets the keyring's backend itself (``keyring.set_keyring``): an in-memory one, or
one that cannot hold secrets as a headless Linux has (keyring's ``fail`` backend).
"""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import keyring
import pytest
from keyring.backend import KeyringBackend
from keyring.backends import fail
from keyring.errors import PasswordDeleteError

from mcp_patchbay.cli import importing, logs
from mcp_patchbay.cli import secret as secret_cli
from mcp_patchbay.clients import secret_values
from mcp_patchbay.clients.locations import Environment
from mcp_patchbay.config import ConfigError, RemoteSpec, StdioSpec, load_config, parse_config
from mcp_patchbay.config.secretstore import SERVICE
from mcp_patchbay.redaction import redact

PATH = Path("/virtual/patchbay.json").resolve()


class MemoryKeyring(KeyringBackend):
    """A keyring in a dict, for tests."""

    priority = 5  # pyright: ignore[reportAssignmentType]

    def __init__(self) -> None:
        super().__init__()
        self.values: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.values.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.values[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        if (service, username) not in self.values:
            raise PasswordDeleteError(username)
        del self.values[(service, username)]


@pytest.fixture
def memory() -> Iterator[MemoryKeyring]:
    before = keyring.get_keyring()
    backend = MemoryKeyring()
    keyring.set_keyring(backend)
    yield backend
    keyring.set_keyring(before)


@pytest.fixture
def no_keyring() -> Iterator[None]:
    before = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())
    yield
    keyring.set_keyring(before)


def config(servers: dict[str, Any], **top: Any) -> Any:
    return parse_config(json.dumps({"mcpServers": servers, **top}), PATH, environ={"HOME": "/home/u"})


# --- ${secret:NAME} in a config -----------------------------------------------------------


def test_a_secret_is_resolved_from_the_keyring_wherever_a_variable_works(memory: MemoryKeyring) -> None:
    memory.values[(SERVICE, "gh")] = "ghp_0123456789abcdefghij"
    memory.values[(SERVICE, "docs.token")] = "docs-secret-value"
    memory.values[(SERVICE, "client")] = "client-secret-value"
    loaded = config(
        {
            "github": {"command": "npx", "args": ["--token=${secret:gh}"], "env": {"GITHUB_TOKEN": "${secret:gh}"}},
            "docs": {
                "url": "https://docs.example/mcp",
                "headers": {"Authorization": "Bearer ${secret:docs.token}"},
                "oauth": {"client_id": "c", "client_secret": "${secret:client}"},
            },
        }
    )
    github, docs = loaded.servers
    assert isinstance(github.spec, StdioSpec), github.problem
    assert github.spec.env == {"GITHUB_TOKEN": "ghp_0123456789abcdefghij"}
    assert github.spec.args == ("--token=ghp_0123456789abcdefghij",)
    assert isinstance(docs.spec, RemoteSpec), docs.problem
    assert docs.spec.headers == {"Authorization": "Bearer docs-secret-value"}
    assert docs.spec.oauth and docs.spec.oauth.client_secret == "client-secret-value"


def test_a_secrets_value_is_not_expanded_again_and_env_variables_still_are(memory: MemoryKeyring) -> None:
    memory.values[(SERVICE, "odd")] = "a${HOME}b"
    entry = config({"s": {"command": "x", "env": {"A": "${secret:odd}", "B": "${HOME}/x"}}}).servers[0]
    assert isinstance(entry.spec, StdioSpec)
    assert entry.spec.env == {"A": "a${HOME}b", "B": "/home/u/x"}


def test_a_missing_secret_disables_the_entry_and_says_how_to_set_it(memory: MemoryKeyring) -> None:
    entry = config({"github": {"command": "x", "env": {"GITHUB_TOKEN": "${secret:gh}"}}}).servers[0]
    assert entry.spec is None and entry.problem is not None
    assert entry.problem.startswith("mcpServers.github.env.GITHUB_TOKEN: secret 'gh' is not in the keyring")
    assert "mcp-patchbay secret set gh" in entry.problem and "${VAR}" in entry.problem


def test_no_keyring_backend_is_a_mistake_naming_the_alternative_never_plain_text(no_keyring: None) -> None:
    entry = config({"github": {"command": "x", "env": {"GITHUB_TOKEN": "${secret:gh}"}}}).servers[0]
    assert entry.spec is None and entry.problem is not None
    assert entry.problem.startswith("mcpServers.github.env.GITHUB_TOKEN: secret 'gh' cannot be read")
    assert "no keyring backend is available" in entry.problem
    assert "environment variable" in entry.problem and "${VAR}" in entry.problem
    # In the gateway object a mistake is the file's: raised with the file and the key path.
    with pytest.raises(ConfigError) as raised:
        config({}, gateway={"oauth": {"issuer": "${secret:issuer}"}})
    assert str(raised.value).startswith(f"{PATH}: gateway.oauth.issuer: secret 'issuer' cannot be read")


class BrokenKeyring(MemoryKeyring):
    """A keyring whose backend fails as a locked Secret Service or a dead D-Bus does."""

    def get_password(self, service: str, username: str) -> str | None:
        raise OSError("cannot connect to /run/user/1000/bus: No such file or directory")


def test_a_keyring_that_fails_is_named_by_kind_and_its_words_go_to_the_log(caplog: pytest.LogCaptureFixture) -> None:
    """An entry's problem can reach the model as its server's status: the backend's own words
    (paths, buses) stay in the log; the entry is held, the config still loads."""
    before = keyring.get_keyring()
    keyring.set_keyring(BrokenKeyring())
    try:
        with caplog.at_level(logging.WARNING):
            entry = config({"github": {"command": "x", "env": {"GITHUB_TOKEN": "${secret:gh}"}}}).servers[0]
    finally:
        keyring.set_keyring(before)
    assert entry.spec is None and entry.problem is not None
    assert "secret 'gh' cannot be read: the keyring refused to read it (OSError" in entry.problem
    assert "/run/user" not in entry.problem
    assert "/run/user/1000/bus" in caplog.text


def test_a_bad_secret_name_is_said(memory: MemoryKeyring) -> None:
    entry = config({"s": {"command": "x", "env": {"A": "${secret:}", "B": "${secret:a b}"}}}).servers[0]
    assert entry.problem is not None
    assert "mcpServers.s.env.A: ${secret:}: expected a secret's name" in entry.problem
    assert "mcpServers.s.env.B: ${secret:a b}: a secret's name takes letters" in entry.problem


def test_a_resolved_secret_never_reaches_a_log_line(memory: MemoryKeyring) -> None:
    memory.values[(SERVICE, "plain")] = "nothing-says-i-am-secret-42"
    config({"s": {"command": "x", "args": ["${secret:plain}"]}})
    assert redact("spawned: x nothing-says-i-am-secret-42 --flag") == "spawned: x *** --flag"
    record = logging.LogRecord(
        "mcp_patchbay.x", logging.WARNING, __file__, 1, "arguments: %s", ("nothing-says-i-am-secret-42",), None
    )
    for formatter in (logs._RedactingFormatter(), logs._JsonFormatter()):  # what every log line goes through
        line = formatter.format(record)
        assert "nothing-says-i-am-secret-42" not in line and "arguments: ***" in line


def test_keyring_is_not_imported_on_startup_without_a_secret(tmp_path: Path) -> None:
    file = tmp_path / "patchbay.json"
    file.write_text(json.dumps({"mcpServers": {"s": {"command": "x", "env": {"A": "${HOME}"}}}}))
    code = (
        "import sys; from mcp_patchbay.config import load_config; load_config(sys.argv[1]); "
        "print('keyring' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(file)], check=False, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip() == "False", done.stderr
    version = [sys.executable, "-X", "importtime", "-m", "mcp_patchbay", "--version"]
    done = subprocess.run(version, check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "keyring" not in done.stderr


# --- mcp-patchbay secret -------------------------------------------------------------------


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def secret(argv: list[str], stdin: io.StringIO | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        code = secret_cli.main(argv, stdin or io.StringIO(), out, err)
    except secret_cli.UsageError as exc:
        return secret_cli.EXIT_USAGE, out.getvalue(), str(exc)
    return code, out.getvalue(), err.getvalue()


def test_secret_set_reads_stdin_whole_and_delete_removes_it(memory: MemoryKeyring) -> None:
    code, out, _ = secret(["set", "gh"], io.StringIO("ghp_value-from-stdin\n"))
    assert code == 0 and memory.values[(SERVICE, "gh")] == "ghp_value-from-stdin"
    pem = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADAN\nBgkqhkiG9w0B\n-----END PRIVATE KEY-----"
    code, _, _ = secret(["set", "key"], io.StringIO(pem + "\n"))
    assert code == 0 and memory.values[(SERVICE, "key")] == pem  # a key file's lines are kept
    code, _, err = secret(["set", "big"], io.StringIO("x" * (secret_cli.MAX_VALUE_CHARS + 1)))
    assert code == 1 and "over 65,536 characters" in err and (SERVICE, "big") not in memory.values
    assert "${secret:gh}" in out and "ghp_value" not in out
    code, out, _ = secret(["delete", "gh"])
    assert code == 0 and (SERVICE, "gh") not in memory.values and "Deleted" in out
    code, _, err = secret(["delete", "gh"])
    assert code == 1 and "no secret 'gh'" in err


def test_secret_set_on_a_terminal_asks_with_a_hidden_prompt(
    memory: MemoryKeyring, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []

    def getpass(prompt: str, stream: Any = None) -> str:
        asked.append(prompt)
        return "typed-secret\n"

    monkeypatch.setattr("getpass.getpass", getpass)
    code, _, _ = secret(["set", "gh"], Tty(""))
    assert code == 0 and asked == ["Value of secret 'gh' (not shown): "]
    assert memory.values[(SERVICE, "gh")] == "typed-secret"


def test_secret_set_refuses_an_empty_value_a_bad_name_and_a_value_as_an_argument(memory: MemoryKeyring) -> None:
    code, _, err = secret(["set", "gh"], io.StringIO("\n"))
    assert code == 1 and "empty" in err and not memory.values
    code, _, err = secret(["set", "a b"])
    assert code == 2 and "a secret's name takes" in err
    code, _, err = secret(["set", "gh", "ghp_on-the-command-line"])
    assert code == 2 and "unrecognized arguments" in err and not memory.values


def test_secret_set_without_a_keyring_names_the_alternative(no_keyring: None) -> None:
    code, _, err = secret(["set", "gh"], io.StringIO("value\n"))
    assert code == 1
    assert "nothing stored: no keyring backend is available" in err and "${VAR}" in err


def test_secret_list_names_the_configs_secrets_and_whether_each_is_set(tmp_path: Path, memory: MemoryKeyring) -> None:
    file = tmp_path / "patchbay.json"
    env = {"A": "${secret:gh}", "B": "x-${secret:slack}-y", "C": "${secret:gh}"}
    file.write_text(json.dumps({"mcpServers": {"s": {"command": "x", "env": env}}}))
    memory.values[(SERVICE, "gh")] = "ghp_not-shown-anywhere"
    code, out, _ = secret(["list", str(file)])
    assert code == 1 and "ghp_not-shown" not in out
    assert out.splitlines() == ["  gh  set", "  slack  missing: mcp-patchbay secret set slack"]
    memory.values[(SERVICE, "slack")] = "xoxb-whatever"
    assert secret(["list", "-c", str(file)])[0] == 0


def test_secret_run_answers_usage_mistakes_with_status_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert secret_cli.run("secret", []) == 2
    assert "required: set|delete|list" in capsys.readouterr().err
    assert secret_cli.run("secret", ["--help"]) == 0
    assert "${secret:NAME}" in capsys.readouterr().out


# --- import moves values that look like secrets -----------------------------------------------

GH_TOKEN = "ghp_" + "a1B2c3D4e5" * 4
SLACK = "xoxb-1234567890-abcdefghij"
DOCS_KEY = "docs-api-key-0123456789"


def client_home(tmp_path: Path) -> Environment:
    """Claude Desktop's file with a token in env, a key in a header, a token in args, and references."""
    home = tmp_path / "home"
    file = home / ".config/Claude/claude_desktop_config.json"
    file.parent.mkdir(parents=True)
    servers = {
        "github": {"command": "npx", "args": ["server-github"], "env": {"GITHUB_TOKEN": GH_TOKEN, "DEBUG": "true"}},
        "slack": {"command": "slack-mcp", "args": ["--token", SLACK, "--verbose"], "env": {"TOKEN_FILE": "/a/b"}},
        "docs": {"type": "http", "url": "https://docs.example/mcp", "headers": {"X-Api-Key": DOCS_KEY}},
        "ref": {"command": "x", "env": {"API_KEY": "${API_KEY}"}, "args": ["${secret:already}"]},
    }
    file.write_text(json.dumps({"mcpServers": servers}))
    return Environment("linux", {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}, tmp_path / "project")


def import_(env: Environment, *argv: str, stdin: io.StringIO | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = importing.main(["--from", "claude-desktop", *argv], env, out, err, stdin or io.StringIO())
    return code, out.getvalue(), err.getvalue()


def test_import_moves_secrets_into_the_keyring_and_leaves_references(tmp_path: Path, memory: MemoryKeyring) -> None:
    target = tmp_path / "patchbay.json"
    code, out, err = import_(client_home(tmp_path), "-o", str(target), "--secrets", "keyring")
    assert code == 0, err
    assert memory.values == {
        (SERVICE, "github.GITHUB_TOKEN"): GH_TOKEN,
        (SERVICE, "slack.arg1"): SLACK,
        (SERVICE, "docs.X-Api-Key"): DOCS_KEY,
    }
    written = json.loads(target.read_text())["mcpServers"]
    assert written["github"]["env"] == {"GITHUB_TOKEN": "${secret:github.GITHUB_TOKEN}", "DEBUG": "true"}
    assert written["slack"]["args"] == ["--token", "${secret:slack.arg1}", "--verbose"]
    assert written["slack"]["env"] == {"TOKEN_FILE": "/a/b"}  # a path, not a secret
    assert written["docs"]["headers"] == {"X-Api-Key": "${secret:docs.X-Api-Key}"}
    assert written["ref"] == {"command": "x", "args": ["${secret:already}"], "env": {"API_KEY": "${API_KEY}"}} | {
        "origin": written["ref"]["origin"]
    }
    for value in (GH_TOKEN, SLACK, DOCS_KEY):
        assert value not in out and value not in target.read_text()
    assert "Moved into the keyring" in out and "github env GITHUB_TOKEN as ${secret:github.GITHUB_TOKEN}" in out
    github = next(e for e in load_config(target, environ={}).servers if e.name == "github")
    assert isinstance(github.spec, StdioSpec) and github.spec.env["GITHUB_TOKEN"] == GH_TOKEN  # loads back


def test_a_second_import_never_replaces_a_secret_another_config_reads(tmp_path: Path, memory: MemoryKeyring) -> None:
    memory.values[(SERVICE, "github.GITHUB_TOKEN")] = "ghp_the_first_configs_token_0000"
    memory.values[(SERVICE, "slack.arg1")] = SLACK  # the same value: its name is used again
    target = tmp_path / "second.json"
    code, out, err = import_(client_home(tmp_path), "-o", str(target), "--secrets", "keyring")
    assert code == 0, err
    assert memory.values[(SERVICE, "github.GITHUB_TOKEN")] == "ghp_the_first_configs_token_0000"
    assert memory.values[(SERVICE, "github.GITHUB_TOKEN-2")] == GH_TOKEN
    written = json.loads(target.read_text())["mcpServers"]
    assert written["github"]["env"]["GITHUB_TOKEN"] == "${secret:github.GITHUB_TOKEN-2}"
    assert written["slack"]["args"][1] == "${secret:slack.arg1}"
    assert "as ${secret:github.GITHUB_TOKEN-2}" in out


def test_import_asks_on_a_terminal_and_keeps_them_when_told_no(tmp_path: Path, memory: MemoryKeyring) -> None:
    env = client_home(tmp_path)
    code, out, _ = import_(env, "-o", str(tmp_path / "no.json"), stdin=Tty("n\n"))
    assert code == 0 and "Move them into the keyring" in out and not memory.values
    assert GH_TOKEN in (tmp_path / "no.json").read_text()
    code, out, _ = import_(env, "-o", str(tmp_path / "yes.json"), stdin=Tty("\n"))  # the default: yes
    assert code == 0 and memory.values[(SERVICE, "github.GITHUB_TOKEN")] == GH_TOKEN
    assert GH_TOKEN not in (tmp_path / "yes.json").read_text()


def test_import_in_a_script_keeps_them_and_says_how_to_move_them(tmp_path: Path, memory: MemoryKeyring) -> None:
    code, out, _ = import_(client_home(tmp_path), "-o", str(tmp_path / "p.json"))
    assert code == 0 and not memory.values
    assert "Kept in the file: github env GITHUB_TOKEN" in out and "--secrets keyring" in out
    assert GH_TOKEN not in out


@pytest.mark.parametrize("choice", [[], ["--secrets", "keyring"], ["--secrets", "keep"]])
def test_import_dry_run_says_what_would_move_and_never_prints_a_value(
    tmp_path: Path, memory: MemoryKeyring, choice: list[str]
) -> None:
    code, out, _ = import_(client_home(tmp_path), "--dry-run", *choice, "-o", str(tmp_path / "p.json"))
    assert code == 0 and not memory.values and not (tmp_path / "p.json").exists()
    for value in (GH_TOKEN, SLACK, DOCS_KEY):
        assert value not in out
    if choice[-1:] == ["keep"]:
        assert '"GITHUB_TOKEN": "***"' in out
    else:
        assert "Would move into the keyring: github env GITHUB_TOKEN as ${secret:github.GITHUB_TOKEN}" in out
        assert '"GITHUB_TOKEN": "${secret:github.GITHUB_TOKEN}"' in out


def test_import_moving_secrets_without_a_keyring_writes_nothing(tmp_path: Path, no_keyring: None) -> None:
    code, _, err = import_(client_home(tmp_path), "-o", str(tmp_path / "p.json"), "--secrets", "keyring")
    assert code == 2 and not (tmp_path / "p.json").exists()
    assert "no keyring backend is available" in err and "${VAR}" in err


@pytest.mark.parametrize(
    ("key", "value", "moved"),
    [
        ("OPENAI_API_KEY", "sk-proj-0123456789abcdefghijklmn", True),
        ("DB_PASSWORD", "hunter2hunter2", True),
        ("LINEAR_ACCESS_TOKEN", "plain-opaque-value", True),
        ("GOOGLE_APPLICATION_CREDENTIALS", "/home/u/key.json", False),
        ("AWS_ACCESS_KEY_ID", "AKIAABCDEFGHIJKLMNOP", True),  # by its shape, though the name says id
        ("KEYBOARD_LAYOUT", "dvorak-programmer", False),
        ("USE_TOKEN", "true", False),
        ("SERVER_URL", "https://x.example", False),
        ("NOTE", "see xoxb-1234567890-abcdefghij here", True),
    ],
)
def test_what_looks_like_a_secret_in_env(key: str, value: str, moved: bool) -> None:
    found = secret_values.find([("s", {"env": {key: value}})])
    assert bool(found) is moved, found


def test_an_oauth_client_secret_and_the_same_token_twice() -> None:
    entry: dict[str, Any] = {
        "url": "https://x.example/mcp",
        "headers": {"Authorization": f"Bearer {GH_TOKEN}"},
        "oauth": {"client_id": "app", "client_secret": "oauth-client-secret-1"},
    }
    other: dict[str, Any] = {"command": "x", "env": {"GH": GH_TOKEN}}
    found = secret_values.find([("docs", entry), ("other", other)])
    assert [(c.where, c.name) for c in found] == [
        ("docs headers Authorization", "docs.Authorization"),
        ("docs oauth client_secret", "docs.client_secret"),
        ("other env GH", "docs.Authorization"),  # one value, one secret
    ]
    secret_values.put_references(entry, [c for c in found if c.server == "docs"])
    assert entry["headers"] == {"Authorization": "Bearer ${secret:docs.Authorization}"}
    assert entry["oauth"]["client_secret"] == "${secret:docs.client_secret}"


def test_import_on_a_terminal_without_a_keyring_keeps_them_and_names_the_alternative(
    tmp_path: Path, no_keyring: None
) -> None:
    code, out, _ = import_(client_home(tmp_path), "-o", str(tmp_path / "p.json"), stdin=Tty("y\n"))
    assert code == 0 and "They stay in the file: no keyring backend is available" in out and "${VAR}" in out
    assert "Move them into the keyring" not in out  # not asked: there is nowhere to move them
    assert GH_TOKEN in (tmp_path / "p.json").read_text()


@pytest.mark.anyio
async def test_a_reload_reads_the_file_off_the_event_loop(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Reading may ask the keyring (a locked one waits for its user): other requests go on meanwhile."""
    import threading

    import anyio

    from mcp_patchbay.config import watch

    released = threading.Event()
    order: list[str] = []

    def slow_load(path: Path) -> object:
        released.wait(5)  # bounded: a reload on the loop would hold it here for the whole 5 s
        order.append("read")
        return object()

    monkeypatch.setattr(watch, "load_config", slow_load)
    applied: list[object] = []
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch.reload, tmp_path / "p.json", applied.append)
            await anyio.sleep(0.01)
            order.append("loop")
            released.set()
    assert order == ["loop", "read"] and len(applied) == 1


def test_import_onto_an_existing_config_without_force_leaves_the_keyring_alone(
    tmp_path: Path, memory: MemoryKeyring
) -> None:
    target = tmp_path / "patchbay.json"
    target.write_text('{"mcpServers": {}}')
    memory.values[(SERVICE, "github.GITHUB_TOKEN")] = "the token the existing config uses"
    code, _, err = import_(client_home(tmp_path), "-o", str(target), "--secrets", "keyring")
    assert code == 2 and "already exists; nothing written" in err
    assert memory.values == {(SERVICE, "github.GITHUB_TOKEN"): "the token the existing config uses"}
