"""The chain of policies around one upstream's tool calls.

One callable type, ``Handler``; every policy takes a Handler and is one (the
shape of Starlette's middleware). The chain is built once per upstream, in this
order, outermost first:

    CircuitBreaker -> Deadline -> Bulkhead -> Retry -> the upstream session

- The breaker first: an open circuit costs the caller nothing, and it sees one
  outcome per logical call, after retries, a timeout included (a hanging upstream
  must trip it like a failing one).
- The deadline next, so the timeout counts from the request's arrival to the reply,
  queue wait and retries included (the breaker check takes no time). How progress
  extends it, and elicitation pauses it, is ``deadlines``' to say.
- The bulkhead holds a slot for the whole call, retries included, so a retrying
  call cannot be overtaken into an overloaded upstream.
- Retry is innermost: only a request that never reached the upstream, or a call
  to a tool annotated read-only or idempotent, is sent again.

Beside the chain, ``RestartBackoff``: how long an upstream whose connection ended waits
before it connects again.

The clock, the sleep and the random are injected so tests never wait on real time; the
breaker and the restart backoff's arithmetic are pure.
"""

from __future__ import annotations

import enum
import math
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from mcp_patchbay.calls.deadlines import Clock, Deadline, ProgressFn
from mcp_patchbay.errors.tree import Code, NotDelivered, PatchbayError, SessionExpired, UpstreamError

Sleep = Callable[[float], Awaitable[None]]


@dataclass(slots=True)
class ToolCall:
    """One tool call on its way upstream. ``tool`` is the upstream's own name."""

    server: str
    tool: str
    arguments: dict[str, Any] | None
    deadline: Deadline
    retry_safe: bool = False
    meta: dict[str, Any] | None = None
    on_progress: ProgressFn | None = None
    attempts: int = field(default=0)
    excused: Callable[[], bool] | None = None
    """True when the proxy refused a request the server made for this call (a sampling request
    it could not route): a failure is then not the server's, and does not trip its breaker."""
    task: dict[str, Any] | None = None
    """The ``task`` the client's call carried, for an upstream that runs it as a task (``tasks``):
    the answer is then its ``CreateTaskResult``."""


RawResult = dict[str, Any]
"""A ``CallToolResult`` as JSON values: results cross the proxy without a model round trip."""

Handler = Callable[[ToolCall], Awaitable[RawResult]]


def with_deadline(inner: Handler) -> Handler:
    async def handle(call: ToolCall) -> RawResult:
        deadline = call.deadline
        with anyio.CancelScope() as scope:
            deadline.bind(scope)
            return await inner(call)
        # Only our own deadline lands here: an outer cancellation propagates out of the scope.
        limit = deadline.limit()
        raise UpstreamError(
            Code.TIMEOUT,
            f"Tool '{call.tool}' on server '{call.server}' did not finish within {limit:g}s and was cancelled. "
            "Retry with a smaller request, or tell the user the server is slow.",
            detail=f"deadline passed after {deadline.elapsed():.3f}s, {call.attempts} attempt(s)",
            server=call.server,
            tool=call.tool,
        )

    return handle


