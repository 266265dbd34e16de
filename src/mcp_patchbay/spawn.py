"""Starting upstream processes; light enough to run before the MCP SDK is imported.

Importing the SDK takes the proxy most of a second. ``prespawn`` starts every stdio
upstream first, right after the config is read, so their own start (an interpreter,
node, imports) runs beside ours on another core instead of after it. Only the process
starts early: the MCP handshake still waits for the client's ``initialize``, so the
upstream still learns what the client can do. POSIX only; elsewhere, and for every
restart, ``stdio.stdio_transport`` spawns as usual.

Reading the config takes pydantic, which is itself a tenth of a second. ``early`` comes
before that: it reads the file with ``json`` alone and starts the plain stdio entries
(no ``${VAR}``, no ``cwd``, only keys it knows). That is a guess; the validated config
is the authority: ``settle`` keeps a process only if its validated entry would launch
exactly what was launched, and stops every other. A process started early carries
:data:`EARLY_MARK` in its environment, and a patchbay that finds the mark in its own
never starts anything early, so an entry that launches patchbay with this same config
(refused by the config check) cannot chain launches before the check has run.

This module imports nothing heavy (no SDK, no pydantic) on purpose.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

logger = logging.getLogger("mcp_patchbay.spawn")


class StdioEntry(Protocol):
    """What ``prespawn`` needs of a config entry (``config.ServerEntry``)."""

    @property
    def name(self) -> str: ...


def child_environment(extra: Mapping[str, str] | None) -> dict[str, str]:
    """The proxy's own environment plus the entry's ``env``: what users expect to reach their servers."""
    return {**os.environ, **(extra or {})}


def resolve_command(command: str, env: Mapping[str, str]) -> str:
    """The command on the child's PATH, else beside our own interpreter.

    The second place lets a config name tools installed in patchbay's own virtualenv
    (``mcp-server-time``) without that virtualenv being activated by the client.
    """
    if Path(command).name != command:
        return command
    search = os.pathsep.join([env.get("PATH", os.defpath), str(Path(sys.executable).parent)])
    return shutil.which(command, path=search) or command


def popen(command: str, args: Sequence[str], env: Mapping[str, str] | None, cwd: str | None) -> subprocess.Popen[bytes]:
    """Start one upstream in its own session (process group), pipes on all three streams."""
    full_env = child_environment(env)
    return subprocess.Popen(
        [resolve_command(command, full_env), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=full_env,
        cwd=cwd,
        start_new_session=True,
    )


def prespawn(
    entries: Iterable[object], started: dict[str, subprocess.Popen[bytes]] | None = None
) -> dict[str, subprocess.Popen[bytes]]:
    """Start every runnable stdio entry not in ``started`` yet; what cannot start is left to the normal path."""
    started = dict(started or {})
    if sys.platform == "win32":
        return started
    for entry in entries:
        spec = getattr(entry, "spec", None)
        if spec is None or getattr(spec, "transport", None) != "stdio" or spec.disabled:
            continue
        name: str = getattr(entry, "name", "")
        if name in started:
            continue
        try:
            started[name] = popen(spec.command, spec.args, spec.env, spec.cwd)
        except (OSError, ValueError) as exc:
            logger.debug("could not prespawn '%s' (%s); it will be started the usual way", name, exc)
    return started


EARLY_MARK = "MCP_PATCHBAY_EARLY"
"""Set in the environment of a process ``early`` started; a patchbay seeing it starts nothing early."""

EARLY_KEYS = frozenset(
    {"command", "args", "env", "type", "disabled", "timeout", "tool_timeouts", "tools", "max_concurrency"}
    | {"description", "autoApprove", "alwaysAllow", "icon"}
)
"""The entry keys ``early`` knows (a subset of what the config accepts); an entry with another is left alone."""

Launch = tuple[str, tuple[str, ...], tuple[tuple[str, str], ...]]
"""What was launched: command, arguments, the entry's own environment (sorted)."""


@dataclass
class Early:
    """A process ``early`` started, and what it launched, for ``settle`` to compare."""

    process: subprocess.Popen[bytes]
    launched: Launch


def _object(value: object) -> dict[str, object] | None:
    return cast("dict[str, object]", value) if isinstance(value, dict) else None


def _plain_stdio(value: object) -> Launch | None:
    """The launch of an entry that needs nothing but JSON to start, else None."""
    entry = _object(value)
    if entry is None or not set(entry) <= EARLY_KEYS or entry.get("disabled", False) is not False:
        return None
    command, args, env = entry.get("command"), entry.get("args", []), _object(entry.get("env", {}))
    if entry.get("type", "stdio") != "stdio" or not isinstance(command, str) or not command.strip():
        return None
    if not isinstance(args, list) or env is None:
        return None
    texts: list[object] = [command, *cast("list[object]", args), *env, *env.values()]
    if not all(isinstance(t, str) and "${" not in t and "\x00" not in t for t in texts):
        return None
    arguments = tuple(cast("list[str]", args))
    return command, arguments, tuple(sorted(cast("dict[str, str]", env).items()))


def early(path: str) -> dict[str, Early]:
    """Start the config file's plain stdio entries before the config is validated (see the module doc)."""
    if sys.platform == "win32" or os.environ.get(EARLY_MARK):
        return {}
    try:
        data = _object(json.loads(Path(path).read_text(encoding="utf-8-sig")))
    except (OSError, ValueError):
        return {}  # the config check says what is wrong
    entries: dict[str, object] = {}
    seen: set[str] = set()
    for shape in ("mcpServers", "servers"):
        servers = _object((data or {}).get(shape))
        for name, entry in (servers or {}).items():
            if name in seen:  # in both shapes: the config check decides
                entries.pop(name, None)
            else:
                entries[name] = entry
            seen.add(name)
    started: dict[str, Early] = {}
    for name, entry in entries.items():
        launch = _plain_stdio(entry)
        if launch is None:
            continue
        command, args, env = launch
        try:
            process = popen(command, args, {**dict(env), EARLY_MARK: "1"}, None)
        except (OSError, ValueError) as exc:
            logger.debug("could not start '%s' early (%s); it will be started the usual way", name, exc)
            continue
        started[name] = Early(process, launch)
    return started


class SpawnEntry(Protocol):
    """What ``settle`` needs of a config entry (``config.ServerEntry``)."""

    @property
    def name(self) -> str: ...

    @property
    def spec(self) -> Any: ...


def settle(started: dict[str, Early], entries: Iterable[SpawnEntry]) -> dict[str, subprocess.Popen[bytes]]:
    """The processes ``early`` started that the validated config launches exactly; the others are stopped."""
    kept: dict[str, subprocess.Popen[bytes]] = {}
    for entry in entries:
        spec = entry.spec
        launched = started.get(entry.name)
        if launched is None or spec is None or getattr(spec, "transport", None) != "stdio" or spec.disabled:
            continue
        if spec.cwd is None and (spec.command, tuple(spec.args), tuple(sorted(spec.env.items()))) == launched.launched:
            kept[entry.name] = started.pop(entry.name).process
    stale = {name: item.process for name, item in started.items()}
    if stale:
        logger.debug("stopping %d process(es) started before the config check: %s", len(stale), ", ".join(stale))
    discard(stale)
    started.clear()
    return kept


def discard(processes: dict[str, subprocess.Popen[bytes]]) -> None:
    """Stop prespawned processes nobody adopted (their entry was removed, or the proxy is ending)."""
    for process in processes.values():
        if process.poll() is None:
            try:
                os.killpg(process.pid, 15)
            except OSError:
                process.kill()
        for pipe in (process.stdin, process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
    processes.clear()
