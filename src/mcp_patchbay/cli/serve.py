"""``serve`` on stdio: the proxy over our stdin/stdout until the client goes or a signal
comes (SIGTERM, SIGINT: every upstream group signalled at once, ``transports.stdio.shutdown``),
with config reloads on SIGHUP and, if asked, on file changes. Also the event loop's options
for ``serve --http`` and the start's warning of a registered name too long for any client."""

from __future__ import annotations

import logging
import signal
import sys
from typing import TYPE_CHECKING, Any

from mcp_patchbay import __version__

if TYPE_CHECKING:
    import anyio
    import anyio.abc

    from mcp_patchbay.config import Config
    from mcp_patchbay.session.proxy import Proxy
    from mcp_patchbay.upstreams.spawn import Prespawned
    from mcp_patchbay.wire.early_handshake import EarlyHandshake
logger = logging.getLogger(__name__)


def loop_options() -> dict[str, Any]:
    """The gateway runs on uvloop where it is installed (not on Windows): the event loop's own
    cost is a large part of an HTTP request's."""
    try:
        import uvloop  # noqa: F401  # pyright: ignore[reportUnusedImport]
    except ImportError:
        return {}
    return {"use_uvloop": True}


async def serve_stdio(
    config: Config, prespawned: Prespawned, early: EarlyHandshake | None = None, config_problem: str | None = None
) -> None:
    """The proxy on our stdin and stdout. ``early``: the reader that may have answered
    ``initialize`` already; ``config_problem``: the config could not be used (``config`` is an
    empty stand-in): serve no server and tell the model why, until the file is fixed."""
    import anyio

    from mcp_patchbay.config.watch import reload_on_sighup, watch_config
    from mcp_patchbay.session.proxy import Proxy
    from mcp_patchbay.upstreams.transports.stdio import shutdown
    from mcp_patchbay.wire.jsonrpc import Bounds
    from mcp_patchbay.wire.stdio import stdio_streams

    proxy = Proxy(config, prespawned=prespawned, config_problem=config_problem)
    profile = f" (profile '{config.profile}')" if config.profile else ""
    logger.info("mcp-patchbay %s serving %d servers from %s%s", __version__, len(config.servers), config.path, profile)
    async with anyio.create_task_group() as tg:
        tg.start_soon(_stop_on_signals, tg.cancel_scope)
        tg.start_soon(reload_on_sighup, config.path, proxy.supervisor.apply)
        from mcp_patchbay.presence.publish import publish  # what mcp-patchbay ui shows of this proxy

        tg.start_soon(publish, proxy)
        if config.settings.activity:
            await tg.start(_activity_log, proxy)
        if config.settings.watch:
            tg.start_soon(watch_config, config.path, proxy.supervisor.apply)
        bounds = Bounds.of(config.settings)
        async with stdio_streams(proxy.lane.offer, bounds, early) as (read_stream, write_stream, wire):
            # Whatever ends the client's session ends the proxy: the upstreams get the quick
            # stop (shutdown), not a restart's.
            await proxy.serve(read_stream, write_stream, wire, before_stop=shutdown)
        tg.cancel_scope.cancel()


async def _activity_log(proxy: Proxy, *, task_status: anyio.abc.TaskStatus[None]) -> None:
    """The activity log (``patchbay.activity``). What happens from the start waits in a bounded
    buffer; the log's code (``activity``, and ``sqlite3`` in its writer's thread) is loaded in a
    worker thread once the start is over, so none of it is on the start's path."""
    import collections
    import importlib
    import os

    import anyio.to_thread

    early: collections.deque[tuple[object, ...]] = collections.deque(maxlen=proxy.settings.activity_queue)
    proxy.on_activity = early.append
    task_status.started()
    await proxy.supervisor.wait_startup()
    try:
        wiring = await anyio.to_thread.run_sync(importlib.import_module, "mcp_patchbay.activity.wiring")
    except Exception as exc:  # the log is not worth the session
        proxy.on_activity = None
        logger.warning("the activity log could not be started: %s", exc)
        return
    await wiring.keep_log(proxy, f"stdio pid {os.getpid()}", early)


async def _stop_on_signals(scope: anyio.CancelScope) -> None:
    import anyio

    from mcp_patchbay.upstreams.transports.stdio import shutdown

    if sys.platform == "win32":  # no signal receivers there; stdin EOF ends the proxy
        return
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            logger.info("received %s; stopping upstreams", signal.Signals(signum).name)
            shutdown()  # every upstream group gets SIGTERM now, before the unwinding below
            scope.cancel()
            return


def warn_unfit_name(config: Config) -> None:
    """Serving under a registered name too long for any exposed name to fit: say so once."""
    from mcp_patchbay.catalog.client_quirks import CLIENT_LIMITS
    from mcp_patchbay.catalog.naming import MIN_MAX_LENGTH, OwnTools

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
