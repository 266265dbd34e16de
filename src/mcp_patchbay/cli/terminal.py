"""What ``tools`` and ``call`` (and ``trust``) share: a command line of their own, the config's
finding, and a proxy with no client.

``run_command`` runs one of them as ``cli.main`` hands it over (``tools.run``, ``calling.run``):
a usage mistake answered with exit status 2, ``--help`` and Ctrl-C as a person expects. ``load``
finds the config (``--config``, ``$PATCHBAY_CONFIG``, the default config) narrowed to a profile;
``running`` is a ``session.proxy.Proxy`` with no client on it, whose supervisor starts the
upstreams at once (there is no client to wait for, and nothing to ask one), so that a call goes
through ``calls.path`` exactly as a client's would.

Nothing heavier than argparse is imported before the command line has been read: a usage
mistake is answered at once.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import AsyncGenerator, Callable, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from mcp_patchbay.cli.logs import StatusLine
from mcp_patchbay.cli.options import EXIT_CONFIG, UsageError, default_config_if_any, log_level

if TYPE_CHECKING:
    from mcp_patchbay.config import Config
    from mcp_patchbay.session.proxy import Proxy
    from mcp_patchbay.upstreams.transports import Connector
    from mcp_patchbay.upstreams.upstream import Upstream
__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_USAGE",
    "Parser",
    "add_common",
    "first_attempts",
    "load",
    "not_a_config",
    "run_command",
    "running",
    "server_named",
    "setup_logs",
    "start_the_rest",
]

EXIT_OK = 0
EXIT_FAILED = 1
"""``call``: the result is an ``isError`` one; ``tools``: a server failed (not ``Diagnosis.ok``), or nothing matched."""
EXIT_USAGE = EXIT_CONFIG
"""A usage or config mistake: nothing was started."""
QUIET_LEVEL = "CRITICAL"
"""stderr's log level unless ``--log-level`` (or ``$PATCHBAY_LOG_LEVEL``) asks for more: these
commands say what failed in their own words, and the log would say it again in the model's."""
STARTUP_GRACE = 5.0
"""Seconds past ``connect_timeout`` a server's first attempt is waited for (as ``check`` does)."""


# --- the command line ------------------------------------------------------------------------


