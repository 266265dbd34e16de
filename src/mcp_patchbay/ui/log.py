"""The activity log as the page reads and writes it: ``activity.store``'s ``ActivityStore``.

The page lists rows newest first, follows new ones by id (``after_id``), reads each server's
calls, errors and times, and writes a row for every action it takes (``ui_action``, and
``approved`` for an approval). The store is opened once per page process and asked on the event
loop: each question is one indexed SQLite query. Where the package cannot be imported the page
says that the log is not available and acts all the same.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

__all__ = ["STATS_FRESH", "STATS_WINDOW", "Log", "Row", "Stats", "open_log"]

logger = logging.getLogger(__name__)

STATS_WINDOW = 24 * 3600.0
"""Seconds of the log a server's calls, errors and times are counted over."""
STATS_FRESH = 5.0
"""Seconds a count is shown again before it is made afresh: counting a day of a busy log reads
every row of it (about 100 ms for 100,000 rows here), and a page reloaded every second needs
no newer figures than that."""


class Row(Protocol):
    """What the page reads of an ``ActivityRow``."""

    @property
    def id(self) -> int: ...
    @property
    def at(self) -> float: ...
    @property
    def kind(self) -> str: ...
    @property
    def proxy(self) -> Any: ...
    @property
    def client(self) -> str | None: ...
    @property
    def server(self) -> str | None: ...
    @property
    def exposed(self) -> str | None: ...
    @property
    def duration_ms(self) -> float | None: ...
    @property
    def outcome(self) -> str | None: ...
    @property
    def error_code(self) -> str | None: ...
    @property
    def detail(self) -> str | None: ...


class Stats(Protocol):
    @property
    def calls(self) -> int: ...
    @property
    def errors(self) -> int: ...
    @property
    def p50_ms(self) -> float | None: ...
    @property
    def p95_ms(self) -> float | None: ...


class Store(Protocol):
    def query(
        self,
        *,
        since: float | None = None,
        server: str | None = None,
        client: str | None = None,
        errors_only: bool = False,
        after_id: int | None = None,
        limit: int = 200,
    ) -> Sequence[Any]: ...

    def server_stats(self, since: float) -> Mapping[tuple[str, str], Any]: ...

    def record(self, row: Any) -> Any: ...


class Log:
    """The page's side of the activity log (``store`` None: not available here)."""

    def __init__(self, store: Store | None, row_type: Any = None, *, why_not: str | None = None) -> None:
        self.store = store
        self._row_type = row_type
        self.why_not = why_not
        """Why there is no log (shown on the page), when ``store`` is None."""
        self._counted: tuple[float, dict[tuple[str, str], Stats]] | None = None

    @property
    def available(self) -> bool:
        return self.store is not None

    def rows(
        self,
        *,
        server: str | None = None,
        client: str | None = None,
        errors_only: bool = False,
        after_id: int | None = None,
        limit: int = 100,
    ) -> list[Row]:
        if self.store is None:
            return []
        return list(
            self.store.query(
                server=server or None, client=client or None, errors_only=errors_only, after_id=after_id, limit=limit
            )
        )

    def stats(self, now: float | None = None) -> dict[tuple[str, str], Stats]:
        """Each proxy's calls, errors and times of each server (by the proxy's label in the log, and
        the server) over the last ``STATS_WINDOW`` seconds, counted at most ``STATS_FRESH`` seconds ago."""
        if self.store is None:
            return {}
        now = time.time() if now is None else now
        if self._counted is not None and 0 <= now - self._counted[0] < STATS_FRESH:
            return self._counted[1]
        counted = dict(self.store.server_stats(now - STATS_WINDOW))
        self._counted = (now, counted)
        return counted

    def record(self, kind: str, *, client: str, outcome: str, detail: str, **values: Any) -> None:
        """One action the page took (``ui_action``, ``approved``). A log that cannot be written
        is said in the page's own log; the action stands."""
        if self.store is None or self._row_type is None:
            return
        fields = {field.name for field in dataclasses.fields(self._row_type)}
        row: dict[str, Any] = dict.fromkeys(fields)
        row.update(
            {"at": time.time(), "kind": kind, "proxy": "ui", "client": client, "outcome": outcome, "detail": detail}
        )
        row.update({key: value for key, value in values.items() if key in fields})
        if "id" in fields:
            row["id"] = None  # the store numbers rows
        try:
            self.store.record(self._row_type(**row))
        except Exception:  # the log is the store's; an action never fails for it
            logger.warning("could not write the page's action to the activity log", exc_info=True)


def open_log(path: Path | None = None) -> Log:
    """The activity log in the data folder (``path``: another file), or a ``Log`` saying why not."""
    try:
        from mcp_patchbay.activity.store import ActivityRow, ActivityStore
    except ImportError as exc:
        return Log(None, why_not=f"the activity log is not part of this installation ({exc})")
    try:
        store: Any = ActivityStore.open(path)  # pyright: ignore[reportUnknownMemberType]
    except Exception as exc:
        logger.warning("could not open the activity log: %s", exc)
        return Log(None, why_not=f"the activity log could not be opened: {exc}")
    return Log(store, ActivityRow)
