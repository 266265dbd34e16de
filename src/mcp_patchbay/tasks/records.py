"""The tasks the proxy holds for its clients: each one's state, its owner's share, and its wire form.

A ``Record`` is one task a client started through the proxy: run by an upstream (its id
there kept) or by the proxy itself. ``Table`` holds them, bound to who started each (a
record of another owner is not found, as one that never was), at most ``max_tasks`` an
owner (a new one drops the owner's oldest finished task; when all are running it is
refused), each forgotten, result and all, once its ttl has passed.

Its wire form is the era's (``values``): the 2025-11-25 ``Task`` (``ttl``, ``pollInterval``;
a tool result with ``isError`` is a ``failed`` task) or the 2026-07-28 tasks extension's
``DetailedTask`` (``ttlMs``, ``pollIntervalMs``, the result or error inline; a tool's
``isError`` result is ``completed``).

Pure apart from the ``anyio.Event`` each record sets when it ends; the clock is injected.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import anyio

Clock = Callable[[], float]
Tell = Callable[[str, dict[str, Any]], Awaitable[None]]
"""Sends one notice (method, params) to the session that started a task."""
Status = Literal["working", "input_required", "completed", "failed", "cancelled"]
TERMINAL: frozenset[str] = frozenset({"completed", "failed", "cancelled"})
PAGE = 50
"""Tasks in one ``tasks/list`` answer."""

_sequence = itertools.count(1)


@dataclass(eq=False)
class Record:
    """One task a client started through the proxy."""

    id: str
    """The id the client holds (``ids.seal``)."""
    owner: str | None
    server: str | None
    """The upstream its call went to (None when the call never reached one)."""
    upstream_id: str | None
    """The upstream's id of the task; None: the proxy runs the call itself."""
    created: float
    ttl_ms: int | None
    poll_ms: int | None = None
    status: Status = "working"
    message: str | None = None
    updated: float = 0.0
    result: dict[str, Any] | None = None
    """The final tool result (JSON values), once known."""
    error: dict[str, Any] | None = None
    """The JSON-RPC error the call ended with (``code``, ``message``, ``data``), once known."""
    done: anyio.Event = field(default_factory=anyio.Event)
    """Set once the outcome (result, error or cancellation) is known."""
    scope: anyio.CancelScope | None = None
    """What runs it here: the proxy's call, or the wait for the upstream's result."""
    seq: int = field(default_factory=lambda: next(_sequence))
    """Creation order (``tasks/list``'s cursor)."""
    tell: Tell | None = None
    """How its owner's session hears of it (a 2025-era client's; None: it polls)."""

    def __post_init__(self) -> None:
        self.updated = self.updated or self.created

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    @property
    def expires(self) -> float | None:
        return None if self.ttl_ms is None else self.created + self.ttl_ms / 1000

    def update(self, status: str, message: str | None, now: float) -> bool:
        """A status seen (an upstream's notice or answer); whether it changed anything. A task
        that ended stays as it ended (a cancelled one stays cancelled)."""
        if self.terminal or status not in ("working", "input_required", *TERMINAL):
            return False
        if status == self.status and message == self.message:
            return False
        self.status = status  # pyright: ignore[reportAttributeAccessIssue]
        self.message = message
        self.updated = now
        return True

    def finish(self, now: float, *, result: dict[str, Any] | None = None, error: dict[str, Any] | None = None) -> bool:
        """The outcome is known: a result, an error, or (neither) a cancellation. Whether it is news."""
        if self.done.is_set():
            return False
        if self.status != "cancelled":
            self.result, self.error = result, error
            if result is not None:
                self.status = "failed" if result.get("isError") else "completed"
            elif error is not None:
                self.status = "failed"
                self.message = self.message if self.message else str(error.get("message", ""))[:300] or None
            else:
                self.status = "cancelled"
        self.updated = now
        self.done.set()
        return True

    def values(self, *, modern: bool) -> dict[str, Any]:
        """The task as the era's wire has it (2026-07-28: ``modern``)."""
        status = self.status
        if modern and self.result is not None and status == "failed":
            status = "completed"  # the extension keeps "failed" for JSON-RPC errors
        elif modern and status in ("completed", "failed") and not self.done.is_set():
            status = "working"  # the extension's terminal task carries its result: not yet here
        values: dict[str, Any] = {
            "taskId": self.id,
            "status": status,
            "createdAt": iso(self.created),
            "lastUpdatedAt": iso(self.updated),
            ("ttlMs" if modern else "ttl"): self.ttl_ms,
        }
        if self.message is not None:
            values["statusMessage"] = self.message
        if self.poll_ms is not None:
            values["pollIntervalMs" if modern else "pollInterval"] = self.poll_ms
        if modern and self.done.is_set():
            if self.result is not None:
                values["result"] = self.result
            elif self.error is not None:
                values["error"] = self.error
        return values


