"""All upstreams together: start them concurrently, wait for them boundedly, keep the catalog.

Every upstream runs in its own task in the supervisor's task group, so one that
hangs, crashes or raises never blocks or harms another. Whenever an upstream's
state or lists change, the catalog is rebuilt (once per change, never per call) and
the change is passed on to the listeners, which tell the client.

``apply`` takes a new config while running: added servers start, removed ones stop,
changed ones restart, unchanged ones are not touched; one whose entry changed only in its
``tools`` filter, ``start`` or ``idle_stop`` keeps running with them (and ``patchbay.start`` and
``patchbay.idle_stop`` apply at once too). A config narrowed to a profile (``--profile``)
narrows each new file to the same profile.

A lazy server (``upstreams.on_demand``) is listed from its last listing (``upstreams.listing_cache``) until a need
starts it; one with no listing kept yet is started at once to learn it, and stopped. Each
listing a lazy server gives is kept for the next start.

Trust (``trust.serving``): every rebuild reviews each server's own listing (live or kept, before
its entry's overrides) against its pins and the scan; held tools are denied by the source's
filter (not listed, not found, not run: ``held_error`` answers a call to one) and held prompts
left out. A listing whose review takes a scan or a write (a first sight, a change) is reviewed
in a worker thread, every such listing of the moment at once (``_review_waiting``), and its new
or changed definitions are served by the rebuild that follows, never before; the startup wait
includes these reviews. Every ``patchbay.trust_poll`` seconds the pins file is looked at (a
``stat``): an approval by ``mcp-patchbay trust`` rebuilds, and the catalog's diff tells the clients.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio
import anyio.abc

from mcp_patchbay.catalog import arguments
from mcp_patchbay.catalog.client_quirks import name_budget
from mcp_patchbay.catalog.merge import Catalog, CheckerCache, Source, build_catalog
from mcp_patchbay.catalog.restriction import Permits
from mcp_patchbay.config import (
    Config,
    ConfigError,
    RemoteSpec,
    ServerEntry,
    Settings,
    StdioSpec,
    ToolFilter,
    apply_profile,
)
from mcp_patchbay.config.overrides import PromptOptions
from mcp_patchbay.errors.tree import PatchbayError
from mcp_patchbay.session.requests_back import ClientChannel
from mcp_patchbay.session.status import StatusRegistry
from mcp_patchbay.trust.fingerprint import Kind
from mcp_patchbay.trust.guard import launch_of
from mcp_patchbay.trust.serving import Listed, ServingTrust
from mcp_patchbay.trust.store import PinStore
from mcp_patchbay.upstreams.availability import PARKED, State, sign_in_tool
from mcp_patchbay.upstreams.listing_cache import ListingCache, launch_key
from mcp_patchbay.upstreams.notices import TaskNotices
from mcp_patchbay.upstreams.on_demand import is_lazy
from mcp_patchbay.upstreams.spawn import Prespawned
from mcp_patchbay.upstreams.transports import Connector
from mcp_patchbay.upstreams.upstream import Upstream

logger = logging.getLogger(__name__)

ChangeListener = Callable[[set[str]], None]
"""Called with the kinds of list that changed: "tools", "prompts", "resources"."""


@dataclass
class Supervisor:
    config: Config
    client: ClientChannel | None = None
    wait_for_client: Callable[[], Awaitable[None]] | None = None
    connector: Connector | None = None
    prespawned: Prespawned = field(default_factory=Prespawned)
    """Processes started before the SDK was imported (``spawn.prespawn``), by server name."""
    start_all: bool = False
    """Start every server now, lazy or not, and stop none idle (``check``: it is a check)."""
    listing_cache: ListingCache = field(default_factory=ListingCache)
    """The lazy servers' last listings (``places.data_dir()``; read only when a server is lazy)."""
    pins: PinStore | None = None
    """Where pins are kept: None, ``pins.json`` in the data folder (in memory for a config that is no file)."""
    task_notices: TaskNotices | None = None
    """Where every upstream's notices about its tasks go (``tasks.Tasks``; ``Proxy`` sets it)."""

    upstreams: dict[str, Upstream] = field(default_factory=lambda: dict[str, Upstream]())
    catalog: Catalog = field(default_factory=Catalog)
    status: StatusRegistry = field(default_factory=StatusRegistry)
    listeners: list[ChangeListener] = field(default_factory=lambda: list[ChangeListener]())
    ready_listeners: list[Callable[[Upstream], None]] = field(
        default_factory=lambda: list[Callable[[Upstream], None]]()
    )
    """Called each time an upstream (re)connects."""
    on_activity: Callable[[tuple[object, ...]], None] | None = None
    """Told of each upstream's change of state and of what is held, one tuple each (the activity log)."""
    started_at: float = field(default_factory=time.monotonic)
    config_problem: str | None = None
    """Why the config could not be used at the start (``ConfigError.summary``), so no server was
    started: the client lists only the status tool saying so and every call is answered with
    it, until ``apply`` takes a good config (the file watched, or SIGHUP)."""
    _checkers: CheckerCache = field(default_factory=lambda: CheckerCache())
    _tg: anyio.abc.TaskGroup | None = None
    _scopes: dict[str, anyio.CancelScope] = field(default_factory=lambda: dict[str, anyio.CancelScope]())
    _all_started: anyio.Event = field(default_factory=anyio.Event)
    _signature: tuple[list[str], list[str], list[str]] | None = None
    _ready: set[str] = field(default_factory=lambda: set[str]())
    _reviewing: anyio.Event | None = None
    """Set when the listings waiting for their review have it (None: none wait)."""
    trust: ServingTrust = field(init=False)
    """Pins and the scan over every server's listing (``trust.serving``)."""

    def __post_init__(self) -> None:
        settings = self.config.settings
        budget = name_budget(settings.max_name_length, settings.registered_as)
        self.trust = ServingTrust(self.config.path, settings, max_length=budget, store=self.pins)

    @property
    def settings(self):
        return self.config.settings

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Start every upstream and supervise them until cancelled."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            self._rebuild()
            for entry in self.config.servers:
                self._start(entry)
            self.prespawned.keep_only(self.upstreams)
            tg.start_soon(self._watch_first_attempts)
            if self.trust.guard.active:
                tg.start_soon(self._watch_pins)
            task_status.started()
            await anyio.sleep_forever()

    def _start(self, entry: ServerEntry) -> None:
        assert self._tg is not None
        if entry.problem is not None:
            logger.warning("server '%s' is not started: %s (in %s)", entry.name, entry.problem, self.config.path)
        lazy = entry.spec is not None and not self.start_all and is_lazy(entry, self.config.settings)
        upstream = Upstream(
            entry,
            self.config.settings,
            on_change=self._on_change,
            client=self.client,
            wait_for_client=self.wait_for_client,
            connector=self.connector,
            prespawned=self.prespawned,
            config_path=self.config.path,
            cached=self.listing_cache.get(entry.spec) if lazy and entry.spec is not None else None,
            forced=self.start_all,
            task_notices=self.task_notices,
        )
        self.upstreams[entry.name] = upstream
        scope = anyio.CancelScope()
        self._scopes[entry.name] = scope
        self._tg.start_soon(self._run_upstream, upstream, scope)

    async def _run_upstream(self, upstream: Upstream, scope: anyio.CancelScope) -> None:
        with scope:
            try:
                await upstream.run()
            except Exception:  # run() never raises by contract; this is the last line of defence
                logger.exception("supervising '%s' failed", upstream.name)
        upstream.first_attempt_done.set()

    async def _watch_first_attempts(self) -> None:
        for upstream in list(self.upstreams.values()):
            await upstream.first_attempt_done.wait()
        await self.reviewed()  # their listings' verdicts: a tool first seen is served with its verdict
        self._all_started.set()
        ready = sum(1 for u in self.upstreams.values() if u.state is State.READY)
        parked = sum(1 for u in self.upstreams.values() if u.state in PARKED)
        logger.info(
            "startup complete in %.0f ms: %d of %d servers ready, %d started when needed, %d tools",
            (time.monotonic() - self.started_at) * 1000,
            ready,
            len(self.upstreams),
            parked,
            len(self.catalog.tools),
        )
        await anyio.to_thread.run_sync(arguments.preload)  # off the start's path, before the first call needs it

    async def _watch_pins(self) -> None:
        """An approval (``mcp-patchbay trust``, another process) served within ``trust_poll``."""
        while True:
            await anyio.sleep(self.config.settings.trust_poll)
            if self.trust.guard.changed():
                logger.info("pins changed (approved with mcp-patchbay trust?): reviewing every server's listing")
                self._rebuild()

    def held_error(
        self, called: str, *, server: str | None = None, kind: Kind = "tool", permits: Permits | None = None
    ) -> PatchbayError | None:
        """``TOOL_CHANGED`` when ``called`` names a held tool (or prompt), else None (``trust.serving``)."""
        return self.trust.held_error(called, server=server, kind=kind, permits=permits)

    @property
    def started(self) -> bool:
        """Every upstream has finished its first connection attempt, and no listing waits for its review."""
        return self._all_started.is_set() and self._reviewing is None

    @property
    def reviewing(self) -> bool:
        """A listing waits for its review now (``reviewed`` waits for its end)."""
        return self._reviewing is not None

    async def reviewed(self, within: float = math.inf) -> None:
        """Until no listing waits for its review (``trust.serving``: the scan, the pins written; its
        wait for the pins file's lock is bounded), at most ``within`` seconds."""
        with anyio.move_on_after(within):
            while (reviewing := self._reviewing) is not None:
                await reviewing.wait()

    async def wait_startup(self) -> None:
        """Until every upstream finished its first attempt, but never past ``startup_wait`` from
        launch, and the reviews under way have their verdicts (a definition new or changed is
        served once its review ends, never before), but never longer than ``startup_wait``."""
        if self.started:
            return
        remaining = self.started_at + self.config.settings.startup_wait - time.monotonic()
        with anyio.move_on_after(max(0.0, remaining)):
            await self._all_started.wait()
        await self.reviewed(within=self.config.settings.startup_wait)

    # --- changes -------------------------------------------------------------------------

    def _on_change(self, upstream: Upstream) -> None:
        if self.on_activity is not None:
            state = (upstream.name, upstream.state, upstream.error, upstream.restarts)
            self.on_activity(("upstream", time.monotonic(), *state))
        ready = upstream.state is State.READY
        if ready and upstream.name not in self._ready:
            for listener in self.ready_listeners:
                listener(upstream)
        (self._ready.add if ready else self._ready.discard)(upstream.name)
        if ready and upstream.demand.lazy:
            self._keep_listing(upstream)
        self._rebuild()

    def _keep_listing(self, upstream: Upstream) -> None:
        """A lazy server listed: keep its listing for the next start, when it changed."""
        known, spec = upstream.known(), upstream.spec
        if spec is None or known == upstream.cached or self._tg is None:
            return
        upstream.cached = known
        if self.listing_cache.put(upstream.name, self.config.path, spec, known):
            self._tg.start_soon(self.listing_cache.flush)

    def _review_waiting(self) -> None:
        """Review the listings waiting for it in a worker thread, those that wait meanwhile after
        them, each round's at once, and rebuild with each round's verdicts (one task at a time)."""
        if self._reviewing is not None or self._tg is None:
            return
        done = self._reviewing = anyio.Event()

        async def review() -> None:
            try:
                while self.trust.waiting:
                    await self.trust.settle()
                    self._rebuild()
            except Exception:  # a review that fails serves nothing new: what waits stays denied
                logger.exception("reviewing the servers' listings failed")
            finally:
                self._reviewing = None
                done.set()

        self._tg.start_soon(review)

    def _rebuild(self) -> None:
        served = self.trust.review(self._listings())
        if self.trust.waiting:
            self._review_waiting()
        holding = self.trust.holding()
        self.status.held = {server: [(h.kind, h.name) for h in held] for server, held in holding.items()}
        self.status.flagged = self.trust.flagged_sentences()
        if self.on_activity is not None and holding:
            self.on_activity(("held", time.monotonic(), holding))
        sources: list[Source] = []
        for entry in self.config.servers:
            upstream = self.upstreams.get(entry.name)
            if upstream is None:
                sources.append(Source(entry.name, unavailable="still starting"))
                continue
            spec = entry.spec
            unavailable = None
            listing = upstream.listing
            tools, prompts = listing.tools, listing.prompts
            tool_filter = spec.tools if spec is not None else None
            reviewed = served.get(entry.name)
            if reviewed is not None:  # held tools denied by the filter, held prompts left out
                tool_filter, prompts = reviewed.tool_filter, reviewed.prompts
            if upstream.state is not State.READY and upstream.state not in PARKED and not tools:
                unavailable = upstream.reason()
                if upstream.state is State.SIGN_IN:
                    # Listed whatever the filters say, so the model can start the sign-in the user wants;
                    # any other name of the server still resolves to it (unavailable).
                    tools, tool_filter = [sign_in_tool(entry.name)], None
            sources.append(
                Source(
                    entry.name,
                    tools=tools,
                    prompts=prompts,
                    resources=listing.resources,
                    templates=listing.templates,
                    tool_filter=tool_filter,
                    unavailable=unavailable,
                    spec=spec,
                    icons=upstream.server_info.icons if upstream.server_info is not None else None,
                )
            )
        settings = self.config.settings
        self.catalog = build_catalog(
            sources,
            separator=settings.separator,
            max_length=name_budget(settings.max_name_length, settings.registered_as),
            validate_arguments=settings.validate_arguments,
            checkers=self._checkers,
            config_path=self.config.path,
        )
        signature = (
            self.catalog.tool_signature(),
            [p.model_dump_json(by_alias=True, exclude_none=True) for p in self.catalog.prompts],
            [str(r.uri) for r in self.catalog.resources] + [t.uri_template for t in self.catalog.templates],
        )
        previous, self._signature = self._signature, signature
        if previous is None:
            return
        changed = {
            kind
            for kind, old, new in zip(("tools", "prompts", "resources"), previous, signature, strict=True)
            if old != new
        }
        if changed:
            for listener in self.listeners:
                listener(changed)

    def _listings(self) -> dict[str, Listed]:
        """Each server's own listing (live, or kept while it does not run), to review."""
        listings: dict[str, Listed] = {}
        for entry in self.config.servers:
            upstream = self.upstreams.get(entry.name)
            if upstream is None or entry.spec is None:
                continue
            listing = upstream.listing
            listings[entry.name] = Listed(listing.tools, listing.prompts, entry.spec.tools, launch_of(entry.spec))
        return listings

    # --- config reload -------------------------------------------------------------------

    def apply(self, new: Config) -> None:
        """Switch to ``new``: start added servers, stop removed ones, restart changed ones
        (a change of the ``tools`` filter, ``start`` or ``idle_stop`` alone restarts nothing). The
        whole file, when the running config is narrowed to a profile, is narrowed to it first."""
        if self.config.profile is not None and new.profile is None:
            try:
                new = apply_profile(new, self.config.profile)
            except ConfigError as exc:
                logger.error("config change ignored, keeping the last good config:\n%s", exc)
                return
        old = {e.name: e for e in self.config.servers}
        fresh = {e.name: e for e in new.servers}
        if self.config_problem is not None:
            logger.warning("config file fixed: starting its servers")
            self.config_problem = None
            for listener in self.listeners:
                listener({"tools"})
        settings = _settings_now(self.config.settings, new.settings, new)
        modes_changed = _modes(settings) != _modes(self.config.settings)
        new = dataclasses.replace(new, settings=settings)
        self.config = new
        # A reload is the user saying "try again": servers that gave up (a missing command)
        # restart even when their entry did not change.
        failed = {name for name, u in self.upstreams.items() if u.state is State.FAILED}
        refiltered = {
            name
            for name, entry in fresh.items()
            if name in self.upstreams
            and name in old
            and name not in failed
            and old[name] != entry
            and _same_but_tools(old[name], entry)
        }
        for name in refiltered:
            logger.info("config: server '%s' changed in what needs no restart (not restarted)", name)
        for name, entry in old.items():
            if (fresh.get(name) != entry and name not in refiltered) or name in failed:
                self._stop(name)
                self._forget_listing(entry, fresh.get(name))
        for name, entry in fresh.items():
            if (old.get(name) != entry and name not in refiltered) or name in failed:
                logger.info("config: %s server '%s'", "restarting" if name in old else "adding", name)
                self._start(entry)
            elif name in refiltered or modes_changed:
                upstream = self.upstreams[name]
                upstream.reconfigure(entry, settings)
                if upstream.state is State.READY and upstream.demand.lazy:
                    self._keep_listing(upstream)
        self._rebuild()

    def _forget_listing(self, old: ServerEntry, new: ServerEntry | None) -> None:
        """A server's launch changed: the listing kept for the old one is dropped."""
        if old.spec is None or new is None or new.spec is None or self._tg is None:
            return
        if launch_key(old.spec) != launch_key(new.spec) and self.listing_cache.drop(old.spec):
            self._tg.start_soon(self.listing_cache.flush)

    def _stop(self, name: str) -> None:
        upstream = self.upstreams.pop(name, None)
        scope = self._scopes.pop(name, None)
        if upstream is not None:
            logger.info("config: stopping server '%s'", name)
            upstream.stop()
        if scope is not None:
            scope.cancel()


