"""A tool call's deadline, from the client's request to the upstream's answer: its one owner.

The life of a deadline, and who does what to it:

- ``Deadline(timeout, max_call_time)`` is made with the call (``server.Proxy``), from the
  tool's or the server's ``timeout``.
- ``policies.with_deadline`` runs the call inside a cancel scope and ``bind``\\s the
  deadline to it: from then on every change below moves the scope too.
- ``extend`` pushes it out by a fresh ``timeout``, never past ``max_call_time``. The
  upstream's progress notifications extend it, but only for a client that asked for
  progress (it sent a ``progressToken`` and so resets its own timer on each one). A client
  that did not is still counting down its own timer: the proxy's ``timeout`` must hold, so
  that the proxy, not the client, ends the call and says why.
- ``pause``/``resume``: while a person answers an elicitation the upstream asked for, its
  calls do not time out; on resume each gets a fresh ``timeout`` and the cap moves with
  it (the wait was a person's, not the server's). ``DeadlineSet`` keeps one upstream's
  calls in flight for that.

Pure apart from the bound cancel scope; the clock is injected so tests never wait.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Generator
from contextlib import contextmanager

import anyio

Clock = Callable[[], float]
ProgressFn = Callable[[float, float | None, str | None], Awaitable[None]]
"""Where a call's progress goes: ``(progress, total, message)``, as ``notifications/progress`` carries it."""


class Deadline:
    """When a call must be answered by. Progress pushes it out, never past the hard cap."""

    __slots__ = ("_clock", "_pauses", "_scope", "at", "hard", "started", "timeout")

    def __init__(self, timeout: float, max_total: float, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self.started = clock()
        self.timeout = timeout
        self.hard = self.started + max(timeout, max_total)
        self.at = self.started + timeout
        self._scope: anyio.CancelScope | None = None
        self._pauses = 0

    def remaining(self) -> float:
        return self.at - self._clock()

    def bind(self, scope: anyio.CancelScope) -> None:
        """The cancel scope that enforces this deadline; it follows every later change."""
        self._scope = scope
        scope.deadline = anyio.current_time() + max(0.0, self.remaining())

    def extend(self) -> None:
        self.at = min(self._clock() + self.timeout, self.hard)
        if self._scope is not None and not self._pauses:  # progress during a pause keeps it paused
            self._scope.deadline = anyio.current_time() + max(0.0, self.remaining())

    def pause(self) -> None:
        self._pauses += 1
        if self._scope is not None:
            self._scope.deadline = math.inf

    def resume(self) -> None:
        """A fresh timeout from now, once the last pause ends (two elicitations may overlap);
        the hard cap moves with it."""
        self._pauses = max(0, self._pauses - 1)
        if self._pauses:
            return
        self.hard = max(self.hard, self._clock() + self.timeout)
        self.extend()

    def elapsed(self) -> float:
        return self._clock() - self.started

    def limit(self) -> float:
        """The bound that ended the call, for the message: the timeout, or the hard cap once reached."""
        return self.timeout if self.at < self.hard else self.hard - self.started


def extending(deadline: Deadline, forward: ProgressFn) -> ProgressFn:
    """Progress passed on to a client that asked for it, each notification extending the deadline."""

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        deadline.extend()
        await forward(progress, total, message)

    return progress


class DeadlineSet:
    """The deadlines of one upstream's calls in flight."""

    def __init__(self) -> None:
        self._active: set[Deadline] = set()

    @contextmanager
    def tracking(self, deadline: Deadline) -> Generator[None, None, None]:
        self._active.add(deadline)
        try:
            yield
        finally:
            self._active.discard(deadline)

    @contextmanager
    def paused(self) -> Generator[None, None, None]:
        """While a person answers an elicitation, these calls do not time out."""
        paused = list(self._active)
        for deadline in paused:
            deadline.pause()
        try:
            yield
        finally:
            for deadline in paused:
                deadline.resume()


__all__ = ["Clock", "Deadline", "DeadlineSet", "ProgressFn", "extending"]
