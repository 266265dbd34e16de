"""The command line read: ``Options`` from ``argv`` and the environment, or a ``UsageError``
whose message is for the user. No I/O, and nothing heavier than argparse imported: it runs
before ``early_start.early`` starts the upstreams."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mcp_patchbay import __version__

EXIT_CONFIG = 2
COMMANDS = ("serve", "check", "login", "logout")
NAMED_COMMANDS = ("login", "logout")
"""Commands that take a server's name before the config."""
OWN_PARSER_COMMANDS: dict[str, str] = {
    "import": "mcp_patchbay.cli.importing",
    "install": "mcp_patchbay.cli.install",
    "uninstall": "mcp_patchbay.cli.install",
    "tools": "mcp_patchbay.cli.tools",
    "call": "mcp_patchbay.cli.calling",
    "trust": "mcp_patchbay.cli.trust",
    "secret": "mcp_patchbay.cli.secret",
    "log": "mcp_patchbay.activity.command",
    "ui": "mcp_patchbay.ui.command",
}
"""Commands that read their own arguments (the first word of the command line names them),
to the module whose ``run(command, argv)`` runs them."""
ALL_COMMANDS = (*COMMANDS, *OWN_PARSER_COMMANDS)
DEFAULT_STDERR_LEVEL = "WARNING"
"""What a client's log gets: problems only (a healthy start writes nothing to stderr)."""
DEFAULT_FILE_LEVEL = "INFO"
"""What ``--log-file`` gets unless ``--log-level`` asks for more."""
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
LOG_FORMATS = ("text", "json")
ASSUMED_REGISTERED_AS = "patchbay"
"""The name ``check`` measures exposed names against when neither ``--as`` nor ``registered_as`` says."""


class UsageError(Exception):
    """A bad combination of arguments; the message is for the user."""


@dataclass(frozen=True)
class Options:
    command: str
    config: str | None
    level: str | None
    """The level asked for (``--log-level``, else ``$PATCHBAY_LOG_LEVEL``), None for the defaults."""
    log_file: str | None
    log_format: str
    """``text`` (a line a record, for people) or ``json`` (one JSON object a line, for log collectors)."""
    json: bool
    registered_as: str | None
    server: str | None = None
    """``login`` / ``logout``: the server's name in the config."""
    http: tuple[str, int] | None = None
    """``serve --http [HOST:]PORT``: serve MCP over HTTP on this address instead of stdio."""
    profile: str | None = None
    """``serve`` / ``check``: the config's profile to serve (``--profile``, else ``$PATCHBAY_PROFILE``)."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcp-patchbay",
        usage=(
            "mcp-patchbay [serve|check] [CONFIG] [options]\n"
            "       mcp-patchbay login|logout SERVER [CONFIG] [options]\n"
            "       mcp-patchbay import|install|uninstall|tools|call|trust|secret|ui|log ... (each with its own --help)"
        ),
        description="An MCP proxy: serves the tools, resources and prompts of several MCP servers as one, over "
        "stdio (or, with serve --http, over streamable HTTP to many clients). import gathers the servers of "
        "your MCP clients into one config; install registers the proxy in a client; tools and call list and "
        "call its tools from the terminal.",
        epilog="CONFIG may come as the positional argument, as --config, or as $PATCHBAY_CONFIG; without any, "
        "the config import writes (mcp-patchbay import --help says where) is used when it exists.",
    )
    parser.add_argument(
        "words",
        nargs="*",
        metavar="[serve|check|login|logout] [SERVER] [CONFIG]",
        help="the command (default: serve), the server (login, logout) and the config file",
    )
    parser.add_argument("--config", "-c", help="config file (default: $PATCHBAY_CONFIG)")
    parser.add_argument(
        "--log-level",
        help=f"stderr's level (default: $PATCHBAY_LOG_LEVEL, else {DEFAULT_STDERR_LEVEL}); "
        f"--log-file gets this level or {DEFAULT_FILE_LEVEL}, whichever says more",
    )
    parser.add_argument("--log-file", help=f"also write logs to this file (at {DEFAULT_FILE_LEVEL} by default)")
    parser.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        help="text (default, or $PATCHBAY_LOG_FORMAT) or json: one JSON object a line, on stderr and in --log-file",
    )
    parser.add_argument(
        "--http",
        metavar="[HOST:]PORT",
        help="serve: MCP over streamable HTTP at /mcp on this address (host default 127.0.0.1), "
        "the gateway for many clients, instead of stdio",
    )
    parser.add_argument(
        "--profile",
        metavar="NAME",
        help="serve, check: only the servers and tools of the config's profile NAME (default: $PATCHBAY_PROFILE)",
    )
    parser.add_argument("--json", action="store_true", help="check: print the status as JSON")
    parser.add_argument(
        "--as",
        dest="registered_as",
        metavar="NAME",
        help="check: the name the client registered the proxy under (default: the config's "
        f"registered_as, else {ASSUMED_REGISTERED_AS!r}); warns of tool names too long for known clients",
    )
    parser.add_argument("--version", action="version", version=f"mcp-patchbay {__version__}")
    return parser


def parse_options(argv: list[str] | None, environ: Mapping[str, str] = os.environ) -> Options:
    """The command line as ``Options``; ``UsageError`` for a combination that makes no sense."""
    parser = _parser()
    args = parser.parse_intermixed_args(argv)
    words: list[str] = list(args.words)
    command = "serve"
    if words and words[0] in COMMANDS:
        command = words.pop(0)
    server: str | None = None
    if command in NAMED_COMMANDS:
        if not words:
            raise UsageError(f"{command} needs the server's name: mcp-patchbay {command} SERVER [CONFIG]")
        server = words.pop(0)
    if words and command == "serve" and words[0] not in ALL_COMMANDS and _looks_like_command(words[0]):
        raise UsageError(unknown_command(words[0]))
    if len(words) > 1:
        raise UsageError(f"one config file at most, got {len(words)}: {' '.join(words)}")
    if words and words[0] in COMMANDS:
        raise UsageError(f"one command at most: {command!r} and {words[0]!r} (a config file named so: ./{words[0]})")
    path: str | None = words[0] if words else None
    if path is not None and args.config is not None and not _same_file(path, args.config):
        raise UsageError(f"two different config files: {path} (positional) and {args.config} (--config)")
    path = path or args.config or environ.get("PATCHBAY_CONFIG") or default_config_if_any()
    level = log_level(args.log_level, environ)
    if args.registered_as is not None and command != "check":
        raise UsageError('--as is for check; when serving, set "registered_as" in the config\'s "patchbay" object')
    log_format: str = args.log_format or environ.get("PATCHBAY_LOG_FORMAT", "").strip().lower() or "text"
    if log_format not in LOG_FORMATS:
        raise UsageError(
            f"PATCHBAY_LOG_FORMAT: unknown format {log_format!r}; expected one of {', '.join(LOG_FORMATS)}"
        )
    http = _http_address(args.http) if args.http is not None else None
    if http is not None and command != "serve":
        raise UsageError(f"--http is for serve, not {command}")
    return Options(
        command,
        path,
        level,
        args.log_file,
        log_format,
        args.json,
        args.registered_as,
        server,
        http,
        _profile(args.profile, environ, command),
    )


def profile_option(given: str | None, environ: Mapping[str, str]) -> str | None:
    """The profile asked for: ``--profile``, else ``$PATCHBAY_PROFILE`` (empty: none); every
    command that serves or lists the config's tools reads it so."""
    if given is not None:
        if not given.strip():
            raise UsageError("--profile: expected a profile's name")
        return given
    return environ.get("PATCHBAY_PROFILE", "").strip() or None