class Full(Exception):
    """An owner holds ``max_tasks`` tasks, all still running."""


class Table:
    """The tasks held, by id, each bound to its owner."""

    def __init__(self, max_tasks: int, clock: Clock = time.time) -> None:
        self.max_tasks = max_tasks
        self.clock = clock
        self.on_expire: Callable[[Record], None] = lambda record: None
        """Told of each record forgotten for its ttl (what runs it is stopped there)."""
        self._records: dict[str, Record] = {}

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[Record]:
        return iter(list(self._records.values()))

    def add(self, record: Record) -> list[Record]:
        """Hold ``record``; the records dropped for room (its owner's oldest finished ones). Raises
        ``Full`` when its owner holds ``max_tasks`` running tasks."""
        self.expire()
        held = sorted(self._owned(record.owner), key=lambda r: r.seq)
        dropped: list[Record] = []
        while len(held) >= self.max_tasks:
            finished = next((r for r in held if r.done.is_set()), None)
            if finished is None:
                raise Full(len(held))
            held.remove(finished)
            dropped.append(self._records.pop(finished.id))
        self._records[record.id] = record
        return dropped

    def get(self, task_id: str, owner: str | None) -> Record | None:
        """The record of ``task_id`` if ``owner`` started it and it has not expired."""
        self.expire()
        record = self._records.get(task_id)
        return record if record is not None and record.owner == owner else None

    def by_upstream(self, server: str, upstream_id: str) -> list[Record]:
        """The records of an upstream's task (one, unless two replicas' ids met here)."""
        return [r for r in self._records.values() if r.server == server and r.upstream_id == upstream_id]

    def remove(self, record: Record) -> None:
        if self._records.get(record.id) is record:
            del self._records[record.id]

    def page(self, owner: str | None, cursor: str | None) -> tuple[list[Record], str | None]:
        """``owner``'s tasks after ``cursor``, oldest first, and the cursor of the next page.
        Raises ValueError for a cursor this table did not give."""
        after = 0
        if cursor is not None:
            if not cursor.isdecimal() or len(cursor) > 18:
                raise ValueError(cursor)
            after = int(cursor)
        self.expire()
        held = sorted((r for r in self._owned(owner) if r.seq > after), key=lambda r: r.seq)
        page = held[:PAGE]
        return page, (str(page[-1].seq) if len(held) > PAGE else None)

    def expire(self) -> list[Record]:
        """Forget the records whose ttl has passed; the ones forgotten (the caller stops what runs them)."""
        now = self.clock()
        gone = [r for r in self._records.values() if self._expired(r, now)]
        for record in gone:
            del self._records[record.id]
            self.on_expire(record)
        return gone

    def next_expiry(self) -> float | None:
        """When the next record expires (epoch seconds), None if none will."""
        times = [r.expires for r in self._records.values() if r.expires is not None]
        return min(times) if times else None

    def _owned(self, owner: str | None) -> list[Record]:
        return [r for r in self._records.values() if r.owner == owner]

    @staticmethod
    def _expired(record: Record, now: float) -> bool:
        expires = record.expires
        return expires is not None and now >= expires


def iso(when: float) -> str:
    """An ISO 8601 timestamp in UTC, to the millisecond (``2025-11-25T10:30:00.000Z``)."""
    return datetime.fromtimestamp(when, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


__all__ = ["PAGE", "TERMINAL", "Clock", "Full", "Record", "Status", "Table", "iso"]
