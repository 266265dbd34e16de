"""Experiments: mcp-patchbay with one thing changed, to put a number on a suggested change.

    .venv/bin/python scripts/bench_variant.py --variant NAME --config FILE [--log-level WARNING]

Runs the proxy exactly as ``python -m mcp_patchbay`` does, with one change:

- ``sdk-stdio``: the client's side served by the SDK's threaded ``mcp.server.stdio.stdio_server``
  (one worker-thread round trip per line read, two per message written), as the proxy did
  before it had its own transport (``mcp_patchbay.downstream``). The before/after of that change.
- ``no-otel``: without the SDK's ``OpenTelemetryMiddleware`` in the proxy's server middleware
  (the SDK documents dropping it from ``Server.middleware`` as the way to opt out). It opens
  a span per request even when no exporter is installed.

The benchmark runs each variant beside the stock proxy, in the same alternating batches.
"""

from __future__ import annotations

import argparse
from typing import Any

VARIANTS = ("sdk-stdio", "no-otel")


def sdk_stdio() -> None:
    try:
        from mcp_patchbay import client_wire as downstream
    except ImportError:  # an older proxy: it used the SDK's transport anyway
        return

    async def no_pipes() -> None:
        return None

    downstream._open_pipes = no_pipes  # type: ignore[assignment]  # pyright: ignore[reportPrivateUsage]


def no_otel() -> None:
    from mcp.server._otel import OpenTelemetryMiddleware

    from mcp_patchbay.server import Proxy

    build = Proxy._build_server  # pyright: ignore[reportPrivateUsage]

    def build_without_otel(self: Proxy) -> Any:
        server = build(self)
        server.middleware[:] = [m for m in server.middleware if not isinstance(m, OpenTelemetryMiddleware)]
        return server

    Proxy._build_server = build_without_otel  # type: ignore[method-assign]


def main() -> None:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--variant", choices=VARIANTS, required=True)
    args, rest = parser.parse_known_args()
    {"sdk-stdio": sdk_stdio, "no-otel": no_otel}[args.variant]()
    from mcp_patchbay.cli import main as cli_main

    raise SystemExit(cli_main(rest))


if __name__ == "__main__":
    main()
