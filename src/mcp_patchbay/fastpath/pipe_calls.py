"""Requests to a stdio upstream as JSON values, answered before the SDK's session sees them.

A tool call passes through the proxy unchanged, so its upstream half needs no model of
the request or the result. Sending it through ``ClientSession`` costs two memory-stream
hand-offs, the dispatcher's bookkeeping and cancel scope, and a pydantic round trip of
the reply: most of the proxy's CPU per call. ``RawCalls`` sends the request line itself
and the transport's reader hands it every parsed line first (``take``): answers to its
own ids, and progress notifications for its own tokens, stop here; everything else goes
on to the SDK's session as before.

Its ids are strings (``"pb-<n>"``), so they can never collide with the SDK's integer ids
on the same connection. What a caller sees matches the SDK's path: an upstream's JSON-RPC
error raises ``MCPError`` with its ``ErrorData``; the connection's end fails every pending
request at once with the SDK's own ``Connection closed``; a cancelled request tells the
upstream with ``notifications/cancelled``; an answer the transport refused unparsed
(``fail``) fails its call alone. No I/O but the writer it is given.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any, Protocol, cast

import mcp_types as types
from mcp.shared.exceptions import MCPError

from mcp_patchbay.calls.deadlines import ProgressFn
from mcp_patchbay.wire.jsonrpc import encode

logger = logging.getLogger(__name__)

ID_PREFIX = "pb-"


class LineWriter(Protocol):
    """What ``RawCalls`` writes to: an ``asyncio.StreamWriter``'s face."""

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...


class Pending:
    """One request in flight: where its answer goes, and its progress (its token is its id)."""

    __slots__ = ("future", "id", "on_progress", "params")

    def __init__(
        self,
        request_id: str,
        params: dict[str, Any],
        future: asyncio.Future[dict[str, Any]],
        on_progress: ProgressFn | None,
    ) -> None:
        self.id = request_id
        self.params = params
        """The request's params as sent: with the progress token when it asked for progress."""
        self.future = future
        self.on_progress = on_progress


class RawCalls:
    """The pending raw requests of one upstream connection.

    ``begin``, ``end`` and ``tell_cancelled`` are a request's life for a lane that sends it its own
    way (``http_calls.HttpLane``), sharing the ids, the table and ``take`` with ``request``."""

    def __init__(self, writer: LineWriter) -> None:
        self._writer = writer
        self._pending: dict[str, Pending] = {}
        self._ids = itertools.count(1)
        self.closed = False

    @property
    def pending(self) -> int:
        return len(self._pending)

    async def request(
        self, method: str, params: dict[str, Any], on_progress: ProgressFn | None = None
    ) -> dict[str, Any]:
        """Send one request and return its result as JSON values.

        Raises MCPError: the upstream's error answer, or ``CONNECTION_CLOSED`` when the
        connection ends first.
        """
        call = self.begin(params, on_progress)
        future = call.future
        try:
            self._writer.write(encode({"jsonrpc": "2.0", "id": call.id, "method": method, "params": call.params}))
            await self._writer.drain()
            return await future
        except asyncio.CancelledError:
            self.tell_cancelled(call)
            raise
        finally:
            self.end(call)

    def begin(self, params: dict[str, Any], on_progress: ProgressFn | None) -> Pending:
        """A new request, pending until ``end``: its id (``pb-<n>``), and its params with the id as
        its progress token when it asks for progress. Raises MCPError once the connection ended."""
        if self.closed:
            raise MCPError(types.CONNECTION_CLOSED, "Connection closed")
        request_id = f"{ID_PREFIX}{next(self._ids)}"
        if on_progress is not None:
            meta = cast("dict[str, Any]", params.get("_meta") or {})
            params = {**params, "_meta": {**meta, "progressToken": request_id}}
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        call = self._pending[request_id] = Pending(request_id, params, future, on_progress)
        return call

    def end(self, call: Pending) -> None:
        """``call`` is over (answered, failed or cancelled): a late answer to it is dropped."""
        del self._pending[call.id]

    def tell_cancelled(self, call: Pending) -> None:
        """The caller gave up (deadline, or the client cancelled) before ``call`` was answered: tell
        the upstream. A plain write, no await: this runs inside a cancelled scope."""
        future, request_id = call.future, call.id
        answered = future.done() and not future.cancelled()  # awaiting it from a cancelled task cancels it
        if answered or self.closed:
            return
        cancel = {"requestId": request_id, "reason": "cancelled by the proxy's client or deadline"}
        try:
            self._writer.write(encode({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel}))
        except Exception:
            logger.debug("could not send notifications/cancelled for %s", request_id, exc_info=True)

    async def take(self, message: dict[str, Any]) -> bool:
        """Whether ``message`` (a parsed line from the upstream) was ours: an answer to one of
        our requests, or progress on one. Everything else is for the SDK's session."""
        request_id = message.get("id")
        if isinstance(request_id, str) and "method" not in message:
            if not request_id.startswith(ID_PREFIX):
                return False
            pending = self._pending.get(request_id)
            if pending is None or pending.future.done():
                logger.debug("late answer to %s (the call was cancelled or timed out): dropped", request_id)
                return True
            if "error" in message:
                pending.future.set_exception(MCPError.from_error_data(_error_data(message["error"])))
            else:
                result = message.get("result")
                pending.future.set_result(cast("dict[str, Any]", result))  # its shape is the caller's to check
            return True
        if message.get("method") != "notifications/progress":
            return False
        params = message.get("params")
        if not isinstance(params, dict):
            return False
        values = cast("dict[str, Any]", params)
        token = values.get("progressToken")
        pending = self._pending.get(token) if isinstance(token, str) else None
        if pending is None or pending.on_progress is None:
            return False
        progress, total, note = values.get("progress"), values.get("total"), values.get("message")
        if not _is_number(progress) or not (total is None or _is_number(total)):
            return False  # malformed: the SDK's session logs and drops it
        try:
            await pending.on_progress(cast("float", progress), total, note if isinstance(note, str) else None)
        except Exception:
            logger.warning("forwarding progress of %s failed", token, exc_info=True)
        return True

    def fail(self, request_id: str, error: Exception) -> bool:
        """The answer to ``request_id`` was refused unparsed (too long, nested too deeply): its
        call fails with ``error`` and the connection goes on. Whether the call was pending."""
        pending = self._pending.get(request_id)
        if pending is None or pending.future.done():
            return False
        pending.future.set_exception(error)
        return True

    def close(self) -> None:
        """The connection ended: every pending request fails now, and any later one at once."""
        self.closed = True
        for pending in self._pending.values():
            if not pending.future.done():
                pending.future.set_exception(MCPError(types.CONNECTION_CLOSED, "Connection closed"))


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _error_data(error: Any) -> types.ErrorData:
    try:
        return types.ErrorData.model_validate(error)
    except ValueError:
        return types.ErrorData(code=types.INTERNAL_ERROR, message=f"malformed error answer: {str(error)[:300]}")
