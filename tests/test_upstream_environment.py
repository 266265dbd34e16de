"""What of the proxy's environment a stdio upstream gets: not what the proxy holds for its own use.

The hardening finding: ``docs/GATEWAY.md`` keeps the gateway's bearer tokens in environment
variables, and every stdio upstream inherited them, so any upstream could call the gateway as
any member. Each test starts real processes that print the names in their environment.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_patchbay.config import StdioSpec, load_config
from mcp_patchbay.config.withheld import asked, held, withheld
from mcp_patchbay.upstreams import spawn
from mcp_patchbay.upstreams.early_start import EARLY_MARK, Early, early, settle
from mcp_patchbay.upstreams.spawn import prespawn

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX spawning; Windows shares child_environment")

PRINT_NAMES = "import json, os; print(json.dumps(sorted(os.environ)), flush=True)"
ALICE = "alice-token-0123456789abcdef"
CI = "ci-token-0123456789abcdef"
STATE_KEY = "state-key-0123456789abcdef0123456789"
DOCS = "docs-token-0123456789"
CLIENT_SECRET = "client-secret-0123456789"


def printer(**extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": ["-c", PRINT_NAMES], **extra}


@pytest.fixture(autouse=True)
def proxy_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(EARLY_MARK, raising=False)
    for name, value in {
        "ALICE_TOKEN": ALICE,
        "CI_TOKEN": CI,
        "PATCHBAY_STATE_KEY": STATE_KEY,
        "DOCS_TOKEN": DOCS,
        "DOCS_CLIENT_SECRET": CLIENT_SECRET,
        "COPY_OF_ALICE": ALICE,  # the same secret under a name the config never reads
        "PLAIN_SETTING": "reaches every server",
    }.items():
        monkeypatch.setenv(name, value)


def write_config(tmp_path: Path, servers: dict[str, Any]) -> Path:
    path = tmp_path / "patchbay.json"
    config = {
        "mcpServers": {
            **servers,
            "docs": {
                "url": "https://docs.example/mcp",
                "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"},
                "oauth": {"client_id": "patchbay", "client_secret": "${DOCS_CLIENT_SECRET}"},
            },
        },
        "gateway": {"tokens": {"alice": "${ALICE_TOKEN}", "ci": "${CI_TOKEN}"}},
    }
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def names_printed(processes: dict[str, subprocess.Popen[bytes]]) -> dict[str, set[str]]:
    """What each process printed (its environment's names); each is reaped and forgotten."""
    printed: dict[str, set[str]] = {}
    try:
        for name, process in processes.items():
            out, _ = process.communicate(timeout=30)
            printed[name] = set(json.loads(out))
    finally:
        spawn.discard(processes)
    return printed


HELD = {"ALICE_TOKEN", "CI_TOKEN", "PATCHBAY_STATE_KEY", "DOCS_TOKEN", "DOCS_CLIENT_SECRET", "COPY_OF_ALICE"}


def test_stdio_upstreams_never_inherit_the_gateways_tokens_or_other_secrets_the_proxy_holds(tmp_path: Path) -> None:
    config = load_config(
        write_config(
            tmp_path,
            {
                "plain": printer(),
                "asks": printer(env={"ALICE_TOKEN": "${ALICE_TOKEN}"}),
                "refers": printer(args=["-c", PRINT_NAMES, "${CI_TOKEN}"]),
            },
        )
    )
    printed = names_printed(prespawn(config.servers))
    assert not printed["plain"] & HELD
    assert "PLAIN_SETTING" in printed["plain"]
    assert printed["asks"] & HELD == {"ALICE_TOKEN"}  # named in its env, so given
    assert printed["refers"] & HELD == {"CI_TOKEN"}  # named in its args, so inherited


def test_an_upstream_started_again_gets_the_same_environment(tmp_path: Path) -> None:
    from mcp_patchbay.upstreams.transports.stdio import stdio_link

    config = load_config(write_config(tmp_path, {"plain": printer()}))
    spec = config.servers[0].spec
    assert isinstance(spec, StdioSpec)
    # The names come back as a notification, through the transport's reader like any message.
    say = "import json, os; print(json.dumps({'jsonrpc': '2.0', 'method': 'notifications/message', "
    say += "'params': {'level': 'info', 'data': sorted(os.environ)}}), flush=True)"
    spec = spec.model_copy(update={"args": ("-c", say)})

    async def first_message() -> set[str]:
        with anyio.fail_after(30):
            async with stdio_link("plain", spec) as link:
                message = await link.read.receive()
        assert not isinstance(message, Exception)
        return set(message.message.params["data"])  # type: ignore[union-attr]

    names = anyio.run(first_message)
    assert not names & HELD
    assert "PLAIN_SETTING" in names


@pytest.fixture
def started() -> Iterator[dict[str, Early]]:
    processes: dict[str, Early] = {}
    yield processes
    spawn.discard({name: item.process for name, item in processes.items()})


def test_the_early_start_withholds_the_same_and_the_checked_config_keeps_it(
    tmp_path: Path, started: dict[str, Early]
) -> None:
    path = write_config(tmp_path, {"plain": printer(), "asks": printer(env={"ALICE_TOKEN": "given"})})
    started.update(early(str(path)))
    assert set(started) == {"plain", "asks"}
    kept = settle(started, load_config(path).servers)
    assert set(kept) == {"plain", "asks"}  # the check withholds what the early start withheld
    printed = names_printed(kept)
    assert not printed["plain"] & HELD
    assert printed["asks"] & HELD == {"ALICE_TOKEN"}


def test_no_early_start_when_the_proxy_holds_a_keyring_secret(tmp_path: Path, started: dict[str, Early]) -> None:
    path = tmp_path / "patchbay.json"
    config = {"mcpServers": {"plain": printer()}, "gateway": {"tokens": {"alice": "${secret:alice}"}}}
    path.write_text(json.dumps(config), encoding="utf-8")
    started.update(early(str(path)))
    assert started == {}  # its value is known only once the keyring is read; the config check's start withholds it


def test_the_names_withheld_are_logged_never_their_values(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    config = load_config(write_config(tmp_path, {"plain": printer()}))
    with caplog.at_level(logging.DEBUG, logger="mcp_patchbay.upstreams.spawn"):
        names_printed(prespawn(config.servers))
    lines = [r.getMessage() for r in caplog.records if "'plain'" in r.getMessage()]
    assert lines
    assert all(name in lines[0] for name in HELD)
    assert not any(secret in line for line in lines for secret in (ALICE, CI, STATE_KEY, DOCS, CLIENT_SECRET))


def test_what_the_proxy_holds_is_read_from_the_files_json_as_variables_expand_it() -> None:
    data: dict[str, Any] = {
        "gateway": {
            "url": "https://${GATEWAY_HOST}/mcp",
            "tokens": {"a": "${UNSET_TOKEN:-fallback-token-0123456789}"},
            "request_state_keys": ["${STATE:-}"],
        },
        "mcpServers": {
            "api": {"url": "https://${API_HOST}/mcp", "headers": {"X-Key": "key ${API_KEY}"}},
            "tool": printer(env={"OWN": "${OWN}"}, args=["${ARG}"], cwd="${WHERE}"),
        },
    }
    environ = {"GATEWAY_HOST": "gateway.example", "API_HOST": "api.example.com", "API_KEY": "api-key-0123456789"}
    holding = held(data, environ)
    assert holding.complete
    assert holding.names == {"PATCHBAY_STATE_KEY", "GATEWAY_HOST", "UNSET_TOKEN", "STATE", "API_HOST", "API_KEY"}
    # A default stands in as the value; a host name is no secret to look for under other names.
    assert holding.values == {"fallback-token-0123456789", "api-key-0123456789", "key api-key-0123456789"}
    assert asked(data["mcpServers"]["tool"]) == {"OWN", "ARG", "WHERE"}
    elsewhere = {**environ, "SAME_KEY": "api-key-0123456789", "SAME_HOST": "api.example.com", "SHORT": ""}
    assert withheld(elsewhere, holding, frozenset({"API_KEY"})) == (holding.names - {"API_KEY"}) | {"SAME_KEY"}


def test_a_keyring_secret_the_proxy_holds_is_known_only_to_the_config_check() -> None:
    holding = held({"mcpServers": {"api": {"url": "https://a.example", "headers": {"A": "${secret:a}"}}}}, {})
    assert not holding.complete
    assert holding.with_values({"from-the-keyring-0123", "short"}).values == {"from-the-keyring-0123"}


def test_a_copy_of_a_keyring_secret_the_gateway_holds_is_withheld(tmp_path: Path) -> None:
    import keyring

    from mcp_patchbay.config import parse_config
    from mcp_patchbay.config.secretstore import SERVICE
    from tests.test_secrets import MemoryKeyring

    before = keyring.get_keyring()
    backend = MemoryKeyring()
    backend.values[(SERVICE, "alice")] = ALICE
    keyring.set_keyring(backend)
    try:
        text = json.dumps({"mcpServers": {"plain": printer()}, "gateway": {"tokens": {"alice": "${secret:alice}"}}})
        config = parse_config(text, tmp_path / "patchbay.json", environ={"COPY_OF_ALICE": ALICE, "PATH": "/bin"})
    finally:
        keyring.set_keyring(before)
    spec = config.servers[0].spec
    assert isinstance(spec, StdioSpec)
    assert "COPY_OF_ALICE" in spec.withheld
    assert "PATH" not in spec.withheld
