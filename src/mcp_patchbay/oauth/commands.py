"""``mcp-patchbay login SERVER`` and ``mcp-patchbay logout SERVER``: for a person at a terminal.

Both print to stderr (stdout stays free, as when serving) and return the exit status:
0 done, 1 the sign-in failed, 2 the server or its entry does not allow one.
"""

from __future__ import annotations

import logging
import sys

from mcp_patchbay.config import Config, RemoteSpec
from mcp_patchbay.errors.tree import Code, UpstreamError

EXIT_FAILED = 1
EXIT_USAGE = 2


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _remote(config: Config, name: str) -> RemoteSpec | None:
    """The entry ``name`` if it can sign in; otherwise says why and returns None."""
    entry = next((e for e in config.servers if e.name == name), None)
    if entry is None:
        known = ", ".join(e.name for e in config.servers) or "none"
        _say(f"mcp-patchbay: no server named {name!r} in {config.path} (servers: {known})")
        return None
    spec = entry.spec
    if spec is None:
        _say(f"mcp-patchbay: server {name!r} has a mistake in {config.path}: {entry.problem}")
        return None
    if not isinstance(spec, RemoteSpec):
        _say(f"mcp-patchbay: server {name!r} is launched with a command; sign-in is for remote servers ('url')")
        return None
    if spec.oauth is False:
        _say(f'mcp-patchbay: sign-in is turned off for server {name!r} ("oauth": false in {config.path})')
        return None
    return spec


_FOR_A_PERSON: dict[Code, str] = {
    Code.AUTH_DENIED: "the sign-in was declined in the browser",
    Code.AUTH_SERVER_UNREACHABLE: "the server's authorization server could not be reached",
    Code.AUTH_REGISTRATION_REFUSED: (
        "the authorization server refused to register mcp-patchbay as a client; register one with it and "
        'put its ID in the entry\'s "oauth": {"client_id": ...}'
    ),
    Code.AUTH_STATE_MISMATCH: "the browser came back from another sign-in attempt (state mismatch); try again",
    Code.AUTH_TOKEN_ERROR: "the authorization server refused to issue a token",
    Code.AUTH_REQUIRED: "the sign-in was not finished in time",
}
"""``login``'s words for a failed sign-in; the model's words (``exc.message``) ask it to talk to the user."""


def _why(config: Config, name: str, exc: UpstreamError) -> str:
    """A failed sign-in in a person's words: the sign-in's own (``_FOR_A_PERSON``), else the
    server's (``upstreams.diagnosis``: the URL that refused, the host DNS cannot find, ...)."""
    if exc.code in _FOR_A_PERSON:
        return _FOR_A_PERSON[exc.code]
    from mcp_patchbay.upstreams.availability import State
    from mcp_patchbay.upstreams.diagnosis import diagnose

    entry = next(e for e in config.servers if e.name == name)
    return diagnose(entry, State.FAILED, exc, connect_timeout=config.settings.connect_timeout).text() or exc.message


async def login(config: Config, name: str) -> int:
    from mcp_patchbay.oauth.signin import open_in_browser, sign_in
    from mcp_patchbay.oauth.store import TokenStore

    spec = _remote(config, name)
    if spec is None:
        return EXIT_USAGE
    store = TokenStore(spec.url)
    # The SDK logs its own flow's failures with a traceback; here the failure is said below.
    logging.getLogger("mcp.client.auth").setLevel(logging.CRITICAL)

    async def show(url: str) -> None:
        _say(f"Signing in to {name!r}: opening the authorization page in your browser.")
        _say(f"If it does not open, open this address yourself:\n  {url}")
        if not await open_in_browser(url):
            _say("(No browser could be opened.)")

    try:
        done = await sign_in(name, spec, store, show)
    except UpstreamError as exc:
        _say(f"mcp-patchbay: signing in to {name!r} failed: {_why(config, name, exc)}")
        if exc.detail:
            _say(f"  ({exc.detail})")
        return EXIT_FAILED
    if not done:
        _say(f"Server {name!r} did not ask for a sign-in: nothing to do.")
        return 0
    _say(f"Signed in to {name!r}. The sign-in is kept in {store.path}.")
    return 0


async def logout(config: Config, name: str) -> int:
    from mcp_patchbay.oauth.store import TokenStore

    spec = _remote(config, name)
    if spec is None:
        return EXIT_USAGE
    store = TokenStore(spec.url)
    if store.forget():
        _say(f"Signed out of {name!r}: its tokens and client registration are forgotten.")
    else:
        _say(f"No sign-in was stored for {name!r}.")
    return 0


__all__ = ["login", "logout"]