class BreakerState(enum.StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class CircuitBreaker:
    """After ``threshold`` consecutive upstream failures, stop sending for ``cooldown`` seconds.

    Then one probe call goes through: success closes the circuit, failure opens it
    again. Pure: the caller reports outcomes; time comes from the injected clock.
    """

    def __init__(self, threshold: int, cooldown: float, clock: Clock = time.monotonic) -> None:
        self.threshold = threshold
        self.cooldown = cooldown
        self._clock = clock
        self.state = BreakerState.CLOSED
        self.failures = 0
        self.opened_at = 0.0
        self._probing = False

    def check(self) -> float | None:
        """None when a call may go ahead; otherwise seconds until it may be tried again."""
        if self.state is BreakerState.CLOSED:
            return None
        wait = self.opened_at + self.cooldown - self._clock()
        if self.state is BreakerState.OPEN and wait <= 0:
            self.state = BreakerState.HALF_OPEN
            self._probing = False
        if self.state is BreakerState.HALF_OPEN and not self._probing:
            self._probing = True
            return None
        return max(wait, 0.5)

    def record_success(self) -> None:
        self.state = BreakerState.CLOSED
        self.failures = 0
        self._probing = False

    def record_failure(self) -> None:
        self.failures += 1
        if self.state is BreakerState.HALF_OPEN or self.failures >= self.threshold:
            self.state = BreakerState.OPEN
            self.opened_at = self._clock()
            self._probing = False

    def release_probe(self) -> None:
        """A probe that ended without a verdict (client error, cancellation) frees the slot."""
        self._probing = False


def with_breaker(inner: Handler, breaker: CircuitBreaker) -> Handler:
    async def handle(call: ToolCall) -> RawResult:
        wait = breaker.check()
        if wait is not None:
            raise UpstreamError(
                Code.CIRCUIT_OPEN,
                f"Server '{call.server}' failed {breaker.failures} times in a row, so the proxy is giving it a rest. "
                f"Retry in {math.ceil(wait)}s or use another tool.",
                retry_after_ms=math.ceil(wait * 1000),
                server=call.server,
                tool=call.tool,
            )
        try:
            result = await inner(call)
        except UpstreamError as exc:
            if exc.code.info.trips_breaker and not (call.excused is not None and call.excused()):
                breaker.record_failure()
            else:
                breaker.release_probe()
            raise
        except BaseException:
            breaker.release_probe()
            raise
        breaker.record_success()
        return result

    return handle


class Bulkhead:
    """At most ``limit`` calls at once; at most ``queue`` more wait, each at most ``wait`` seconds."""

    def __init__(self, limit: int, queue: int, wait: float) -> None:
        self.limit = limit
        self.queue = queue
        self.wait = wait
        self.semaphore = anyio.Semaphore(limit)
        self.waiting = 0

    @property
    def in_flight(self) -> int:
        return self.limit - self.semaphore.value


def with_bulkhead(inner: Handler, bulkhead: Bulkhead) -> Handler:
    def full(call: ToolCall, why: str) -> UpstreamError:
        return UpstreamError(
            Code.BULKHEAD_FULL,
            f"Server '{call.server}' is busy with {bulkhead.limit} calls already ({why}). Retry in a few seconds.",
            retry_after_ms=1000,
            server=call.server,
            tool=call.tool,
        )

    async def handle(call: ToolCall) -> RawResult:
        semaphore = bulkhead.semaphore
        if semaphore.value > 0:  # fast path: no queue, and no scheduler round trip to take a slot
            semaphore.acquire_nowait()
            try:
                return await inner(call)
            finally:
                semaphore.release()
        if bulkhead.waiting >= bulkhead.queue:
            raise full(call, "the queue is full")
        bulkhead.waiting += 1
        try:
            with anyio.move_on_after(bulkhead.wait) as scope:
                await semaphore.acquire()
            if scope.cancelled_caught:
                raise full(call, f"waited {bulkhead.wait:g}s for a free slot")
        finally:
            bulkhead.waiting -= 1
        try:
            return await inner(call)
        finally:
            semaphore.release()

    return handle


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    attempts: int
    """Extra attempts after the first."""
    backoff: float
    """Base delay in seconds; doubles each attempt, with full jitter."""
    sleep: Sleep = anyio.sleep
    rand: Callable[[], float] = random.random


def with_retry(inner: Handler, policy: RetryPolicy, wait_ready: Callable[[float], Awaitable[bool]]) -> Handler:
    """Send again only what is safe to send again, within the call's deadline.

    ``wait_ready(seconds)`` waits for the upstream to be connected again (after a
    session expiry) and says whether it is.
    """

    async def handle(call: ToolCall) -> RawResult:
        while True:
            call.attempts += 1
            try:
                return await inner(call)
            except PatchbayError as exc:
                if not _may_retry(exc, call, policy):
                    raise
                if isinstance(exc, SessionExpired):
                    if not await wait_ready(call.deadline.remaining()):
                        raise
                    continue
                delay = policy.backoff * (2 ** (call.attempts - 1)) * policy.rand()
                if exc.retry_after_ms is not None:
                    delay = max(delay, exc.retry_after_ms / 1000)
                if delay >= call.deadline.remaining():
                    raise
                await policy.sleep(delay)

    return handle


def _may_retry(exc: PatchbayError, call: ToolCall, policy: RetryPolicy) -> bool:
    if call.attempts > policy.attempts:
        return False
    if isinstance(exc, NotDelivered):
        return exc.code is not Code.SERVER_STARTING
    return call.retry_safe and exc.code.info.resend_when_safe


def build_chain(
    send: Handler,
    *,
    breaker: CircuitBreaker,
    bulkhead: Bulkhead,
    retry: RetryPolicy,
    wait_ready: Callable[[float], Awaitable[bool]],
) -> Handler:
    """The documented order, innermost first as it is built."""
    handler = with_retry(send, retry, wait_ready)
    handler = with_bulkhead(handler, bulkhead)
    handler = with_deadline(handler)
    return with_breaker(handler, breaker)


STABLE_AFTER = 60.0
"""A connection that lasted this long (seconds) was healthy: the next restart waits the initial delay again."""


@dataclass(slots=True)
class RestartBackoff:
    """When an upstream whose connection ended connects again: the wait doubles from
    ``initial`` up to ``maximum`` after each failed connection, each wait a random half to
    whole of it (so many upstreams that failed together do not retry together), and starts
    again from ``initial`` after a connection that lasted ``stable_after`` or a sign-in.

    ``next_wait`` is pure arithmetic on what it is given and ``rand``; the upstream measures
    a connection's life with ``clock`` and waits with ``sleep``.
    """

    initial: float
    maximum: float
    stable_after: float = STABLE_AFTER
    clock: Clock = time.monotonic
    sleep: Sleep = anyio.sleep
    rand: Callable[[], float] = random.random
    delay: float = field(init=False)
    """The next wait's ceiling."""

    def __post_init__(self) -> None:
        self.delay = self.initial

    def reset(self) -> None:
        self.delay = self.initial

    def next_wait(self, lasted: float) -> float:
        """The wait before the next connection, for one that lasted ``lasted`` seconds."""
        if lasted > self.stable_after:
            self.delay = self.initial
        wait = self.delay * (0.5 + self.rand() / 2)
        self.delay = min(self.delay * 2, self.maximum)
        return wait
