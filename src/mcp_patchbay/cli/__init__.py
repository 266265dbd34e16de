"""Command line: ``mcp-patchbay [serve|check] [CONFIG]`` (or ``--config CONFIG``, or ``$PATCHBAY_CONFIG``),
``mcp-patchbay login|logout SERVER [CONFIG]``.

``serve`` (the default) speaks MCP on stdin/stdout; logs go to stderr (and
``--log-file``), never stdout. ``check`` connects to every upstream once and prints
one line per server; it is what a user runs first. ``login`` signs in to a remote
server that asks for OAuth (in the browser); ``logout`` forgets that sign-in.

The config may be given as a positional argument because some clients take
``--config`` (and ``--log-level``) for themselves even after ``--`` (MCP Inspector);
``$PATCHBAY_LOG_LEVEL`` is the level's other way in. Clients show or record every stderr
line of a server (Claude Code logs each as an error), so stderr gets WARNING and above
by default: a healthy start writes nothing there. ``--log-file`` gets INFO by default.

Shutdown (SIGTERM, SIGINT, the client closing stdin) signals every upstream group at
once (``transports.stdio.shutdown``); see ``spawn`` for what happens when the proxy is killed.

The package, by job: this module runs a command (``main``); ``options`` reads the command
line; ``logs`` sets up the log handlers and formats; ``serve`` serves on stdio (signals,
reloads); ``check`` is the ``check`` report; ``importing`` and ``install`` are ``import``,
``install`` and ``uninstall`` over ``clients/``; ``tools`` and ``calling`` list the tools and
make one call from the terminal, on what ``terminal`` holds for both (and for ``trust``): a
command line of their own, the config's finding, a proxy with no client; ``trust`` shows what
is held and approves it; ``secret`` keeps values in the OS keyring. ``login``/``logout`` are
``oauth.commands``, ``serve --http`` is ``gateway.app``, ``ui`` is ``ui``, ``log`` is ``activity``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from pathlib import Path

from mcp_patchbay.cli.logs import setup_logging
from mcp_patchbay.cli.options import (
    EXIT_CONFIG,
    NAMED_COMMANDS,
    OWN_PARSER_COMMANDS,
    Options,
    UsageError,
    parse_options,
)
from mcp_patchbay.upstreams.early_start import early, settle
from mcp_patchbay.upstreams.spawn import Prespawned, discard, prespawn, starts_now
from mcp_patchbay.wire.early_handshake import EarlyHandshake

# Everything else (anyio, pydantic, the SDK) is imported once early_start.early has started the
# upstreams: each millisecond before that is one more of the proxy's startup.

__all__ = ["EXIT_CONFIG", "Options", "UsageError", "main", "parse_options"]


# Long on purpose: the command dispatch: one branch per command and exit path, read top to bottom.
def main(argv: list[str] | None = None, *, quick_exit: bool | None = None) -> int:  # noqa: PLR0912, PLR0915
    """Run the command line (``sys.argv`` when ``argv`` is None).

    ``quick_exit`` (default: when run as a program, ``argv`` None): once serving is over,
    flush the logs and end the process at once (``os._exit``), without the interpreter's
    teardown of the SDK's and pydantic's heap (a quarter to half a second on a busy
    machine, while the client may be counting down to SIGKILL).
    """
    words = sys.argv[1:] if argv is None else argv
    if words and words[0] in OWN_PARSER_COMMANDS:
        import importlib

        module = importlib.import_module(OWN_PARSER_COMMANDS[words[0]])
        try:
            code: int = module.run(words[0], words[1:])
        except BrokenPipeError:  # `mcp-patchbay import --dry-run | head`: the reader has all it wanted
            with contextlib.suppress(OSError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
        return code
    try:
        options = parse_options(argv)
    except UsageError as exc:
        print(f"mcp-patchbay: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    path = options.config
    if not path:
        print(
            "mcp-patchbay: no config file: pass it as an argument (mcp-patchbay /path/to/patchbay.json), "
            "or --config PATH, or set PATCHBAY_CONFIG; or run 'mcp-patchbay import' to gather the servers "
            "of your MCP clients into the default config",
            file=sys.stderr,
        )
        return EXIT_CONFIG
    setup_logging(options.level, options.log_file, options.log_format)
    on_stdio = options.command == "serve" and options.http is None
    # Serving on stdio: answer the client's initialize before anything else (early_handshake),
    # then start the plain stdio upstreams before even the config check imports pydantic
    # (early_start.early); the checked config then keeps exactly those it would launch itself.
    # A profile serves some of the file's servers: started early they would only be stopped
    # again, and the last start's tool count (the early listing's guess) may be another profile's.
    profile = options.profile
    handshake = EarlyHandshake.start_if_possible(path if profile is None else None) if on_stdio else None
    guessed = early(path) if options.command == "serve" and profile is None else {}
    config_problem: str | None = None
    try:
        from mcp_patchbay.config import Config, ConfigError, Settings, load_config

        try:
            config = load_config(Path(path), profile=profile)
        except ConfigError as exc:
            print(f"mcp-patchbay: invalid config:\n{exc}", file=sys.stderr)
            if not on_stdio or sys.stdin.isatty():  # a person at a terminal has just been told
                return EXIT_CONFIG
            # A client launched us: serving nothing, and saying why to the model, beats a closed
            # connection that no client explains. The file is watched; fixed, it is applied.
            print("mcp-patchbay: serving no servers until the file is fixed", file=sys.stderr)
            config_problem = exc.summary()
            # A reload narrows the fixed file to the profile asked for (Supervisor.apply).
            config = Config(path=Path(path).absolute(), settings=Settings(), servers=(), profile=profile)
        eager = [entry for entry in config.servers if starts_now(entry, config.settings.start)]
        kept = settle(guessed, eager)
    finally:
        discard({name: item.process for name, item in guessed.items()})  # left only if the check failed
    # An entry with a mistake is said once, by the supervisor that leaves it unstarted (at the
    # start and at each reload), and by ``login`` when it is the server asked for.
    import anyio

    if options.command == "check":
        registered_as = options.registered_as or config.settings.registered_as
        from mcp_patchbay.cli.check import run_check

        # The report says in a person's words what the upstreams' failure lines would: those are
        # for --log-level (a config mistake is still warned about, with its file and key).
        upstream_log = logging.getLogger("mcp_patchbay.upstreams.upstream")
        level = upstream_log.level
        if options.level is None:
            upstream_log.setLevel(logging.CRITICAL)
        try:
            return anyio.run(run_check, config, options.json, registered_as)
        finally:
            upstream_log.setLevel(level)
    if options.command in NAMED_COMMANDS:
        assert options.server is not None
        from mcp_patchbay.oauth.commands import login, logout

        return anyio.run(login if options.command == "login" else logout, config, options.server)
    if options.http is not None:
        from mcp_patchbay.gateway.bind import refusal

        refused = refusal(config, *options.http)
        if refused is not None:
            print(f"mcp-patchbay: {refused}", file=sys.stderr)
            return EXIT_CONFIG
    else:
        from mcp_patchbay.cli.serve import warn_unfit_name

        warn_unfit_name(config)
    # Start the stdio upstreams now, before the MCP SDK is imported (most of our own start):
    # their boot then runs beside ours. The handshake still waits for the client. Not the lazy
    # ones (on_demand): they start when needed.
    prespawned = Prespawned(prespawn(eager, kept))
    try:
        with contextlib.suppress(KeyboardInterrupt):
            if options.http is not None:
                from mcp_patchbay.cli.serve import loop_options
                from mcp_patchbay.gateway.app import serve_http

                anyio.run(serve_http, config, prespawned, *options.http, backend_options=loop_options())
            else:
                from mcp_patchbay.cli.serve import serve_stdio

                if sys.stdin.isatty():
                    print(
                        f"mcp-patchbay: serving {len(config.servers)} servers from {config.path}"
                        + (f" (profile {config.profile!r})" if config.profile else "")
                        + " as one MCP server "
                        "on stdin/stdout, for an MCP client to launch (see 'mcp-patchbay install'); "
                        "Ctrl-C to stop",
                        file=sys.stderr,
                    )
                anyio.run(serve_stdio, config, prespawned, handshake, config_problem)
    finally:
        prespawned.stop_all()  # normally all stopped already; never leave one behind
    if argv is None if quick_exit is None else quick_exit:
        logging.shutdown()
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(0)
    return 0
