"""What a person at a terminal is told of a server that cannot serve: the words of ``check``,
``tools`` and ``call``, not the model's.

The model's texts (``errors``, ``availability``) say what to do next in a model's terms
("Tell the user to fix the server's 'command'") and never show paths or URLs. A person needs
the opposite: which command was not found and where it was looked for, which URL refused
the connection, which key of which file to change, and what to run next. ``for_person``
builds that from the entry, the error's code and its developer detail. Pure: values in,
values out (the search path is read from the environment given).
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from mcp_patchbay.availability import State
from mcp_patchbay.errors import Code
from mcp_patchbay.spawn import search_path

if TYPE_CHECKING:
    from mcp_patchbay.config import RemoteSpec, ServerEntry, StdioSpec
    from mcp_patchbay.errors import PatchbayError

__all__ = ["for_person"]

MAX_PATH_SHOWN = 300
"""Characters of a search path shown before it is cut."""


def _at(server: str, field: str) -> str:
    return f"the {field!r} of server {server!r}"


def _shown(folders: list[str]) -> str:
    text = os.pathsep.join(folders)
    return text if len(text) <= MAX_PATH_SHOWN else text[: MAX_PATH_SHOWN - 1] + "…"


def for_person(
    entry: ServerEntry,
    state: State,
    error: PatchbayError | None,
    *,
    connect_timeout: float,
    environ: Mapping[str, str] = os.environ,
    login_hint: str | None = None,
) -> str:
    """Why ``entry``'s server cannot serve, and what to do, in a person's words ("" when it can)."""
    key = entry.name
    if state is State.READY:
        return ""
    if state is State.DISABLED:
        return 'disabled ("disabled": true in its entry)'
    if state is State.INVALID:
        return f"not started: {entry.problem}"
    if state is State.SIGN_IN:
        return f"needs you to sign in: run {login_hint or f'mcp-patchbay login {entry.name}'}"
    spec = entry.spec
    if error is None or spec is None:
        return "did not answer before the check gave up" if state is State.STARTING else state.value
    if hasattr(spec, "command"):
        return _stdio(key, spec, error, connect_timeout, environ)  # pyright: ignore[reportArgumentType]
    return _remote(key, spec, error, connect_timeout)  # pyright: ignore[reportArgumentType]


def _stdio(key: str, spec: StdioSpec, error: PatchbayError, connect_timeout: float, environ: Mapping[str, str]) -> str:
    detail = error.detail or ""
    command = spec.command
    if error.code is Code.SPAWN_FAILED:
        if detail.startswith("NotADirectoryError"):
            return f"its working directory {spec.cwd!r} does not exist: fix {_at(key, 'cwd')}"
        if detail.startswith("PermissionError"):
            return f"{command!r} is not executable: chmod +x it, or fix {_at(key, 'command')}"
        if detail.startswith("FileNotFoundError"):
            if Path(command).name != command:
                return f"{command!r} does not exist: fix {_at(key, 'command')}"
            env = {**environ, **(spec.env or {})}
            return (
                f"command {command!r} not found: looked in PATH ({_shown(search_path(env)[:-1])}) and beside "
                f"patchbay ({search_path(env)[-1]}); install it, or give its full path in {_at(key, 'command')}"
            )
        return f"{command!r} could not start ({detail}): check server {key!r}'s entry"
    if error.code is Code.CONNECTION_FAILED and "exit code" in detail:
        said = detail.split("last stderr lines:", 1)
        tail = " / ".join(line.strip() for line in said[1].strip().splitlines()[-3:]) if len(said) > 1 else ""
        code = detail.split(";", 1)[0]
        return f"{command!r} exited during startup ({code})" + (f"; its last words: {tail}" if tail else "")
    if error.code is Code.TIMEOUT:
        return (
            f"{command!r} started but did not complete the MCP handshake within {connect_timeout:g}s "
            f"(patchbay.connect_timeout): is it an MCP server on stdio? Try running it: {command} "
            + " ".join(spec.args)
        ).rstrip()
    return f"{command!r}: {error.message}"


def _remote(key: str, spec: RemoteSpec, error: PatchbayError, connect_timeout: float) -> str:
    url = spec.url
    parts = urllib.parse.urlsplit(url)
    address = f"{parts.hostname}:{parts.port or (443 if parts.scheme == 'https' else 80)}"
    detail = error.detail or ""
    if error.code is Code.CONNECTION_FAILED:
        if "Name or service not known" in detail or "nodename nor servname" in detail or "getaddrinfo" in detail:
            return f"{url}: the host {parts.hostname!r} could not be found (DNS): fix {_at(key, 'url')}"
        return (
            f"{url} refused the connection (nothing listening on {address}?): start the server, "
            f"or fix {_at(key, 'url')}"
        )
    if error.code is Code.AUTH_FAILED:
        return (
            f"{url} refused the credentials ({detail or 'HTTP 401/403'}): check {_at(key, 'headers')}, or run "
            f"mcp-patchbay login {key} if it signs in with OAuth"
        )
    if error.code is Code.TIMEOUT:
        return f"{url} did not answer within {connect_timeout:g}s (patchbay.connect_timeout)"
    status = detail.split()[1] if detail.startswith("HTTP ") and len(detail.split()) > 1 else ""
    if status in ("404", "405", "406", "415", "501") or (error.code is Code.PROTOCOL_ERROR and status):
        return (
            f"{url} answered HTTP {status}: is it an MCP endpoint? Check {_at(key, 'url')} (the path, often "
            '/mcp, or /sse with "type": "sse")'
        )
    if status.startswith("5"):
        return f"{url} had an internal error (HTTP {status}): try again later, or tell whoever runs it"
    return f"{url}: {error.message}"