def _same_but_tools(old: ServerEntry, new: ServerEntry) -> bool:
    """Two valid entries that differ in their ``tools`` filter (and overrides), ``prompts`` overrides,
    ``start`` and ``idle_stop`` at most: the same launch, the same limits, so the running server
    takes them without a restart."""
    if old.spec is None or new.spec is None or old.name != new.name:
        return False
    unfiltered = {"tools": ToolFilter(), "prompts": PromptOptions()}
    return _modeless(old.spec.model_copy(update=unfiltered)) == _modeless(new.spec.model_copy(update=unfiltered))


def _modeless(spec: StdioSpec | RemoteSpec) -> StdioSpec | RemoteSpec:
    return spec.model_copy(update={"start": None, "idle_stop": None})


def _modes(settings: Settings) -> tuple[str, float | None]:
    return settings.start, settings.idle_stop


def _settings_now(running: Settings, read: Settings, new: Config) -> Settings:
    """The settings a reload applies: ``start`` and ``idle_stop`` at once (they restart nothing),
    every other one when the proxy restarts (a change is warned about)."""
    applied = running.model_copy(update={"start": read.start, "idle_stop": read.idle_stop})
    if applied != read:
        logger.warning("proxy-wide settings changed in %s; they take effect on restart", new.path)
    return applied
