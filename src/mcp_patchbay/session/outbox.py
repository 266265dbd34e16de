"""Notices to one gateway session, queued and sent by a task of that session's own.

A notice (a list change, a resource update, an upstream's log message) is not an answer:
nobody waits for it, so nobody should wait on the client that reads it. On the gateway
every notice to a session goes into that session's ``Outbox`` and returns at once; one
sender task per session (started when a notice arrives, gone when the queue is empty)
writes them in order. A client that does not read (a GET stream it never drains)
stalls only its own sender, and then is ended:

- a send that waits longer than ``gateway.send_timeout``, or
- a queue that reaches ``gateway.max_queued_messages``

ends the session (``http_sessions.SessionManager.end_session``, logged at WARNING with the session
id and why; past ``WARNINGS_PER_MINUTE`` a minute at DEBUG, counted in the next WARNING
(``throttle``), so an attacker cannot flood the log), and its queue is dropped. So a stuck session costs
at most its queue and one task, and no loop ever awaits one session on behalf of others.

A notice already waiting in a queue is not queued again: a list change, or an update of a
resource URI, says only that something changed since the client last looked, so one is
as good as many. A client slow to read gets each change once, and an upstream that sends
thousands of updates of one resource fills no queue; log messages are all kept.

A call's progress rides its own answer stream, not the session's queue, but the same rule
holds (``Outboxes.progress``): it is posted, never awaited; while one notice is being
written only the latest value waits (progress says where a call is, and the latest says
it best); and a client that reads nothing for ``send_timeout`` gets no more progress for
that call. (Awaited, one client that asked for progress and never read its answer held a
task per notice, 57 MiB for 3,000 notices of 8 KB, and with a stdio upstream would have
stalled the reader that every member's calls to that server share.)

stdio has one client and keeps sending in place (``session.requests_back``); results never
come here (they are answers, on the request's own stream).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
import anyio.abc
from mcp.server.connection import Connection

from mcp_patchbay.calls.deadlines import ProgressFn
from mcp_patchbay.throttle import LogThrottle

logger = logging.getLogger(__name__)

EndSession = Callable[[str], Awaitable[None]]
"""Ends one HTTP session by id (the gateway's session manager)."""
WARNINGS_PER_MINUTE = 10
"""Sessions ended for not reading that are logged at WARNING in a minute; the rest at DEBUG."""
_COALESCED = frozenset(
    {
        "notifications/resources/updated",
        "notifications/tools/list_changed",
        "notifications/prompts/list_changed",
        "notifications/resources/list_changed",
    }
)
"""Notices that say only "this changed": one queued is as good as several."""
_KEY = "mcp_patchbay.session.outbox"
"""Where a connection keeps its outbox (``Connection.state``): it lives and dies with the session."""


class Outbox:
    """One session's notices not yet written, and whether a sender is at work on them."""

    __slots__ = ("closed", "queue", "queued", "sending")

    def __init__(self) -> None:
        self.queue: deque[tuple[str, Mapping[str, Any] | None]] = deque()
        self.queued: set[tuple[str, object]] = set()
        """The coalesced notices in ``queue`` (method, and URI for a resource update)."""
        self.sending = False
        self.closed = False
        """Ended for being stuck: later notices are dropped."""

    def __len__(self) -> int:
        return len(self.queue)


class Outboxes:
    """The gateway's outboxes: ``post`` a notice to a session, never waiting for it."""

    def __init__(
        self,
        *,
        send_timeout: float,
        max_queued: int,
        end_session: EndSession | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.send_timeout = send_timeout
        self.max_queued = max_queued
        self._end_session = end_session
        self.tg: anyio.abc.TaskGroup | None = None
        """Where senders and session ends run (the proxy's background group); None: not running."""
        self.senders = 0
        """Sender tasks at work now (one per session with notices queued)."""
        self.ended = 0
        """Sessions ended for not reading, since start."""
        self._ends = LogThrottle(logger, per_minute=WARNINGS_PER_MINUTE, clock=clock)
        self.stopped_progress = LogThrottle(logger, per_minute=WARNINGS_PER_MINUTE, clock=clock)

    def post(self, connection: Connection, method: str, params: Mapping[str, Any] | None = None) -> None:
        """Queue a notice for ``connection``'s client; a sender writes it in order."""
        tg = self.tg
        if tg is None or not connection.has_standalone_channel:  # a 2026-07-28 request: nothing to send on
            return
        outbox: Outbox | None = connection.state.get(_KEY)
        if outbox is None:
            outbox = connection.state[_KEY] = Outbox()
        if outbox.closed:
            return
        key = _coalescing_key(method, params)
        if key is not None:
            if key in outbox.queued:
                return
            outbox.queued.add(key)
        if len(outbox) >= self.max_queued:
            self._stuck(connection, outbox, f"{len(outbox)} notices queued unread, max_queued_messages")
            return
        outbox.queue.append((method, params))
        if not outbox.sending:
            outbox.sending = True
            self.senders += 1
            tg.start_soon(self._send, connection, outbox)

    async def _send(self, connection: Connection, outbox: Outbox) -> None:
        queue = outbox.queue
        try:
            while queue and not outbox.closed:
                method, params = queue[0]
                with anyio.move_on_after(self.send_timeout) as waited:
                    try:
                        await connection.notify(method, params)
                    except Exception:  # a session going away as we write: nothing to tell anyone
                        logger.debug("could not send %s to a session", method, exc_info=True)
                if waited.cancelled_caught:
                    self._stuck(connection, outbox, f"{method} unread for {self.send_timeout:g} s, send_timeout")
                    return
                if queue:
                    sent, sent_params = queue.popleft()
                    key = _coalescing_key(sent, sent_params)
                    if key is not None:
                        outbox.queued.discard(key)
        finally:
            outbox.sending = False
            self.senders -= 1

    def progress(self, forward: ProgressFn) -> ProgressFn:
        """``forward`` (one call's progress to its client) posted instead of awaited."""
        return _PostedProgress(self, forward)

    def _stuck(self, connection: Connection, outbox: Outbox, why: str) -> None:
        outbox.closed = True
        outbox.queue.clear()
        outbox.queued.clear()
        self.ended += 1
        session_id = connection.session_id
        self._ends.log("closing session %s: its client does not read its stream (%s)", session_id or "(no id)", why)
        if session_id is not None and self._end_session is not None and self.tg is not None:
            self.tg.start_soon(self._end, session_id)

    async def _end(self, session_id: str) -> None:
        assert self._end_session is not None
        try:
            await self._end_session(session_id)
        except Exception:
            logger.exception("could not close session %s", session_id)


class _PostedProgress:
    """One call's progress to its client: the latest value, written by one task at a time."""

    __slots__ = ("_forward", "_latest", "_outboxes", "_sending", "_stopped")

    def __init__(self, outboxes: Outboxes, forward: ProgressFn) -> None:
        self._outboxes = outboxes
        self._forward = forward
        self._latest: tuple[float, float | None, str | None] | None = None
        self._sending = False
        self._stopped = False

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        tg = self._outboxes.tg
        if self._stopped or tg is None:
            return
        self._latest = (progress, total, message)
        if not self._sending:
            self._sending = True
            tg.start_soon(self._send)

    async def _send(self) -> None:
        try:
            while self._latest is not None and not self._stopped:
                values, self._latest = self._latest, None
                with anyio.move_on_after(self._outboxes.send_timeout) as waited:
                    try:
                        await self._forward(*values)
                    except Exception:  # the call's stream is gone: nothing more to tell
                        logger.debug("could not send progress to a client", exc_info=True)
                        self._stopped = True
                if waited.cancelled_caught:
                    self._stopped = True
                    self._outboxes.stopped_progress.log(
                        "stopped forwarding a call's progress: its client read none for %g s (send_timeout)",
                        self._outboxes.send_timeout,
                    )
        finally:
            self._sending = False
            self._latest = None


def _coalescing_key(method: str, params: Mapping[str, Any] | None) -> tuple[str, object] | None:
    if method not in _COALESCED:
        return None
    return (method, params.get("uri") if params is not None else None)


__all__ = ["EndSession", "Outbox", "Outboxes"]
