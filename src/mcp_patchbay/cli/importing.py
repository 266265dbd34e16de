"""``import``: gather the MCP servers of every client installed for this user into one patchbay config.

``mcp-patchbay import [--from CLIENT ...] [-o PATH] [--dry-run] [--force] [--project DIR]`` reads
the clients' files (``clients.reading``), merges the servers (``clients.merging``), writes the
config (default ``places.default_config()``; never over a file without ``--force``, and then
after a backup) and loads it back with ``config.load_config`` before saying it is done. What it
prints is for a person: a line per server (name, transport, where from), then what was merged,
renamed, skipped or left out of an entry, then the file written and what to run next.

Values that look like secrets (``clients.secret_values``: tokens and keys in ``env``, ``headers``
and ``args``) can move into the OS keyring, leaving ``${secret:NAME}`` in the file: on a terminal
import asks; ``--secrets keyring`` moves them and ``--secrets keep`` leaves them, for scripts
(which, saying neither, keep them and are told how to move them). ``--dry-run`` says what would
move and prints ``${secret:NAME}`` (or ``***``, with ``keep``) in their place: never a value.
Exit status: 0 written (or shown, with ``--dry-run``), 1 no server found, 2 a usage mistake or a
file that cannot be read or written.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from mcp_patchbay.cli.options import EXIT_CONFIG

if TYPE_CHECKING:
    from collections.abc import Callable

    from mcp_patchbay.clients.locations import Client, Environment, Place
    from mcp_patchbay.clients.merging import Server
    from mcp_patchbay.clients.reading import Survey
    from mcp_patchbay.clients.secret_values import Candidate
__all__ = ["run"]

EXIT_DONE, EXIT_NOTHING = 0, 1
REGISTERED_AS = "patchbay"
"""The name ``install`` registers the proxy under unless told otherwise; the config says it, so the
exposed tool names are fitted to what clients make of it (``catalog.client_quirks``)."""


def _parser() -> argparse.ArgumentParser:
    from mcp_patchbay import places
    from mcp_patchbay.clients.locations import CLIENT_IDS

    parser = argparse.ArgumentParser(
        prog="mcp-patchbay import",
        description="Find the MCP servers configured in your clients (Claude Desktop, Claude Code, Cursor, "
        "VS Code, Windsurf, Gemini CLI, Codex) and write them into one patchbay config, each server once.",
        epilog=f"The config is written to {places.default_config()} unless -o says otherwise; "
        "docs/CLIENTS.md lists every file read.",
    )
    parser.add_argument(
        "--from",
        dest="clients",
        action="append",
        metavar="CLIENT",
        help=f"read only this client (again for more, or comma-separated), in the order given: the first to "
        f"have a server's name keeps it; the clients: {', '.join(CLIENT_IDS)}",
    )
    parser.add_argument("-o", "--output", metavar="PATH", help="write the config here instead")
    parser.add_argument("--dry-run", action="store_true", help="print the config instead of writing it")
    parser.add_argument("--force", action="store_true", help="replace an existing file (a backup is kept beside it)")
    parser.add_argument(
        "--secrets",
        choices=("keyring", "keep"),
        help="values that look like secrets (tokens, API keys in env, headers, args): 'keyring' moves them into "
        "the OS keyring and writes ${secret:NAME} in their place; 'keep' leaves them in the file (default: ask "
        "on a terminal, else keep)",
    )
    parser.add_argument(
        "--project",
        metavar="DIR",
        help="the project whose own files are read (.mcp.json, .cursor/, .vscode/, .gemini/); default: here",
    )
    return parser


class _Usage(Exception):
    pass


def _clients(words: list[str] | None) -> list[Client]:
    from mcp_patchbay.clients.locations import CLIENT_IDS, CLIENTS, client_named

    if not words:
        return list(CLIENTS)
    chosen: list[Client] = []
    for word in (w for item in words for w in item.split(",") if w.strip()):
        client = client_named(word)
        if client is None:
            raise _Usage(f"--from: unknown client {word!r}; the clients are {', '.join(CLIENT_IDS)}")
        if client not in chosen:
            chosen.append(client)
    return chosen


def origin_of(place: Place, env: Environment) -> str:
    """Where an entry came from, for people: the client and its file (and the project, for Claude
    Code's per-project servers in ``~/.claude.json``)."""
    from mcp_patchbay.clients.locations import CLIENTS

    title = next(c.title for c in CLIENTS if c.id == place.client)
    where = f"{title} {env.shorten(place.file)}"
    if place.scope == "local":
        where += f" (project {place.keys[1]})"
    return where


def config_text(servers: list[Server]) -> str:
    """The config ``import`` writes: the servers, and the name the proxy is registered under."""
    document: dict[str, Any] = {
        "mcpServers": {server.name: server.entry for server in servers},
        "patchbay": {"registered_as": REGISTERED_AS},
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def _report(servers: list[Server], found: Survey, env: Environment, out: TextIO) -> None:
    """A line per server, then what was merged, renamed, skipped or left out (see the module doc)."""
    clients = {s.place.client for server in servers for s in server.sources}
    print(f"Found {len(servers)} server{'s' * (len(servers) != 1)} in {len(clients)} client(s):", file=out)
    width = max(len(s.name) for s in servers)
    for server in servers:
        origins = server.entry["origin"]
        print(f"  {server.name:<{width}}  {server.transport:<5}  {origins}", file=out)
    for server in servers:
        if len(server.sources) > 1:
            titles = list(dict.fromkeys(_title(s.place.client) for s in server.sources))
            print(f"Merged: {server.name}: the same server in {_and(titles)}", file=out)
    for server in servers:
        if server.renamed_from is not None:
            print(
                f"Renamed: {_title(server.sources[0].place.client)}'s {server.renamed_from!r} is {server.name!r}: "
                f"another {server.renamed_from!r} (different command or address) keeps that name",
                file=out,
            )
    for skipped in found.skipped:
        print(f"Skipped: {skipped.name} in {origin_of(skipped.place, env)}: {skipped.reason}", file=out)
    for server in servers:
        for source in server.sources[:1]:
            dropped = source.normalized.dropped
            if dropped:
                items = "; ".join(f"{key!r} ({why})" for key, why in dropped.items())
                print(f"Left out of {server.name}: {items}", file=out)
            for note in source.normalized.notes:
                print(f"Note: {server.name} {note}", file=out)


def _title(client: str) -> str:
    from mcp_patchbay.clients.locations import CLIENTS

    return next(c.title for c in CLIENTS if c.id == client)


def _and(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _not_found(found: Survey, clients: list[Client], env: Environment) -> list[str]:
    """The clients none of whose files exist (or hold servers), with where they were looked for."""
    lines: list[str] = []
    for client in clients:
        places = [(p, held) for p, held in found.looked if p.client == client.id]
        if not any(held for _, held in places):
            files = list(dict.fromkeys(env.shorten(p.file) for p, _ in places))
            lines.append(f"{client.title} ({', '.join(files)})")
    return lines


def _next_steps(servers: list[Server], target: Path, default: bool, out: TextIO) -> None:
    config = "" if default else f" {target}"
    option = "" if default else f" --config {target}"
    clients = list(dict.fromkeys(s.place.client for server in servers for s in server.sources))
    check = f"mcp-patchbay check{config}"
    install = f"mcp-patchbay install CLIENT{option} --replace"
    width = max(len(check), len(install))
    print("Next:", file=out)
    print(f"  {check:<{width}}  connects to each server once and says what it serves", file=out)
    print(f"  {install:<{width}}  registers the proxy in a client, taking out the servers it now serves", file=out)
    print(f"  {'':<{width}}  CLIENT: {', '.join(clients)} (where servers were found)", file=out)


def _secrets(
    servers: list[Server], args: argparse.Namespace, stdin: TextIO, out: TextIO, err: TextIO
) -> tuple[list[Candidate], bool] | None:
    """The values to move into the keyring (stored already, unless ``--dry-run``), and whether
    the rest that look like secrets are to be shown as ``***`` (a dry run keeping them); None:
    stop, nothing written (``--secrets keyring`` with no keyring here)."""
    from mcp_patchbay.clients.secret_values import find
    from mcp_patchbay.config import secretstore

    found = find((server.name, server.entry) for server in servers)
    if not found:
        return [], False
    listed = "; ".join(f"{c.where} ({c.why})" for c in found)
    choice: str | None = args.secrets
    if choice is None and args.dry_run:
        choice = "keyring"
        print(f"Looks like secrets: {listed}. Import would offer to move them into the keyring.", file=out)
    elif choice is None and stdin.isatty():
        print(f"These values look like secrets: {listed}.", file=out)
        try:
            where = secretstore.backend_name()
        except secretstore.KeyringUnavailable as exc:
            print(
                f"They stay in the file: {exc}; ${{VAR}} with an environment variable keeps them out of it.", file=out
            )
            return [], False
        print(
            f"Move them into the keyring ({where}) and write ${{secret:NAME}} in their place? [Y/n] ", end="", file=out
        )
        out.flush()
        choice = "keep" if stdin.readline().strip().lower() in ("n", "no") else "keyring"
    elif choice is None:
        print(
            f"Kept in the file: {listed}. Run import again with --secrets keyring to move them into the OS keyring.",
            file=out,
        )
        return [], False
    if choice == "keep":
        return [], bool(args.dry_run)
    from contextlib import suppress

    with suppress(secretstore.KeyringUnavailable):  # a dry run without a keyring: the names as found
        found = _unclaimed(found, secretstore.read)
    if args.dry_run:
        moves = "; ".join(f"{c.where} as {c.reference}" for c in found)
        print(f"Would move into the keyring: {moves}.", file=out)
        return found, False
    try:
        for candidate in {c.name: c for c in found}.values():
            secretstore.write(candidate.name, candidate.value)
    except secretstore.KeyringUnavailable as exc:
        print(
            f"mcp-patchbay import: nothing written: the secrets cannot be moved: {exc}. Use --secrets keep (and "
            "${VAR} with environment variables, where no keyring exists).",
            file=err,
        )
        return None
    moved = "; ".join(f"{c.where} as {c.reference}" for c in found)
    print(f"Moved into the keyring (service '{secretstore.SERVICE}'): {moved}.", file=out)
    return found, False


def _unclaimed(found: list[Candidate], read: Callable[[str], str | None]) -> list[Candidate]:
    """``found`` with each secret's name moved past any the keyring holds with another value
    (``github.GITHUB_TOKEN-2``): a second config imported from another client must not replace
    the token the first one reads. A name holding the same value is used again."""
    from dataclasses import replace

    taken = {c.name for c in found}
    final: dict[str, str] = {}
    for name, value in {c.name: c.value for c in found}.items():
        candidate, n = name, 1
        while (held := read(candidate)) is not None and held != value:
            n += 1
            candidate = f"{name}-{n}"
            while candidate in taken:
                n += 1
                candidate = f"{name}-{n}"
        taken.add(candidate)
        final[name] = candidate
    return [replace(c, name=final[c.name]) for c in found]


def _hide(servers: list[Server], found: list[Candidate], masked: bool) -> None:
    """Put each moved value's reference in its entry; with ``masked``, ``***`` for every value
    that looks like a secret (a dry run that keeps them: its output never shows one)."""
    from mcp_patchbay.clients.secret_values import find, put_references

    if masked:
        found = find((server.name, server.entry) for server in servers)
    for server in servers:
        put_references(server.entry, [c for c in found if c.server == server.name], "***" if masked else None)


# Long on purpose: import's flow: read, choose, write, each with its own refusal to the person.
def main(argv: list[str], env: Environment, out: TextIO, err: TextIO, stdin: TextIO | None = None) -> int:  # noqa: PLR0912, PLR0915
    """``import`` with the clients' files found from ``env``; the report on ``out``, problems on ``err``,
    answers (whether to move secrets into the keyring) from ``stdin`` (default: ``sys.stdin``)."""
    from mcp_patchbay import places
    from mcp_patchbay.clients.files import backup, write_atomic
    from mcp_patchbay.clients.merging import merge
    from mcp_patchbay.clients.reading import survey
    from mcp_patchbay.config import ConfigError, load_config, parse_config

    args = _parser().parse_args(argv)
    try:
        clients = _clients(args.clients)
    except _Usage as exc:
        print(f"mcp-patchbay import: {exc}", file=err)
        return EXIT_CONFIG
    found = survey(env, [c.id for c in clients])
    if found.unreadable:
        for item in found.unreadable:
            print(f"mcp-patchbay import: cannot read {item.file}: {item.problem}", file=err)
        print(
            "Nothing written. Fix the file, or leave its client out with --from (the others: "
            "mcp-patchbay import --from CLIENT ...).",
            file=err,
        )
        return EXIT_CONFIG
    servers = merge(found.found, lambda place: origin_of(place, env))
    missing = _not_found(found, clients, env)
    if not servers:
        for skipped in found.skipped:
            print(f"Skipped: {skipped.name} in {origin_of(skipped.place, env)}: {skipped.reason}", file=out)
        looked = ", ".join(list(dict.fromkeys(env.shorten(p.file) for p, _ in found.looked)))
        print(f"No MCP servers found. Looked in: {looked}.", file=out)
        print("Nothing written. Add servers to a client first, or write a config by hand (README).", file=out)
        return EXIT_NOTHING
    _report(servers, found, env, out)
    if missing:
        print(f"No servers in: {'; '.join(missing)}", file=out)

    default = args.output is None
    target = (places.default_config() if default else Path(args.output)).absolute()
    text = config_text(servers)
    try:
        parse_config(text, target, os.environ)  # a mistake of ours shows here, before anything is written
    except ConfigError as exc:
        print(f"mcp-patchbay import: the config made is not valid; nothing written:\n{exc}", file=err)
        return EXIT_CONFIG
    if target.exists() and not args.force and not args.dry_run:  # before any secret is stored in the keyring
        print(
            f"mcp-patchbay import: {target} already exists; nothing written. Add --force to replace it "
            "(a backup is kept beside it), -o PATH to write elsewhere, or --dry-run to see the result.",
            file=err,
        )
        return EXIT_CONFIG
    secrets = _secrets(servers, args, sys.stdin if stdin is None else stdin, out, err)
    if secrets is None:
        return EXIT_CONFIG
    if secrets[0] or secrets[1]:
        _hide(servers, *secrets)
        text = config_text(servers)
    if args.dry_run:
        print(f"Dry run: this is what would be written to {target}; nothing was written.", file=out)
        out.write(text)
        return EXIT_DONE
    kept: Path | None = None
    try:
        if target.exists():
            kept = backup(target)  # refused at once when it is no regular file (/dev/zero) or too large
        write_atomic(target, text.encode("utf-8"))
        config = load_config(target)
    except OSError as exc:
        print(f"mcp-patchbay import: cannot write {target}: {exc.strerror or exc}", file=err)
        return EXIT_CONFIG
    except ConfigError as exc:
        print(f"mcp-patchbay import: the file written does not load back:\n{exc}", file=err)
        return EXIT_CONFIG
    written = f"Wrote {target} ({len(servers)} server{'s' * (len(servers) != 1)})"
    print(written + (f"; the file it replaced is kept as {kept}." if kept else "."), file=out)
    for entry in config.servers:
        if entry.spec is None and entry.problem:
            print(f"Will not start until fixed: {entry.name}: {entry.problem}", file=out)
    _next_steps(servers, target, default, out)
    return EXIT_DONE


def run(command: str, argv: list[str]) -> int:
    """The ``import`` command (``cli.main`` hands over the words after it)."""
    from mcp_patchbay.clients.locations import Environment

    try:
        project = _project(argv)
    except _Usage as exc:
        print(f"mcp-patchbay {command}: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    return main(argv, Environment.current(project), sys.stdout, sys.stderr)


def _project(argv: list[str]) -> Path | None:
    """``--project DIR`` read ahead of the rest (it settles where the clients' project files are)."""
    args, _ = _parser().parse_known_args(argv)
    if args.project is None:
        return None
    folder = Path(args.project).expanduser()
    if not folder.is_dir():
        raise _Usage(f"--project: no such folder: {folder}")
    return folder
