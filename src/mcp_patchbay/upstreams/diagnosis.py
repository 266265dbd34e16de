"""What a person at a terminal is told of a server that cannot serve: the words of ``check``,
``tools``, ``call`` and ``login``, not the model's.

The model's texts (``errors``, ``upstreams.availability``) say what to do next in a model's terms
("Tell the user to fix the server's 'command'") and never show paths or URLs. A person needs
the opposite: which command was not found and where it was looked for, which URL refused
the connection and on what address, which key of which file to change, and what to run
next. ``diagnose`` builds that (``Diagnosis``: a label, why, what next; ``text`` in one line) from
the entry, its state, the error's code and its developer detail.
Pure: values in, values out (the search path is read from the environment given).
"""

from __future__ import annotations

import os
import re
import shlex
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcp_patchbay.errors.tree import Code
from mcp_patchbay.redaction import redact
from mcp_patchbay.upstreams.availability import State
from mcp_patchbay.upstreams.command_lookup import search_path

if TYPE_CHECKING:
    from mcp_patchbay.config import RemoteSpec, ServerEntry, StdioSpec
    from mcp_patchbay.errors.tree import PatchbayError
    from mcp_patchbay.upstreams.upstream import Upstream
__all__ = ["Diagnosis", "diagnose", "of_upstream"]

_OK = frozenset(s.value for s in (State.READY, State.DISABLED, State.NOT_STARTED, State.IDLE))

MAX_PATH_SHOWN = 300
"""Characters of a search path shown before it is cut."""


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """A server's state as a person reads it: ``label`` (ready, failed, needs sign-in, ...), why
    (None when ready), and what to run or change next (None when nothing)."""

    name: str
    state: str
    """``upstreams.availability.State``'s value (``ready``, ``failed``, ``needs_sign_in``, ...)."""
    label: str
    why: str | None = None
    next: str | None = None

    @property
    def ok(self) -> bool:
        """Serving, or not running by the config's choice (disabled, lazy not needed yet, stopped idle)."""
        return self.state in _OK

    def line(self) -> str:
        return f"{self.label}: {self.why}" if self.why else self.label

    def text(self) -> str:
        """The whole of it in one line: why, then what next ("" when ready)."""
        if self.state in _OK and self.state != State.DISABLED.value:
            return ""
        return self.line() + (f"; {self.next}" if self.next else "")

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "state": self.state, "label": self.label, "problem": self.why, "next": self.next}


def of_upstream(upstream: Upstream, config_path: Path | None = None) -> Diagnosis:
    """``diagnose`` for a running upstream."""
    return diagnose(
        upstream.entry,
        upstream.state,
        upstream.error,
        connect_timeout=upstream.settings.connect_timeout,
        config_path=config_path,
        login_hint=upstream.gate.login_command if upstream.gate is not None else None,
        restarting=upstream.first_ready_after is not None,
    )


def diagnose(
    entry: ServerEntry,
    state: State,
    error: PatchbayError | None,
    *,
    connect_timeout: float,
    config_path: Path | None = None,
    environ: Mapping[str, str] = os.environ,
    login_hint: str | None = None,
    restarting: bool = False,
) -> Diagnosis:
    """``entry``'s server in a person's words: what failed, where it was looked for, what next."""
    name = entry.name
    where = f" in {config_path}" if config_path is not None else ""

    def fix(key: str, hint: str = "") -> str:
        return f'fix the entry "{name}"{where} ("{key}"{": " + hint if hint else ""})'

    def said(label: str, why: str | None = None, next_step: str | None = None) -> Diagnosis:
        return Diagnosis(name, state.value, label, why, next_step)

    if state is State.READY:
        return said("ready")
    if state is State.DISABLED:
        return said("disabled", 'its entry says "disabled": true')
    if state is State.NOT_STARTED:
        return said("not started", "it starts when needed (lazy), listed meanwhile as it last listed")
    if state is State.IDLE:
        return said("stopped idle", "it had nothing to do for its idle_stop; it starts again when needed")
    if state is State.INVALID:
        return said("config error", entry.problem, f'fix the entry "{name}"{where}, then run this again')
    if state is State.SIGN_IN:
        return said("needs sign-in", "it asks you to sign in", f"run: {login_hint or f'mcp-patchbay login {name}'}")
    spec = entry.spec
    if error is None or spec is None:
        why = f"it did not finish starting within {connect_timeout:g} s"
        return said("not ready", why, "run: mcp-patchbay check (it waits for every server)")
    label = "restarting" if restarting else "failed"
    if hasattr(spec, "command"):
        why, next_step = _stdio(spec, error, connect_timeout, environ, fix)  # pyright: ignore[reportArgumentType]
    else:
        why, next_step = _remote(name, spec, error, connect_timeout, fix)  # pyright: ignore[reportArgumentType]
    return said(label, why, next_step)


