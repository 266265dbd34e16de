"""The links to upstream servers: one per transport, each an open ``Link`` while connected.

- ``link``: what every transport yields: ``Link`` (streams, the end event, the process
  watch and raw lane where there are some) and ``Connector``, the seam tests use.
- ``stdio``: a child process speaking JSON-RPC lines on its stdin and stdout, with its
  raw tool-call lane (``fastpath.pipe_calls``); the process tree is stopped with the link.
- ``http``: streamable HTTP and the older SSE transport, on the SDK's clients, with the
  HTTP status of a failed request tied to that request's error answer.
- ``http_lane``: ``tools/call`` to a streamable HTTP upstream POSTed past the SDK's client
  (the HTTP half of ``fastpath.pipe_calls``), on ``http1``: keep-alive HTTP/1.1 connections on asyncio
  streams with httptools' parser.

``Upstream`` opens a link per connection through ``open_link``, or through a test's
``Connector`` (in-memory servers), and runs the SDK's ``ClientSession`` over it.
"""

from __future__ import annotations

import subprocess
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING

from mcp_patchbay.config import RemoteSpec, StdioSpec
from mcp_patchbay.upstreams.transports.link import Connector, Link

if TYPE_CHECKING:
    import httpx2

    from mcp_patchbay.wire.jsonrpc import Bounds


def open_link(
    name: str,
    spec: StdioSpec | RemoteSpec,
    connect_timeout: float,
    *,
    adopt: subprocess.Popen[bytes] | None = None,
    auth: httpx2.Auth | None = None,
    bounds: Bounds | None = None,
) -> AbstractAsyncContextManager[Link]:
    """The link for a config entry, the one dispatch by transport (``Upstream`` and sign-in open
    theirs here); ``adopt`` is a process already started for it (``spawn``); ``auth`` signs a
    remote server's requests (``oauth.UpstreamAuth``); ``bounds`` bound every message (the
    defaults if not given)."""
    if isinstance(spec, StdioSpec):
        from mcp_patchbay.upstreams.transports.stdio import stdio_link

        return stdio_link(name, spec, adopt, bounds)
    from mcp_patchbay.upstreams.transports.http import (  # the SDK's HTTP client: when needed
        sse_link,
        streamable_http_link,
    )

    link = sse_link if spec.transport == "sse" else streamable_http_link
    return link(spec, connect_timeout, auth, bounds)


__all__ = ["Connector", "Link", "open_link"]
