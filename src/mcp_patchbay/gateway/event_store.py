"""Resumable SSE for 2025-era sessions: the events each stream sent, kept for a while.

A client whose SSE stream broke reconnects with ``Last-Event-ID`` and gets what it
missed (the SDK's transport asks ``replay_events_after``). Events live in this replica's
memory, one store per session, bounded per stream and in streams, oldest forgotten first: a session is pinned
to one replica anyway (see docs/DEPLOY.md), and a replica that dies takes its sessions
with it.

A resumed stream of a request ends once that request's answer has been sent on it, as the
spec says the server should close it: a request already answered gets what it missed, then
the end; one still running is followed here, event by event as the session stores them,
until its answer. (Left to the SDK, a resumed request stream stayed open after its answer
for as long as the client held it: 64 such streams a session, past every quota.) Only the
latest resume of a stream is followed: a client that reconnects again ends its earlier one.
The session's standalone GET stream never ends this way; the SDK follows it, one at a time.
``close`` (the session ended) ends every stream still followed.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field
from itertools import count

import anyio
from mcp.server.streamable_http import GET_STREAM_KEY, EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCError, JSONRPCMessage, JSONRPCResponse

EVENTS_PER_STREAM = 256
STREAMS = 64
"""Per session: its streams' ids are its request ids (and one GET stream), so each
session has a store of its own (``http_sessions.SessionManager``); shared, ids would collide."""


@dataclass(eq=False)
class _Stream:
    events: deque[tuple[int, JSONRPCMessage | None]]
    answered: bool = False
    """Its request's answer is stored: a resume ends after sending it."""
    resumes: int = 0
    """Resumes so far; only the latest is followed."""
    changed: anyio.Event = field(default_factory=anyio.Event)

    def wake(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()


class MemoryEventStore(EventStore):
    """The last ``per_stream`` events of the last ``streams`` streams."""

    def __init__(self, *, per_stream: int = EVENTS_PER_STREAM, streams: int = STREAMS) -> None:
        self._per_stream = per_stream
        self._max_streams = streams
        self._streams: OrderedDict[StreamId, _Stream] = OrderedDict()
        self._ids = count(1)
        self._closed = False

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        stream = self._streams.get(stream_id)
        if stream is None:
            stream = self._streams[stream_id] = _Stream(deque(maxlen=self._per_stream))
            while len(self._streams) > self._max_streams:
                self._streams.popitem(last=False)[1].wake()
        else:
            self._streams.move_to_end(stream_id)
        number = next(self._ids)
        stream.events.append((number, message))
        if stream_id != GET_STREAM_KEY and isinstance(message, JSONRPCResponse | JSONRPCError):
            stream.answered = True
        stream.wake()
        return f"{stream_id}_{number}"

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        """Send what followed ``last_event_id``. A request's stream is followed here until its
        answer is sent, and None returned (the SDK then ends the response); the GET stream's id is
        returned for the SDK to follow."""
        stream_id, _, number = last_event_id.rpartition("_")
        stream = self._streams.get(stream_id)
        if stream is None or not number.isdigit():
            return None
        after = int(number)
        if stream_id == GET_STREAM_KEY:
            await self._send_after(stream_id, stream, after, send_callback)
            return stream_id
        stream.resumes += 1
        mine = stream.resumes
        stream.wake()  # an earlier resume of this stream ends
        while True:
            sent = await self._send_after(stream_id, stream, after, send_callback)
            if sent != after:
                after = sent
                continue
            if stream.answered or self._closed or stream.resumes != mine or self._streams.get(stream_id) is not stream:
                return None
            await stream.changed.wait()

    async def _send_after(self, stream_id: StreamId, stream: _Stream, after: int, send: EventCallback) -> int:
        """Send the stream's events numbered above ``after``; the last number sent (or ``after``)."""
        for number, message in [e for e in stream.events if e[0] > after]:
            if message is not None:
                await send(EventMessage(message, f"{stream_id}_{number}"))
            after = number
        return after

    def close(self) -> None:
        """The session ended: every stream followed here ends."""
        self._closed = True
        for stream in self._streams.values():
            stream.wake()
