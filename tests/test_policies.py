"""The policy chain, with an injected clock and sleep: no test waits on real time."""

from __future__ import annotations

import math
from typing import Any

import anyio
import pytest

from mcp_patchbay.calls.deadlines import Deadline
from mcp_patchbay.calls.policies import (
    BreakerState,
    Bulkhead,
    CircuitBreaker,
    RawResult,
    RestartBackoff,
    RetryPolicy,
    ToolCall,
    build_chain,
    with_breaker,
    with_retry,
)
from mcp_patchbay.errors.tree import ClientError, Code, NotDelivered, SessionExpired, UpstreamError

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _call(clock: Clock, *, retry_safe: bool = False, timeout: float = 50.0) -> ToolCall:
    return ToolCall(server="s", tool="t", arguments={}, deadline=Deadline(timeout, 300.0, clock), retry_safe=retry_safe)


OK: RawResult = {"content": [{"type": "text", "text": "ok"}]}


def test_breaker_opens_after_threshold_then_one_probe_closes_it() -> None:
    clock = Clock()
    breaker = CircuitBreaker(threshold=3, cooldown=30.0, clock=clock)
    for _ in range(2):
        assert breaker.check() is None
        breaker.record_failure()
    assert breaker.state is BreakerState.CLOSED
    breaker.record_failure()
    assert breaker.state is BreakerState.OPEN
    wait = breaker.check()
    assert wait is not None and 29.0 < wait <= 30.0
    clock.now += 31
    assert breaker.check() is None  # the probe
    assert breaker.state is BreakerState.HALF_OPEN
    assert breaker.check() is not None  # only one probe at a time
    breaker.record_success()
    assert breaker.state is BreakerState.CLOSED and breaker.check() is None


def test_failed_probe_opens_the_breaker_again() -> None:
    clock = Clock()
    breaker = CircuitBreaker(threshold=1, cooldown=10.0, clock=clock)
    breaker.record_failure()
    clock.now += 11
    assert breaker.check() is None
    breaker.record_failure()
    assert breaker.state is BreakerState.OPEN
    assert breaker.check() is not None


def test_success_resets_the_consecutive_count() -> None:
    breaker = CircuitBreaker(threshold=2, cooldown=10.0, clock=Clock())
    breaker.record_failure()
    breaker.record_success()
    breaker.record_failure()
    assert breaker.state is BreakerState.CLOSED


async def test_breaker_ignores_client_errors_and_its_own_rejections() -> None:
    clock = Clock()
    breaker = CircuitBreaker(threshold=1, cooldown=10.0, clock=clock)

    async def bad_args(call: ToolCall) -> RawResult:
        raise ClientError(Code.INVALID_ARGUMENTS, "no")

    async def starting(call: ToolCall) -> RawResult:
        raise NotDelivered(Code.SERVER_STARTING, "wait")

    for inner in (bad_args, starting):
        with pytest.raises(ClientError if inner is bad_args else UpstreamError):
            await with_breaker(inner, breaker)(_call(clock))
    assert breaker.state is BreakerState.CLOSED


async def test_retry_resends_what_never_arrived_but_not_what_may_have_run() -> None:
    clock = Clock()
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    attempts: list[int] = []

    async def flaky(call: ToolCall) -> RawResult:
        attempts.append(call.attempts)
        if len(attempts) < 3:
            raise NotDelivered(Code.CONNECTION_FAILED, "refused")
        return OK

    policy = RetryPolicy(attempts=2, backoff=0.2, sleep=sleep, rand=lambda: 1.0)

    async def ready(seconds: float) -> bool:
        return True

    assert await with_retry(flaky, policy, ready)(_call(clock)) == OK
    assert attempts == [1, 2, 3]
    assert slept == [0.2, 0.4]  # exponential backoff

    async def lost(call: ToolCall) -> RawResult:
        attempts.append(call.attempts)
        raise UpstreamError(Code.CONNECTION_LOST, "gone mid-call")

    attempts.clear()
    with pytest.raises(UpstreamError):
        await with_retry(lost, policy, ready)(_call(clock))
    assert attempts == [1]  # may have run: never sent twice

    attempts.clear()
    with pytest.raises(UpstreamError):
        await with_retry(lost, policy, ready)(_call(clock, retry_safe=True))
    assert attempts == [1, 2, 3]  # read-only or idempotent: bounded retries


async def test_retry_after_is_honoured_but_never_past_the_deadline() -> None:
    clock = Clock()
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.now += seconds

    async def limited(call: ToolCall) -> RawResult:
        raise UpstreamError(Code.RATE_LIMITED, "slow down", retry_after_ms=3000)

    policy = RetryPolicy(attempts=3, backoff=0.1, sleep=sleep, rand=lambda: 0.5)

    async def ready(seconds: float) -> bool:
        return True

    with pytest.raises(UpstreamError):
        await with_retry(limited, policy, ready)(_call(clock, retry_safe=True, timeout=5.0))
    assert slept == [3.0]  # a second 3 s wait would not fit in the 2 s left of the 5 s deadline