class Parser(argparse.ArgumentParser):
    """argparse, with a mistake raised as ``UsageError`` (answered with exit status 2 by ``run_command``)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message}\n{self.format_usage().rstrip()}")


def add_common(parser: argparse.ArgumentParser) -> None:
    """The options ``tools`` and ``call`` share."""
    parser.add_argument(
        "--config",
        "-c",
        metavar="PATH",
        help="the patchbay config (default: $PATCHBAY_CONFIG, else the default config 'mcp-patchbay import' writes)",
    )
    parser.add_argument(
        "--profile",
        metavar="NAME",
        help="only the servers and tools of the config's profile NAME (default: $PATCHBAY_PROFILE)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")
    parser.add_argument(
        "--log-level",
        metavar="LEVEL",
        help="also show the proxy's log on stderr from this level (DEBUG, INFO, WARNING, ...; default: "
        "$PATCHBAY_LOG_LEVEL, else none)",
    )


def run_command(command: str, main: Callable[[list[str]], int], argv: list[str]) -> int:
    """``main(argv)`` for ``mcp-patchbay COMMAND ...``: a ``UsageError`` said on stderr with exit
    status 2, ``--help``'s exit status, Ctrl-C as 130 with the status line cleared."""
    try:
        return main(argv)
    except UsageError as exc:
        print(f"mcp-patchbay {command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    except KeyboardInterrupt:
        StatusLine.current().clear()
        print(f"mcp-patchbay {command}: interrupted", file=sys.stderr)
        return 130


def not_a_config(words: Sequence[str], command: str) -> None:
    """Refuse a config file given where a word is expected: the config comes with ``--config``."""
    for word in words:
        if word.endswith(".json") and Path(word).expanduser().is_file():
            raise UsageError(f"the config comes with --config (or -c): mcp-patchbay {command} -c {word} ...")


def setup_logs(level: str | None, environ: Mapping[str, str] = os.environ) -> None:
    from mcp_patchbay.cli.logs import setup_logging

    setup_logging(log_level(level, environ) or QUIET_LEVEL, None)


# --- the config --------------------------------------------------------------------------------


def load(given: str | None, environ: Mapping[str, str] = os.environ, profile: str | None = None) -> Config:
    """The config named by ``--config``, else ``$PATCHBAY_CONFIG``, else the default config,
    narrowed to ``--profile`` (else ``$PATCHBAY_PROFILE``) when one is asked for; ``UsageError``
    saying every way to give one when there is none, or what is wrong with it."""
    from mcp_patchbay.cli.options import profile_option
    from mcp_patchbay.config import ConfigError, load_config

    if given:
        path, source = given, "--config"
    elif environ.get("PATCHBAY_CONFIG"):
        path, source = environ["PATCHBAY_CONFIG"], "$PATCHBAY_CONFIG"
    else:
        default = default_config_if_any()
        if default is None:
            from mcp_patchbay import places

            raise UsageError(
                "no config file. Name one with --config PATH (or -c PATH), or set PATCHBAY_CONFIG=PATH, or run "
                f"'mcp-patchbay import' to gather your MCP clients' servers into the default config "
                f"({places.default_config()}), which is read when no config is named."
            )
        path, source = default, "the default config"
    try:
        return load_config(Path(path).expanduser(), profile=profile_option(profile, environ))
    except ConfigError as exc:
        raise UsageError(f"the config ({source}) cannot be used: {exc}") from None


def server_named(given: str, config: Config) -> str:
    """The config's name for ``--server`` (case, ``-`` and ``_`` aside, as find_tools' ``server``)."""
    from mcp_patchbay.catalog.naming import normalize

    for entry in config.servers:
        if entry.name == given:
            return entry.name
    for entry in config.servers:
        if normalize(entry.name) == normalize(given):
            return entry.name
    names = ", ".join(entry.name for entry in config.servers) or "none"
    raise UsageError(f"no server is named '{given}' in {config.path}; its servers: {names}")


# --- the proxy, with no client ---------------------------------------------------------------


@asynccontextmanager
async def running(
    config: Config, *, only: Collection[str] | None = None, connector: Connector | None = None
) -> AsyncGenerator[Proxy]:
    """A ``Proxy`` on ``config`` (its servers named in ``only``, when given), yielded once each
    server it started has made its first attempt (or ``connect_timeout`` and a grace have
    passed, as ``check`` waits); everything stops when the block ends. ``connector``: the
    tests' in-memory upstreams."""
    import anyio

    from mcp_patchbay.session.proxy import Proxy

    if only is not None:
        config = replace(config, servers=tuple(entry for entry in config.servers if entry.name in only))
    proxy = Proxy(config, connector=connector)
    # No client to wait for before connecting: a terminal is no MCP client, and what an upstream
    # asks of one (sampling, elicitation, roots) is answered "not connected" at once.
    proxy.supervisor.wait_for_client = None
    # A run on part of the config (some servers, a profile) is no start to learn the catalog's
    # size from (start_memory).
    proxy.remembers_start = only is None and config.profile is None
    async with anyio.create_task_group() as tg:
        await tg.start(proxy.run)
        try:
            await first_attempts(proxy, list(proxy.supervisor.upstreams.values()))
            yield proxy
        finally:
            tg.cancel_scope.cancel()


async def first_attempts(proxy: Proxy, upstreams: Sequence[Upstream]) -> None:
    """Until each of ``upstreams`` made its first attempt, boundedly; on a terminal, the status
    line says which one is waited for."""
    import anyio

    status = StatusLine.current()
    try:
        with anyio.move_on_after(proxy.settings.connect_timeout + STARTUP_GRACE):
            for upstream in upstreams:
                if not upstream.first_attempt_done.is_set():
                    status.show(f"starting {upstream.name}...")
                    await upstream.first_attempt_done.wait()
            await proxy.supervisor.reviewed()  # each listing's verdict: what is held, what is served
    finally:
        status.clear()


async def start_the_rest(proxy: Proxy, config: Config) -> None:
    """Start every server of ``config`` that ``running(only=...)`` left out, and wait for them
    (and for a server that had failed: ``apply``, a reload, starts it again)."""
    before = {id(upstream) for upstream in proxy.supervisor.upstreams.values()}
    proxy.supervisor.apply(config)
    await first_attempts(proxy, [u for u in proxy.supervisor.upstreams.values() if id(u) not in before])