def _profile(given: str | None, environ: Mapping[str, str], command: str) -> str | None:
    if command in NAMED_COMMANDS:  # a sign-in is the server's, whichever profile serves it
        if given is not None:
            raise UsageError(f"--profile is for serve and check, not {command}")
        return None
    return profile_option(given, environ)


def _http_address(text: str) -> tuple[str, int]:
    """``[HOST:]PORT`` (``[::1]:8080`` for IPv6) as (host, port)."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "", text
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise UsageError(f"--http: expected [HOST:]PORT, like 8080 or 0.0.0.0:8080, got {text!r}")
    return host, int(port)


def _same_file(a: str, b: str) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return a == b


def log_level(given: str | None, environ: Mapping[str, str] = os.environ) -> str | None:
    """The log level asked for, ``--log-level`` else ``$PATCHBAY_LOG_LEVEL``, as a level name
    (``warn`` is WARNING); None when neither asks; ``UsageError`` naming where a bad one came from."""
    level, source = given, "--log-level"
    if level is None and environ.get("PATCHBAY_LOG_LEVEL"):
        level, source = environ["PATCHBAY_LOG_LEVEL"], "PATCHBAY_LOG_LEVEL"
    if level is None:
        return None
    level = level.strip().upper()
    level = "WARNING" if level == "WARN" else level
    if level not in LEVELS:
        raise UsageError(f"{source}: unknown level {level!r}; expected one of {', '.join(LEVELS)}")
    return level


def default_config_if_any() -> str | None:
    """The user's default config (``places.default_config``, which ``import`` writes) when it exists."""
    from mcp_patchbay import places

    path = places.default_config()
    return str(path) if path.is_file() else None


def _looks_like_command(word: str) -> bool:
    """A first word that is no file and reads as a word, not a path: a command mistyped."""
    if Path(word).exists() or any(c in word for c in "/\\.:~$"):
        return False
    return word.replace("-", "").isalnum()


def unknown_command(word: str) -> str:
    """What the user is told of a first word that is neither a command nor a file."""
    import difflib

    close = difflib.get_close_matches(word, ALL_COMMANDS, n=1, cutoff=0.6)
    hint = f"did you mean '{close[0]}'? " if close else ""
    return (
        f"unknown command '{word}' (and no file of that name): {hint}"
        f"the commands are {', '.join(ALL_COMMANDS)}; mcp-patchbay --help says more"
    )