async def test_session_expiry_rebuilds_then_resends_once_ready() -> None:
    clock = Clock()
    sent: list[int] = []
    waited: list[float] = []

    async def expiring(call: ToolCall) -> RawResult:
        sent.append(call.attempts)
        if len(sent) == 1:
            raise SessionExpired(Code.CONNECTION_LOST, "session ended")
        return OK

    async def ready(seconds: float) -> bool:
        waited.append(seconds)
        return True

    policy = RetryPolicy(attempts=1, backoff=0.1)
    assert await with_retry(expiring, policy, ready)(_call(clock)) == OK
    assert sent == [1, 2] and len(waited) == 1


async def test_bulkhead_queue_is_bounded() -> None:
    bulkhead = Bulkhead(limit=1, queue=1, wait=5.0)
    release = anyio.Event()

    async def hold(call: ToolCall) -> RawResult:
        await release.wait()
        return OK

    chain = build_chain(
        hold,
        breaker=CircuitBreaker(5, 30.0),
        bulkhead=bulkhead,
        retry=RetryPolicy(0, 0.1),
        wait_ready=_never,
    )
    outcomes: list[Any] = []

    async def run() -> None:
        try:
            outcomes.append(await chain(_call(Clock())))
        except UpstreamError as exc:
            outcomes.append(exc.code)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)  # takes the slot
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(run)  # waits in the queue
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(run)  # the queue is full: shed at once
            await anyio.wait_all_tasks_blocked()
            assert outcomes == [Code.BULKHEAD_FULL]
            release.set()
    assert outcomes == [Code.BULKHEAD_FULL, OK, OK]


async def _never(seconds: float) -> bool:
    return False


async def test_deadline_covers_the_whole_chain_and_progress_extends_it() -> None:
    progressed = anyio.Event()

    async def slow(call: ToolCall) -> RawResult:
        call.deadline.extend()  # what a progress notification does
        progressed.set()
        await anyio.sleep_forever()
        return OK

    deadline = Deadline(0.05, 0.2)
    chain = build_chain(
        slow,
        breaker=CircuitBreaker(5, 30.0),
        bulkhead=Bulkhead(2, 2, 1.0),
        retry=RetryPolicy(0, 0.1),
        wait_ready=_never,
    )
    with anyio.fail_after(5), pytest.raises(UpstreamError) as caught:
        await chain(ToolCall(server="s", tool="t", arguments={}, deadline=deadline))
    assert caught.value.code is Code.TIMEOUT and progressed.is_set()
    assert deadline.elapsed() < 1.0


def test_deadline_extension_never_passes_the_hard_cap() -> None:
    clock = Clock()
    deadline = Deadline(10.0, 25.0, clock)
    clock.now += 8
    deadline.extend()
    assert deadline.at == 1018.0
    clock.now += 9
    deadline.extend()
    assert deadline.at == 1025.0  # capped at start + max_call_time
    deadline.pause()
    deadline.resume()  # a person answered an elicitation: a fresh timeout from now
    assert deadline.at == clock.now + 10.0


async def test_timeouts_trip_the_breaker() -> None:
    """Regression: the deadline used to wrap the breaker, which saw a timeout as a cancellation."""

    async def hang(call: ToolCall) -> RawResult:
        await anyio.sleep_forever()
        return OK

    breaker = CircuitBreaker(threshold=2, cooldown=30.0)
    chain = build_chain(
        hang, breaker=breaker, bulkhead=Bulkhead(2, 2, 1.0), retry=RetryPolicy(0, 0.1), wait_ready=_never
    )
    codes: list[Code] = []
    with anyio.fail_after(5):
        for _ in range(3):
            with pytest.raises(UpstreamError) as caught:
                await chain(ToolCall(server="s", tool="t", arguments={}, deadline=Deadline(0.02, 1.0)))
            codes.append(caught.value.code)
    assert codes == [Code.TIMEOUT, Code.TIMEOUT, Code.CIRCUIT_OPEN]


async def test_overlapping_elicitations_keep_a_deadline_paused_until_the_last_ends() -> None:
    """Two elicitations from one upstream: the first to end resumed every deadline while the
    person was still answering the second."""
    from mcp_patchbay.calls.deadlines import DeadlineSet

    now = [0.0]
    deadline = Deadline(1.0, 10.0, lambda: now[0])
    calls = DeadlineSet()
    with anyio.CancelScope() as scope:  # noqa: ASYNC100 - only its deadline is looked at
        deadline.bind(scope)
        with calls.tracking(deadline):
            with calls.paused():
                with calls.paused():
                    pass
                assert scope.deadline == math.inf  # the second is still open
                deadline.extend()  # progress meanwhile
                assert scope.deadline == math.inf
            assert scope.deadline != math.inf


def test_restart_backoff_doubles_to_its_maximum_with_jitter_and_starts_over_after_a_stable_connection() -> None:
    draws = iter([1.0, 0.0, 1.0, 1.0, 1.0, 0.5])
    backoff = RestartBackoff(1.0, 5.0, stable_after=60.0, rand=lambda: next(draws))
    assert backoff.next_wait(lasted=0.1) == 1.0  # the whole delay
    assert backoff.next_wait(lasted=0.1) == 1.0  # half of 2
    assert backoff.next_wait(lasted=0.1) == 4.0
    assert backoff.next_wait(lasted=0.1) == 5.0  # capped at the maximum
    assert backoff.next_wait(lasted=61.0) == 1.0  # a connection that lasted: from the start again
    backoff.delay = 5.0
    backoff.reset()  # a sign-in
    assert backoff.next_wait(lasted=0.1) == 0.75
