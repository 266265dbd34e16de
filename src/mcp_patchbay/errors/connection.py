"""What a failing connection to an upstream says: a start that did not finish in time, a process
that exited while starting, a connection lost, an answer that is not a tool result.

Each error carries the process's last words (``transports.stdio.ProcessWatch``: exit code,
stderr's tail, lines on stdout that were not MCP) as its developer detail, and the first three
are logged here with them. ``upstream`` raises them; every other foreign failure is
``errors.foreign``' to translate.
"""

from __future__ import annotations

import logging
from typing import Any, cast

import anyio

from mcp_patchbay.errors.tree import Code, UpstreamError
from mcp_patchbay.upstreams.transports.stdio import ProcessWatch

__all__ = ["checked_result", "connection_lost", "exited_while_starting", "start_timed_out"]


def start_timed_out(server: str, connect_timeout: float, watch: ProcessWatch | None) -> UpstreamError:
    garbage = ""
    if watch is not None and watch.garbage_lines:
        garbage = (
            f" It wrote {watch.garbage_lines} line(s) to stdout that are not MCP messages (a server must "
            "write only JSON-RPC there)."
        )
    return UpstreamError(
        Code.TIMEOUT,
        f"Server '{server}' did not finish starting within {connect_timeout:g}s.{garbage}",
        detail=watch.describe_exit() if watch is not None else None,
        server=server,
    )


async def exited_while_starting(server: str, watch: ProcessWatch | None, log: logging.Logger) -> UpstreamError | None:
    """The error of a start that failed because the process ended; None when it did not end."""
    if watch is None or not (watch.stdout_closed.is_set() or watch.exited.is_set()):
        return None
    await _settle(watch)
    code = f" with exit code {watch.returncode}" if watch.returncode is not None else ""
    log.error("server '%s' exited during startup: %s", server, watch.describe_exit())
    return UpstreamError(
        Code.CONNECTION_FAILED,
        f"Server '{server}' exited during startup{code}. Tell the user to run 'mcp-patchbay check' "
        "and look at the proxy's log.",
        detail=watch.describe_exit(),
        server=server,
    )


async def connection_lost(server: str, watch: ProcessWatch | None, log: logging.Logger) -> UpstreamError:
    if watch is not None:
        await _settle(watch)
    detail = watch.describe_exit() if watch is not None else "connection lost"
    log.error("server '%s' connection lost: %s", server, detail)
    return UpstreamError(
        Code.CONNECTION_LOST,
        f"Server '{server}' stopped unexpectedly and is restarting. Retry in a few seconds.",
        detail=detail,
        server=server,
    )


def checked_result(result: Any, server: str, tool: str) -> dict[str, Any]:
    """``result`` if it has enough shape to pass on (an object whose content, if any, is a list,
    and whose structured content, if any, an object); else the error of a malformed answer."""
    if isinstance(result, dict):
        answer = cast("dict[str, Any]", result)
        structured = answer.get("structuredContent")
        if isinstance(answer.get("content", []), list) and (structured is None or isinstance(structured, dict)):
            return answer
    raise UpstreamError(
        Code.PROTOCOL_ERROR,
        f"Server '{server}' answered with a malformed tool result. Retry once; if it persists, tell the user.",
        detail=f"result: {str(cast('object', result))[:500]}",
        server=server,
        tool=tool,
    )


async def _settle(watch: ProcessWatch) -> None:
    """Give a dying process a moment, so its exit code and last words make the log."""
    with anyio.move_on_after(1.0):
        await watch.exited.wait()
