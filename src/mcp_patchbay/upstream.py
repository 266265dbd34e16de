"""One upstream server: its transport, its session, its restarts, its state.

An ``Upstream`` runs as one task for its whole life (``run``): connect, read its
lists, serve until the connection is lost, wait (``policies.RestartBackoff``),
connect again. Each connection lives inside a single cancel scope whose
deadline bounds spawn + initialize (``connect_timeout``) and is lifted once the
session is ready, so startup is bounded without breaking the scope nesting of the
SDK's transports. Whatever escapes a transport (ExceptionGroups from HTTP
clients included) is caught here, so one upstream can never take down another.

Tool calls go through ``chain``, the policies of ``policies.build_chain`` around
``send_call``, built once.

One module on purpose, though past 450 lines: the connection's life and the call path
share one invariant (``_ready`` is set exactly while there is a session, and a failure
seen by a call ends only the connection it was sent on), which must be read in one place.
What is separable lives apart: the links (``transports``), reading lists (``listing``),
the way back to the client (``client_channel``), the state and what it says while the
server cannot serve (``availability``).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import anyio
import mcp_types as types
from mcp.client.session import ClientSession, IncomingMessage

from mcp_patchbay import __version__, availability
from mcp_patchbay.availability import GIVE_UP, SIGN_IN_TOOL, State
from mcp_patchbay.client_channel import ClientChannel, session_callbacks
from mcp_patchbay.config import RemoteSpec, ServerEntry, Settings, StdioSpec
from mcp_patchbay.deadlines import DeadlineSet, extending
from mcp_patchbay.errors import Code, PatchbayError, SignedIn, UpstreamError
from mcp_patchbay.foreign_errors import translate
from mcp_patchbay.jsonrpc import Bounds
from mcp_patchbay.listing import Listing, read_listing, reread
from mcp_patchbay.policies import (
    Bulkhead,
    CircuitBreaker,
    Handler,
    RawResult,
    RestartBackoff,
    RetryPolicy,
    ToolCall,
    build_chain,
)
from mcp_patchbay.rawcalls import RawCalls
from mcp_patchbay.redaction import redact
from mcp_patchbay.sdk import send_raw
from mcp_patchbay.spawn import Prespawned
from mcp_patchbay.transports import Connector, Link, open_link
from mcp_patchbay.transports.stdio import ProcessWatch, stdio_link

if TYPE_CHECKING:
    from mcp_patchbay.oauth.gate import SignInGate

logger = logging.getLogger("mcp_patchbay.upstream")

CLIENT_INFO = types.Implementation(name="mcp-patchbay", version=__version__)


@dataclass
class Upstream:
    entry: ServerEntry
    settings: Settings
    on_change: Callable[[Upstream], None]
    client: ClientChannel | None = None
    """The channel back to the client, for what this upstream asks of it."""
    wait_for_client: Callable[[], Awaitable[None]] | None = None
    connector: Connector | None = None
    prespawned: Prespawned | None = None
    """Where the process started for this server before the SDK was imported waits (``spawn``):
    the first connection takes it; restarts spawn anew."""
    config_path: Path | None = None
    """The config file, for the ``mcp-patchbay login`` command a sign-in message names."""

    state: State = State.STARTING
    listing: Listing = field(default_factory=Listing)
    error: PatchbayError | None = None
    restarts: int = 0
    ready_since: float | None = None
    first_ready_after: float | None = None
    server_info: types.Implementation | None = None
    instructions: str | None = None
    """What the server says it is for (its ``initialize`` answer): search mode describes it so."""
    capabilities: types.ServerCapabilities | None = None
    first_attempt_done: anyio.Event = field(default_factory=anyio.Event)

    _session: ClientSession | None = None
    _raw: RawCalls | None = None
    _ready: anyio.Event = field(default_factory=anyio.Event)
    _lost: anyio.Event = field(default_factory=anyio.Event)
    _stopping: bool = False
    _created: float = field(default_factory=time.monotonic)
    _refreshing: set[str] = field(default_factory=lambda: set[str]())
    """The kinds of list being re-read now (``refresh_soon``)."""
    _stale: set[str] = field(default_factory=lambda: set[str]())
    """The kinds of list that changed again while being re-read: read once more."""
    deadlines: DeadlineSet = field(default_factory=DeadlineSet)
    """This upstream's calls in flight, paused while a person answers its elicitation."""
    gate: SignInGate | None = None
    """Its OAuth sign-in, for a remote server that may ask for one (``RemoteSpec.signs_in``)."""
    restart_backoff: RestartBackoff = field(init=False)
    """How long to wait before connecting again (its clock and sleep are the tests' to replace)."""

    def __post_init__(self) -> None:
        self.name = self.entry.name
        self.log = logger.getChild(self.name)
        settings = self.settings
        spec = self.entry.spec
        limit = (spec.max_concurrency if spec is not None else None) or settings.max_concurrency
        self.breaker = CircuitBreaker(settings.breaker_threshold, settings.breaker_cooldown)
        self.bulkhead = Bulkhead(limit, queue=limit * 4, wait=settings.queue_timeout)
        self.restart_backoff = RestartBackoff(settings.restart_initial_delay, settings.restart_max_delay)
        self.chain: Handler = build_chain(
            self.send_call,
            breaker=self.breaker,
            bulkhead=self.bulkhead,
            retry=RetryPolicy(settings.retry_attempts, settings.retry_backoff),
            wait_ready=self.wait_ready,
        )
        if spec is None:
            self.state = State.INVALID
        elif spec.disabled:
            self.state = State.DISABLED
        elif isinstance(spec, RemoteSpec) and spec.signs_in and self.connector is None:
            from mcp_patchbay.oauth.gate import SignInGate

            self.gate = SignInGate.for_server(self.name, spec, settings, self.config_path)

    # --- what callers ask -------------------------------------------------------------

    @property
    def spec(self) -> StdioSpec | RemoteSpec | None:
        return self.entry.spec

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
        """The error a call meets while this upstream cannot serve (``availability``)."""
        return availability.unavailable_error(self)

    async def wait_ready(self, timeout: float) -> bool:
        with anyio.move_on_after(max(0.0, timeout)):
            while self._session is None:
                await self._ready.wait()
        return self._session is not None

    def _set_session(self, session: ClientSession | None, raw: RawCalls | None = None) -> None:
        """Keep the invariant that ``_ready`` is set exactly while there is a session."""
        self._session = session
        self._raw = raw if session is not None else None
        if session is not None:
            self._ready.set()
        elif self._ready.is_set():
            self._ready = anyio.Event()

    # --- the call -----------------------------------------------------------------------

    async def send_call(self, call: ToolCall, *, signed_in_again: bool = True) -> RawResult:
        """Send one tool call. A call refused for want of a sign-in that completes while it
        waits (``gate.needed``: a browser that remembered the consent) is sent once more."""
        if call.tool == SIGN_IN_TOOL and self.gate is not None and self.state is State.SIGN_IN:
            return await self._sign_in_now(self.gate)
        try:
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

    async def _send_call(self, call: ToolCall) -> RawResult:
        session = self._session
        if session is None and not self.first_attempt_done.is_set():
            # A call that arrives during startup waits for it, within its own deadline.
            with anyio.move_on_after(call.deadline.remaining()):
                await self.first_attempt_done.wait()
            session = self._session
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
        if not _is_call_result(result):
            raise UpstreamError(
                Code.PROTOCOL_ERROR,
                f"Server '{self.name}' answered with a malformed tool result. Retry once; if it persists, tell "
                "the user.",
                detail=f"result: {str(result)[:500]}",
                server=self.name,
                tool=call.tool,
            )
        return result

    async def request(
        self, request: types.ClientRequest, result_type: type[Any], *, what: str, timeout: float | None = None
    ) -> Any:
        """Any other request (resources, prompts, completion): same error translation."""
        session = self._session
        if session is None:
            raise await self.unavailable()
        lost = self._lost
        try:
            with anyio.fail_after(timeout or self.settings.timeout):
                return await session.send_request(request, result_type)
        except TimeoutError as exc:
            raise translate(exc, server=self.name, what=what) from exc
        except Exception as exc:
            error = self._failure(exc, None, lost)
            if error.code is Code.AUTH_REQUIRED and self.gate is not None:
                error = await self.gate.needed()
            raise error from exc

    def _translate(self, exc: BaseException, tool: str | None = None) -> PatchbayError:
        """``foreign_errors.translate``, with a refusal judged by the sign-in gate where there is one."""
        error = translate(exc, server=self.name, tool=tool)
        return self.gate.judge(error, exc) if self.gate is not None else error

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

    # --- the life of the connection --------------------------------------------------

    async def run(self) -> None:
        """Connect and keep connected until cancelled. Never raises (but cancellation)."""
        if self.state in (State.INVALID, State.DISABLED):
            self.first_attempt_done.set()
            self.on_change(self)
            return
        if self.wait_for_client is not None:
            await self.wait_for_client()
        if self.gate is None:
            await self._run()
            return
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.gate.run)
            await self._run()
            tg.cancel_scope.cancel()

    async def _run(self) -> None:
        backoff = self.restart_backoff
        try:
            while True:
                began = backoff.clock()
                try:
                    await self._connect_and_serve()
                except Exception as exc:
                    self._record_failure(exc)
                finally:
                    self._set_session(None)
                    self._lost = anyio.Event()
                    self.ready_since = None
                if self._stopping:
                    return
                if not self.first_attempt_done.is_set():
                    self.first_attempt_done.set()
                if self.gate is not None and self.error is not None and self.error.code is Code.AUTH_REQUIRED:
                    await self._wait_for_sign_in(self.gate)
                    backoff.reset()
                    continue
                if self.error is not None and self.error.code in GIVE_UP:
                    self.state = State.FAILED
                    self.on_change(self)
                    return  # a missing command or a refused token does not mend by waiting; a config reload retries
                wait = backoff.next_wait(lasted=backoff.clock() - began)
                self.state = State.RESTARTING if self.listing.tools or self.restarts else State.FAILED
                self.on_change(self)
                self.log.warning("reconnecting to '%s' in %.1fs (attempt %d)", self.name, wait, self.restarts + 1)
                await backoff.sleep(wait)
                self.restarts += 1
                if self.state is State.FAILED:
                    self.state = State.RESTARTING
        finally:
            self.state = State.STOPPED if self._stopping else self.state
            self.first_attempt_done.set()

    async def _wait_for_sign_in(self, gate: SignInGate) -> None:
        """Wait, in state ``SIGN_IN``, until a sign-in completes here or elsewhere; then reconnect."""
        self.state = State.SIGN_IN
        # INFO: a call opens the browser when the user wants the server (a warning would be shown as
        # an error at every start by clients that record stderr); check and the status say it too.
        self.log.info(
            "server '%s' needs a sign-in (none valid in %s): run %s", self.name, gate.store.path, gate.login_command
        )
        self.on_change(self)
        await gate.wait_signed_in()
        self.log.info("server '%s': signed in; connecting", self.name)
        self.state = State.STARTING
        self.error = None
        self.on_change(self)

    def stop(self) -> None:
        if self.prespawned is not None:  # removed before its first connection
            self.prespawned.discard(self.name)
        self._stopping = True
        self.state = State.STOPPED
        self._lost.set()

    def _record_failure(self, exc: BaseException) -> None:
        error = self._translate(exc)
        self.error = error
        if error.code is Code.AUTH_REQUIRED:
            return  # not a failure: the user has to sign in (_wait_for_sign_in says so)
        self.log.error(
            "server '%s' %s: %s (%s)",
            self.name,
            "failed to start" if not self.first_attempt_done.is_set() else "connection failed",
            error.message,
            error.detail,
            exc_info=(type(exc), exc, exc.__traceback__) if self.log.isEnabledFor(logging.DEBUG) else None,
        )

    async def _connect_and_serve(self) -> None:
        spec = self.spec
        assert spec is not None
        started = time.monotonic()
        link: Link | None = None
        with anyio.CancelScope() as startup:
            # One scope for the connection's whole life: its deadline bounds spawn + initialize only.
            startup.deadline = anyio.current_time() + self.settings.connect_timeout
            async with AsyncExitStack() as stack:
                link = await stack.enter_async_context(self._open_link(spec))
                session = await stack.enter_async_context(
                    ClientSession(
                        link.read,
                        link.write,
                        client_info=CLIENT_INFO,
                        message_handler=self._on_message,
                        **session_callbacks(self.client, self.name),
                    )
                )
                try:
                    init = await session.initialize()
                    self.server_info = init.server_info
                    self.instructions = init.instructions
                    self.capabilities = init.capabilities
                    listing = await read_listing(session, init.capabilities, self.log)
                except Exception as exc:
                    raise await self._startup_failure(exc, link.watch) from exc
                startup.deadline = math.inf
                previous = self.listing
                self.listing = listing
                self._set_session(session, link.raw)
                self.error = None
                self.state = State.READY
                self.ready_since = time.monotonic()
                if self.first_ready_after is None:
                    self.first_ready_after = self.ready_since - self._created
                self.first_attempt_done.set()
                self.log.info(
                    "server '%s' ready in %.0f ms: %d tools, %d resources, %d prompts%s",
                    self.name,
                    (self.ready_since - started) * 1000,
                    len(listing.tools),
                    len(listing.resources),
                    len(listing.prompts),
                    "" if previous == listing or not previous.tools else " (lists changed)",
                )
                self.on_change(self)
                async with anyio.create_task_group() as tg:
                    if link.closed is not None:
                        tg.start_soon(_set_when, link.closed, self._lost)
                    await self._lost.wait()
                    tg.cancel_scope.cancel()
                if not self._stopping:
                    self._set_session(None)
                    self.state = State.RESTARTING
                    self.on_change(self)
                    raise await self._lost_failure(link.watch)
        if startup.cancelled_caught:
            watch = link.watch if link is not None else None
            garbage = ""
            if watch is not None and watch.garbage_lines:
                garbage = (
                    f" It wrote {watch.garbage_lines} line(s) to stdout that are not MCP messages (a server must "
                    "write only JSON-RPC there)."
                )
            raise UpstreamError(
                Code.TIMEOUT,
                f"Server '{self.name}' did not finish starting within {self.settings.connect_timeout:g}s.{garbage}",
                detail=watch.describe_exit() if watch is not None else None,
                server=self.name,
            )

    def _open_link(self, spec: StdioSpec | RemoteSpec) -> AbstractAsyncContextManager[Link]:
        if self.connector is not None:
            return self.connector(self.name, spec)
        adopt = self.prespawned.take(self.name) if self.prespawned is not None else None
        # The settings' bounds on every message (open_link gives the links the defaults).
        if isinstance(spec, StdioSpec):
            return stdio_link(self.name, spec, adopt, Bounds.of(self.settings))
        auth = self.gate.provider() if self.gate is not None else None
        if spec.transport != "sse":
            from mcp_patchbay.transports.http import streamable_http_link  # the SDK's HTTP client: when needed

            return streamable_http_link(spec, self.settings.connect_timeout, auth, Bounds.of(self.settings))
        return open_link(self.name, spec, self.settings.connect_timeout, adopt, auth)

    async def _startup_failure(self, exc: Exception, watch: ProcessWatch | None) -> PatchbayError:
        if watch is not None and (watch.stdout_closed.is_set() or watch.exited.is_set()):
            await _settle(watch)
            code = f" with exit code {watch.returncode}" if watch.returncode is not None else ""
            self.log.error("server '%s' exited during startup: %s", self.name, watch.describe_exit())
            return UpstreamError(
                Code.CONNECTION_FAILED,
                f"Server '{self.name}' exited during startup{code}. Tell the user to run 'mcp-patchbay check' "
                "and look at the proxy's log.",
                detail=watch.describe_exit(),
                server=self.name,
            )
        return self._translate(exc)

    async def _lost_failure(self, watch: ProcessWatch | None) -> PatchbayError:
        if watch is not None:
            await _settle(watch)
        detail = watch.describe_exit() if watch is not None else "connection lost"
        self.log.error("server '%s' connection lost: %s", self.name, detail)
        return UpstreamError(
            Code.CONNECTION_LOST,
            f"Server '{self.name}' stopped unexpectedly and is restarting. Retry in a few seconds.",
            detail=detail,
            server=self.name,
        )

    async def refresh_soon(self, what: str) -> None:
        """The upstream said a list changed: re-read it, coalescing a burst of such notices.

        At most one re-read per kind is in flight and one more is owed: a notice that comes
        while one runs only marks the list stale, and the running one reads it once more when
        it is done, so the last change is always read. (The SDK runs every notice in a task
        of its own: 5,000 ``tools/list_changed`` made 5,000 ``tools/list`` requests.)
        """
        if what in self._refreshing:
            self._stale.add(what)
            return
        self._refreshing.add(what)
        try:
            while True:
                self._stale.discard(what)
                await self.refresh(what)
                if what not in self._stale:
                    return
        finally:
            self._refreshing.discard(what)

    async def refresh(self, what: str) -> None:
        """Re-read one list after the upstream said it changed."""
        session = self._session
        if session is None:
            return
        try:
            self.listing = await reread(session, self.listing, what, self.log)
        except Exception as exc:
            self.log.warning("re-reading %s of '%s' failed: %s", what, self.name, exc)
            return
        self.on_change(self)

    # --- what the upstream sends us ----------------------------------------------------

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, Exception):
            self.log.warning("transport error from '%s': %s", self.name, redact(repr(message)))
            return
        match message:
            case types.ToolListChangedNotification():
                await self.refresh_soon("tools")
            case types.PromptListChangedNotification():
                await self.refresh_soon("prompts")
            case types.ResourceListChangedNotification():
                await self.refresh_soon("resources")
            case _:
                if self.client is not None:
                    await self.client.notify(self.name, message)

    async def send_notification(self, notification: types.ClientNotification) -> None:
        session = self._session
        if session is not None:
            try:
                await session.send_notification(notification)
            except Exception as exc:
                self.log.debug("could not notify '%s': %s", self.name, exc)

    def status(self) -> dict[str, Any]:
        return {
            "state": self.state.value,
            "transport": self.transport,
            "tools": len(self.listing.tools),
            "restarts": self.restarts,
            "reason": self.reason() or None,
            "breaker": self.breaker.state.value,
            "in_flight": self.bulkhead.in_flight,
            "ready_after_ms": None if self.first_ready_after is None else round(self.first_ready_after * 1000),
        }


def _is_call_result(result: Any) -> bool:
    """Enough shape to pass on: an object whose content, if any, is a list of objects."""
    if not isinstance(result, dict):
        return False
    content = cast("dict[str, Any]", result).get("content", [])
    if not isinstance(content, list):
        return False
    structured = cast("dict[str, Any]", result).get("structuredContent")
    return structured is None or isinstance(structured, dict)


async def _settle(watch: ProcessWatch) -> None:
    """Give a dying process a moment, so its exit code and last words make the log."""
    with anyio.move_on_after(1.0):
        await watch.exited.wait()


async def _set_when(source: anyio.Event, target: anyio.Event) -> None:
    await source.wait()
    target.set()


__all__ = ["State", "Upstream"]  # State is availability's, named here too for the upstream's readers
