"""Self-launch detection: does a stdio entry launch patchbay itself with this same config?

Such an entry would start a proxy that starts the entry again, without end. The command
line is read the way it would run: ``mcp-patchbay ...``, ``python -m mcp_patchbay ...``,
``uvx mcp-patchbay ...``, ``uv run`` / ``uv tool run`` / ``pipx run``; the config it would
be given (``--config``, ``-c``, the positional one, else ``PATCHBAY_CONFIG`` from the entry's
``env`` or the environment, else the default config, ``places.default_config``) is resolved
against the entry's ``cwd`` and compared with this file. ``launches_patchbay`` says whether
a command line runs patchbay at all (``import`` leaves such entries out).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from mcp_patchbay.config.models import StdioSpec
__all__ = ["launches_patchbay", "launches_same_config"]

_PYTHON = re.compile(r"(?:pythonw?[0-9.]*|py)\Z")
_MODULES: Final = frozenset({"mcp_patchbay", "mcp_patchbay.__main__"})
_PACKAGE = "mcp-patchbay"
# Options of uvx / uv run / pipx run that take a value as the next argument.
_RUNNER_VALUE_OPTIONS: Final = frozenset(
    {
        "--from",
        "--with",
        "-w",
        "--with-editable",
        "--with-requirements",
        "--python",
        "-p",
        "--index",
        "--default-index",
        "--index-url",
        "-i",
        "--extra-index-url",
        "--find-links",
        "-f",
        "--spec",
        "--pip-args",
        "--constraints",
        "-c",
        "--overrides",
        "--directory",
        "--project",
        "--package",
        "--cache-dir",
        "--config-file",
        "--env-file",
        "--python-platform",
    }
)


def _program(command: str) -> str:
    base = command.replace("\\", "/").rsplit("/", 1)[-1].lower()
    for ext in (".exe", ".cmd", ".bat"):
        if base.endswith(ext):
            return base[: -len(ext)]
    return base


def _after_module(args: Sequence[str]) -> Sequence[str] | None:
    """The arguments after ``-m mcp_patchbay`` in a python command line, or None."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "-m":
            return args[i + 2 :] if i + 1 < len(args) and args[i + 1] in _MODULES else None
        if arg.startswith("-m"):
            return args[i + 1 :] if arg[2:] in _MODULES else None
        if arg in ("-c", "-") or not arg.startswith("-"):
            return None  # a script or -c code, not a module
        i += 2 if arg in ("-W", "-X") else 1
    return None


def _after_runner(args: Sequence[str]) -> Sequence[str] | None:
    """The arguments given to patchbay by ``uvx ... mcp-patchbay ARGS`` and the like, or None."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in _RUNNER_VALUE_OPTIONS:
            i += 2
        elif arg.startswith("-"):
            i += 1
        else:
            name = re.split(r"[@=<>!~\[; ]", arg, maxsplit=1)[0].lower().replace("_", "-")
            if name == _PACKAGE:
                return args[i + 1 :]
            return _patchbay_args(arg, args[i + 1 :])
    return None


def _patchbay_args(command: str, args: Sequence[str]) -> Sequence[str] | None:
    """The arguments patchbay would get if this command line launches patchbay, else None."""
    program = _program(command)
    args = list(args)
    if program == _PACKAGE:
        return args
    if _PYTHON.match(program):
        return _after_module(args)
    if program == "uvx":
        return _after_runner(args)
    if program in ("pipx", "uv") and args[:1] == ["run"]:
        return _after_runner(args[1:])
    if program == "uv" and args[:2] == ["tool", "run"]:
        return _after_runner(args[2:])
    return None


def launches_patchbay(command: str, args: Sequence[str]) -> bool:
    """Whether this command line runs patchbay (any config, any subcommand)."""
    return _patchbay_args(command, args) is not None


_VALUE_OPTIONS: Final = ("--log-level", "--log-file", "--log-format", "--http", "--as")
"""patchbay's options that take the next argument as their value (besides the config's)."""
_COMMANDS: Final = frozenset({"serve", "check"})


def _config_argument(argv: Sequence[str]) -> str | None:
    """The config file the cli would read from these arguments, as its argparse reads them: the
    last ``--config``/``-c``, else the positional one (after an optional command)."""
    target: str | None = None
    words: list[str] = []
    skip = False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        option, equals, value = arg.partition("=")
        if arg == "--":
            words.extend(argv[i + 1 :])
            break
        if len(option) >= 3 and "--config".startswith(option):  # argparse accepts unique prefixes
            target = value if equals else (argv[i + 1] if i + 1 < len(argv) else None)
            skip = not equals
        elif arg == "-c":
            target = argv[i + 1] if i + 1 < len(argv) else None
            skip = True
        elif arg.startswith("-c"):
            target = arg[2:]
        elif arg.startswith("-"):
            skip = option in _VALUE_OPTIONS and not equals
        else:
            words.append(arg)
    if words and words[0] in _COMMANDS:
        words = words[1:]
    if len(words) > 1:
        return None  # the cli refuses two config files: it launches nothing
    return target or (words[0] if words else None)


def launches_same_config(spec: StdioSpec, config_path: Path, environ: Mapping[str, str]) -> bool:
    """Whether ``spec`` would run patchbay with the config file at ``config_path``."""
    argv = _patchbay_args(spec.command, spec.args)
    if argv is None:
        return False
    target = _config_argument(argv) or spec.env.get("PATCHBAY_CONFIG") or environ.get("PATCHBAY_CONFIG")
    if not target:
        from mcp_patchbay import places

        target = str(places.default_config())
    try:
        base = Path(spec.cwd) if spec.cwd else Path.cwd()
        return (base / target).resolve() == config_path.resolve()
    except (OSError, RuntimeError, ValueError):
        return False
