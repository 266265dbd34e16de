"""Starting the config's plain stdio upstreams before the config is validated, and settling them.

Reading the config takes pydantic, which is itself a tenth of a second. ``early`` comes
before that: it reads the file with ``json`` alone and starts the plain stdio entries
(no ``${VAR}``, no ``cwd``, only keys it knows). That is a guess; the validated config
is the authority: ``settle`` keeps a process only if its validated entry would launch
exactly what was launched, and stops every other. A process started early carries
:data:`EARLY_MARK` in its environment, and a patchbay that finds the mark in its own
never starts anything early, so an entry that launches patchbay with this same config
(refused by the config check) cannot chain launches before the check has run.

What the proxy holds for its own use (``config.withheld``) is computed from the same JSON, and
``settle`` keeps a process only if it withheld exactly what the validated entry withholds.
The processes start as every upstream does (``spawn.popen``: their own group, the watchdog).

This module imports nothing heavy (no SDK, no pydantic) on purpose.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import cast

from mcp_patchbay.bounded_read import read_config
from mcp_patchbay.config.keys import IGNORED_ENTRY_KEYS, STDIO_ENTRY_KEYS
from mcp_patchbay.config.withheld import Held, asked, held
from mcp_patchbay.config.withheld import withheld as withheld_names
from mcp_patchbay.upstreams.spawn import SpawnEntry, batch, discard, popen

logger = logging.getLogger(__name__)

EARLY_MARK = "MCP_PATCHBAY_EARLY"
"""Set in the environment of a process ``early`` started; a patchbay seeing it starts nothing early."""

EARLY_KEYS = (STDIO_ENTRY_KEYS - {"cwd"}) | {"type"} | IGNORED_ENTRY_KEYS
"""The entry keys ``early`` knows (a subset of what the config accepts); an entry with another is left alone."""

Launch = tuple[str, tuple[str, ...], tuple[tuple[str, str], ...], tuple[str, ...]]
"""What was launched: command, arguments, the entry's own environment, the names withheld (sorted)."""


@dataclass
class Early:
    """A process ``early`` started, and what it launched, for ``settle`` to compare."""

    process: subprocess.Popen[bytes]
    launched: Launch


def _object(value: object) -> dict[str, object] | None:
    return cast("dict[str, object]", value) if isinstance(value, dict) else None


def _plain_stdio(value: object, holding: Held, default_start: object = "eager") -> Launch | None:
    """The launch of an entry that needs nothing but JSON to start, and starts now (not lazy), else None;
    ``holding``: what the proxy holds for its own use, withheld from it unless it names it."""
    entry = _object(value)
    if entry is None or not set(entry) <= EARLY_KEYS or entry.get("disabled", False) is not False:
        return None
    if entry.get("start", default_start) != "eager":
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
    withheld = tuple(sorted(withheld_names(os.environ, holding, asked(entry))))
    return command, arguments, tuple(sorted(cast("dict[str, str]", env).items())), withheld


def early(path: str) -> dict[str, Early]:
    """Start the config file's plain stdio entries before the config is validated (see the module doc)."""
    if sys.platform == "win32" or os.environ.get(EARLY_MARK):
        return {}
    try:
        data = _object(json.loads(read_config(path)))  # bounded: never waits on a FIFO nor reads /dev/zero
    except (OSError, ValueError):
        return {}  # the config check says what is wrong
    data = data or {}
    holding = held(data, os.environ)
    if not holding.complete:  # what a ${secret:NAME} holds is known once the keyring is read
        logger.debug("nothing started early: the config holds a keyring secret for the proxy's own use")
        return {}
    entries: dict[str, object] = {}
    seen: set[str] = set()
    default_start = (_object(data.get("patchbay")) or {}).get("start", "eager")
    for shape in ("mcpServers", "servers"):
        servers = _object(data.get(shape))
        for name, entry in (servers or {}).items():
            if name in seen:  # in both shapes: the config check decides
                entries.pop(name, None)
            else:
                entries[name] = entry
            seen.add(name)
    started: dict[str, Early] = {}
    with batch():
        _start_early(entries, started, default_start, holding)
    return started


def _start_early(entries: dict[str, object], started: dict[str, Early], default_start: object, holding: Held) -> None:
    for name, entry in entries.items():
        launch = _plain_stdio(entry, holding, default_start)
        if launch is None:
            continue
        command, args, env, withheld = launch
        try:
            process = popen(command, args, {**dict(env), EARLY_MARK: "1"}, None, withheld=withheld, server=name)
        except (OSError, ValueError) as exc:
            logger.debug("could not start '%s' early (%s); it will be started the usual way", name, exc)
            continue
        started[name] = Early(process, launch)


def settle(started: dict[str, Early], entries: Iterable[SpawnEntry]) -> dict[str, subprocess.Popen[bytes]]:
    """The processes ``early`` started that the validated config launches exactly; the others are stopped."""
    kept: dict[str, subprocess.Popen[bytes]] = {}
    for entry in entries:
        spec = entry.spec
        launched = started.get(entry.name)
        if launched is None or spec is None or spec.transport != "stdio" or spec.disabled:
            continue
        launch = (spec.command, tuple(spec.args), tuple(sorted(spec.env.items())), tuple(sorted(spec.withheld)))
        if spec.cwd is None and launch == launched.launched:
            kept[entry.name] = started.pop(entry.name).process
    stale = {name: item.process for name, item in started.items()}
    if stale:
        logger.debug("stopping %d process(es) started before the config check: %s", len(stale), ", ".join(stale))
    discard(stale)
    started.clear()
    return kept
