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
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import sys
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcp_patchbay import __version__
from mcp_patchbay.spawn import Prespawned, discard, early, prespawn, settle

if TYPE_CHECKING:
    import anyio

    from mcp_patchbay.config import Config

# Everything else (anyio, pydantic, the SDK) is imported once spawn.early has started the
# upstreams: each millisecond before that is one more of the proxy's startup.

logger = logging.getLogger("mcp_patchbay")

EXIT_CONFIG = 2
COMMANDS = ("serve", "check", "login", "logout")
NAMED_COMMANDS = ("login", "logout")
"""Commands that take a server's name before the config."""
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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcp-patchbay",
        usage=(
            "mcp-patchbay [serve|check] [CONFIG] [options]\n       mcp-patchbay login|logout SERVER [CONFIG] [options]"
        ),
        description="An MCP proxy: serves the tools, resources and prompts of several MCP servers as one, over "
        "stdio (or, with serve --http, over streamable HTTP to many clients).",
        epilog="CONFIG may come as the positional argument, as --config, or as $PATCHBAY_CONFIG.",
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
    if len(words) > 1:
        raise UsageError(f"one config file at most, got {len(words)}: {' '.join(words)}")
    if words and words[0] in COMMANDS:
        raise UsageError(f"one command at most: {command!r} and {words[0]!r} (a config file named so: ./{words[0]})")
    path: str | None = words[0] if words else None
    if path is not None and args.config is not None and not _same_file(path, args.config):
        raise UsageError(f"two different config files: {path} (positional) and {args.config} (--config)")
    path = path or args.config or environ.get("PATCHBAY_CONFIG") or None
    level: str | None = args.log_level
    source = "--log-level"
    if level is None and environ.get("PATCHBAY_LOG_LEVEL"):
        level, source = environ["PATCHBAY_LOG_LEVEL"], "PATCHBAY_LOG_LEVEL"
    if level is not None:
        level = level.strip().upper()
        level = "WARNING" if level == "WARN" else level
        if level not in LEVELS:
            raise UsageError(f"{source}: unknown level {level!r}; expected one of {', '.join(LEVELS)}")
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
    return Options(command, path, level, args.log_file, log_format, args.json, args.registered_as, server, http)


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


def setup_logging(level: str | None, log_file: str | None, log_format: str = "text") -> None:
    """stderr at ``level`` (default WARNING); the log file at ``level`` or INFO, whichever says more;
    each line as text or as one JSON object (``log_format``)."""
    stderr_level = logging.getLevelNamesMapping()[level or DEFAULT_STDERR_LEVEL]
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setLevel(stderr_level)
    handlers: list[logging.Handler] = [stderr]
    lowest = stderr_level
    if log_file:
        file_level = min(stderr_level, logging.getLevelNamesMapping()[DEFAULT_FILE_LEVEL])
        file = logging.FileHandler(log_file, encoding="utf-8")
        file.setLevel(file_level)
        handlers.append(file)
        lowest = file_level
    logging.basicConfig(level=lowest, handlers=handlers, force=True)
    formatter = _JsonFormatter() if log_format == "json" else _RedactingFormatter(TEXT_FORMAT)
    for handler in handlers:  # secrets never: whatever a library quotes (an OAuth server's answer)
        handler.setFormatter(formatter)
    # Our own logs say it better; the SDK's per-message chatter is for debugging the SDK.
    if logging.getLogger().level > logging.DEBUG:
        for noisy in ("mcp", "httpx", "httpx2", "httpcore"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
    logging.captureWarnings(True)
    warnings.filterwarnings("ignore", category=UserWarning, module=r"mcp\..*")


TEXT_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"


class _RedactingFormatter(logging.Formatter):
    """Log lines, tracebacks included, with credential-like values cut (``redaction.redact``)."""

    def format(self, record: logging.LogRecord) -> str:
        from mcp_patchbay.redaction import redact

        return redact(super().format(record))


class _JsonFormatter(logging.Formatter):
    """One JSON object a line: ``ts`` (UTC, ISO 8601), ``level``, ``logger``, ``message``, and
    ``exception`` (the traceback) when there is one; every text redacted."""

    def format(self, record: logging.LogRecord) -> str:
        from mcp_patchbay.redaction import redact

        line: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": redact(record.getMessage()),
        }
        if record.exc_info:
            line["exception"] = redact(self.formatException(record.exc_info))
        elif record.exc_text:
            line["exception"] = redact(record.exc_text)
        return json.dumps(line, ensure_ascii=False)


