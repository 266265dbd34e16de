"""One upstream server as callers see it: what they ask of it, and the calls sent to it.

``Upstream`` is its ``Lifecycle`` (``upstreams.lifecycle``: its state, its connection's life,
restarts, parking, stop) and the call path: tool calls go through ``chain``, the policies of
``policies.build_chain`` around ``send_call``, built once; ``request_raw`` and ``request`` send
the rest. A call waits for a start it needs (``ensure_started``), and a failure it sees ends
only the connection it was sent on (``_connection_lost``: the invariant ``lifecycle`` states);
a refusal for want of a sign-in starts one (``oauth.gate``). Its health is ``status``'.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.client.session import ClientSession

from mcp_patchbay.calls.deadlines import extending
from mcp_patchbay.calls.policies import Bulkhead, CircuitBreaker, Handler, RawResult, RetryPolicy, ToolCall, build_chain
from mcp_patchbay.errors.connection import checked_result
from mcp_patchbay.errors.foreign import translate
from mcp_patchbay.errors.tree import Code, PatchbayError, SignedIn
from mcp_patchbay.session.sdk import send_raw
from mcp_patchbay.session.status import upstream_health
from mcp_patchbay.upstreams import availability
from mcp_patchbay.upstreams.availability import SIGN_IN_TOOL, State
from mcp_patchbay.upstreams.lifecycle import Lifecycle

if TYPE_CHECKING:
    from mcp_patchbay.oauth.gate import SignInGate


@dataclass
class Upstream(Lifecycle):
    """One upstream server: its ``Lifecycle``, and the calls sent to it (``chain``, ``request_raw``, ``request``)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        settings = self.settings
        spec = self.entry.spec
        limit = (spec.max_concurrency if spec is not None else None) or settings.max_concurrency
        self.breaker = CircuitBreaker(settings.breaker_threshold, settings.breaker_cooldown)
        self.bulkhead = Bulkhead(limit, queue=limit * 4, wait=settings.queue_timeout)
        self.chain: Handler = build_chain(
            self.send_call,
            breaker=self.breaker,
            bulkhead=self.bulkhead,
            retry=RetryPolicy(settings.retry_attempts, settings.retry_backoff),
            wait_ready=self.wait_ready,
        )

    # --- what callers ask -------------------------------------------------------------

    @property
    def transport(self) -> str:
        spec = self.entry.spec
        return "-" if spec is None else spec.transport

    def timeout_for(self, tool: str) -> float:
        spec = self.entry.spec
        if spec is not None:
            if (per_tool := spec.tool_timeouts.get(tool)) is not None:
                return per_tool
            if spec.timeout is not None:
                return spec.timeout
        return self.settings.timeout

    def reason(self) -> str:
        """Why this upstream cannot serve now, in plain words (empty when ready)."""
        return availability.reason(self)

    async def unavailable(self, tool: str | None = None) -> PatchbayError:
        """Why a call cannot be served now; for a server that needs a sign-in, starting one."""
        if self.state is State.SIGN_IN and self.gate is not None:
            return await self.gate.needed(tool)
        return self.unavailable_error()

    def unavailable_error(self) -> PatchbayError:
        """The error a call meets while this upstream cannot serve (``upstreams.availability``)."""
        return availability.unavailable_error(self)

    # --- the call -----------------------------------------------------------------------

    async def send_call(self, call: ToolCall, *, signed_in_again: bool = True) -> RawResult:
        """Send one tool call. A call refused for want of a sign-in that completes while it
        waits (``gate.needed``: a browser that remembered the consent) is sent once more."""
        if call.tool == SIGN_IN_TOOL and self.gate is not None and self.state is State.SIGN_IN:
            return await self._sign_in_now(self.gate)
        try:
            with self.demand.using():
                return await self._send_call(call)
        except SignedIn:
            if not signed_in_again:
                raise
            if not await self.wait_ready(call.deadline.remaining()):
                raise
        return await self.send_call(call, signed_in_again=False)

    async def _sign_in_now(self, gate: SignInGate) -> RawResult:
        """The listed ``sign_in`` tool (``sign_in_tool``) was called."""
        error = await gate.needed(SIGN_IN_TOOL)
        if not isinstance(error, SignedIn):
            raise error
        if not await self.wait_ready(self.settings.connect_timeout):
            raise error
        text = f"Signed in to server '{self.name}'. Its tools are listed now."
        return {"content": [{"type": "text", "text": text}]}

    async def ensure_started(self, timeout: float) -> ClientSession | None:
        """Start a parked server (``upstreams.on_demand``), or wait for one starting (first start, or a start
        a need caused), within ``timeout``: the session to send on, None if it cannot serve now
        (stopped meanwhile: ``_start_decided`` is set then too). ``calls.resolve`` checks after it."""
        if self._session is None:
            if not self._start_decided.is_set():
                self.demand.want()
                decided = self._start_decided
            elif not self.first_attempt_done.is_set():
                decided = self.first_attempt_done
            else:
                return None
            with anyio.move_on_after(max(0.0, timeout)):
                await decided.wait()
        return self._session

    async def _send_call(self, call: ToolCall) -> RawResult:
        session = await self.ensure_started(call.deadline.remaining())
        if session is None:
            raise await self.unavailable(call.tool)
        raw = self._raw
        lost = self._lost  # this connection's: a late failure must not end the next one
        deadline = call.deadline
        on_progress = call.on_progress

        # Progress extends the deadline only for a client that asked for it (see deadlines).
        progress = None if on_progress is None else extending(deadline, on_progress)

        params: dict[str, Any] = {"name": call.tool}
        if call.arguments is not None:
            params["arguments"] = call.arguments
        if call.meta:
            params["_meta"] = dict(call.meta)
        if call.task is not None:
            params["task"] = call.task
        try:
            with self.deadlines.tracking(deadline):
                if raw is not None:
                    result = await raw.request("tools/call", params, progress)
                else:
                    result = await send_raw(session, "tools/call", params, progress)
        except Exception as exc:
            error = self._failure(exc, call.tool, lost)
            if error.code is Code.AUTH_REQUIRED and self.gate is not None:
                error = await self.gate.needed(call.tool)
            raise error from exc
        return checked_result(result, self.name, call.tool)

    async def request_raw(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """A request and its result as JSON values, past the SDK's models (``tasks/*``, which the SDK
        does not dispatch): started, sent and its failures translated as a tool call's are. Unbounded:
        the caller bounds it (``tasks/result`` waits as long as the task runs). The upstream's
        JSON-RPC error stays the raised error's ``__cause__``."""
        with self.demand.using():
            session = await self.ensure_started(self.settings.connect_timeout)
            if session is None:
                raise await self.unavailable()
            raw, lost = self._raw, self._lost
            try:
                if raw is not None:
                    return await raw.request(method, params)
                return await send_raw(session, method, params)
            except Exception as exc:
                raise self._failure(exc, None, lost) from exc

    async def request(
        self, request: types.ClientRequest, result_type: type[Any], *, what: str, timeout: float | None = None
    ) -> Any:
        """Any other request (resources, prompts, completion): same error translation. A parked
        server is started for it (within ``connect_timeout``); a subscription keeps it running."""
        with self.demand.using():
            session = await self.ensure_started(self.settings.connect_timeout)
            if session is None:
                raise await self.unavailable()
            lost = self._lost
            try:
                with anyio.fail_after(timeout or self.settings.timeout):
                    result = await session.send_request(request, result_type)
            except TimeoutError as exc:
                raise translate(exc, server=self.name, what=what) from exc
            except Exception as exc:
                error = self._failure(exc, None, lost)
                if error.code is Code.AUTH_REQUIRED and self.gate is not None:
                    error = await self.gate.needed()
                raise error from exc
            if isinstance(request, types.SubscribeRequest | types.UnsubscribeRequest):
                self.demand.subscribed(request.method, str(request.params.uri))
            return result

    def _failure(self, exc: Exception, tool: str | None, lost: anyio.Event) -> PatchbayError:
        error = self._translate(exc, tool)  # an HTTP 404 says the session is gone, too
        if error.tool is None:
            error.tool = tool  # raised by the transport (an answer it refused), which knows no tool
        if error.code is Code.CONNECTION_LOST or error.code is Code.CONNECTION_FAILED:
            self._connection_lost(lost)
        return error

    def _connection_lost(self, lost: anyio.Event) -> None:
        """A call saw its connection end: stop handing out that session at once, so a retry
        waits (``wait_ready``) for the next connection instead of reusing the dead one."""
        lost.set()
        if lost is self._lost:
            self._set_session(None)

    def status(self) -> dict[str, Any]:
        """Its health as the status shows it (``status.upstream_health``)."""
        return upstream_health(self)


__all__ = ["State", "Upstream"]  # State is availability's, named here too for the upstream's readers
