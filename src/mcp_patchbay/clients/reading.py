"""Reading the servers out of the clients' files: what ``import`` finds, where, and what it cannot use.

:func:`survey` reads every place of the clients asked for (``locations``), each file once,
normalizes each entry (``entries``) and sorts the results: servers found, entries skipped (with
why: an entry that launches patchbay itself, a transport patchbay does not speak), files that
cannot be read (with the problem) and every place looked in.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePath

from mcp_patchbay.bounded_read import CLIENT_FILE_BYTES, FileRefused, read_text
from mcp_patchbay.clients.entries import Normalized, normalize
from mcp_patchbay.clients.formats import FormatError, objects_at, parse
from mcp_patchbay.clients.locations import Environment, Place, places_of
from mcp_patchbay.config.selfref import launches_patchbay

__all__ = ["Found", "Skipped", "Survey", "Unreadable", "read_place", "survey"]


@dataclass(frozen=True)
class Found:
    """A server entry of a client, as patchbay's config would take it."""

    place: Place
    name: str
    normalized: Normalized


@dataclass(frozen=True)
class Skipped:
    place: Place
    name: str
    reason: str


@dataclass(frozen=True)
class Unreadable:
    file: PurePath
    problem: str


@dataclass
class Survey:
    found: list[Found] = field(default_factory=list[Found])
    skipped: list[Skipped] = field(default_factory=list[Skipped])
    unreadable: list[Unreadable] = field(default_factory=list[Unreadable])
    looked: list[tuple[Place, bool]] = field(default_factory=list[tuple[Place, bool]])
    """Every place read, with whether it held a servers object."""


def _is_patchbay_program(command: str) -> bool:
    """A command that is a path to patchbay's program under another name (a symlink)."""
    path = Path(command)
    if not path.is_absolute() or not path.exists():
        return False
    try:
        real = os.path.realpath(path)
    except OSError:
        return False
    return Path(real).name.lower().removesuffix(".exe") == "mcp-patchbay"


def self_launching(entry: dict[str, object]) -> bool:
    """Whether a normalized stdio entry starts patchbay itself (``install``'s own entry among them)."""
    command, args = entry.get("command"), entry.get("args", [])
    if not isinstance(command, str) or not isinstance(args, list):
        return False
    words = [str(a) for a in args]  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    return launches_patchbay(command, words) or _is_patchbay_program(command)


def read_place(place: Place, text: str, env: Environment, survey: Survey) -> None:
    """Add what the place holds in ``text`` (its file's text) to ``survey``."""
    try:
        data = parse(text, place.format)
    except FormatError as exc:
        survey.unreadable.append(Unreadable(place.file, str(exc)))
        return
    servers = objects_at(data, place.keys)
    survey.looked.append((place, servers is not None))
    if servers is None:
        return
    project = str(env.project) if place.scope == "project" else None
    for name, raw in servers.items():
        normalized = normalize(place.client, raw, project=project, home=str(env.home))
        if normalized.entry is None:
            survey.skipped.append(Skipped(place, name, normalized.skipped or "cannot be used"))
        elif normalized.transport == "stdio" and self_launching(normalized.entry):
            survey.skipped.append(Skipped(place, name, "launches mcp-patchbay itself"))
        else:
            survey.found.append(Found(place, name, normalized))


def survey(env: Environment, clients: Iterable[str]) -> Survey:
    """Read every place of ``clients``, in the table's order (see the module doc)."""
    result = Survey()
    texts: dict[PurePath, str | None] = {}
    for client in clients:
        for place in places_of(client, env):
            if place.file not in texts:
                texts[place.file] = _read(place.file, result)
            text = texts[place.file]
            if text is None:
                result.looked.append((place, False))
            else:
                read_place(place, text, env, result)
    # A file read for two places (Claude Code's) is reported unreadable once.
    result.unreadable = list({u.file: u for u in result.unreadable}.values())
    return result


def _read(file: PurePath, result: Survey) -> str | None:
    try:
        return read_text(Path(file), CLIENT_FILE_BYTES, "a client's config file", encoding="utf-8-sig")
    except FileNotFoundError:
        return None
    except FileRefused as exc:  # a directory, a device, a FIFO; or too large
        result.unreadable.append(Unreadable(file, exc.why))
    except NotADirectoryError:
        result.unreadable.append(Unreadable(file, "not a file"))
    except UnicodeDecodeError as exc:
        result.unreadable.append(Unreadable(file, f"not UTF-8 text (invalid byte at offset {exc.start})"))
    except OSError as exc:
        result.unreadable.append(Unreadable(file, f"cannot be read: {exc.strerror or exc}"))
    return None
