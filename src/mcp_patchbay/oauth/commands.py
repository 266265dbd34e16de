"""``mcp-patchbay login SERVER`` and ``mcp-patchbay logout SERVER``: for a person at a terminal.

Both print to stderr (stdout stays free, as when serving) and return the exit status:
0 done, 1 the sign-in failed, 2 the server or its entry does not allow one.
"""

from __future__ import annotations

import sys

from mcp_patchbay.config import Config, RemoteSpec
from mcp_patchbay.errors import UpstreamError

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


async def login(config: Config, name: str) -> int:
    from mcp_patchbay.oauth.signin import open_in_browser, sign_in
    from mcp_patchbay.oauth.store import TokenStore

    spec = _remote(config, name)
    if spec is None:
        return EXIT_USAGE
    store = TokenStore(spec.url)

    async def show(url: str) -> None:
        _say(f"Signing in to {name!r}: opening the authorization page in your browser.")
        if not await open_in_browser(url):
            _say("No browser could be opened; open this address yourself:")
        else:
            _say("If it did not open, open this address yourself:")
        _say(f"  {url}")

    try:
        done = await sign_in(name, spec, store, show)
    except UpstreamError as exc:
        _say(f"mcp-patchbay: signing in to {name!r} failed: {exc.message}")
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
