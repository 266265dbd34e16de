"""The activity log wired to a running ``Proxy`` (stdio or the gateway), and the ``trust`` command's approvals.

``keep_log`` points the proxy's hooks (``Proxy.on_activity``) at an ``ActivityWriter`` whose
thread makes the raw events rows (``events.Events``) and writes them, until cancelled; then the
writer writes what is queued, within ``FLUSH_SECONDS``. What happened before it started (the
stdio proxy loads the log once its start is over, ``cli.serve``) is handed over as ``early``.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from mcp_patchbay.activity.events import Events, client_text
from mcp_patchbay.activity.rows import REQUEST_KINDS, ActivityRow, Limits
from mcp_patchbay.activity.writer import ActivityWriter, Sink

if TYPE_CHECKING:
    from mcp_patchbay.config import Settings
    from mcp_patchbay.session.proxy import Proxy
__all__ = ["FLUSH_SECONDS", "gateway_member", "keep_log", "limits_of", "record_approvals"]

logger = logging.getLogger(__name__)

FLUSH_SECONDS = 1.0
"""The longest a proxy's exit waits for the log to write what is queued."""
_MIB = 1024 * 1024


def limits_of(settings: Settings) -> Limits:
    return Limits(keep_days=settings.activity_keep_days, max_bytes=int(settings.activity_max_mb * _MIB))


async def keep_log(
    proxy: Proxy,
    label: str,
    early: Iterable[Any] = (),
    *,
    member: Callable[[Any], str] | None = None,
    sink: Sink | None = None,
    path: Path | None = None,
    linger: float = 0.25,
    task_status: anyio.abc.TaskStatus[ActivityWriter] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Record what ``proxy`` does, as ``label``, until cancelled. ``early``: raw events from
    before (oldest first); ``member``: who a request's caller is (the gateway; else the stdio
    client's ``clientInfo``); ``sink``/``path``: where rows go (default: the data folder's file)."""
    settings = proxy.settings
    events = Events(
        label,
        client=_as_is if member is not None else _stdio_client(proxy),
        keep_arguments=settings.activity_keep_arguments,
        argument_chars=settings.activity_argument_chars,
    )
    writer = ActivityWriter(
        sink, path=path, limits=limits_of(settings), bound=settings.activity_queue, linger=linger, convert=events.batch
    )
    for entry in early:
        writer.emit(entry)
    proxy.on_activity = writer.emit if member is None else _naming_members(writer, member)
    writer.start()
    task_status.started(writer)
    try:
        await anyio.sleep_forever()
    finally:
        proxy.on_activity = None
        if not writer.stop(FLUSH_SECONDS):
            lost = writer.queued
            logger.warning("the activity log did not finish writing within %.1f s; %d rows lost", FLUSH_SECONDS, lost)


def _naming_members(writer: ActivityWriter, member: Callable[[Any], str]) -> Callable[[tuple[Any, ...]], None]:
    """The gateway's observer: a request's member is read on the request's path (its access
    token is a context variable there), the rest in the writer's thread."""

    def observe(event: tuple[Any, ...]) -> None:
        if event[0] in REQUEST_KINDS and event[3] is not None:
            try:
                event = (*event[:3], member(event[3]), *event[4:])
            except Exception:
                event = (*event[:3], None, *event[4:])
        writer.emit(event)

    return observe


def gateway_member(ctx: Any) -> str:
    """The member behind a gateway request (``gateway.identity``), read on the request's path."""
    from mcp_patchbay.gateway.identity import request_identity

    return request_identity(getattr(ctx, "request", None))


def _as_is(caller: Any) -> str | None:
    return caller if isinstance(caller, str) else None


def _stdio_client(proxy: Proxy) -> Callable[[Any], str | None]:
    """The one client of a stdio proxy: its ``clientInfo`` as the SDK's session has it, else the
    name the tool-call lane read from its ``initialize``; learnt once."""
    known: list[str] = []

    def client(_request: Any) -> str | None:
        if known:
            return known[0]
        session = proxy.channel.session
        info = getattr(getattr(session, "client_params", None), "client_info", None)
        text = client_text(getattr(info, "name", None), getattr(info, "version", None))
        if text is None:
            text = client_text(proxy.lane.client_name, None)
        if text is not None:
            known.append(text)
        return text

    return client


def record_approvals(settings: Settings, approved: Sequence[Mapping[str, Any]], path: Path | None = None) -> None:
    """One ``approved`` row for each definition the ``trust`` command approved (its JSON items:
    server, kind, name, fingerprint). Never raises: an approval stands whatever the log does."""
    if not settings.activity or not approved:
        return
    from mcp_patchbay.activity.store import ActivityStore, values_of

    now = time.time()
    label = f"trust pid {os.getpid()}"
    rows = [
        ActivityRow(
            id=None,
            at=now,
            kind="approved",
            proxy=label,
            client="mcp-patchbay trust",
            server=str(item.get("server")),
            upstream=str(item.get("name")),
            outcome="ok",
            detail=f"{item.get('kind')} '{item.get('name')}' approved, fingerprint {str(item.get('fingerprint'))[:12]}",
        )
        for item in approved
    ]
    try:
        store = ActivityStore.open(path, limits=limits_of(settings))
        try:
            store.insert([values_of(row) for row in rows])
        finally:
            store.close()
    except Exception as exc:
        logger.warning("the approval was not written to the activity log: %s", exc)
