"""``secret``: the values a config names as ``${secret:NAME}``, kept in the OS keyring.

``mcp-patchbay secret set NAME`` reads the value from a hidden prompt on a terminal, else one
line of standard input (``printf %s "$TOKEN" | mcp-patchbay secret set github``), never from
the command line, where it would land in the shell's history and in every process listing.
``mcp-patchbay secret delete NAME`` removes it. ``mcp-patchbay secret list [-c CONFIG]`` names
the secrets a config refers to and whether the keyring holds each (a keyring cannot list what
it holds; the config is the one harmless place the names are kept). The keyring's service is
``mcp-patchbay`` (``config.secretstore``). Exit status: 0 done (every secret listed is set),
1 nothing stored (no keyring here, an empty value, no such secret to delete, a secret listed
missing), 2 a usage mistake.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import NoReturn, TextIO

from mcp_patchbay.cli.options import EXIT_CONFIG, UsageError

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "main", "run"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = EXIT_CONFIG

_NO_KEYRING_HINT = (
    "Where no keyring exists (a headless Linux, a container, CI), keep the value in an environment "
    "variable and write ${VAR} in the config instead."
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message}\n{self.format_usage().rstrip()}")


def _parser() -> _Parser:
    parser = _Parser(
        prog="mcp-patchbay secret",
        description="Keep the secrets a config names as ${secret:NAME} (tokens, API keys) in the OS keyring "
        "(macOS Keychain, Windows Credential Locker, the Secret Service of a Linux desktop) instead of in "
        "the config file.",
        epilog="The value is never taken from the command line: set asks for it (hidden) on a terminal, else "
        "reads standard input whole (a key file of several lines too, up to 64 KiB). Exit status: 0 done; "
        "1 nothing stored or deleted (no keyring on "
        "this system, an empty value, no such secret), or list found a secret missing; 2 a usage mistake.",
    )
    commands = parser.add_subparsers(dest="action", metavar="set|delete|list", required=True, parser_class=_Parser)
    setting = commands.add_parser(
        "set",
        help="store a secret (asked for, or standard input)",
        description="Store the secret NAME in the keyring, replacing any; the config names it as ${secret:NAME}.",
    )
    setting.add_argument("name", metavar="NAME", help="the secret's name, as in ${secret:NAME}")
    deleting = commands.add_parser("delete", help="remove a secret", description="Remove the secret NAME.")
    deleting.add_argument("name", metavar="NAME", help="the secret's name, as in ${secret:NAME}")
    listing = commands.add_parser(
        "list",
        help="the secrets a config names, and whether each is set",
        description="List the ${secret:NAME} a config refers to and whether the keyring holds each (never a value).",
    )
    listing.add_argument(
        "config",
        nargs="?",
        metavar="CONFIG",
        help="the config (default: --config, $PATCHBAY_CONFIG, the default config)",
    )
    listing.add_argument("--config", "-c", dest="config_option", metavar="PATH", help="the config")
    return parser


_REFERENCE = re.compile(r"\$\{secret:([^}]*)\}")


def _list(path: str | None, out: TextIO, err: TextIO) -> int:
    """``secret list``: each ``${secret:NAME}`` of the config's text, set or missing."""
    from mcp_patchbay.bounded_read import FileRefused, read_config
    from mcp_patchbay.cli.options import default_config_if_any
    from mcp_patchbay.config import secretstore

    path = path or os.environ.get("PATCHBAY_CONFIG") or default_config_if_any()
    if not path:
        raise UsageError("which config? Pass it (mcp-patchbay secret list CONFIG) or set PATCHBAY_CONFIG")
    try:
        text = read_config(Path(path).expanduser())
    except FileRefused as exc:
        hint = "; give the path of a JSON config file" if exc.kind is not None else ""
        raise UsageError(f"{path}: {exc}{hint}") from None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:  # not UTF-8, or the limit's variable
        raise UsageError(f"cannot read {path}: {exc}") from None
    names = [n for n in dict.fromkeys(_REFERENCE.findall(text)) if secretstore.name_problem(n) is None]
    if not names:
        print(f"{path} names no secret.", file=out)
        return EXIT_OK
    missing = 0
    for name in names:
        state = "set" if secretstore.read(name) is not None else "missing: mcp-patchbay secret set " + name
        missing += state != "set"
        print(f"  {name}  {state}", file=out)
    return EXIT_FAILED if missing else EXIT_OK


MAX_VALUE_CHARS = 65_536
"""The longest value ``set`` takes from standard input: a private key in PEM is a few KB."""


class _TooLong(Exception):
    pass


def _read_value(name: str, stdin: TextIO, err: TextIO) -> str:
    """The value: a hidden prompt on a terminal, else ``stdin`` whole (a PEM key has several
    lines), surrounding white space left out."""
    if stdin.isatty():
        import getpass

        return getpass.getpass(f"Value of secret '{name}' (not shown): ", stream=err).strip()
    value = stdin.read(MAX_VALUE_CHARS + 1)
    if len(value) > MAX_VALUE_CHARS:
        raise _TooLong
    return value.strip()


def main(argv: list[str], stdin: TextIO, out: TextIO, err: TextIO) -> int:
    """``secret`` with its words after it; messages for a person on ``out`` and ``err``."""
    from mcp_patchbay.config import secretstore

    args = _parser().parse_args(argv)
    if args.action == "list":
        try:
            return _list(args.config or args.config_option, out, err)
        except secretstore.KeyringUnavailable as exc:
            print(f"mcp-patchbay secret: {exc}.", file=err)
            print(_NO_KEYRING_HINT, file=err)
            return EXIT_FAILED
    name: str = args.name
    wrong = secretstore.name_problem(name)
    if wrong is not None:
        raise UsageError(f"{name!r}: {wrong}")
    try:
        if args.action == "set":
            where = secretstore.backend_name()  # before asking: no point typing a token no keyring will keep
            try:
                value = _read_value(name, stdin, err)
            except _TooLong:
                too_long = f"the value is over {MAX_VALUE_CHARS:,} characters"
                print(f"mcp-patchbay secret: nothing stored: {too_long}", file=err)
                return EXIT_FAILED
            if not value:
                print(f"mcp-patchbay secret: nothing stored: the value of '{name}' was empty", file=err)
                return EXIT_FAILED
            secretstore.write(name, value)
            print(
                f"Stored secret '{name}' in the keyring ({where}). Use it in the config as ${{secret:{name}}}.",
                file=out,
            )
            print(
                "A proxy already running reads it at its next start, or when its config file is saved again.", file=out
            )
            return EXIT_OK
        if not secretstore.delete(name):
            print(f"mcp-patchbay secret: the keyring holds no secret '{name}'; nothing deleted", file=err)
            return EXIT_FAILED
        print(f"Deleted secret '{name}' from the keyring.", file=out)
        return EXIT_OK
    except secretstore.KeyringUnavailable as exc:
        print(f"mcp-patchbay secret: nothing {'stored' if args.action == 'set' else 'deleted'}: {exc}.", file=err)
        print(_NO_KEYRING_HINT, file=err)
        return EXIT_FAILED


def run(command: str, argv: list[str]) -> int:
    """``mcp-patchbay secret ...`` (``cli.main`` hands over the words after it)."""
    try:
        return main(argv, sys.stdin, sys.stdout, sys.stderr)
    except UsageError as exc:
        print(f"mcp-patchbay {command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    except (KeyboardInterrupt, EOFError):
        print(f"\nmcp-patchbay {command}: nothing stored", file=sys.stderr)
        return 130
