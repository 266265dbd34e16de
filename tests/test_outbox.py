"""The gateway's per-session outbox in isolation: order, coalescing, the two ways a session
that does not read is ended, and the WARNINGs that cannot flood the log (issue 20)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, cast

import anyio
import pytest
from mcp.server.connection import Connection

from mcp_patchbay.session.outbox import WARNINGS_PER_MINUTE, Outboxes
from tests.harness import until

pytestmark = pytest.mark.anyio

UPDATED = "notifications/resources/updated"
TOOLS_CHANGED = "notifications/tools/list_changed"
LOG = "notifications/message"


class FakeConnection:
    """What the outbox uses of the SDK's ``Connection``; ``notify`` waits on ``reading``."""

    has_standalone_channel = True

    def __init__(self, session_id: str = "s1", *, reads: bool = True) -> None:
        self.session_id = session_id
        self.state: dict[str, Any] = {}
        self.sent: list[tuple[str, Mapping[str, Any] | None]] = []
        self.reading = anyio.Event()
        if reads:
            self.reading.set()

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        await self.reading.wait()
        self.sent.append((method, params))


def as_connection(fake: FakeConnection) -> Connection:
    """The fake where the outbox takes the SDK's ``Connection`` (it uses only what the fake has)."""
    return cast(Connection, fake)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_notices_are_sent_in_order_and_a_change_already_queued_is_not_queued_again() -> None:
    ended: list[str] = []

    async def end(session_id: str) -> None:
        ended.append(session_id)

    outboxes = Outboxes(send_timeout=5, max_queued=8, end_session=end)
    slow = FakeConnection(reads=False)
    async with anyio.create_task_group() as tg:
        outboxes.tg = tg
        outboxes.post(as_connection(slow), UPDATED, {"uri": "a"})  # the sender takes this one and waits on the client
        for _ in range(1000):  # an upstream that updates the same resources over and over
            outboxes.post(as_connection(slow), UPDATED, {"uri": "a"})
            outboxes.post(as_connection(slow), UPDATED, {"uri": "b"})
            outboxes.post(as_connection(slow), TOOLS_CHANGED)
        outboxes.post(as_connection(slow), LOG, {"level": "info", "data": "one"})
        outboxes.post(as_connection(slow), LOG, {"level": "info", "data": "one"})  # log messages are all kept
        slow.reading.set()
        await until(lambda: not outboxes.senders)  # every notice written, the sender gone
        tg.cancel_scope.cancel()
    assert [(m, (p or {}).get("uri") or (p or {}).get("data")) for m, p in slow.sent] == [
        (UPDATED, "a"),
        (UPDATED, "b"),
        (TOOLS_CHANGED, None),
        (LOG, "one"),
        (LOG, "one"),
    ]
    assert ended == []


async def test_a_session_that_does_not_read_is_ended_by_send_timeout_or_by_its_queue() -> None:
    ended: list[str] = []
    both_ended = anyio.Event()

    async def end(session_id: str) -> None:
        ended.append(session_id)
        if len(ended) == 2:
            both_ended.set()

    outboxes = Outboxes(send_timeout=0.2, max_queued=4, end_session=end)
    timing_out, overflowing = FakeConnection("slow", reads=False), FakeConnection("full", reads=False)
    async with anyio.create_task_group() as tg:
        outboxes.tg = tg
        outboxes.post(as_connection(timing_out), UPDATED, {"uri": "a"})
        for n in range(5):  # distinct log messages: nothing to coalesce
            outboxes.post(as_connection(overflowing), LOG, {"data": n})
        with anyio.fail_after(5):
            await both_ended.wait()
        outboxes.post(as_connection(overflowing), LOG, {"data": "late"})  # an ended session's later notices are dropped
        tg.cancel_scope.cancel()
    assert sorted(ended) == ["full", "slow"]
    assert outboxes.ended == 2
    assert overflowing.sent == [] and timing_out.sent == []


async def test_sessions_ended_for_not_reading_cannot_flood_the_log(caplog: pytest.LogCaptureFixture) -> None:
    """An attacker that opens stuck sessions one after another got a WARNING each (885 a
    minute measured): past WARNINGS_PER_MINUTE they are DEBUG, and the next WARNING counts them."""
    caplog.set_level(logging.DEBUG, "mcp_patchbay.session.outbox")
    clock = Clock()
    outboxes = Outboxes(send_timeout=5, max_queued=1, end_session=None, clock=clock)
    async with anyio.create_task_group() as tg:
        outboxes.tg = tg
        for n in range(WARNINGS_PER_MINUTE + 25):
            stuck = FakeConnection(f"s{n}", reads=False)
            outboxes.post(as_connection(stuck), LOG, {"data": 1})
            outboxes.post(as_connection(stuck), LOG, {"data": 2})  # over max_queued: ended
        clock.now += 61
        last = FakeConnection("next-minute", reads=False)
        outboxes.post(as_connection(last), LOG, {"data": 1})
        outboxes.post(as_connection(last), LOG, {"data": 2})
        tg.cancel_scope.cancel()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == WARNINGS_PER_MINUTE + 1
    assert "(25 more like this since the last one, logged at DEBUG)" in warnings[-1]
    assert sum(r.levelno == logging.DEBUG and "closing session" in r.getMessage() for r in caplog.records) == 25


async def test_progress_is_posted_the_latest_value_waits_and_a_client_that_reads_none_gets_no_more() -> None:
    outboxes = Outboxes(send_timeout=0.2, max_queued=8, end_session=None)
    written: list[float] = []
    reading = anyio.Event()

    async def forward(progress: float, total: float | None, message: str | None) -> None:
        await reading.wait()
        written.append(progress)

    async with anyio.create_task_group() as tg:
        outboxes.tg = tg
        post = outboxes.progress(forward)
        with anyio.fail_after(1):  # never waits for the client
            for n in range(1000):
                await post(float(n), 1000.0, None)
        reading.set()
        await until(lambda: written and written[-1] == 999.0)
        assert len(written) <= 2  # at most the one being written, then the latest: not a thousand

        given_up = anyio.Event()

        async def never_read(progress: float, total: float | None, message: str | None) -> None:
            try:
                await anyio.sleep_forever()
            finally:
                given_up.set()  # send_timeout passed: the outbox cancelled this write

        stuck = outboxes.progress(never_read)
        await stuck(1.0, None, None)
        with anyio.fail_after(5):
            await given_up.wait()  # send_timeout (0.2 s) of a client reading nothing: the scenario itself
        await until(lambda: _stopped(stuck))
        await stuck(2.0, None, None)  # after send_timeout, nothing more is sent
        assert _stopped(stuck)
        tg.cancel_scope.cancel()


def _stopped(post: object) -> bool:
    return bool(getattr(post, "_stopped", False))
