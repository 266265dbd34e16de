"""The client's tool calls, taken off the wire before the SDK's server session.

Every client that launches the proxy over stdio today (Claude Desktop and Code, Cursor,
VS Code) speaks the ``initialize`` handshake, where a tool call's params and result
cross the proxy unchanged. For those calls the SDK's server machinery (pydantic models
of the request and result, a dispatcher task and cancel scope, two memory-stream
hand-offs) is pure cost, so the transport offers every message it reads to
``CallLane.offer`` first, as JSON values:

- before the client's ``notifications/initialized`` (and always on the stateless
  2026-07-28 protocol, which has no handshake) nothing is taken: the SDK serves it all;
- after it, a well-formed ``tools/call`` runs here, in a plain asyncio task of its own
  (an anyio task group's ``start_soon`` cost five times as much a call), through the
  same ``Proxy.run_tool`` (``calls.path.ToolPath.run``) as the SDK's path, and its answer is written as JSON
  (a call asking for a task is not taken: its answer is a ``CreateTaskResult``, ``tasks``);
- a ``notifications/cancelled`` for one of those calls cancels it (the upstream is told
  by the cancelled call); a cancelled call gets no answer, as the protocol asks;
- anything else, malformed calls included, goes on to the SDK, which answers it;
- with ``patchbay.fast_path`` off, nothing is taken.

What every lane on the client's side does alike to a call's messages is ``fastpath.messages``'.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, cast

import anyio
from mcp.shared.exceptions import MCPError

from mcp_patchbay.calls.deadlines import ProgressFn
from mcp_patchbay.fastpath.messages import Send, progress_sender, split_meta, without_later_fields
from mcp_patchbay.wire.jsonrpc import RequestId, is_request_id

logger = logging.getLogger(__name__)

RunTool = Callable[
    [str, "dict[str, Any] | None", "ProgressFn | None", "dict[str, Any] | None"], Awaitable[dict[str, Any]]
]


class CallLane:
    """``tools/call`` on a handshake-era connection, as JSON values end to end."""

    def __init__(self, run_tool: RunTool, *, fast_path: bool = True) -> None:
        self._run_tool = run_tool
        self.fast_path = fast_path
        """``patchbay.fast_path``: off, the lane takes no call (it still learns the client's name)."""
        self._send: Send | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._saw_initialize = False
        self.client_name: str | None = None
        """The ``clientInfo.name`` of the client's ``initialize`` (what it shows the model differs)."""
        self.open = False
        """True once the client finished the handshake: from then on tool calls take the lane."""
        self._in_flight: dict[RequestId, anyio.CancelScope] = {}

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    @asynccontextmanager
    async def serving(self, send: Send) -> AsyncGenerator[None, None]:
        """Take calls while inside; ``send`` writes one message to the client. Leaving cancels
        the calls still in flight (they get no answer) and waits for them to end."""
        self._send = send
        try:
            yield
        finally:
            self._send, self.open, self._saw_initialize = None, False, False
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            if tasks:
                with anyio.CancelScope(shield=True):
                    await asyncio.wait(tasks)

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            # run_tool answers every failure; anything else is a bug, told to developers.
            logger.error("tools/call failed unexpectedly", exc_info=task.exception())

    def offer(self, message: dict[str, Any]) -> bool:
        """Whether the lane took ``message`` (one message read from the client)."""
        method = message.get("method")
        if method == "tools/call":
            return self._take_call(message)
        if method == "notifications/cancelled":
            params = message.get("params")
            request_id = cast("dict[str, Any]", params).get("requestId") if isinstance(params, dict) else None
            scope = self._in_flight.get(cast("RequestId", request_id)) if is_request_id(request_id) else None
            if scope is None:
                return False  # not ours: the SDK's session may know it
            scope.cancel()
            return True
        if method == "initialize" and "id" in message:
            self._saw_initialize = True
            params = message.get("params")
            info = cast("dict[str, Any]", params).get("clientInfo") if isinstance(params, dict) else None
            name = cast("dict[str, Any]", info).get("name") if isinstance(info, dict) else None
            self.client_name = name if isinstance(name, str) else None
        elif method == "notifications/initialized" and self._saw_initialize and not self.open:
            self.open = True
            logger.debug("handshake done: tool calls now take the lane")
        return False

    def _take_call(self, message: dict[str, Any]) -> bool:
        request_id = message.get("id")
        params = message.get("params")
        if not (self.open and self.fast_path) or self._send is None or not isinstance(params, dict):
            return False
        if not is_request_id(request_id):
            return False
        values = cast("dict[str, Any]", params)
        if "task" in values:
            return False  # the SDK's path, where tasks.Tasks answers it
        name, arguments, meta = values.get("name"), values.get("arguments"), values.get("_meta")
        if not isinstance(name, str) or not (arguments is None or isinstance(arguments, dict)):
            return False  # the SDK answers it with its usual invalid-params error
        token, forwarded = split_meta(meta)
        task = asyncio.create_task(
            self._call(cast("RequestId", request_id), name, cast("dict[str, Any] | None", arguments), token, forwarded)
        )
        self._tasks.add(task)
        task.add_done_callback(self._ended)
        return True

    async def _call(
        self,
        request_id: RequestId,
        name: str,
        arguments: dict[str, Any] | None,
        token: RequestId | None,
        meta: dict[str, Any] | None,
    ) -> None:
        send = self._send
        assert send is not None
        reply: dict[str, Any] | None = None
        with anyio.CancelScope() as scope:
            self._in_flight[request_id] = scope
            try:
                progress = None if token is None else progress_sender(token, send)
                result = await self._run_tool(name, arguments, progress, meta)
                reply = {"jsonrpc": "2.0", "id": request_id, "result": without_later_fields(result)}
            except MCPError as exc:  # an answer in JSON-RPC's error form (``unknown_tool: "error"``)
                error = exc.error.model_dump(by_alias=True, mode="json", exclude_none=True)
                reply = {"jsonrpc": "2.0", "id": request_id, "error": error}
            finally:
                if self._in_flight.get(request_id) is scope:
                    del self._in_flight[request_id]
        if reply is None or scope.cancel_called:
            return  # cancelled by the client (or the proxy is stopping): no answer
        try:
            await send(reply)
        except Exception:
            logger.debug("could not answer tools/call %r: the client is gone", request_id, exc_info=True)
