"""What a transport yields while connected: a ``Link``; and the ``Connector`` seam that opens one."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from mcp_patchbay.config import RemoteSpec, StdioSpec

if TYPE_CHECKING:
    from mcp_patchbay.fastpath.pipe_calls import RawCalls
    from mcp_patchbay.upstreams.transports.stdio import ProcessWatch


@dataclass(frozen=True, slots=True)
class Link:
    """An open transport to an upstream: its streams, and what tells us it ended."""

    read: Any
    write: Any
    closed: anyio.Event | None = None
    """Set when the transport ended on its own (a stdio server's stdout closed)."""
    watch: ProcessWatch | None = None
    raw: RawCalls | None = None
    """Where the transport offers it: tool calls past the SDK's session (``fastpath.pipe_calls``)."""


Connector = Callable[[str, "StdioSpec | RemoteSpec"], AbstractAsyncContextManager[Link]]
"""Opens a ``Link`` for a server; tests pass one that connects in-memory servers."""


__all__ = ["Connector", "Link"]
