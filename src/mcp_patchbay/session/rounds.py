"""Suspended calls: what a 2025-era upstream asks mid-call, put to a 2026-07-28 client.

A server of the 2026-07-28 protocol cannot send the client requests. When it needs input
it answers the call with an ``input_required`` result (``inputRequests``, ``requestState``);
the client fulfils the requests and calls again with ``inputResponses`` and the same
``requestState``. An upstream of the 2025 era instead sends ``sampling/createMessage``,
``elicitation/create`` or ``roots/list`` in the middle of its call and waits for the
answer. The proxy joins the two::

    client ─tools/call─> Rounds.start ─(background task)─> Proxy.run_tool ─> upstream
                                         upstream ─sampling/createMessage─> client_channel
    client <─input_required {key: request}, requestState─── Exchange.ask (the upstream waits)
    client ─tools/call + inputResponses + requestState─> Rounds.resume ─answer─> upstream
    client <─the final result, or the next input_required (several rounds)

The upstream call runs in the proxy's background task group, so it outlives the client
request that started it; an ``Exchange`` is that call and what its upstream asked for it.

Keyed: the ``requestState`` the handlers see is ``<id>.<round>``: 128 random bits naming
the suspension, and the round, so that an answer to an earlier round is refused. The
SDK's ``RequestStateBoundary`` (its keys: ``session.request_state``) seals it on the way out (AES-GCM under the
``request_state_keys``, bound to the method, tool name, arguments and the caller's
principal, with an expiry) and opens it on the way back in, before any handler runs;
a state it did not mint never reaches ``resume``.

Bounded: a suspension waits for the client's retry at most ``ttl`` (the sealed state's
own lifetime); then the upstream's question is answered with an error and the suspension
is forgotten. The call itself keeps its deadline (``deadlines``), running while it is
suspended (not paused for an elicitation, as a 2025-era session's call is): when it passes,
the upstream request is cancelled and its concurrency slot freed, and a late retry gets the
timeout. A client that cancels its request, or goes away while it waits, takes the call
with it (``abandon``: also when it hung up before its ``input_required`` was written). On
the gateway one member may hold at most ``max_waiting`` suspended calls
(``gateway.max_waiting_calls_per_identity``); a call beyond that is refused before it
starts, so it takes no slot.

One process holds a suspension: a retry that reaches another replica (or this one after a
restart) gets a clear ``isError`` result asking the model to call the tool again.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import suppress
from contextvars import ContextVar
from typing import Any, Final

import anyio
import anyio.abc
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from mcp_patchbay.calls.deadlines import Clock, ProgressFn
from mcp_patchbay.errors.tree import Category, ClientError, Code, PatchbayError
from mcp_patchbay.session.capabilities import refusal
from mcp_patchbay.throttle import LogThrottle

logger = logging.getLogger(__name__)

EXPIRED_MESSAGE = (
    "The earlier call of this tool is no longer waiting for its answer (it expired, was answered "
    "already, or was made on another replica of the proxy). Call the tool again."
)

_STOP_GRACE = 5.0
"""How long, as the proxy stops, the calls still running get to end once cancelled."""
Call = Callable[[ProgressFn | None], Awaitable[dict[str, Any]]]
"""One tool call as JSON values (``calls.path.ToolPath.run``), given where its progress goes."""
CURRENT: ContextVar[Exchange | None] = ContextVar("patchbay_exchange", default=None)
"""The exchange of the call running in this task (set in its background task), read by
``session.requests_back.SessionChannel.calling`` to tie what the upstream asks to this call. A
ContextVar on purpose: only a call ``Rounds.start`` runs has one, known only in the task it
starts; passing it would put it in every tool call's signature (``calls.path.ToolPath.run``)."""

_CAPABILITY: Final = {
    "sampling/createMessage": "sampling",
    "elicitation/create": "elicitation",
    "roots/list": "roots",
}
_ANSWERS: Final[dict[str, tuple[type[types.Result], ...]]] = {
    "sampling/createMessage": (types.CreateMessageResult, types.CreateMessageResultWithTools),
    "elicitation/create": (types.ElicitResult,),
    "roots/list": (types.ListRootsResult,),
}


class _Ended:
    """The outcome of a call that was cancelled before it had one."""


_ENDED = _Ended()
Outcome = dict[str, Any] | Exception | _Ended


