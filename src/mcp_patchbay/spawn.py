"""Starting upstream processes; light enough to run before the MCP SDK is imported.

Importing the SDK takes the proxy most of a second. ``prespawn`` starts every stdio
upstream first, right after the config is read, so their own start (an interpreter,
node, imports) runs beside ours on another core instead of after it. Only the process
starts early: the MCP handshake still waits for the client's ``initialize``, so the
upstream still learns what the client can do. POSIX only; elsewhere, and for every
restart, ``stdio.stdio_transport`` spawns as usual.

This module imports nothing heavy (no SDK, no pydantic) on purpose.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

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


def prespawn(entries: Iterable[object]) -> dict[str, subprocess.Popen[bytes]]:
    """Start every runnable stdio entry now; what cannot start is left to the normal path to report."""
    if sys.platform == "win32":
        return {}
    started: dict[str, subprocess.Popen[bytes]] = {}
    for entry in entries:
        spec = getattr(entry, "spec", None)
        if spec is None or getattr(spec, "transport", None) != "stdio" or spec.disabled:
            continue
        name: str = getattr(entry, "name", "")
        try:
            started[name] = popen(spec.command, spec.args, spec.env, spec.cwd)
        except (OSError, ValueError) as exc:
            logger.debug("could not prespawn '%s' (%s); it will be started the usual way", name, exc)
    return started


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
