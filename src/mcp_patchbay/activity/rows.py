"""What the activity log holds: ``ActivityRow`` (one thing that happened), ``ServerStats``, ``Limits``.

Standard library only and no ``sqlite3``: the serving path's side of the log (``writer``,
``events``) makes rows without loading the file's code; ``store`` re-exports these names.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = [
    "COLUMNS",
    "KINDS",
    "REQUEST_KINDS",
    "ActivityRow",
    "Limits",
    "Record",
    "ServerStats",
    "row_of",
    "values_of",
]

KINDS = (
    "tool_call",
    "resource_read",
    "prompt_get",
    "upstream_start",
    "upstream_crash",
    "upstream_restart",
    "sign_in_needed",
    "definition_held",
    "approved",
    "ui_action",
)
REQUEST_KINDS = ("tool_call", "resource_read", "prompt_get")
"""The kinds a client asks for: what ``ActivityStore.server_stats`` counts."""


@dataclass(frozen=True, slots=True)
class ActivityRow:
    """One thing that happened. ``at`` is when it began (unix seconds); what a kind leaves
    unsaid is None. ``arguments`` and ``result`` are kept only with
    ``patchbay.activity_keep_arguments``, cut and with credentials redacted."""

    id: int | None
    at: float
    kind: str
    """One of ``KINDS``."""
    proxy: str
    """Which process wrote it: ``stdio pid 1234``, ``gateway 127.0.0.1:8080 pid 99``, ``trust pid 7``, ``ui``."""
    client: str | None = None
    """The stdio client's ``clientInfo`` (``name version``), or the gateway's member."""
    server: str | None = None
    exposed: str | None = None
    """The name the client used (a tool's or prompt's exposed name, a resource's URI)."""
    upstream: str | None = None
    """The name the server knows it by."""
    duration_ms: float | None = None
    outcome: str | None = None
    """``ok``, ``tool_error`` (the tool's own ``isError``) or the proxy's error code."""
    error_code: str | None = None
    bytes_in: int | None = None
    bytes_out: int | None = None
    detail: str | None = None
    """A person's words, bounded."""
    arguments: str | None = None
    result: str | None = None


COLUMNS = tuple(field.name for field in fields(ActivityRow))


@dataclass(frozen=True, slots=True)
class ServerStats:
    """A server's requests (tool calls, resource reads, prompt gets) since some time."""

    calls: int
    errors: int
    """Those whose outcome was not ``ok`` (a tool's own ``isError`` included)."""
    p50_ms: float | None
    p95_ms: float | None


@dataclass(frozen=True, slots=True)
class Limits:
    """How much of the log is kept (``patchbay.activity_keep_days``, ``activity_max_mb``)."""

    keep_days: float = 14.0
    max_bytes: int = 64 * 1024 * 1024


Record = tuple[object, ...]
"""A row's values as they are written: every column but ``id``, in ``COLUMNS``' order (what the
writer's thread makes of the serving path's events, without building an ``ActivityRow``)."""


def row_of(record: Record) -> ActivityRow:
    return ActivityRow(None, *record)  # pyright: ignore[reportArgumentType]


def values_of(row: ActivityRow) -> Record:
    """A row as it is written (every column but ``id``)."""
    return (
        row.at,
        row.kind,
        row.proxy,
        row.client,
        row.server,
        row.exposed,
        row.upstream,
        row.duration_ms,
        row.outcome,
        row.error_code,
        row.bytes_in,
        row.bytes_out,
        row.detail,
        row.arguments,
        row.result,
    )
