"""An upstream server's state and its connection's life: ``Lifecycle``, the base of ``Upstream``.

An upstream runs as one task for its whole life (``run``): connect, read its lists, serve until
the connection is lost, wait (``policies.RestartBackoff``), connect again. Each connection lives
inside a single cancel scope whose deadline bounds spawn + initialize (``connect_timeout``) and
is lifted once the session is ready, so startup is bounded without breaking the scope nesting of
the SDK's transports. Whatever escapes a transport (ExceptionGroups from HTTP clients included)
is caught here, so one upstream can never take down another. A lazy server is parked until a
need starts it, and stopped when idle (``upstreams.on_demand``); one that needs a sign-in waits
for it (``oauth.gate``).

The one invariant the calls (``upstreams.upstream``) share with this life: ``_ready`` is set
exactly while there is a session (``_set_session``), and ``_lost`` is the current connection's,
so a failure a call sees ends only the connection it was sent on. What is separable lives apart:
the links (``transports``), reading lists (``listing``), what the server sends unasked
(``upstreams.notices``), the state and what it says while it cannot serve (``availability``),
what a failing connection says (``errors.connection``), when it is needed (``on_demand``).
"""

from __future__ import annotations

import functools
import logging
import math
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, cast

import anyio
import mcp_types as types
from mcp.client.session import ClientSession

from mcp_patchbay import __version__
from mcp_patchbay.calls.deadlines import DeadlineSet
from mcp_patchbay.calls.policies import RestartBackoff
from mcp_patchbay.config import RemoteSpec, ServerEntry, Settings, StdioSpec
from mcp_patchbay.errors.connection import connection_lost, exited_while_starting, start_timed_out
from mcp_patchbay.errors.foreign import translate
from mcp_patchbay.errors.tree import Code, PatchbayError
from mcp_patchbay.fastpath.pipe_calls import RawCalls
from mcp_patchbay.session.requests_back import ClientChannel, session_callbacks
from mcp_patchbay.session.sdk import OfferingSession
from mcp_patchbay.upstreams.availability import GIVE_UP, State
from mcp_patchbay.upstreams.listing import Listing, Rereads, read_listing, reread
from mcp_patchbay.upstreams.listing_cache import Cached
from mcp_patchbay.upstreams.notices import TaskNotices, on_message, task_bindings
from mcp_patchbay.upstreams.on_demand import Demand
from mcp_patchbay.upstreams.spawn import Prespawned
from mcp_patchbay.upstreams.transports import Connector, Link, open_link
from mcp_patchbay.wire.jsonrpc import Bounds

if TYPE_CHECKING:
    from mcp_patchbay.oauth.gate import SignInGate
    from mcp_patchbay.upstreams.upstream import Upstream

logger = logging.getLogger(__name__)

CLIENT_INFO = types.Implementation(name="mcp-patchbay", version=__version__)


@dataclass
class Lifecycle:
    """One upstream's state and its connection's life: the base of ``Upstream``, which adds the calls."""

    entry: ServerEntry
    settings: Settings
    on_change: Callable[[Upstream], None]
    """Told of every change of its state or lists (the supervisor's)."""
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
        self.restart_backoff = RestartBackoff(settings.restart_initial_delay, settings.restart_max_delay)
        self.demand = Demand.of(self.entry, settings, forced=self.forced)
        self._rereads = Rereads(self.refresh)
        self._start_decided.set()
        if self.cached is not None:
            self.listing, self.capabilities = self.cached.listing, self.cached.capabilities
            self.server_info, self.instructions = self.cached.server_info, self.cached.instructions
        if spec is None:
            self.state = State.INVALID
        elif spec.disabled:
            self.state = State.DISABLED
        elif isinstance(spec, RemoteSpec) and spec.signs_in and self.connector is None:
            from mcp_patchbay.oauth.gate import SignInGate

            self.gate = SignInGate.for_server(self.name, spec, settings, self.config_path)

    @property
    def spec(self) -> StdioSpec | RemoteSpec | None:
        return self.entry.spec

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

    def _translate(self, exc: BaseException, tool: str | None = None) -> PatchbayError:
        """``errors.foreign.translate``, with a refusal judged by the sign-in gate where there is one."""
        error = translate(exc, server=self.name, tool=tool)
        return self.gate.judge(error, exc) if self.gate is not None else error

    def _changed(self) -> None:
        """Tell the supervisor (``on_change``): every ``Lifecycle`` is an ``Upstream``."""
        self.on_change(cast("Upstream", self))

    # --- the life of the connection --------------------------------------------------

    async def run(self) -> None:
        """Connect and keep connected until cancelled. Never raises (but cancellation)."""
        if self.state in (State.INVALID, State.DISABLED):
            self.first_attempt_done.set()
            self._changed()
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
                    self._changed()
                    return  # a missing command or a refused token does not mend by waiting; a config reload retries
                wait = backoff.next_wait(lasted=backoff.clock() - began)
                self.state = State.RESTARTING if self.listing.tools or self.restarts else State.FAILED
                self._changed()
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
        self._changed()
        await gate.wait_signed_in()
        self.log.info("server '%s': signed in; connecting", self.name)
        self.state = State.STARTING
        self.error = None
        self._changed()

    # --- started when needed, stopped when idle (on_demand) ---------------------------------

    def _parked(self, state: State) -> None:
        """Not running, healthy: the next need (``ensure_started``) starts it."""
        self.state = state
        self._start_decided = anyio.Event()
        self.demand.parked()
        self.first_attempt_done.set()
        self._changed()

    async def _until_needed(self) -> None:
        await self.demand.until_wanted()
        self.log.info("starting server '%s': a request needs it", self.name)
        self.state = State.STARTING
        self._changed()

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
                        message_handler=functools.partial(on_message, self),
                        notification_bindings=task_bindings(self.name, self.task_notices),
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
                self._changed()
                async with anyio.create_task_group() as tg:
                    if link.closed is not None:
                        tg.start_soon(_set_when, link.closed, self._lost)
                    tg.start_soon(self._stop_when_idle, self._lost)
                    await self._lost.wait()
                    tg.cancel_scope.cancel()
                if not self._stopping and not self._idled:
                    self._set_session(None)
                    self.state = State.RESTARTING
                    self._changed()
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
        self._changed()

    # --- what the upstream sends us ----------------------------------------------------

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


async def _set_when(source: anyio.Event, target: anyio.Event) -> None:
    await source.wait()
    target.set()


__all__ = ["CLIENT_INFO", "Lifecycle"]
