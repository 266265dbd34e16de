"""Resumable SSE for 2025-era sessions: the events each stream sent, kept for a while.

A client whose SSE stream broke reconnects with ``Last-Event-ID`` and gets what it
missed (the SDK's transport asks ``replay_events_after``). Events live in this replica's
memory, one store per session, bounded per stream and in streams, oldest forgotten first: a session is pinned
to one replica anyway (see docs/DEPLOY.md), and a replica that dies takes its sessions
with it.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from itertools import count

from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCMessage

EVENTS_PER_STREAM = 256
STREAMS = 64
"""Per session: its streams' ids are its request ids (and one GET stream), so each
session has a store of its own (``sdk.SessionManager``); shared, ids would collide."""


class MemoryEventStore(EventStore):
    """The last ``per_stream`` events of the last ``streams`` streams."""

    def __init__(self, *, per_stream: int = EVENTS_PER_STREAM, streams: int = STREAMS) -> None:
        self._per_stream = per_stream
        self._streams = streams
        self._events: OrderedDict[StreamId, deque[tuple[int, JSONRPCMessage | None]]] = OrderedDict()
        self._ids = count(1)

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        events = self._events.get(stream_id)
        if events is None:
            events = self._events[stream_id] = deque(maxlen=self._per_stream)
            while len(self._events) > self._streams:
                self._events.popitem(last=False)
        else:
            self._events.move_to_end(stream_id)
        number = next(self._ids)
        events.append((number, message))
        return f"{stream_id}_{number}"

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        stream_id, _, number = last_event_id.rpartition("_")
        events = self._events.get(stream_id)
        if events is None or not number.isdigit():
            return None
        after = int(number)
        for event_number, message in list(events):
            if event_number > after and message is not None:
                await send_callback(EventMessage(message, f"{stream_id}_{event_number}"))
        return stream_id