def answers_input(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether this request's client speaks 2026-07-28 and can answer some input request."""
    if ctx.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS:
        return False
    caps = ctx.session.client_capabilities
    return caps is not None and (caps.sampling is not None or caps.elicitation is not None or caps.roots is not None)


class _Ask:
    """One question of the upstream, waiting for the client's answer."""

    __slots__ = ("answer", "answered", "request")

    def __init__(self, request: types.InputRequest) -> None:
        self.request = request
        self.answered = anyio.Event()
        self.answer: types.InputResponse | types.ErrorData | None = None

    def settle(self, answer: types.InputResponse | types.ErrorData) -> None:
        self.answer = answer
        self.answered.set()


class Exchange:
    """One call of a 2026-07-28 client and the questions its upstream asked for it."""

    def __init__(
        self, caps: types.ClientCapabilities | None, progress: ProgressFn | None, member: str | None = None
    ) -> None:
        self.id = secrets.token_urlsafe(16)
        self.caps = caps
        self.member = member
        """Who made the call (the gateway's identity), for the quota of suspended calls."""
        self.round = 0
        self.pending: dict[str, _Ask] = {}
        """Questions not answered yet, by the key the client sees."""
        self.outcome: Outcome | None = None
        self.closed = False
        """Expired, cancelled or finished: a new question is refused at once."""
        self.attended = True
        """A client request is waiting on this call (the first, or a retry)."""
        self.expires_at = math.inf
        self.scope = anyio.CancelScope()
        self.progress = progress
        self._keys = itertools.count(1)
        self._changed = anyio.Event()

    @property
    def waiting(self) -> bool:
        """The upstream has a question out: it waits for that answer, it is not asking another."""
        return bool(self.pending)

    async def ask(self, request: types.InputRequest) -> types.InputResponse | types.ErrorData:
        """The upstream's question, answered when the client retries (``session.requests_back``)."""
        refused = self._refusal(request)
        if refused is not None:
            return refused
        key = f"{_CAPABILITY[request.method]}-{next(self._keys)}"
        ask = self.pending[key] = _Ask(request)
        self._notify()
        try:
            await ask.answered.wait()
        finally:
            self.pending.pop(key, None)  # answered, or the upstream withdrew its question
        assert ask.answer is not None
        return ask.answer

    def _refusal(self, request: types.InputRequest) -> types.ErrorData | None:
        if self.closed:
            return types.ErrorData(
                code=types.INVALID_REQUEST,
                message=f"{request.method}: the client's call ended; nobody is left to answer.",
            )
        return refusal(self.caps, request)  # what the client did not declare, answered for it

    def deliver(self, responses: Mapping[str, types.InputResponse]) -> None:
        """The client's answers, each to the question of its key (unknown keys are ignored)."""
        for key, response in responses.items():
            ask = self.pending.pop(key, None)
            if ask is None:
                continue
            method = ask.request.method
            if isinstance(response, _ANSWERS[method]):
                ask.settle(response)
            else:
                logger.info("the client answered %s (%s) with a %s: refused", method, key, type(response).__name__)
                ask.settle(
                    types.ErrorData(
                        code=types.INVALID_PARAMS,
                        message=f"The client answered {method} with the wrong kind of result.",
                    )
                )

    def close(self, error: types.ErrorData) -> None:
        """No more questions: every one still out gets ``error``."""
        self.closed = True
        for ask in self.pending.values():
            ask.settle(error)
        self.pending.clear()
        self._notify()

    def finish(self, outcome: Outcome) -> None:
        self.outcome = outcome
        self.close(types.ErrorData(code=types.INVALID_REQUEST, message="The call has ended."))

    async def changed(self) -> None:
        """Until the next question, or the end (every waiter wakes)."""
        await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def relay(self, progress: float, total: float | None, message: str | None) -> None:
        """Progress goes to the client request waiting on the call now, if it asked for it."""
        forward = self.progress
        if forward is not None:
            with suppress(Exception):  # that request may have ended meanwhile
                await forward(progress, total, message)


class Rounds:
    """The suspended calls of this process, by id, and the tasks their calls run in.

    A call's task is an asyncio task of our own rather than an anyio task group's: this is
    every 2026-07-28 call of a client that can answer input, and anyio's ``start_soon``
    and hand-off cost ~40 us a call against ~10 us. ``run`` owns them all the same: when it
    ends, every call still running is cancelled and waited for (bounded)."""

    def __init__(self, ttl: float, clock: Clock = time.monotonic, *, max_waiting: int | None = None) -> None:
        """``max_waiting``: suspended calls one member may hold (the gateway's quota); None: no quota."""
        self.ttl = ttl
        self.clock = clock
        self.max_waiting = max_waiting
        self._refusals = LogThrottle(logger)
        """Calls refused over the quota of suspended calls: a WARNING, at most 10 a minute."""
        self.suspended: dict[str, Exchange] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._running = False
        self._rearm = anyio.Event()

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Host the calls and expire what waits too long, until cancelled."""
        self._running = True
        task_status.started()
        try:
            while True:
                self.expire()
                soonest = min((e.expires_at for e in self.suspended.values()), default=math.inf)
                self._rearm = anyio.Event()
                with anyio.move_on_after(max(0.0, soonest - self.clock())):
                    await self._rearm.wait()
        finally:
            self._running = False
            tasks = list(self._tasks)
            for task in tasks:
                task.cancel()
            if tasks:
                with anyio.CancelScope(shield=True), anyio.move_on_after(_STOP_GRACE):
                    await asyncio.wait(tasks)

    async def start(
        self,
        call: Call,
        caps: types.ClientCapabilities | None,
        progress: ProgressFn | None,
        member: str | None = None,
    ) -> dict[str, Any] | types.InputRequiredResult:
        """Run ``call`` for a client that can answer input: its result, or the first questions.
        Raises ``ClientError`` when ``member`` holds its quota of suspended calls already."""
        if not self._running:  # a proxy used without its background work: no suspension
            return await call(progress)
        if member is not None and self.max_waiting is not None:
            held = self.waiting(member)
            if held >= self.max_waiting:
                self._refusals.log("refused a call of %s: %d of its calls wait for its answers already", member, held)
                raise too_many_waiting(held)
        exchange = Exchange(caps, progress, member)
        task = asyncio.get_running_loop().create_task(
            self._run(exchange, call, exchange.relay if progress is not None else None)
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return await self._attend(exchange, progress)

    async def resume(
        self, state: str, responses: Mapping[str, types.InputResponse] | None, progress: ProgressFn | None
    ) -> dict[str, Any] | types.InputRequiredResult:
        """A client's retry: its answers to the upstream, then the result or the next questions.
        Raises ``ClientError`` when that call is no longer waiting."""
        key, _, round_ = state.partition(".")
        exchange = self.suspended.get(key)
        if exchange is None or exchange.attended or round_ != str(exchange.round):
            logger.info(
                "a retry named a call that is not waiting (%s)",
                "unknown or expired" if exchange is None else "answered already",
            )
            raise expired()
        exchange.deliver(responses or {})
        return await self._attend(exchange, progress)

    def waiting(self, member: str) -> int:
        """How many calls of ``member`` are suspended now, waiting for its answers."""
        return sum(1 for e in self.suspended.values() if e.member == member and not e.attended and e.outcome is None)

    def abandon(self, state: str) -> None:
        """The client of a call that just suspended has gone (it will never see the
        ``input_required``): the call ends now, its upstream request cancelled."""
        exchange = self.suspended.pop(state.partition(".")[0], None)
        if exchange is None:
            return
        logger.info("a call's client hung up before its input_required was written: the call ends")
        exchange.scope.cancel()
        exchange.close(types.ErrorData(code=types.INVALID_REQUEST, message="The client went away."))

    def expire(self) -> int:
        """Forget the suspensions whose client did not come back in time; how many."""
        now = self.clock()
        gone = [e for e in self.suspended.values() if not e.attended and e.expires_at <= now]
        for exchange in gone:
            del self.suspended[exchange.id]
            logger.info("a suspended call expired: the client did not retry within %.0f s", self.ttl)
            exchange.close(
                types.ErrorData(code=types.REQUEST_TIMEOUT, message="The client did not answer in time; it gave up.")
            )
        return len(gone)

    async def _run(self, exchange: Exchange, call: Call, progress: ProgressFn | None) -> None:
        CURRENT.set(exchange)
        outcome: Outcome = _ENDED
        try:
            with exchange.scope:
                try:
                    outcome = await call(progress)
                except Exception as exc:  # run_tool raises only what the client must see as an error
                    outcome = exc
        finally:
            exchange.finish(outcome)

    async def _attend(
        self, exchange: Exchange, progress: ProgressFn | None
    ) -> dict[str, Any] | types.InputRequiredResult:
        """Wait, for the client request in hand, until the call ends or its upstream asks."""
        exchange.attended = True
        exchange.expires_at = math.inf
        exchange.progress = progress
        try:
            while exchange.outcome is None and not exchange.pending:
                await exchange.changed()
        except BaseException:  # the client cancelled or went away: the call goes with it
            exchange.scope.cancel()
            self.suspended.pop(exchange.id, None)
            exchange.close(types.ErrorData(code=types.INVALID_REQUEST, message="The client cancelled its call."))
            raise
        exchange.progress = None
        outcome = exchange.outcome
        if outcome is not None:
            self.suspended.pop(exchange.id, None)
            if isinstance(outcome, Exception):
                raise outcome
            if isinstance(outcome, _Ended):
                raise expired()
            return outcome
        exchange.round += 1
        if logger.isEnabledFor(logging.DEBUG):
            asked = ", ".join(ask.request.method for ask in exchange.pending.values())
            logger.debug(
                "call suspended (round %d): its upstream asked %s; the client answers by calling again",
                exchange.round,
                asked,
            )
        exchange.attended = False
        exchange.expires_at = self.clock() + self.ttl
        self.suspended[exchange.id] = exchange
        self._rearm.set()
        return types.InputRequiredResult(
            input_requests={key: ask.request for key, ask in exchange.pending.items()},
            request_state=f"{exchange.id}.{exchange.round}",
        )


def expired() -> PatchbayError:
    return ClientError(Code.INVALID_ARGUMENTS, EXPIRED_MESSAGE, retryable=True, category=Category.CANCELLED)


def too_many_waiting(held: int) -> PatchbayError:
    return ClientError(
        Code.RATE_LIMITED,
        f"{held} of your tool calls are waiting for your answers to their servers' questions, the most one member "
        "may have. Answer those calls (or let them time out), then call again.",
        retryable=True,
        retry_after_ms=5000,
    )


__all__ = [
    "CURRENT",
    "EXPIRED_MESSAGE",
    "Exchange",
    "Rounds",
    "answers_input",
    "expired",
]
