"""When an upstream runs: started with the proxy or when first needed, stopped when idle.

An entry's ``start`` (else ``patchbay.start``) says when its server starts: ``"eager"`` with
the proxy, ``"lazy"`` when a call, a resource read, a prompt or a completion first needs it
(its listing is served from ``upstreams.listing_cache`` meanwhile). Its ``idle_stop`` (else
``patchbay.idle_stop``) stops it once it has had no call in flight and no resource
subscription for that many seconds; the next need starts it again. A lazy server started
only to learn its listing (no cache yet) is stopped as soon as it is idle.

``Demand`` is the bookkeeping (who needs the server now, since when it is idle); the
connection's life that acts on it is ``upstream``'s. ``check`` starts every server
(``forced``): it is a check.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from mcp_patchbay.config import ServerEntry, Settings
__all__ = ["Demand", "is_lazy"]


def is_lazy(entry: ServerEntry, settings: Settings) -> bool:
    """Whether ``entry``'s server starts only when needed (its ``start``, else ``patchbay.start``)."""
    spec = entry.spec
    return spec is not None and (spec.start or settings.start) == "lazy"


@dataclass
class Demand:
    """Who needs one upstream now: calls and requests in flight, resource subscriptions, and
    whether anything has needed it since it last stopped."""

    lazy: bool = False
    idle_stop: float | None = None
    """Seconds idle before the server is stopped; None: never."""
    forced: bool = False
    """Every server runs (``check``): none waits to be needed, none is stopped idle."""

    busy: int = 0
    """Calls and requests in flight."""
    subscriptions: set[str] = field(default_factory=lambda: set[str]())
    """Resource URIs subscribed to on the current connection (a subscription keeps it running)."""
    _wanted: anyio.Event = field(default_factory=anyio.Event)
    _stirred: anyio.Event = field(default_factory=anyio.Event)
    """Set (and replaced) at each change that may end or restart an idle wait, while one waits
    (``_heeded``): a call costs no wake-up of a server that is never stopped idle."""
    _heeded: bool = False
    _configured: anyio.Event = field(default_factory=anyio.Event)
    """Set (and replaced) when ``configure`` may have changed the idle time."""

    @classmethod
    def of(cls, entry: ServerEntry, settings: Settings, *, forced: bool = False) -> Demand:
        demand = cls(forced=forced)
        demand.configure(entry, settings)
        return demand

    def configure(self, entry: ServerEntry, settings: Settings) -> None:
        """Take the entry's (and the proxy's) ``start`` and ``idle_stop``; a running idle wait
        starts over with them."""
        spec = entry.spec
        self.lazy = is_lazy(entry, settings)
        self.idle_stop = spec.idle_stop if spec is not None and spec.idle_stop is not None else settings.idle_stop
        self._configured.set()
        self._configured = anyio.Event()
        self._stir()

    # --- what needs the server ---------------------------------------------------------

    def want(self) -> None:
        """Something needs the server: a parked one starts."""
        self._wanted.set()

    @property
    def wanted(self) -> bool:
        return self._wanted.is_set()

    async def until_wanted(self) -> None:
        await self._wanted.wait()

    def parked(self) -> None:
        """The server stopped (or waits for its first need): the next need starts it."""
        if self._wanted.is_set():
            self._wanted = anyio.Event()
        self.subscriptions.clear()

    @property
    def waits_to_start(self) -> bool:
        """A lazy server, not needed yet, whose listing is known: it is not started now."""
        return self.lazy and not self.forced and not self.wanted

    def using(self) -> Demand:
        """A call or a request in flight (``with demand.using():``): the server is needed, and not
        idle, until it ends. The demand is its own context manager: no generator on the call path."""
        return self

    def __enter__(self) -> None:
        self.busy += 1
        self._wanted.set()
        self._stir()

    def __exit__(self, *exc_info: object) -> None:
        self.busy -= 1
        self._stir()

    def subscribed(self, method: str, uri: str) -> None:
        """A ``resources/subscribe`` (or ``unsubscribe``) the server took."""
        if method == "resources/subscribe":
            self.subscriptions.add(uri)
        elif method == "resources/unsubscribe":
            self.subscriptions.discard(uri)
        self._stir()

    # --- when it is idle ------------------------------------------------------------------

    def idle_seconds(self) -> float | None:
        """How long the running server may stay idle: at once for a lazy server that nothing has
        needed (started only to learn its listing), else ``idle_stop``; None: it keeps running."""
        if self.forced:
            return None
        if self.lazy and not self.wanted:
            return 0.0
        return self.idle_stop

    async def until_idle(self) -> None:
        """Return once the server has been idle (no call in flight, no subscription) for its idle
        time. The caller acts before its next ``await``: nothing can start in between."""
        while True:
            seconds = self.idle_seconds()
            if seconds is None:
                await self._configured.wait()
                continue
            stirred, self._heeded = self._stirred, True
            if self.busy or self.subscriptions:
                await stirred.wait()
                continue
            with anyio.move_on_after(seconds):
                await stirred.wait()
            if not stirred.is_set() and not self.busy and not self.subscriptions:
                return

    def _stir(self) -> None:
        if self._heeded:
            self._heeded = False
            self._stirred.set()
            self._stirred = anyio.Event()
