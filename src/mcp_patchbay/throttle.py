"""Log lines a peer can cause, at most so many a minute.

A refusal is worth a WARNING to the operator (a member over its quota, a session ended for
not reading, connections refused), but a peer that repeats it thousands of times must not
flood the log and its pipeline. ``LogThrottle`` logs the first ``per_minute`` of a kind in a
minute at its level, the rest at DEBUG, and the next line at its level says how many were
quieted. One throttle per kind of line, so one flood never silences another kind. Pure but
for the logger it is given; the clock is injected.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

WINDOW_SECONDS = 60.0


class LogThrottle:
    """One kind of log line, at most ``per_minute`` a minute at ``level``."""

    def __init__(
        self,
        logger: logging.Logger,
        *,
        per_minute: int = 10,
        level: int = logging.WARNING,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.per_minute = per_minute
        self.level = level
        self._clock = clock
        self._window_start = -WINDOW_SECONDS
        self._logged = 0
        self.quieted = 0
        """Lines logged at DEBUG since the last one at ``level``."""

    def log(self, message: str, *args: object) -> None:
        now = self._clock()
        if now - self._window_start >= WINDOW_SECONDS:
            self._window_start, self._logged = now, 0
        if self._logged >= self.per_minute:
            self.quieted += 1
            self.logger.debug(message, *args)
            return
        self._logged += 1
        quieted, self.quieted = self.quieted, 0
        if quieted:
            message += f" ({quieted} more like this since the last one, logged at DEBUG)"
        self.logger.log(self.level, message, *args)


__all__ = ["LogThrottle"]
