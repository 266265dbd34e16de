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
the way back to the client (``session.requests_back``), the state and what it says while the
server cannot serve (``upstreams.availability``), what a failing connection says
(``errors.connection``), when it is needed and idle (``upstreams.on_demand``), its health (``status``).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import mcp_types as types
from mcp.client.extension import NotificationBinding
from mcp.client.session import ClientSession, IncomingMessage

from mcp_patchbay import __version__
from mcp_patchbay.calls.deadlines import DeadlineSet, extending
from mcp_patchbay.calls.policies import (
    Bulkhead,
    CircuitBreaker,
    Handler,
    RawResult,
    RestartBackoff,
    RetryPolicy,
    ToolCall,
    build_chain,
)
from mcp_patchbay.config import RemoteSpec, ServerEntry, Settings, StdioSpec
from mcp_patchbay.errors.connection import checked_result, connection_lost, exited_while_starting, start_timed_out
from mcp_patchbay.errors.foreign import translate
from mcp_patchbay.errors.tree import Code, PatchbayError, SignedIn
from mcp_patchbay.fastpath.pipe_calls import RawCalls
from mcp_patchbay.redaction import redact
from mcp_patchbay.session.requests_back import ClientChannel, session_callbacks
from mcp_patchbay.session.sdk import OfferingSession, send_raw
from mcp_patchbay.session.status import upstream_health
from mcp_patchbay.upstreams import availability
from mcp_patchbay.upstreams.availability import GIVE_UP, SIGN_IN_TOOL, State
from mcp_patchbay.upstreams.listing import Listing, Rereads, read_listing, reread
from mcp_patchbay.upstreams.listing_cache import Cached
from mcp_patchbay.upstreams.on_demand import Demand
from mcp_patchbay.upstreams.spawn import Prespawned
from mcp_patchbay.upstreams.transports import Connector, Link, open_link
from mcp_patchbay.wire.jsonrpc import Bounds

if TYPE_CHECKING:
    from mcp_patchbay.oauth.gate import SignInGate
logger = logging.getLogger(__name__)

CLIENT_INFO = types.Implementation(name="mcp-patchbay", version=__version__)


