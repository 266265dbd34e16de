"""The activity log's file: ``activity.sqlite3`` in the data folder, one row per thing that happened.

Every proxy of the user writes to the same file at once (each MCP client's own stdio proxy, the
gateway, the page's own actions), so the file is SQLite in WAL mode: readers never wait, writers
take turns, each for one short transaction (a batch of rows), and a writer that finds another
one's transaction open waits up to ``BUSY_TIMEOUT_MS``. Row ids grow in commit order, so a reader
that follows the log asks for the rows after the last id it has read (``query(after_id=...)``).

The file is created 0600 in the data folder (0700); SQLite gives its ``-wal`` and ``-shm`` files
the same mode. It is kept within ``Limits``: rows older than ``keep_days`` and, past
``max_bytes``, the oldest rows are deleted and their pages handed back to the file system
(``auto_vacuum = INCREMENTAL``), when the store opens and every ``PRUNE_EVERY`` rows it writes.
"""

from __future__ import annotations

import functools
import itertools
import math
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from mcp_patchbay.activity.rows import (
    COLUMNS,
    KINDS,
    REQUEST_KINDS,
    ActivityRow,
    Limits,
    Record,
    ServerStats,
    values_of,
)

__all__ = [
    "FILE_NAME",
    "KINDS",
    "ActivityRow",
    "ActivityStore",
    "Limits",
    "ServerStats",
    "default_path",
    "values_of",
]

FILE_NAME = "activity.sqlite3"
BUSY_TIMEOUT_MS = 5000
"""How long a writer waits for another process's transaction before giving up on its batch."""
PRUNE_EVERY = 2000
"""Rows written between two looks at the file's age and size limits."""
_PRUNE_CHUNK = 5000
"""Rows deleted per transaction while pruning: other writers wait for one chunk, not for all."""
_SCHEMA_VERSION = 1

_WRITTEN = COLUMNS[1:]  # the store numbers rows
_MOST_PER_STATEMENT = 128
"""Rows one INSERT carries at most: each statement's step lets go of the GIL and takes it back, so
one a row would hand the serving thread the GIL, and take it back, as many times (a context switch
each). A batch is cut into statements of 128, 64, ... 1 rows: few statements, each kept prepared."""
_VARYING = (0, 7, 10, 11)
"""The columns (in ``_WRITTEN``) that differ from one call to the next: at, duration_ms, bytes_in, bytes_out."""
_SHARED = tuple(index for index in range(len(_WRITTEN)) if index not in _VARYING)
"""The others: a run of calls to one tool from one client, with one outcome, has them alike."""
_ALIKE = 4
"""Rows alike in ``_SHARED`` that are written by a statement binding those values once (binding
a string costs more than SQLite's own work for it: 1.6 µs a row instead of 3.2)."""
_ONE = f"({', '.join('?' for _ in _WRITTEN)})"


@functools.cache
def _insert(count: int) -> str:
    # OR IGNORE: a held definition is one row, whichever proxy saw it first (activity_held_once).
    return f"INSERT OR IGNORE INTO activity ({', '.join(_WRITTEN)}) VALUES {', '.join([_ONE] * count)}"


@functools.cache
def _insert_alike(count: int) -> str:
    """``count`` rows whose ``_SHARED`` values are bound once, as ?1...: each row binds its
    ``_VARYING`` values only."""
    shared = {column: f"?{number}" for number, column in enumerate(_SHARED, 1)}
    rows: list[str] = []
    for row in range(count):
        first = len(_SHARED) + 1 + row * len(_VARYING)
        varying = {column: f"?{first + offset}" for offset, column in enumerate(_VARYING)}
        rows.append(f"({', '.join((shared | varying)[column] for column in range(len(_WRITTEN)))})")
    return f"INSERT OR IGNORE INTO activity ({', '.join(_WRITTEN)}) VALUES {', '.join(rows)}"


def _sizes(count: int) -> Iterable[tuple[int, int]]:
    """(start, rows) of the statements that write ``count`` rows: 128 at a time, then a power of two each."""
    start, size = 0, _MOST_PER_STATEMENT
    while start < count:
        while count - start < size:
            size //= 2
        yield start, size
        start += size


def _alike(records: Sequence[Record]) -> tuple[list[list[Record]], list[Record]]:
    """``records`` in runs of rows alike in ``_SHARED`` (``_ALIKE`` of them at least; in the order
    each first came), and the others."""
    groups: dict[Record, list[Record]] = {}
    for record in records:
        key = record[1:7] + record[8:10] + record[12:]
        found = groups.get(key)
        if found is None:
            groups[key] = [record]
        else:
            found.append(record)
    runs: list[list[Record]] = []
    others: list[Record] = []
    for group in groups.values():
        if len(group) >= _ALIKE:
            runs.append(group)
        else:
            others.extend(group)
    return runs, others


