"""``diagnosis.diagnose``: what a person is told of a server that cannot serve (check, tools, call)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mcp_patchbay.config import ServerEntry, parse_config
from mcp_patchbay.errors.tree import Code, NotDelivered, UpstreamError
from mcp_patchbay.upstreams.availability import State
from mcp_patchbay.upstreams.diagnosis import diagnose


def for_person(*args: Any, **kwargs: Any) -> str:
    """``diagnose`` in one line, as check, login, tools and call show it."""
    return diagnose(*args, **kwargs).text()


def entry(**fields: Any) -> ServerEntry:
    return parse_config(json.dumps({"mcpServers": {"s": fields}}), Path("/c.json"), {}).servers[0]


def test_a_command_not_found_names_it_and_every_place_it_was_looked_for() -> None:
    error = UpstreamError(Code.SPAWN_FAILED, "model text", detail="FileNotFoundError(2, 'No such file')")
    said = for_person(
        entry(command="mcp-nope"), State.FAILED, error, connect_timeout=30, environ={"PATH": "/a/bin:/b/bin"}
    )
    assert said.startswith("failed: its command 'mcp-nope' was not found on PATH (/a/bin:/b/bin), nor in ")
    assert said.endswith('; install mcp-nope, or fix the entry "s" ("command": a full path)')
    assert "Tell the user" not in said


@pytest.mark.parametrize(
    ("fields", "code", "detail", "expected"),
    [
        (
            {"command": "/opt/x"},
            Code.SPAWN_FAILED,
            "FileNotFoundError(2, '')",
            'its command was not found: /opt/x; fix the entry "s" ("command")',
        ),
        (
            {"command": "/etc/passwd"},
            Code.SPAWN_FAILED,
            "PermissionError(13, '')",
            "its command '/etc/passwd' is not executable",
        ),
        (
            {"command": "x", "cwd": "/no/dir"},
            Code.SPAWN_FAILED,
            "NotADirectoryError()",
            "its working directory does not exist: /no/dir",
        ),
        (
            {"command": "python3"},
            Code.CONNECTION_FAILED,
            "exit code 3; last stderr lines:\n    Traceback\n    ImportError: no foo",
            "it exited during startup (exit code 3); the last line on its stderr: ImportError: no foo; run it by hand",
        ),
        (
            {"command": "sleep", "args": ["9"]},
            Code.TIMEOUT,
            "TimeoutError()",
            "did not complete the MCP handshake within 30 s",
        ),
        (
            {"url": "http://127.0.0.1:9/mcp"},
            Code.CONNECTION_FAILED,
            "ConnectError('All connection attempts failed')",
            "http://127.0.0.1:9/mcp refused the connection (nothing listening on 127.0.0.1:9?)",
        ),
        (
            {"url": "https://x.invalid/mcp"},
            Code.CONNECTION_FAILED,
            "ConnectError('[Errno -2] Name or service not known')",
            "the host of https://x.invalid/mcp could not be found (DNS)",
        ),
        ({"url": "https://h/mcp"}, Code.AUTH_FAILED, "HTTP 401", "refused the credentials (HTTP 401)"),
        ({"url": "https://h/"}, Code.PROTOCOL_ERROR, "HTTP 405", "answered HTTP 405: is it an MCP endpoint?"),
        ({"url": "https://h/mcp"}, Code.SERVER_ERROR, "HTTP 503", "had an internal error (HTTP 503)"),
    ],
)
def test_each_failure_in_a_persons_words(fields: dict[str, Any], code: Code, detail: str, expected: str) -> None:
    error = NotDelivered(code, "model text", detail=detail)
    assert expected in for_person(entry(**fields), State.FAILED, error, connect_timeout=30)


def test_states_that_are_no_failure() -> None:
    assert for_person(entry(command="x"), State.READY, None, connect_timeout=30) == ""
    assert for_person(entry(command="x", disabled=True), State.DISABLED, None, connect_timeout=30) == (
        'disabled: its entry says "disabled": true'
    )
    signin = for_person(
        entry(url="https://h/mcp"), State.SIGN_IN, None, connect_timeout=30, login_hint="mcp-patchbay login s"
    )
    assert signin == "needs sign-in: it asks you to sign in; run: mcp-patchbay login s"