class TaskNotices(Protocol):
    """Where an upstream's notices about its tasks go (``tasks.Tasks``)."""

    async def status(self, server: str, params: types.TaskStatusNotificationParams) -> None: ...

    async def progress(self, server: str, params: types.ProgressNotificationParams) -> bool:
        """Whether the progress was on a token the proxy gave one of its tasks (and so is taken)."""
        ...


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
    cached: Cached | None = None
    """Its last listing, from ``upstreams.listing_cache`` (a lazy server): served until it starts, and kept
    up to date by the supervisor."""
    forced: bool = False
    """Started now, lazy or not, and never stopped idle (``check``)."""

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
    offered_roots: bool = False
    """Its session declared roots to it (the client has them): only then may it hear of their change."""
    first_attempt_done: anyio.Event = field(default_factory=anyio.Event)

    _session: ClientSession | None = None
    _raw: RawCalls | None = None
    _ready: anyio.Event = field(default_factory=anyio.Event)
    _lost: anyio.Event = field(default_factory=anyio.Event)
    _stopping: bool = False
    _created: float = field(default_factory=time.monotonic)
    _start_decided: anyio.Event = field(default_factory=anyio.Event)
    """Unset while parked (``upstreams.on_demand``) and until the start a need caused succeeds or fails."""
    _idled: bool = False
    """The connection was ended for being idle (``upstreams.on_demand``): park, do not restart."""
    deadlines: DeadlineSet = field(default_factory=DeadlineSet)
    """This upstream's calls in flight, paused while a person answers its elicitation."""
    gate: SignInGate | None = None
    """Its OAuth sign-in, for a remote server that may ask for one (``RemoteSpec.signs_in``)."""
    task_notices: TaskNotices | None = None
    """Where its ``notifications/tasks/status`` and its tasks' progress go (the SDK's session
    dispatches neither: the tasks methods are not in its tables)."""
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
        self.demand = Demand.of(self.entry, settings, forced=self.forced)
        self._rereads = Rereads(self.refresh)
        self._start_decided.set()
        if self.cached is not None:
            self.listing, self.capabilities = self.cached.listing, self.cached.capabilities
            self.server_info, self.instructions = self.cached.server_info, self.cached.instructions
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
        """The error a call meets while this upstream cannot serve (``upstreams.availability``)."""
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
        (stopped meanwhile: ``_start_decided`` is set then too). ``calls.path`` checks after it."""
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

    def _task_bindings(self) -> list[NotificationBinding[Any]]:
        notices = self.task_notices
        if notices is None:
            return []

        async def status(params: types.TaskStatusNotificationParams) -> None:
            await notices.status(self.name, params)

        binding = NotificationBinding(
            method="notifications/tasks/status", params_type=types.TaskStatusNotificationParams, handler=status
        )
        return [binding]

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

    def _translate(self, exc: BaseException, tool: str | None = None) -> PatchbayError:
        """``errors.foreign.translate``, with a refusal judged by the sign-in gate where there is one."""
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
        if self.cached is not None and self.demand.waits_to_start:
            self._parked(State.NOT_STARTED)
            await self._until_needed()
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
                    self.demand.subscriptions.clear()
                if self._stopping:
                    return
                if self._idled:
                    self._idled = False
                    backoff.reset()
                    await self._until_needed()
                    continue
                self.first_attempt_done.set()
                self._start_decided.set()
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
            self._start_decided.set()  # a call waiting for this start is answered now

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

    # --- started when needed, stopped when idle (on_demand) ---------------------------------

    def _parked(self, state: State) -> None:
        """Not running, healthy: the next need (``ensure_started``) starts it."""
        self.state = state
        self._start_decided = anyio.Event()
        self.demand.parked()
        self.first_attempt_done.set()
        self.on_change(self)

    async def _until_needed(self) -> None:
        await self.demand.until_wanted()
        self.log.info("starting server '%s': a request needs it", self.name)
        self.state = State.STARTING
        self.on_change(self)

    async def _stop_when_idle(self, lost: anyio.Event) -> None:
        await self.demand.until_idle()
        # No await from here to the end: a need that comes next finds no session and starts it again.
        learned = self.demand.lazy and not self.demand.wanted
        self.log.info("stopping server '%s': %s", self.name, "its list is learned" if learned else "idle")
        self._idled = True
        self._set_session(None)
        self._parked(State.NOT_STARTED if learned else State.IDLE)
        lost.set()

    def reconfigure(self, entry: ServerEntry, settings: Settings) -> None:
        """A reload changed only what needs no restart (its ``tools``, ``start``, ``idle_stop``):
        a running server keeps running (``idle_stop`` may stop it), one made eager starts now."""
        self.entry, self.settings = entry, settings
        self.demand.configure(entry, settings)
        if self._session is not None or not self.demand.lazy:
            self.demand.want()

    def known(self) -> Cached:
        """What it listed and said at ``initialize``, as ``upstreams.listing_cache`` keeps it."""
        return Cached(self.listing, self.capabilities, self.server_info, self.instructions)

    def stop(self) -> None:
        if self.prespawned is not None:  # removed before its first connection
            self.prespawned.discard(self.name)
        self._stopping = True
        self.state = State.STOPPED
        self._lost.set()
        self._start_decided.set()  # a call waiting for a lazy start: SERVER_UNAVAILABLE, not its deadline

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
                callbacks = session_callbacks(self.client, self.name)
                self.offered_roots = "list_roots_callback" in callbacks
                session = await stack.enter_async_context(
                    OfferingSession(
                        link.read,
                        link.write,
                        client_info=CLIENT_INFO,
                        message_handler=self._on_message,
                        notification_bindings=self._task_bindings(),
                        **callbacks,
                    )
                )
                try:
                    init = await session.initialize()
                    self.server_info = init.server_info
                    self.instructions = init.instructions
                    self.capabilities = init.capabilities
                    listing = await read_listing(session, init.capabilities, self.log)
                except Exception as exc:
                    raise (
                        await exited_while_starting(self.name, link.watch, self.log) or self._translate(exc)
                    ) from exc
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
                self._start_decided.set()
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
                    tg.start_soon(self._stop_when_idle, self._lost)
                    await self._lost.wait()
                    tg.cancel_scope.cancel()
                if not self._stopping and not self._idled:
                    self._set_session(None)
                    self.state = State.RESTARTING
                    self.on_change(self)
                    raise await connection_lost(self.name, link.watch, self.log)
        if startup.cancelled_caught:
            raise start_timed_out(self.name, self.settings.connect_timeout, link.watch if link is not None else None)

    def _open_link(self, spec: StdioSpec | RemoteSpec) -> AbstractAsyncContextManager[Link]:
        if self.connector is not None:
            return self.connector(self.name, spec)
        # Only a stdio server is adopted, only a remote one signed in to.
        adopt = self.prespawned.take(self.name) if self.prespawned is not None and isinstance(spec, StdioSpec) else None
        auth = self.gate.provider() if self.gate is not None and isinstance(spec, RemoteSpec) else None
        settings = self.settings
        bounds, fast_path = Bounds.of(settings), settings.fast_path
        return open_link(
            self.name, spec, settings.connect_timeout, adopt=adopt, auth=auth, bounds=bounds, fast_path=fast_path
        )

    async def refresh_soon(self, what: str) -> None:
        """The upstream said a list changed: re-read it, a burst of such notices coalesced (``listing.Rereads``)."""
        await self._rereads.soon(what)

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
        if (
            isinstance(message, types.ProgressNotification)
            and self.task_notices is not None
            and await self.task_notices.progress(self.name, message.params)
        ):
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

    @property
    def running(self) -> bool:
        """Connected now (for a stdio server: its process is up)."""
        return self._session is not None

    def status(self) -> dict[str, Any]:
        """Its health as the status shows it (``status.upstream_health``)."""
        return upstream_health(self)


async def _set_when(source: anyio.Event, target: anyio.Event) -> None:
    await source.wait()
    target.set()


__all__ = ["State", "Upstream"]  # State is availability's, named here too for the upstream's readers
