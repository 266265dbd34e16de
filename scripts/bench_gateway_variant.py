"""The gateway with one change, for ``bench_gateway.py --variant NAME``: experiments, not fixes.

    .venv/bin/python scripts/bench_gateway_variant.py --variant drain -- serve --http 127.0.0.1:PORT CONFIG

Applies the change in this process, then runs ``mcp_patchbay.cli.main`` with the arguments after
``--``. The source under ``src/`` is not touched: each variant shows what a change there would buy.

- ``drain``: an upstream's SSE answer to a POST is read to its end before the response is closed,
  so that its connection goes back to httpx2's pool. The SDK's streamable HTTP client closes the
  response as soon as the JSON-RPC answer has arrived (``_handle_sse_response``: ``is_complete``,
  then ``response.aclose()``); when the closing chunk of the body has not been read by then,
  httpcore2 cannot reuse the connection and closes it, so the next call opens a new TCP
  connection (one per call under load: ``ss -tan`` counts one TIME-WAIT socket per call). Here
  the client's transport wraps such a response's stream so that ``aclose`` first reads what is
  left (at most ``DRAIN_SECONDS``).
"""

from __future__ import annotations

import argparse
import types
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx2

DRAIN_SECONDS = 0.25
"""How long closing an SSE answer may wait for the rest of its body (the server ends it right after the answer)."""


class _DrainOnClose(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream) -> None:
        self.inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for part in self.inner:
            yield part

    async def aclose(self) -> None:
        try:
            with anyio.move_on_after(DRAIN_SECONDS):
                async for _ in self.inner:
                    pass
        except httpx2.HTTPError:
            pass
        await self.inner.aclose()


class DrainingTransport(httpx2.AsyncHTTPTransport):
    """httpx2's own transport, but an SSE answer to a POST is drained before it is closed."""

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await super().handle_async_request(request)
        if request.method == "POST" and response.headers.get("content-type", "").startswith("text/event-stream"):
            assert isinstance(response.stream, httpx2.AsyncByteStream)
            response.stream = _DrainOnClose(response.stream)
        return response


def apply_drain() -> None:
    from mcp_patchbay.transports import http

    def async_client(*args: Any, **kwargs: Any) -> httpx2.AsyncClient:
        kwargs.setdefault("transport", DrainingTransport())
        return httpx2.AsyncClient(*args, **kwargs)

    shim = types.ModuleType("httpx2_with_draining")
    shim.__dict__.update(httpx2.__dict__)
    shim.AsyncClient = async_client  # type: ignore[attr-defined]
    http.httpx2 = shim  # type: ignore[attr-defined]


VARIANTS = {"drain": apply_drain}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variant", choices=sorted(VARIANTS), required=True)
    parser.add_argument("rest", nargs=argparse.REMAINDER, help="-- and the arguments of mcp-patchbay")
    args = parser.parse_args()
    VARIANTS[args.variant]()
    from mcp_patchbay.cli import main as patchbay_main

    rest = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
    raise SystemExit(patchbay_main(rest))


if __name__ == "__main__":
    main()
