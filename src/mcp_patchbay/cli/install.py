"""``install`` and ``uninstall``: the proxy's entry written into one client's own config, and taken out.

``mcp-patchbay install CLIENT [--config PATH] [--name NAME] [--replace] [--scope user|project]``
writes an entry that runs this installation's ``mcp-patchbay`` (an absolute path, ``clients.launch``)
with the patchbay config's absolute path; Codex's says ``required = true`` and a startup timeout.
``--replace`` also takes out the client's entries the config now serves (same name and content).
``mcp-patchbay uninstall CLIENT [--name NAME]`` undoes it: the backup restored byte for byte while
the file is as install left it, else only the proxy's entry taken out (and what ``--replace`` took
put back). Every write: a timestamped backup first, an atomic replace, the file read back and
checked; each install is recorded in ``installs.json`` in the proxy's data folder
(``clients.installs``). A client seen running is told to restart, in one line.
Exit status: 0 done, 1 nothing to do, 2 a usage mistake or a file that cannot be read or written.
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from mcp_patchbay.cli.options import EXIT_CONFIG

if TYPE_CHECKING:
    from mcp_patchbay.clients.installs import Record
    from mcp_patchbay.clients.launch import Launch
    from mcp_patchbay.clients.locations import Client, Environment, Place
    from mcp_patchbay.config import Config
__all__ = ["run"]

EXIT_DONE, EXIT_NOTHING = 0, 1
DEFAULT_NAME = "patchbay"
NAME_CHARS = re.compile(r"[A-Za-z0-9_-]+\Z")
MIN_STARTUP_TIMEOUT = 30
"""Codex's ``startup_timeout_sec`` for the proxy, at least (Codex's own default is 10 s, less than
the proxy's ``startup_wait`` plus a slow upstream's start)."""
CHECK_COMMANDS = {
    "claude-code": "run 'claude mcp list': it should say {name}: ... Connected",
    "gemini": "run 'gemini mcp list' in a folder Gemini trusts: it should say {name}: ... Connected",
    "codex": "run 'codex mcp list': it should list {name} as enabled (Codex connects when a session starts)",
}
"""What shows the proxy registered, for the clients that have a command for it (seen with Claude Code
2.1, Gemini CLI 0.61 and Codex 0.169)."""


class _Refused(Exception):
    """The command cannot go on; the message says why and what to do."""


def _parser(command: str) -> argparse.ArgumentParser:
    from mcp_patchbay.clients.locations import CLIENT_IDS

    installing = command == "install"
    parser = argparse.ArgumentParser(
        prog=f"mcp-patchbay {command}",
        description=(
            "Register the proxy in an MCP client's own config (a backup of the file is kept beside it)."
            if installing
            else "Take the proxy out of an MCP client's config: the file as it was before install, when it has "
            "not changed since; else only the proxy's entry removed."
        ),
    )
    parser.add_argument("client", metavar="CLIENT", help=", ".join(CLIENT_IDS))
    parser.add_argument("--name", help=f"the name the client knows the proxy by (default: {DEFAULT_NAME})")
    parser.add_argument(
        "--scope",
        choices=("user", "project"),
        help="user: every project (default); project: the project's own file (.mcp.json, .cursor/mcp.json, ...)",
    )
    parser.add_argument("--project", metavar="DIR", help="the project for --scope project (default: here)")
    if installing:
        parser.add_argument(
            "--config", "-c", metavar="PATH", help="the patchbay config (default: the one import wrote)"
        )
        parser.add_argument(
            "--replace",
            action="store_true",
            help="also take out of the client the servers the patchbay config now serves (same name and content)",
        )
    return parser


def _client(word: str) -> Client:
    from mcp_patchbay.clients.locations import CLIENT_IDS, client_named

    client = client_named(word)
    if client is None:
        raise _Refused(f"unknown client {word!r}; the clients are {', '.join(CLIENT_IDS)}")
    return client


def check_name(name: str, config: Config | None) -> None:
    """Refuse a name some client cannot take, or that leaves no room for tool names (``catalog.client_quirks``)."""
    from mcp_patchbay.catalog.client_quirks import CLIENT_LIMITS
    from mcp_patchbay.catalog.naming import MIN_MAX_LENGTH, OwnTools

    if not NAME_CHARS.match(name):
        raise _Refused(f"--name {name!r}: use only letters, digits, '_' and '-' (clients refuse other names)")
    separator = config.settings.separator if config is not None else "__"
    own = max(len(OwnTools.for_separator(separator).find_tools), MIN_MAX_LENGTH)
    longest = min(limit.limit - limit.length("", "x" * own) for limit in CLIENT_LIMITS)
    for limit in CLIENT_LIMITS:
        if limit.length(name, "x" * own) > limit.limit:
            raise _Refused(
                f"--name {name!r} is too long: {limit.client} allows {limit.limit} characters for "
                f"{limit.form!r}, which leaves too little for tool names; use at most {longest} characters"
            )


def _load(path: Path) -> Config:
    from mcp_patchbay.config import ConfigError, load_config

    if not path.is_file():
        raise _Refused(
            f"no patchbay config at {path}: run 'mcp-patchbay import' first to gather your clients' servers "
            "there, or name another with --config PATH"
        )
    try:
        return load_config(path)
    except ConfigError as exc:
        raise _Refused(f"the patchbay config cannot be used:\n{exc}") from None


def _absorbed(config: Config) -> dict[str, dict[str, Any]]:
    """The patchbay config's entries as written (``--replace`` compares the client's with these)."""
    from mcp_patchbay.bounded_read import read_config
    from mcp_patchbay.clients.formats import parse

    try:
        text = read_config(config.path)
    except (OSError, ValueError) as exc:  # it was read a moment ago: changed since
        raise _Refused(f"cannot read {config.path}: {exc.strerror if isinstance(exc, OSError) else exc}") from None
    data = parse(text, "json")
    found: dict[str, dict[str, Any]] = {}
    for shape in ("servers", "mcpServers"):  # as the config reads them: mcpServers wins a name
        entries = data.get(shape)
        if isinstance(entries, dict):
            found.update({n: e for n, e in entries.items() if isinstance(e, dict)})  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    return found


def _read_text(path: Path) -> str | None:
    from mcp_patchbay.clients.files import read_bytes

    try:
        data = read_bytes(path)
        return None if data is None else data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Refused(f"cannot read {path}: not UTF-8 text (invalid byte at offset {exc.start})") from None
    except OSError as exc:
        raise _Refused(f"cannot read {path}: {exc.strerror or exc}") from None


def _backup_bytes(backup: str) -> bytes | None:
    """A backup's bytes (the records name it: bounded as a client's file is), None when it is gone."""
    from mcp_patchbay.clients.files import read_bytes

    try:
        return read_bytes(Path(backup))
    except OSError as exc:
        raise _Refused(f"cannot read the backup {backup}: {exc.strerror or exc}") from None


def _write_checked(place: Place, text: str, name: str, entry: dict[str, Any] | None) -> str | None:
    """Back up ``place``'s file (when there is one), write ``text`` atomically, read it back and check
    it; the backup's path. A check that fails puts the old file back."""
    from mcp_patchbay.clients.files import backup, read_bytes, write_atomic
    from mcp_patchbay.clients.formats import FormatError, parse
    from mcp_patchbay.clients.installing import holds

    path = Path(place.file)
    try:
        kept = backup(path) if path.exists() else None
        write_atomic(path, text.encode("utf-8"))
        written = (read_bytes(path) or b"").decode("utf-8", "replace")
    except OSError as exc:
        raise _Refused(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        parse(written, place.format)
        good = holds(place, written, name, entry) if entry is not None else True
    except FormatError:
        good = False
    if not good:
        if kept is not None:
            write_atomic(path, read_bytes(Path(kept)) or b"")
        else:
            path.unlink(missing_ok=True)
        raise _Refused(f"{path} did not read back as written; the file is as it was before")
    return str(kept) if kept is not None else None


def _running_hint(client: Client, env: Environment, out: TextIO) -> None:
    from mcp_patchbay.clients.running import is_running

    if is_running(client, env.platform):
        print(f"{client.title} is running: {client.restart}, so it reads the change.", file=out)


def _records_path() -> Path:
    from mcp_patchbay import places
    from mcp_patchbay.clients.installs import RECORDS_NAME

    return places.data_dir() / RECORDS_NAME


def _records() -> list[Record]:
    from mcp_patchbay.clients.installs import load_records

    try:
        return load_records(_records_path())
    except ValueError as exc:
        raise _Refused(f"the record of past installs cannot be read: {exc}; move it away to go on") from None


def install(args: argparse.Namespace, env: Environment, launch: Launch, out: TextIO) -> int:
    from mcp_patchbay import places
    from mcp_patchbay.clients.entries import proxy_entry
    from mcp_patchbay.clients.files import digest
    from mcp_patchbay.clients.installing import EditRefused, plan_install
    from mcp_patchbay.clients.installs import Record, save_records
    from mcp_patchbay.clients.locations import install_place

    client = _client(args.client)
    config_path = (Path(args.config).expanduser() if args.config else places.default_config()).absolute()
    config = _load(config_path)
    name = args.name or config.settings.registered_as or DEFAULT_NAME
    check_name(name, config)
    scope = args.scope or "user"
    place = install_place(client.id, env, scope)
    if place is None:
        raise _Refused(f"{client.title} has no {scope} file patchbay knows; use --scope user")
    startup = max(MIN_STARTUP_TIMEOUT, int(config.settings.startup_wait) + 20)
    entry = proxy_entry(client.id, launch.command, [*launch.args, str(config_path)], startup)
    records = _records()
    path = Path(place.file)
    text = _read_text(path)
    try:
        plan = plan_install(place, text, name, entry, _absorbed(config) if args.replace else None)
    except EditRefused as exc:
        import json

        raise _Refused(f"{exc}:\n{json.dumps({name: entry}, indent=2)}") from None
    where = f"{env.shorten(place.file)} ({place.label})"
    if plan.unchanged:
        print(
            f"{client.title} already runs the proxy as {name!r} with {config_path}: {where}; nothing to do.", file=out
        )
        return EXIT_NOTHING
    kept = _write_checked(place, plan.text, name, entry)
    after = digest(plan.text.encode("utf-8"))  # what _write_checked wrote and read back
    when = datetime.datetime.now().isoformat(timespec="seconds")
    records.append(Record(client.id, str(path), name, kept, after, when, plan.removed, place.format, list(place.keys)))
    save_records(_records_path(), records)

    verb = "Updated" if plan.previous is not None else "Installed"
    print(f"{verb} the proxy in {client.title} as {name!r}: {where}", file=out)
    print(f"  runs: {' '.join([launch.command, *launch.args, str(config_path)])}", file=out)
    print(f"  backup of the file before: {kept}" if kept else "  (the file is new)", file=out)
    if plan.removed:
        print(f"  took out the servers the proxy now serves: {', '.join(plan.removed)}", file=out)
    if launch.temporary:
        print(
            f"Note: {launch.command} is in a cache that gets emptied (uvx); install the proxy for good "
            "(pipx install mcp-patchbay, or uv tool install mcp-patchbay) and run install again.",
            file=out,
        )
    if config.settings.registered_as not in (None, name):
        print(
            f"Note: the config says registered_as {config.settings.registered_as!r}: set it to {name!r} in "
            f"{config_path} so tool names are fitted to this name.",
            file=out,
        )
    _running_hint(client, env, out)
    check = CHECK_COMMANDS.get(client.id)
    shown = check.format(name=name) if check else f"look for {name!r} among {client.title}'s MCP servers"
    print(f"Next: {shown}; 'mcp-patchbay uninstall {client.id}' undoes this.", file=out)
    return EXIT_DONE


# Long on purpose: each record's undo, with a word to the person for every case it meets.
def uninstall(args: argparse.Namespace, env: Environment, out: TextIO) -> int:  # noqa: PLR0912, PLR0915
    from mcp_patchbay.clients.files import digest, read_bytes, write_atomic
    from mcp_patchbay.clients.installing import EditRefused, plan_uninstall
    from mcp_patchbay.clients.installs import save_records
    from mcp_patchbay.clients.locations import install_place, places_of

    client = _client(args.client)
    records = _records()
    mine = [r for r in records if r.client == client.id and (args.name is None or r.name == args.name)]
    name = args.name or (mine[-1].name if mine else DEFAULT_NAME)
    mine = [r for r in mine if r.name == name]
    if args.scope is not None:
        place = install_place(client.id, env, args.scope)
        mine = [r for r in mine if place is not None and r.file == str(place.file)]
    did = False
    for record in reversed(mine):  # newest first: each restore gives the file the previous record saw
        path = Path(record.file)
        records.remove(record)
        try:
            current = read_bytes(path)
        except OSError as exc:  # a directory, a device, a FIFO or too large: not the file install wrote
            raise _Refused(f"cannot read {path}: {exc.strerror or exc}") from None
        if current is None:
            print(f"{path} is gone; nothing to undo there.", file=out)
            continue
        if digest(current) == record.sha256:
            if record.backup is not None and (saved := _backup_bytes(record.backup)) is not None:
                write_atomic(path, saved)
                Path(record.backup).unlink()
                print(f"Restored {path} as it was before install (byte for byte, from {record.backup}).", file=out)
            elif record.backup is None:
                path.unlink()
                print(f"Removed {path}: install had created it.", file=out)
            else:
                raise _Refused(f"the backup {record.backup} is gone; {path} keeps the proxy's entry")
            did = True
            continue
        place = record.place
        try:
            plan = plan_uninstall(place, current.decode("utf-8"), name, record.removed)
        except (EditRefused, UnicodeDecodeError) as exc:
            raise _Refused(f"cannot take the proxy out of {path}: {exc}") from None
        if plan.removed_ours or plan.restored:
            kept = _write_checked(place, plan.text, name, None)
            back = f"; put back: {', '.join(plan.restored)}" if plan.restored else ""
            print(
                f"{path} changed since install: took out only the proxy's entry {name!r}{back} "
                f"(the file before this: {kept}).",
                file=out,
            )
            did = True
    if not mine:  # no record (installed by hand, or records lost): the entry itself, if it runs patchbay
        for place in places_of(client.id, env):
            if not place.installable or (args.scope is not None and place.scope != args.scope):
                continue
            text = _read_text(Path(place.file))
            if text is None:
                continue
            try:
                plan = plan_uninstall(place, text, name)
            except EditRefused as exc:
                raise _Refused(str(exc)) from None
            if plan.removed_ours:
                kept = _write_checked(place, plan.text, name, None)
                print(f"Took the proxy's entry {name!r} out of {place.file} (the file before: {kept}).", file=out)
                did = True
    save_records(_records_path(), records)
    if not did:
        looked = ", ".join(str(p.file) for p in places_of(client.id, env) if p.installable)
        print(f"No proxy entry named {name!r} in {client.title}'s files ({looked}); nothing to do.", file=out)
        return EXIT_NOTHING
    _running_hint(client, env, out)
    return EXIT_DONE


def main(command: str, argv: list[str], *, env: Environment, launch: Launch, out: TextIO, err: TextIO) -> int:
    """``install`` or ``uninstall``; the report on ``out``, refusals on ``err``."""
    args = _parser(command).parse_args(argv)
    try:
        return install(args, env, launch, out) if command == "install" else uninstall(args, env, out)
    except _Refused as exc:
        print(f"mcp-patchbay {command}: {exc}", file=err)
        return EXIT_CONFIG


def run(command: str, argv: list[str]) -> int:
    """The ``install`` / ``uninstall`` command (``cli.main`` hands over the words after it)."""
    from mcp_patchbay.clients.launch import this_launch
    from mcp_patchbay.clients.locations import Environment

    args, _ = _parser(command).parse_known_args(argv)
    project = Path(args.project).expanduser() if args.project else None
    if project is not None and not project.is_dir():
        print(f"mcp-patchbay {command}: --project: no such folder: {project}", file=sys.stderr)
        return EXIT_CONFIG
    return main(command, argv, env=Environment.current(project), launch=this_launch(), out=sys.stdout, err=sys.stderr)