_SELECT = f"SELECT {', '.join(COLUMNS)} FROM activity"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS activity (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    kind TEXT NOT NULL,
    proxy TEXT NOT NULL,
    client TEXT,
    server TEXT,
    exposed TEXT,
    upstream TEXT,
    duration_ms REAL,
    outcome TEXT,
    error_code TEXT,
    bytes_in INTEGER,
    bytes_out INTEGER,
    detail TEXT,
    arguments TEXT,
    result TEXT
);
CREATE INDEX IF NOT EXISTS activity_at ON activity (at);
CREATE UNIQUE INDEX IF NOT EXISTS activity_held_once ON activity (server, upstream, at, detail)
    WHERE kind = 'definition_held';
"""


def default_path() -> Path:
    from mcp_patchbay.places import data_dir

    return data_dir() / FILE_NAME


class ActivityStore:
    """The log file, open: rows written, asked for, counted, and kept within ``Limits``.
    Safe to use from several threads (one connection, a lock around each use)."""

    def __init__(self, connection: sqlite3.Connection, path: Path, limits: Limits) -> None:
        self._db = connection
        self.path = path
        self.limits = limits
        self._lock = threading.Lock()
        self._written = 0

    @classmethod
    def open(cls, path: Path | None = None, *, limits: Limits | None = None) -> ActivityStore:
        """The log at ``path`` (default: ``activity.sqlite3`` in the data folder), created 0600 in a
        0700 folder if need be, and pruned to ``limits``. Raises OSError or ``sqlite3.Error``."""
        narrow = path is None
        path = default_path() if path is None else path
        _create_private(path, narrow=narrow)
        connection = sqlite3.connect(
            path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
        )
        try:
            connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            # Set before the first table exists (a no-op after): deleted rows' pages can be given back.
            connection.execute("PRAGMA auto_vacuum = INCREMENTAL")
            connection.execute("PRAGMA journal_mode = WAL")
            connection.execute(
                "PRAGMA synchronous = NORMAL"
            )  # WAL: no fsync per commit; a log may lose its last rows to a power cut
            connection.execute(f"PRAGMA journal_size_limit = {8 * 1024 * 1024}")
            if connection.execute("PRAGMA user_version").fetchone()[0] < _SCHEMA_VERSION:
                connection.execute("BEGIN IMMEDIATE")
                try:
                    for statement in _SCHEMA.split(";"):
                        if statement.strip():
                            connection.execute(statement)
                    connection.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")
                    connection.execute("COMMIT")
                except BaseException:
                    connection.execute("ROLLBACK")
                    raise
        except BaseException:
            connection.close()
            raise
        store = cls(connection, path, limits or Limits())
        store.prune()
        return store

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # --- writing ------------------------------------------------------------------------------

    def record(self, row: ActivityRow) -> None:
        """Write one row now (the page's own actions, the ``trust`` command's approvals)."""
        self.insert([values_of(row)])

    def insert(self, records: Sequence[Record]) -> None:
        """Write rows (each as its ``Record``) in one transaction; prune every ``PRUNE_EVERY``."""
        if not records:
            return
        try:
            runs, others = _alike(records)
        except TypeError:  # a value that is no column's (unhashable): each row bound whole, SQLite judges
            runs, others = [], list(records)
        with self._lock:
            execute = self._db.execute
            execute("BEGIN IMMEDIATE")
            try:
                for run in runs:
                    shared = [run[0][column] for column in _SHARED]
                    for start, size in _sizes(len(run)):
                        values = list(shared)
                        add = values.extend
                        for record in run[start : start + size]:
                            add((record[0], record[7], record[10], record[11]))  # _VARYING
                        execute(_insert_alike(size), values)
                for start, size in _sizes(len(others)):
                    execute(_insert(size), list(itertools.chain.from_iterable(others[start : start + size])))
                execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._written += len(records)
            due = self._written >= PRUNE_EVERY
        if due:
            self.prune()

    def prune(self, now: float | None = None) -> int:
        """Delete the rows older than ``keep_days`` and, while the file holds more than
        ``max_bytes``, the oldest ones (to 90% of it); give the pages back. Rows deleted."""
        now = time.time() if now is None else now
        cutoff = now - self.limits.keep_days * 86400
        deleted = 0
        with self._lock:
            self._written = 0
            deleted += self._delete("SELECT id FROM activity WHERE at < ? ORDER BY at LIMIT ?", cutoff, math.inf)
            used = self._used_bytes()
            if used > self.limits.max_bytes:
                count = self._db.execute("SELECT count(*) FROM activity").fetchone()[0]
                excess = used - self.limits.max_bytes * 0.9
                over = math.ceil(count * excess / used) if used else 0
                deleted += self._delete("SELECT id FROM activity ORDER BY id LIMIT ?", None, over)
            if deleted:  # each step of it frees one page: executescript runs it to the end
                self._db.executescript("PRAGMA incremental_vacuum;")
        return deleted

    def _delete(self, chosen: str, cutoff: float | None, most: float) -> int:
        done = 0
        while done < most:
            chunk = int(min(_PRUNE_CHUNK, most - done))
            arguments = (cutoff, chunk) if cutoff is not None else (chunk,)
            cursor = self._db.execute(f"DELETE FROM activity WHERE id IN ({chosen})", arguments)
            done += cursor.rowcount
            if cursor.rowcount < chunk:
                break
        return done

    def _used_bytes(self) -> int:
        page_size = self._db.execute("PRAGMA page_size").fetchone()[0]
        pages = self._db.execute("PRAGMA page_count").fetchone()[0]
        free = self._db.execute("PRAGMA freelist_count").fetchone()[0]
        return int((pages - free) * page_size)

    # --- reading ------------------------------------------------------------------------------

    def query(
        self,
        *,
        since: float | None = None,
        server: str | None = None,
        client: str | None = None,
        errors_only: bool = False,
        after_id: int | None = None,
        limit: int = 200,
    ) -> list[ActivityRow]:
        """Rows newest first (by ``at``), at most ``limit``. ``client``: its ``clientInfo`` or member
        holds this text (any case); ``errors_only``: an outcome other than ``ok``. ``after_id``: the
        ``limit`` rows written next after that id (the oldest of them first chosen, so that a
        reader following the log, asking again with the highest id it got, misses none)."""
        where: list[str] = []
        arguments: list[object] = []
        if since is not None:
            where.append("at >= ?")
            arguments.append(since)
        if server is not None:
            where.append("server = ?")
            arguments.append(server)
        if client is not None:
            where.append("client LIKE ? ESCAPE '\\'")
            arguments.append("%" + client.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%")
        if errors_only:
            where.append("outcome IS NOT NULL AND outcome != 'ok'")
        if after_id is not None:
            where.append("id > ?")
            arguments.append(after_id)
        condition = f" WHERE {' AND '.join(where)}" if where else ""
        arguments.append(max(0, limit))
        if after_id is not None:
            sql = f"SELECT * FROM ({_SELECT}{condition} ORDER BY id LIMIT ?) ORDER BY at DESC, id DESC"
        else:
            sql = f"{_SELECT}{condition} ORDER BY at DESC, id DESC LIMIT ?"
        with self._lock:
            found = self._db.execute(sql, arguments).fetchall()
        return [ActivityRow(*values) for values in found]

    def last_id(self) -> int:
        """The highest id written so far (0 for an empty log): where following from now starts."""
        with self._lock:
            found = self._db.execute("SELECT max(id) FROM activity").fetchone()[0]
        return int(found or 0)

    def server_stats(self, since: float) -> dict[tuple[str, str], ServerStats]:
        """Each proxy's tool calls, resource reads and prompt gets of each server since ``since``,
        by (the proxy's label, the server): how many, how many failed, and the median and 95th
        percentile of their durations."""
        kinds = ", ".join(f"'{kind}'" for kind in REQUEST_KINDS)
        with self._lock:
            found = self._db.execute(
                f"SELECT proxy, server, duration_ms, outcome FROM activity WHERE at >= ? AND kind IN ({kinds}) "
                "AND server IS NOT NULL",
                (since,),
            ).fetchall()
        durations: dict[tuple[str, str], list[float]] = {}
        calls: dict[tuple[str, str], int] = {}
        errors: dict[tuple[str, str], int] = {}
        for proxy, server, duration, outcome in found:
            key = (proxy, server)
            if duration is not None:
                durations.setdefault(key, []).append(duration)
            calls[key] = calls.get(key, 0) + 1
            errors[key] = errors.get(key, 0) + (outcome != "ok")
        return {
            key: ServerStats(
                calls=count,
                errors=errors[key],
                p50_ms=_percentile(durations.get(key, ()), 50),
                p95_ms=_percentile(durations.get(key, ()), 95),
            )
            for key, count in calls.items()
        }


def _percentile(values: Iterable[float], q: float) -> float | None:
    """The nearest-rank percentile (None for no values)."""
    ordered = sorted(values)
    if not ordered:
        return None
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def _create_private(path: Path, *, narrow: bool) -> None:
    """The file, ours alone, and its folder made 0700 (``narrow``: the data folder, narrowed to it
    whoever made it, as ``places.write_private`` does)."""
    folder = path.parent
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    if narrow and os.name != "nt" and folder.stat().st_mode & 0o077:
        folder.chmod(0o700)
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.close(descriptor)
    if os.name != "nt" and path.stat().st_mode & 0o077:
        path.chmod(0o600)