def _shown(folders: list[str]) -> str:
    text = os.pathsep.join(folders)
    return text if len(text) <= MAX_PATH_SHOWN else text[: MAX_PATH_SHOWN - 1] + "…"


def _one_line(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _stdio(
    spec: StdioSpec, error: PatchbayError, connect_timeout: float, environ: Mapping[str, str], fix: Callable[..., str]
) -> tuple[str, str]:
    detail = error.detail or ""
    command = spec.command
    by_hand = _one_line(redact(shlex.join([command, *spec.args])))
    if error.code is Code.SPAWN_FAILED:
        if detail.startswith("NotADirectoryError"):
            return f"its working directory does not exist: {spec.cwd}", fix("cwd")
        if detail.startswith("PermissionError"):
            return f"its command '{command}' is not executable", f"{fix('command')}, or make it executable"
        if detail.startswith("FileNotFoundError"):
            if Path(command).name != command:
                return f"its command was not found: {command}", fix("command")
            folders = search_path({**environ, **(spec.env or {})})
            return (
                f"its command '{command}' was not found on PATH ({_shown(folders[:-1])}), nor in {folders[-1]}",
                f"install {command}, or {fix('command', 'a full path')}",
            )
        return f"its command '{command}' could not start ({_one_line(detail)})", fix("command")
    if error.code is Code.CONNECTION_FAILED and detail.startswith("exit code"):
        code, _, tail = detail.replace("; no stderr output", "").partition("; last stderr lines:")
        lines = [line.strip() for line in tail.splitlines() if line.strip()]
        last = f"; the last line on its stderr: {_one_line(lines[-1])}" if lines else ", writing nothing on stderr"
        return f"it exited during startup ({code}){last}", f"run it by hand to see why: {by_hand}"
    if error.code is Code.TIMEOUT:
        return (
            f"it started but did not complete the MCP handshake within {connect_timeout:g} s: is it an MCP "
            "server on stdio?",
            f"run it by hand to see what it does: {by_hand}; or raise patchbay.connect_timeout",
        )
    return _plain(error.message), "run: mcp-patchbay check"


def _remote(
    name: str, spec: RemoteSpec, error: PatchbayError, connect_timeout: float, fix: Callable[..., str]
) -> tuple[str, str]:
    url = redact(spec.url)
    parts = urllib.parse.urlsplit(spec.url)
    address = f"{parts.hostname}:{parts.port or (443 if parts.scheme == 'https' else 80)}"
    detail = error.detail or ""
    status = detail.split()[1] if detail.startswith("HTTP ") and len(detail.split()) > 1 else ""
    if error.code is Code.CONNECTION_FAILED:
        if any(words in detail for words in ("Name or service not known", "nodename nor servname", "getaddrinfo")):
            return f"the host of {url} could not be found (DNS)", fix("url")
        if "refused" in detail.lower() or "All connection attempts failed" in detail:
            return f"{url} refused the connection (nothing listening on {address}?)", f"start it, or {fix('url')}"
        return f"could not connect to {url}: {_exception_text(detail)}", f"check that it is up, or {fix('url')}"
    if error.code in (Code.AUTH_FAILED, Code.AUTH_REQUIRED):
        return (
            f"{url} refused the credentials ({(status and f'HTTP {status}') or _plain(error.message)})",
            f"{fix('headers')}, or run: mcp-patchbay login {name} if it signs in with OAuth",
        )
    if error.code is Code.TIMEOUT:
        return (
            f"{url} did not answer within {connect_timeout:g} s",
            "check that it is up, or raise patchbay.connect_timeout",
        )
    if status in ("404", "405", "406", "415", "501") or (error.code is Code.PROTOCOL_ERROR and status):
        return f"{url} answered HTTP {status}: is it an MCP endpoint?", fix("url", "often /mcp, or /sse")
    if status.startswith("5"):
        return f"{url} had an internal error (HTTP {status})", "try again later, or tell whoever runs it"
    return _plain(error.message), "run: mcp-patchbay check"


_TO_THE_MODEL = ("tell the user", "retry", "try again", "use another tool", "the proxy keeps retrying", "call ")


def _plain(message: str) -> str:
    """A message for the model without its sentences addressed to the model."""
    sentences = [s.strip() for s in message.replace("\n", " ").split(". ") if s.strip()]
    kept = [s for s in sentences if not s.lower().startswith(_TO_THE_MODEL)]
    return ". ".join(kept or sentences[:1]).rstrip(".")


def _exception_text(detail: str) -> str:
    """``ConnectError('All connection attempts failed')`` (an exception's repr) as its message."""
    match = re.fullmatch(r"\w+\((['\"])(.*)\1\)", detail.strip(), re.DOTALL)
    return _one_line(match.group(2) if match else detail, 160)
