"""The page's Sign in button: ``mcp-patchbay login``'s flow (``oauth.signin.sign_in``), with the
person already at a browser.

A sign-in runs in the page's process, in the background: its loopback listener waits for the
authorization server's redirect, as ``login``'s does, and the tokens land in the same store, so
every proxy serving that server notices the sign-in within 2 s. ``start`` waits until the flow
has the authorization page's address (the page sends the browser there) or has ended without
one (the server did not ask, or it failed: said in words). One sign-in per server at a time; a
second press while one waits gets its address again.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
import anyio.abc

if TYPE_CHECKING:
    from mcp_patchbay.config import RemoteSpec
__all__ = ["SignIns", "Started"]

logger = logging.getLogger(__name__)

URL_WITHIN = 30.0
"""Seconds the button waits for the authorization page's address (discovery, registration)."""


@dataclass
class Started:
    """What pressing Sign in came to: an address to open, or why there is none."""

    url: str | None = None
    done: bool = False
    signed_in: bool = False
    failure: str | None = None
    ready: anyio.Event = field(default_factory=anyio.Event)


Finished = Callable[[str, Started], Awaitable[None] | None]


class SignIns:
    """The page's sign-ins in flight, in the page's task group (``tg``)."""

    def __init__(self) -> None:
        self.tg: anyio.abc.TaskGroup | None = None
        self._running: dict[tuple[str, str], Started] = {}

    async def start(self, config: str, name: str, spec: RemoteSpec, on_end: Finished | None = None) -> Started:
        running = self._running.get((config, name))
        if running is not None and not running.done:
            return running
        if self.tg is None:
            return Started(done=True, failure="sign-in is not available here")
        started = Started()
        self._running[(config, name)] = started
        self.tg.start_soon(self._run, config, name, spec, started, on_end)
        with anyio.move_on_after(URL_WITHIN):
            await started.ready.wait()
        return started

    async def _run(self, config: str, name: str, spec: RemoteSpec, started: Started, on_end: Finished | None) -> None:
        from mcp_patchbay.errors.tree import UpstreamError
        from mcp_patchbay.oauth.commands import _FOR_A_PERSON  # pyright: ignore[reportPrivateUsage]
        from mcp_patchbay.oauth.signin import sign_in
        from mcp_patchbay.oauth.store import TokenStore

        async def show(url: str) -> None:
            started.url = url
            started.ready.set()

        try:
            started.signed_in = await sign_in(name, spec, TokenStore(spec.url), show)
        except UpstreamError as exc:
            started.failure = _FOR_A_PERSON.get(exc.code, exc.message)
        except Exception as exc:  # never the page's end
            logger.warning("signing in to '%s' failed", name, exc_info=True)
            started.failure = f"{type(exc).__name__}: {exc}"
        finally:
            started.done = True
            started.ready.set()
        if on_end is not None:
            ended = on_end(name, started)
            if ended is not None:
                await ended
