"""A stdio upstream as a ``Link``: the process transport of ``stdio``, framed for the session."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager

from mcp_patchbay.config import StdioSpec
from mcp_patchbay.stdio import stdio_transport
from mcp_patchbay.transports import Link


@asynccontextmanager
async def stdio_link(
    name: str, spec: StdioSpec, adopt: subprocess.Popen[bytes] | None = None
) -> AsyncGenerator[Link, None]:
    transport = stdio_transport(name, spec.command, spec.args, spec.env, spec.cwd, adopt=adopt)
    async with transport as (read, write, watch, raw):
        yield Link(read, write, closed=watch.stdout_closed, watch=watch, raw=raw)
