"""The links to upstream servers: one per transport, each an open ``Link`` while connected.

- ``link``: what every transport yields: ``Link`` (streams, the end event, the process
  watch and raw lane where there are some) and ``Connector``, the seam tests use.
- ``stdio``: a child process speaking JSON-RPC lines on its stdin and stdout, with its
  raw tool-call lane (``fastpath.pipe_calls``); the process tree is stopped with the link.
- ``http``: streamable HTTP and the older SSE transport, on the SDK's clients, with the
  HTTP status of a failed request tied to that request's error answer; beside a streamable
  HTTP link, its lane (``fastpath.http_calls``: tool calls POSTed past the SDK's client).

Each lane is given with ``fast_path`` (``patchbay.fast_path``): off, the link has none and every
request goes through the SDK's session.

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
    fast_path: bool = True,
) -> AbstractAsyncContextManager[Link]:
    """The link for a config entry, the one dispatch by transport (``Upstream`` and sign-in open
    theirs here); ``adopt`` is a process already started for it (``spawn``); ``auth`` signs a
    remote server's requests (``oauth.UpstreamAuth``); ``bounds`` bound every message (the
    defaults if not given); ``fast_path``: whether the link has its lane (``patchbay.fast_path``)."""
    if isinstance(spec, StdioSpec):
        from mcp_patchbay.upstreams.transports.stdio import stdio_link

        return stdio_link(name, spec, adopt, bounds, fast_path=fast_path)
    from mcp_patchbay.upstreams.transports.http import (  # the SDK's HTTP client: when needed
        sse_link,
        streamable_http_link,
    )

    if spec.transport == "sse":
        return sse_link(spec, connect_timeout, auth, bounds)
    return streamable_http_link(spec, connect_timeout, auth, bounds, fast_path=fast_path)


__all__ = ["Connector", "Link", "open_link"]
