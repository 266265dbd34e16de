"""Command line: ``mcp-patchbay [serve] --config PATH`` and ``mcp-patchbay check --config PATH``.

``serve`` (the default) speaks MCP on stdin/stdout; logs go to stderr (and
``--log-file``), never stdout. ``check`` connects to every upstream once and prints
one line per server; it is what a user runs first.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcp_patchbay import __version__
from mcp_patchbay.spawn import discard, early, prespawn, settle

if TYPE_CHECKING:
    import anyio

    from mcp_patchbay.config import Config

# Everything else (anyio, pydantic, the SDK) is imported once spawn.early has started the
# upstreams: each millisecond before that is one more of the proxy's startup.

logger = logging.getLogger("mcp_patchbay")

EXIT_CONFIG = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcp-patchbay",
        description="An MCP proxy: serves the tools, resources and prompts of several MCP servers as one, over stdio.",
    )
    parser.add_argument("command", nargs="?", choices=("serve", "check"), default="serve", help="default: serve")
    parser.add_argument("--config", "-c", help="config file (default: $PATCHBAY_CONFIG)")
    parser.add_argument("--log-level", default=os.environ.get("PATCHBAY_LOG_LEVEL", "INFO"), help="default: INFO")
    parser.add_argument("--log-file", help="also write logs to this file")
    parser.add_argument("--json", action="store_true", help="check: print the status as JSON")
    parser.add_argument("--version", action="version", version=f"mcp-patchbay {__version__}")
    return parser


def setup_logging(level: str, log_file: str | None) -> None:
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_file:
        handlers.append(logging.FileHandler(log_file, encoding="utf-8"))
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        handlers=handlers,
        force=True,
    )
    # Our own logs say it better; the SDK's per-message chatter is for debugging the SDK.
    if logging.getLogger().level > logging.DEBUG:
        for noisy in ("mcp", "httpx", "httpx2", "httpcore"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
    logging.captureWarnings(True)
    warnings.filterwarnings("ignore", category=UserWarning, module=r"mcp\..*")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    setup_logging(args.log_level, args.log_file)
    path = args.config or os.environ.get("PATCHBAY_CONFIG")
    if not path:
        print("mcp-patchbay: no config file: pass --config PATH or set PATCHBAY_CONFIG", file=sys.stderr)
        return EXIT_CONFIG
    # Serving: start the plain stdio upstreams before even the config check imports pydantic
    # (spawn.early); the checked config then keeps exactly those it would launch itself.
    guessed = early(path) if args.command == "serve" else {}
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

    if args.command == "check":
        return anyio.run(_check, config, args.json)
    # Start the stdio upstreams now, before the MCP SDK is imported (most of our own start):
    # their boot then runs beside ours. The handshake still waits for the client.
    prespawned = prespawn(config.servers, kept)
    started = dict(prespawned)  # the proxy takes them from the first; this one is for the last word
    try:
        with contextlib.suppress(KeyboardInterrupt):
            anyio.run(_serve, config, prespawned)
    finally:
        discard(started)  # normally all stopped already; never leave one behind
    return 0


async def _serve(config: Config, prespawned: dict[str, subprocess.Popen[bytes]]) -> None:
    import anyio

    from mcp_patchbay.downstream import stdio_streams
    from mcp_patchbay.server import Proxy
    from mcp_patchbay.watch import reload_on_sighup, watch_config

    proxy = Proxy(config, prespawned=prespawned)
    logger.info("mcp-patchbay %s serving %d servers from %s", __version__, len(config.servers), config.path)
    async with anyio.create_task_group() as tg:
        tg.start_soon(_stop_on_signals, tg.cancel_scope)
        tg.start_soon(reload_on_sighup, config.path, proxy.supervisor.apply)
        if config.settings.watch:
            tg.start_soon(watch_config, config.path, proxy.supervisor.apply)
        async with stdio_streams(proxy.lane.offer) as (read_stream, write_stream, wire):
            await proxy.serve(read_stream, write_stream, wire)
        logger.info("client closed the connection; stopping upstreams")
        tg.cancel_scope.cancel()


async def _stop_on_signals(scope: anyio.CancelScope) -> None:
    import anyio

    if sys.platform == "win32":  # no signal receivers there; stdin EOF ends the proxy
        return
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            logger.info("received %s; stopping upstreams", signal.Signals(signum).name)
            scope.cancel()
            return


async def _check(config: Config, as_json: bool) -> int:
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
            rows.append(status)
        tg.cancel_scope.cancel()
    failed = [r for r in rows if r["state"] not in ("ready", "disabled")]
    if as_json:
        print(json.dumps({"servers": rows, "tools": len(supervisor.catalog.tools)}, indent=2))
    else:
        width = max([len(r["name"]) for r in rows] + [6])
        print(f"{'SERVER':<{width}}  {'TRANSPORT':<9}  {'STATE':<10}  {'TOOLS':>5}  {'READY IN':>8}  PROBLEM")
        for r in rows:
            ready = f"{r['ready_after_ms']} ms" if r["ready_after_ms"] is not None else "-"
            state = "failed" if r["state"] in ("restarting", "starting") else r["state"]
            print(
                f"{r['name']:<{width}}  {r['transport']:<9}  {state:<10}  {r['tools']:>5}  {ready:>8}  "
                f"{r['reason'] or ''}"
            )
        total = len(supervisor.catalog.tools)
        print(
            f"\n{len(rows) - len(failed)} of {len(rows)} servers ok, {total} tools, "
            f"checked in {time.monotonic() - started:.1f}s ({config.path})"
        )
    return 1 if failed else 0
