"""One sign-in, with a person at a browser: ``sign_in``.

A sign-in connects to the server as the proxy would, with an interactive ``UpstreamAuth``:
the server's refusal starts the SDK's flow (discovery, registration, PKCE), the browser is
sent to the authorization page (``webbrowser``, so ``BROWSER`` is honoured), the loopback
listener receives the code, the tokens are stored. It then lists the server's tools,
since some servers let ``initialize`` through and ask for a token only after it. Used by
``mcp-patchbay login`` and by a served upstream that needs one (``oauth.gate``).

The authorization URL is checked (``urls.browser_refusal``) before it is shown or opened, and
again by ``open_in_browser``: a refused one ends the sign-in with ``AUTH_FAILED``
(``urls.RefusedUrl``); the endpoints it came from were checked as they arrived (``provider``).
What a failure means for the model is ``errors.foreign.sign_in_failure``'s to say, as every
foreign exception's is ``errors.foreign``'s.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import urllib.parse
import webbrowser
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager

import anyio
import mcp_types as types
from mcp.client.session import ClientSession

from mcp_patchbay import __version__
from mcp_patchbay.config import RemoteSpec
from mcp_patchbay.errors.exception_groups import most_telling
from mcp_patchbay.errors.foreign import sign_in_failure
from mcp_patchbay.oauth.loopback import Loopback, loopback
from mcp_patchbay.oauth.provider import Challenge, UpstreamAuth
from mcp_patchbay.oauth.store import TokenStore
from mcp_patchbay.oauth.urls import RefusedUrl, browser_refusal, shown
from mcp_patchbay.upstreams.transports import open_link

logger = logging.getLogger(__name__)

SIGN_IN_TIMEOUT = 300.0
"""Seconds a person has to finish a sign-in in the browser."""
CONNECT_TIMEOUT = 30.0
_CLIENT_INFO = types.Implementation(name="mcp-patchbay", version=__version__)

ShowUrl = Callable[[str], Awaitable[None]]


BROWSER_START = 2.0
"""Seconds to wait for ``webbrowser.open`` to say whether a browser opened; one still running
then (a ``BROWSER`` command that stays open until the browser closes) counts as opened."""


async def open_in_browser(url: str) -> bool:
    """Open ``url`` with Python's ``webbrowser`` (``BROWSER`` honoured); False if none could be.

    In a thread of its own, not awaited to the end: ``webbrowser`` waits for a ``BROWSER``
    command to exit, and a browser started that way may run until the user closes it, while the
    redirect must be received now (a headless one follows it to this very process's listener).
    """
    refused_because(url)
    if _no_display():
        return False  # webbrowser would pick a console browser no one sees (lynx, w3m)
    outcome: list[bool] = []
    done = threading.Event()

    def run() -> None:
        try:
            outcome.append(webbrowser.open(url))
        except Exception:  # webbrowser.Error, or a broken BROWSER command
            outcome.append(False)
        finally:
            done.set()

    threading.Thread(target=run, name="mcp-patchbay-browser", daemon=True).start()
    finished = await anyio.to_thread.run_sync(done.wait, BROWSER_START, abandon_on_cancel=True)
    return outcome[0] if finished and outcome else True


def refused_because(url: str) -> None:
    """Raise ``RefusedUrl`` (and log it) when the browser may not be sent to ``url`` (``urls``)."""
    reason = browser_refusal(url)
    if reason is not None:
        logger.warning("refused to open the authorization endpoint %s: %s", shown(url), reason)
        raise RefusedUrl("authorization endpoint", url, reason)


async def sign_in(
    name: str,
    spec: RemoteSpec,
    store: TokenStore,
    show: ShowUrl,
    *,
    challenge: Challenge | None = None,
    timeout: float = SIGN_IN_TIMEOUT,
) -> bool:
    """Sign in to one server; True once signed in, False if the server never asked for it.

    ``show`` gets the authorization URL (to open a browser, print it, or both). A
    ``challenge`` is the refusal that made this sign-in necessary: with a step-up, the
    stored tokens are kept so that the new grant adds to them; otherwise the sign-in
    starts afresh. Raises ``UpstreamError`` with a sign-in code (``errors.foreign.sign_in_failure``);
    the caller says it (the traceback is logged at DEBUG).
    """
    step_up = challenge is not None and challenge.step_up
    provider: UpstreamAuth | None = None
    try:
        with anyio.fail_after(timeout):
            async with _callback(name, spec, store) as site:

                async def redirect(url: str, site: Loopback = site) -> None:
                    refused_because(url)  # before it is printed, opened or expected
                    site.expect(url)
                    await show(url)

                provider = UpstreamAuth(
                    spec.url,
                    store,
                    spec.oauth or None,
                    site.redirect_uri,
                    interactive=True,
                    redirect_handler=redirect,
                    callback_handler=site.result,
                    challenge=challenge,
                    fresh=not step_up,
                )
                async with open_link(name, spec, CONNECT_TIMEOUT, auth=provider) as link:
                    async with ClientSession(link.read, link.write, client_info=_CLIENT_INFO) as session:
                        await session.initialize()
                        await session.list_tools()
    except BaseException as exc:
        if isinstance(exc, anyio.get_cancelled_exc_class()):
            raise
        signed_in = provider is not None and provider.exchanged
        error = sign_in_failure(exc, name, spec.url, timeout=SIGN_IN_TIMEOUT, signed_in=signed_in)
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("signing in to '%s' failed", name, exc_info=most_telling(exc))
        raise error from exc
    return provider.exchanged


@asynccontextmanager
async def _callback(name: str, spec: RemoteSpec, store: TokenStore) -> AsyncGenerator[Loopback, None]:
    """The loopback listener: on the configured port; else on the port the stored registration
    names (so it stays valid), or, if that one is taken, on a free one with a new registration."""
    oauth = spec.oauth or None
    if oauth is not None and oauth.callback_port is not None:
        async with loopback(name, oauth.callback_port) as site:
            yield site
        return
    registered = store.client_info()
    port = None
    if registered is not None and registered.redirect_uris and _registered_by_us(registered.client_id, spec):
        parts = urllib.parse.urlsplit(str(registered.redirect_uris[0]))
        port = parts.port if parts.hostname == "127.0.0.1" else None
    if port is not None and not _free(port):
        logger.info("port %d of the stored registration for '%s' is taken: registering anew", port, name)
        store.forget_client()
        port = None
    async with loopback(name, port) as site:
        yield site


def _no_display() -> bool:
    """On Linux and the BSDs, no ``BROWSER`` and no display to open a window on."""
    if not sys.platform.startswith(("linux", "freebsd", "openbsd", "netbsd")) or os.environ.get("BROWSER"):
        return False
    return not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def _free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the listener will: TIME_WAIT is free
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _registered_by_us(client_id: str, spec: RemoteSpec) -> bool:
    """A dynamic registration (not the config's client nor a metadata document URL)."""
    oauth = spec.oauth or None
    return oauth is None or client_id not in (oauth.client_id, oauth.client_metadata_url)


__all__ = ["SIGN_IN_TIMEOUT", "open_in_browser", "sign_in"]