def main(argv: list[str] | None = None, *, quick_exit: bool | None = None) -> int:
    """Run the command line (``sys.argv`` when ``argv`` is None).

    ``quick_exit`` (default: when run as a program, ``argv`` None): once serving is over,
    flush the logs and end the process at once (``os._exit``), without the interpreter's
    teardown of the SDK's and pydantic's heap (a quarter to half a second on a busy
    machine, while the client may be counting down to SIGKILL).
    """
    try:
        options = parse_options(argv)
    except UsageError as exc:
        print(f"mcp-patchbay: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    path = options.config
    if not path:
        print(
            "mcp-patchbay: no config file: pass it as an argument (mcp-patchbay /path/to/patchbay.json), "
            "or --config PATH, or set PATCHBAY_CONFIG",
            file=sys.stderr,
        )
        return EXIT_CONFIG
    # Serving: start the plain stdio upstreams before even the config check imports pydantic
    # (spawn.early); the checked config then keeps exactly those it would launch itself.
    setup_logging(options.level, options.log_file, options.log_format)
    guessed = early(path) if options.command == "serve" else {}
    try:
        from mcp_patchbay.config import ConfigError, load_config

        try:
            config = load_config(Path(path))
        except ConfigError as exc:
            print(f"mcp-patchbay: invalid config:\n{exc}", file=sys.stderr)
            return EXIT_CONFIG
        kept = settle(guessed, config.servers)
    finally:
        discard({name: item.process for name, item in guessed.items()})  # left only if the check failed
    for entry in config.servers:
        if entry.problem is not None:
            logger.warning("server '%s' will not start: %s", entry.name, entry.problem)
    import anyio

    if options.command == "check":
        registered_as = options.registered_as or config.settings.registered_as
        return anyio.run(_check, config, options.json, registered_as)
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
        _warn_unfit_name(config)
    # Start the stdio upstreams now, before the MCP SDK is imported (most of our own start):
    # their boot then runs beside ours. The handshake still waits for the client.
    prespawned = Prespawned(prespawn(config.servers, kept))
    try:
        with contextlib.suppress(KeyboardInterrupt):
            if options.http is not None:
                from mcp_patchbay.gateway.app import serve_http

                anyio.run(serve_http, config, prespawned, *options.http, backend_options=_loop_options())
            else:
                anyio.run(_serve, config, prespawned)
    finally:
        prespawned.stop_all()  # normally all stopped already; never leave one behind
    if argv is None if quick_exit is None else quick_exit:
        logging.shutdown()
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(0)
    return 0


def _loop_options() -> dict[str, Any]:
    """The gateway runs on uvloop where it is installed (not on Windows): the event loop's own
    cost is a large part of an HTTP request's."""
    try:
        import uvloop  # noqa: F401  # pyright: ignore[reportUnusedImport]
    except ImportError:
        return {}
    return {"use_uvloop": True}


async def _serve(config: Config, prespawned: Prespawned) -> None:
    import anyio

    from mcp_patchbay.client_wire import stdio_streams
    from mcp_patchbay.jsonrpc import Bounds
    from mcp_patchbay.server import Proxy
    from mcp_patchbay.transports.stdio import shutdown
    from mcp_patchbay.watch import reload_on_sighup, watch_config

    proxy = Proxy(config, prespawned=prespawned)
    logger.info("mcp-patchbay %s serving %d servers from %s", __version__, len(config.servers), config.path)
    async with anyio.create_task_group() as tg:
        tg.start_soon(_stop_on_signals, tg.cancel_scope)
        tg.start_soon(reload_on_sighup, config.path, proxy.supervisor.apply)
        if config.settings.watch:
            tg.start_soon(watch_config, config.path, proxy.supervisor.apply)
        async with stdio_streams(proxy.lane.offer, Bounds.of(config.settings)) as (read_stream, write_stream, wire):
            # Whatever ends the client's session ends the proxy: the upstreams get the quick
            # stop (shutdown), not a restart's.
            await proxy.serve(read_stream, write_stream, wire, before_stop=shutdown)
        tg.cancel_scope.cancel()


async def _stop_on_signals(scope: anyio.CancelScope) -> None:
    import anyio

    from mcp_patchbay.transports.stdio import shutdown

    if sys.platform == "win32":  # no signal receivers there; stdin EOF ends the proxy
        return
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            logger.info("received %s; stopping upstreams", signal.Signals(signum).name)
            shutdown()  # every upstream group gets SIGTERM now, before the unwinding below
            scope.cancel()
            return


def _warn_unfit_name(config: Config) -> None:
    """Serving under a registered name too long for any exposed name to fit: say so once."""
    from mcp_patchbay.client_limits import CLIENT_LIMITS
    from mcp_patchbay.naming import MIN_MAX_LENGTH, OwnTools

    name = config.settings.registered_as
    if name is None:
        return
    # Search mode's own tools keep their names: the longest of them must fit as well.
    own = max(len(OwnTools.for_separator(config.settings.separator).find_tools), MIN_MAX_LENGTH)
    for client in CLIENT_LIMITS:
        if client.length(name, "x" * own) > client.limit:
            logger.warning(
                "registered_as %r is too long for %s (%d characters at most for prefix and tool name): "
                "tool names cannot be shortened enough; register the proxy under a shorter name",
                name,
                client.client,
                client.limit,
            )


def name_warnings(tool_names: list[str], registered_as: str) -> list[dict[str, Any]]:
    """The exposed names some known client cannot take whole (``client_limits.over_limits``), as rows."""
    from mcp_patchbay.client_limits import over_limits

    return [
        {
            "tool": o.exposed,
            "client": o.client,
            "sent_as": o.sent,
            "length": o.length,
            "limit": o.limit,
            "consequence": o.consequence,
        }
        for o in over_limits(tool_names, registered_as)
    ]


async def _check(config: Config, as_json: bool, registered_as: str | None = None) -> int:
    import anyio

    from mcp_patchbay.supervisor import Supervisor
    from mcp_patchbay.upstream import State

    supervisor = Supervisor(config)
    started = time.monotonic()
    rows: list[dict[str, Any]] = []
    async with anyio.create_task_group() as tg:
        await tg.start(supervisor.run)
        with anyio.move_on_after(config.settings.connect_timeout + 5):
            for upstream in list(supervisor.upstreams.values()):
                await upstream.first_attempt_done.wait()
        for name, upstream in supervisor.upstreams.items():
            status = upstream.status()
            status["name"] = name
            if upstream.state is State.STARTING:
                status["reason"] = "did not answer before the check gave up"
            if upstream.state is State.SIGN_IN:
                status["reason"] = f"run: mcp-patchbay login {name} --config {config.path}"
            rows.append(status)
        tg.cancel_scope.cancel()
    failed = [r for r in rows if r["state"] not in ("ready", "disabled")]
    assumed = registered_as is None
    registered_as = registered_as or ASSUMED_REGISTERED_AS
    exposure, listed = _exposure(config, supervisor)
    too_long = name_warnings(listed, registered_as)
    if as_json:
        names = {"registered_as": registered_as, "assumed": assumed, "too_long": too_long}
        document = {"servers": rows, "tools": len(supervisor.catalog.tools), "names": names, "exposure": exposure}
        print(json.dumps(document, indent=2))
    else:
        width = max([len(r["name"]) for r in rows] + [6])
        print(f"{'SERVER':<{width}}  {'TRANSPORT':<9}  {'STATE':<13}  {'TOOLS':>5}  {'READY IN':>8}  PROBLEM")
        for r in rows:
            ready = f"{r['ready_after_ms']} ms" if r["ready_after_ms"] is not None else "-"
            state = "failed" if r["state"] in ("restarting", "starting") else r["state"]
            state = "needs sign-in" if state == State.SIGN_IN.value else state
            print(
                f"{r['name']:<{width}}  {r['transport']:<9}  {state:<13}  {r['tools']:>5}  {ready:>8}  "
                f"{r['reason'] or ''}"
            )
        total = len(supervisor.catalog.tools)
        print(
            f"\n{len(rows) - len(failed)} of {len(rows)} servers ok, {total} tools, "
            f"checked in {time.monotonic() - started:.1f}s ({config.path})"
        )
        _print_exposure(exposure)
        _print_name_warnings(too_long, registered_as, assumed, config)
    return 1 if failed else 0


def _exposure(config: Config, supervisor: Any) -> tuple[dict[str, Any], list[str]]:
    """Which listing this config gets (``patchbay.expose``) and what each would cost; the
    names the client would list in the mode used."""
    from mcp_patchbay.exposure import Exposure, described_servers, listing_cost, search_mode

    catalog = supervisor.catalog
    servers = described_servers(supervisor.upstreams)
    settings = config.settings
    listings = {
        mode: Exposure(settings.model_copy(update={"expose": mode})).listing(catalog, servers)
        for mode in ("all", "search")
    }
    used = "search" if search_mode(settings, len(catalog.tools)) else "all"
    exposure: dict[str, Any] = {"mode": used, "expose": settings.expose, "threshold": settings.search_threshold}
    for mode, tools in listings.items():
        chars, tokens = listing_cost(tools)
        exposure[mode] = {"tools": len(tools), "chars": chars, "tokens": tokens}
    return exposure, [tool.name for tool in listings[used]]


def _print_exposure(exposure: dict[str, Any]) -> None:
    why = {
        "all": "every tool is listed",
        "search": "the client lists find_tools and call_tool",
    }[exposure["mode"]]
    if exposure["expose"] == "auto":
        why += f' (expose "auto", search_threshold {exposure["threshold"]})'
    print(f"\nexposed as: {exposure['mode']} mode: {why}")
    for mode in ("all", "search"):
        cost = exposure[mode]
        print(
            f"  {mode + ' mode:':<13}{cost['tools']:>4} tools listed, {cost['chars']:>9,} characters, "
            f"~{cost['tokens']:,} tokens"
        )


def _print_name_warnings(too_long: list[dict[str, Any]], registered_as: str, assumed: bool, config: Config) -> None:
    if not too_long:
        return
    how = "assumed; pass --as NAME" if assumed else "as given"
    print(f"\nwarning: {len(too_long)} tool name(s) too long for a client, registered as {registered_as!r} ({how}):")
    for w in too_long:
        print(
            f"  {w['tool']}: {w['length']} characters in {w['client']} ({w['sent_as']}), "
            f"over its limit of {w['limit']}; {w['consequence']}"
        )
    if config.settings.registered_as != registered_as:
        print(
            f'  fix: set "registered_as": "{registered_as}" in the config\'s "patchbay" object (names are then '
            "shortened to fit), or register the proxy under a shorter name"
        )
    else:
        print("  fix: register the proxy under a shorter name (the names cannot be shortened enough)")
