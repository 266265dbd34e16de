"""``mcp-patchbay ui [--config PATH] [--port N] [--no-open]``: the page on 127.0.0.1.

Serves the page (``app.Ui`` over ``sources.LocalSources``) on 127.0.0.1, prints its address as
the first line on stdout (with the page's random token), and opens it in the browser unless
``--no-open``. Ctrl-C (or SIGTERM) stops it. The config (``--config``, ``$PATCHBAY_CONFIG``, the
default config when it exists) is the one shown when no proxy serves it; every running proxy's
own config is shown too. Exit status: 0 stopped, 2 a usage mistake or a port that cannot be used.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import socket
import sys
from pathlib import Path

__all__ = ["main", "run"]

EXIT_OK = 0
EXIT_USAGE = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcp-patchbay ui",
        description="A page on 127.0.0.1 showing every proxy running for you on this machine (which client "
        "launched it, its servers' states, problems, calls and times), its tools, the activity log live and "
        "what is held for approval; approve, sign in, and turn servers and tools off and on from it.",
        epilog="The address carries a random token: only the browser you open it in gets in.",
    )
    parser.add_argument(
        "--config",
        "-c",
        metavar="PATH",
        help="the patchbay config to show and change when no proxy serves it (default: $PATCHBAY_CONFIG, else "
        "the default config if there is one)",
    )
    parser.add_argument(
        "--port", "-p", type=int, default=0, metavar="N", help="the port on 127.0.0.1 (default: a free one)"
    )
    parser.add_argument("--no-open", action="store_true", help="do not open a browser; the address is printed first")
    return parser


def run(command: str, argv: list[str]) -> int:
    """``mcp-patchbay ui ...`` (``cli.main`` dispatches it here)."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    return main(args.config, args.port, open_browser=not args.no_open)


def _config(given: str | None) -> Path | None:
    from mcp_patchbay.cli.options import default_config_if_any

    if given:
        return Path(given).expanduser().absolute()
    if os.environ.get("PATCHBAY_CONFIG"):
        return Path(os.environ["PATCHBAY_CONFIG"]).expanduser().absolute()
    found = default_config_if_any()
    return Path(found).absolute() if found else None


def main(config: str | None, port: int, *, open_browser: bool = True) -> int:
    import logging

    import anyio

    if not 0 <= port <= 65535:
        print(f"mcp-patchbay ui: --port {port} is not a port", file=sys.stderr)
        return EXIT_USAGE
    path = _config(config)
    if path is not None and not path.is_file():
        print(f"mcp-patchbay ui: no config file at {path}", file=sys.stderr)
        return EXIT_USAGE
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        if sys.platform != "win32":
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(64)
    except OSError as exc:
        listener.close()
        print(f"mcp-patchbay ui: cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    port = listener.getsockname()[1]
    token = secrets.token_urlsafe(24)
    url = f"http://127.0.0.1:{port}/?token={token}"
    print(url, flush=True)
    logging.basicConfig(level=logging.WARNING, format="mcp-patchbay ui: %(message)s", stream=sys.stderr)
    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(_serve, listener, path, token, url, open_browser)
    return EXIT_OK


async def _serve(listener: socket.socket, config: Path | None, token: str, url: str, open_browser: bool) -> None:
    import anyio
    import uvicorn

    from mcp_patchbay.ui.app import Ui
    from mcp_patchbay.ui.guard import HostOrigin
    from mcp_patchbay.ui.log import open_log
    from mcp_patchbay.ui.sources import LocalSources

    port = listener.getsockname()[1]
    hosts = (f"127.0.0.1:{port}", f"localhost:{port}")
    ui = Ui(
        LocalSources(config, open_log()),
        host_origin=HostOrigin(hosts=hosts, origins=(f"http://localhost:{port}",)),
        token=token,
        port=port,
    )
    server = uvicorn.Server(
        uvicorn.Config(ui.app(), ws="none", lifespan="off", log_config=None, access_log=False, server_header=False)
    )
    async with anyio.create_task_group() as tg:
        ui.signins.tg = tg
        if open_browser:
            tg.start_soon(_open, url)
        await server.serve(sockets=[listener])
        tg.cancel_scope.cancel()


async def _open(url: str) -> None:
    from mcp_patchbay.oauth.signin import open_in_browser

    if not await open_in_browser(url):
        print("mcp-patchbay ui: no browser could be opened; open the address above yourself", file=sys.stderr)
