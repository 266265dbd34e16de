"""``ActivityWriter``: what happened, handed over by the serving path and written by a thread of its own.

The serving path never waits for the log: ``emit`` appends to a bounded queue and returns (a
full queue drops its oldest entry and counts the drop), and a background thread wakes, lets a
batch gather for ``linger`` seconds, turns the entries into rows (``convert``: the serving
path's raw events, ``activity.events``) and writes them in one short transaction. Whatever the
thread meets (a file it cannot open, a batch refused, a bug in a conversion) is logged at
most once a minute, and the rows concerned are dropped and counted; the serving path never
hears of it. ``stop`` writes what is queued, within a bound, and ends the thread.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mcp_patchbay.activity.rows import ActivityRow, Limits, Record, values_of

__all__ = ["ActivityWriter", "Convert", "Sink"]

logger = logging.getLogger(__name__)

Sink = Callable[[Sequence[Record]], None]
"""Where a batch of rows goes, each as its ``Record`` (the store's file, by default); may block, may raise."""
Convert = Callable[[list[Any]], tuple[list[Record], int]]
"""A batch of the queue's entries made rows (``events.Events.batch``: rows made already as they are,
the serving path's raw events converted): the rows, and how many entries could not be made one."""

TELL_EVERY = 60.0
"""Seconds between two log lines about rows dropped or a file that cannot be written."""
_BUSY_TRIES = 3
"""Times a batch refused for another process's lock is tried again before it is dropped."""


class ActivityWriter:
    """A bounded queue and the thread that writes it out."""

    def __init__(
        self,
        sink: Sink | None = None,
        *,
        path: Path | None = None,
        limits: Limits | None = None,
        bound: int = 10_000,
        linger: float = 0.25,
        convert: Convert | None = None,
    ) -> None:
        """``sink``: where batches go; None: ``ActivityStore.open(path, limits=limits)``, opened by
        the thread (``sqlite3`` is imported there, not by whoever makes the writer). ``bound``:
        entries queued at most; ``linger``: seconds a batch gathers before it is written;
        ``convert``: makes each batch's entries rows (without it, only ``ActivityRow`` entries are written)."""
        self._sink = sink
        self._path = path
        self._limits = limits
        self._bound = max(1, bound)
        self._queue: collections.deque[Any] = collections.deque()
        self._linger = linger
        self._convert = convert
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._close: Callable[[], None] | None = None
        self._pushed_out = 0  # counted by emit's thread only
        self._refused = 0  # counted by the writer's thread only
        self.written = 0
        """Rows the sink took."""
        self._told_dropped = 0
        self._told_at = -TELL_EVERY

    @property
    def dropped(self) -> int:
        """Rows lost: pushed out of a full queue, or refused by the file."""
        return self._pushed_out + self._refused

    # --- the serving path's side ---------------------------------------------------------------

    def emit(self, entry: Any) -> None:
        """Queue a row (or a raw event for ``convert``): never blocks, never raises. A full queue
        drops its oldest entry, counted in ``dropped``."""
        queue = self._queue
        if len(queue) >= self._bound:
            try:
                queue.popleft()
                self._pushed_out += 1
            except IndexError:  # the thread took them meanwhile
                pass
        queue.append(entry)
        if not self._wake.is_set():
            self._wake.set()

    # --- life ------------------------------------------------------------------------------------

    def start(self) -> ActivityWriter:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="patchbay-activity", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 1.0) -> bool:
        """Write what is queued and end the thread, waiting ``timeout`` seconds at most (a sink
        that hangs is left behind: the thread is a daemon). Whether it ended."""
        self._stopping.set()
        self._wake.set()
        thread = self._thread
        if thread is None:
            return True
        thread.join(timeout)
        return not thread.is_alive()

    @property
    def queued(self) -> int:
        return len(self._queue)

    # --- the thread ------------------------------------------------------------------------------

    def _run(self) -> None:
        sink = self._open()
        try:
            while True:
                self._wake.wait()
                if not self._stopping.is_set():
                    self._stopping.wait(self._linger)  # a batch gathers; stop cuts it short
                self._wake.clear()
                self._write(sink, self._drain())
                self._tell()
                if self._stopping.is_set() and not self._queue:
                    return
        finally:
            if self._close is not None:
                try:
                    self._close()
                except Exception:
                    logger.debug("closing the activity log failed", exc_info=True)

    def _open(self) -> Sink | None:
        if self._sink is not None:
            return self._sink
        try:
            from mcp_patchbay.activity.store import ActivityStore

            store = ActivityStore.open(self._path, limits=self._limits)
        except Exception as exc:
            logger.warning("the activity log cannot be opened, nothing is recorded: %s", exc)
            return None
        self._close = store.close
        return store.insert

    def _drain(self) -> list[Record]:
        entries: list[Any] = []
        append, take = entries.append, self._queue.popleft
        try:
            while True:  # emit may drop the oldest meanwhile: taken one by one until none is left
                append(take())
        except IndexError:
            pass
        if self._convert is not None:
            try:
                rows, failed = self._convert(entries)
            except Exception:  # the batch's conversion itself: its entries are lost, counted
                rows, failed = [], len(entries)
                logger.debug("activity events could not be made rows", exc_info=True)
            self._refused += failed
            return rows
        return [values_of(entry) for entry in entries if isinstance(entry, ActivityRow)]

    def _write(self, sink: Sink | None, rows: list[Record]) -> None:
        if not rows:
            return
        if sink is None:
            self._refused += len(rows)
            return
        for attempt in range(_BUSY_TRIES):
            try:
                sink(rows)
            except Exception as exc:
                if _busy(exc) and attempt + 1 < _BUSY_TRIES and not self._stopping.is_set():
                    continue  # another process held the file past the busy timeout: once more
                self._refused += len(rows)
                if time.monotonic() - self._told_at >= TELL_EVERY:
                    logger.warning("the activity log could not be written (%d rows dropped): %s", len(rows), exc)
                    self._told_at = time.monotonic()
                    self._told_dropped = self.dropped
                return
            self.written += len(rows)
            return

    def _tell(self) -> None:
        """Say that rows were dropped, at most once a minute."""
        if self.dropped > self._told_dropped and time.monotonic() - self._told_at >= TELL_EVERY:
            logger.warning(
                "activity log: %d rows dropped so far (the queue of %d was full, or the file refused them)",
                self.dropped,
                self._bound,
            )
            self._told_at = time.monotonic()
            self._told_dropped = self.dropped


def _busy(exc: Exception) -> bool:
    text = str(exc).lower()
    return type(exc).__name__ == "OperationalError" and ("locked" in text or "busy" in text)
