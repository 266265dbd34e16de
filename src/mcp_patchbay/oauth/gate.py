"""A served upstream's sign-in: ``SignInGate``, one per remote server that may ask for one.

It gives each connection its (non-interactive) ``UpstreamAuth``, judges a refusal the
connection saw (``judge``: a sign-in can answer it, or it cannot), and, when a call needs a
sign-in, starts one in the background, at most one per server at a time (``needed``):
the browser opens on the authorization page and the call is answered at once with
``AUTH_REQUIRED``, telling the model to have the user finish signing in and then retry.
With ``patchbay.open_browser: false`` nothing opens and the answer names
``mcp-patchbay login``. ``wait_signed_in`` returns once a sign-in completed, here or in
another process (the stored file changed), so the upstream reconnects.
"""

from __future__ import annotations

import logging
import shlex
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from mcp_patchbay.config import RemoteSpec, Settings
from mcp_patchbay.errors.foreign import auth_server_trouble, sign_in_failure
from mcp_patchbay.errors.tree import Code, PatchbayError, SignedIn, UpstreamError

if TYPE_CHECKING:
    from mcp_patchbay.oauth.provider import Challenge, UpstreamAuth
    from mcp_patchbay.oauth.store import TokenStore
logger = logging.getLogger(__name__)

BROWSER_WAIT = 10.0
"""Seconds a call waits for the browser to open (or a quick sign-in to finish) before answering."""
QUICK_SIGN_IN = 0.5
"""Seconds a call waits, once the browser opened, for a sign-in that needs no one (consent remembered)."""
STORE_POLL = 2.0
"""Seconds between looks at the stored sign-in while a server waits for one made elsewhere."""
MAX_SIGN_INS = 3
SIGN_IN_WINDOW = 600.0
"""At most ``MAX_SIGN_INS`` sign-ins started by calls per server in this many seconds: a server
that keeps refusing what the user grants must not open a browser window for every call."""


@dataclass
class SignInGate:
    name: str
    spec: RemoteSpec
    settings: Settings
    store: TokenStore
    login_command: str = ""
    """What the user runs to sign in from a terminal, with the config's path: for logs and ``check``."""
    challenge: Challenge | None = None
    """What the server last asked for that only a sign-in gives (None: nothing pending)."""
    last_failure: UpstreamError | None = None
    browser_opened: bool | None = None
    """Whether the last sign-in's page opened in a browser (None: none tried)."""
    _live: UpstreamAuth | None = None
    _wanted: anyio.Event = field(default_factory=anyio.Event)
    _opened: anyio.Event = field(default_factory=anyio.Event)
    _completed: anyio.Event = field(default_factory=anyio.Event)
    """Set when a sign-in completes, then replaced: each waiter holds the one it waits on."""
    _running: bool = False
    _started: deque[float] = field(default_factory=deque[float])
    _refused: str = ""
    """The fingerprint of the stored tokens when the server last refused them (``TokenStore.fingerprint``)."""

    @classmethod
    def for_server(cls, name: str, spec: RemoteSpec, settings: Settings, config: Path | None = None) -> SignInGate:
        from mcp_patchbay.oauth.store import TokenStore

        where = f" --config {shlex.quote(str(config))}" if config is not None else ""
        return cls(name, spec, settings, TokenStore(spec.url), f"'mcp-patchbay login {name}{where}'")

    @property
    def login_hint(self) -> str:
        """The login command as the model may see it: the config as a placeholder, no paths."""
        return f"'mcp-patchbay login {self.name} --config <the patchbay config file>'"

    # --- a connection --------------------------------------------------------------------

    def provider(self) -> UpstreamAuth:
        """The auth of a new connection: stored tokens, refreshed; never a browser."""
        from mcp_patchbay.oauth.provider import UpstreamAuth

        self._live = UpstreamAuth(
            self.spec.url, self.store, self.spec.oauth or None, "http://127.0.0.1/callback", interactive=False
        )
        return self._live

    def judge(self, error: PatchbayError, cause: BaseException | None = None) -> PatchbayError:
        """A refusal seen on the connection, judged: ``AUTH_REQUIRED`` where a sign-in answers it
        (the challenge is kept for the sign-in), a plainer ``AUTH_FAILED`` where it cannot; a
        connection failure that was the authorization server's (a refresh): ``AUTH_SERVER_UNREACHABLE``."""
        if error.code is Code.CONNECTION_FAILED and cause is not None:
            return auth_server_trouble(cause, self.name, self.spec.url) or error
        live = self._live
        if error.code is not Code.AUTH_FAILED or live is None:
            return error
        if live.refresh_trouble is not None:
            return UpstreamError(
                Code.AUTH_SERVER_UNREACHABLE,
                f"The authorization server of server '{self.name}' failed to renew the sign-in (HTTP "
                f"{live.refresh_trouble}). Retry in a little while.",
                detail=error.detail,
                retry_after_ms=5000,
                server=self.name,
                tool=error.tool,
            )
        if live.challenge_covered:
            return UpstreamError(
                Code.AUTH_FAILED,
                f"Server '{self.name}' refused the request although the user granted the access it asks for. "
                "Signing in again will not help: tell the user.",
                detail=error.detail,
                server=self.name,
                tool=error.tool,
            )
        challenge = live.challenge
        if challenge is None:
            return error
        from mcp_patchbay.oauth.provider import bearer_challenge_text

        if challenge.status == 401 and self.spec.oauth is None and not bearer_challenge_text(challenge):
            return error  # a refusal without a Bearer challenge, and no "oauth" in the entry: not OAuth
        self.challenge = challenge
        self._refused = live.refused  # the token the server refused, not whatever the file holds now
        live.challenge = None
        return UpstreamError(
            Code.AUTH_REQUIRED,
            f"Server '{self.name}' needs the user to sign in.",
            detail=f"HTTP {challenge.status}; challenge: {challenge.www_authenticate[:300]}",
            server=self.name,
            tool=error.tool,
        )

    # --- asking the user -----------------------------------------------------------------

    def required(self, tool: str | None = None) -> UpstreamError:
        """The answer for a call that needs a sign-in, as things stand."""
        where = f"'{self.name}'"
        login = self.login_hint
        challenge = self.challenge
        need = "needs the user to sign in"
        if challenge is not None and challenge.step_up:
            scope = f" ({challenge.scope})" if challenge.scope else ""
            need = f"needs the user to grant more access{scope}"
        if not self._running and self._limited():  # only browser windows count: failures before one do not
            return UpstreamError(
                Code.AUTH_REQUIRED,
                f"Server {where} {need}, and {MAX_SIGN_INS} sign-ins in the browser did not give it. Tell the "
                f"user; they can sign in from a terminal with {login}.",
                server=self.name,
                tool=tool,
            )
        if self.last_failure is not None and not self._running:
            return self.last_failure
        if not self.settings.open_browser or self.browser_opened is False:
            why = " No browser window could be opened." if self.browser_opened is False else ""
            return UpstreamError(
                Code.AUTH_REQUIRED,
                f"Server {where} {need}.{why} Ask the user to run {login} in a terminal, then call this tool again.",
                server=self.name,
                tool=tool,
            )
        if not self._running:
            return UpstreamError(
                Code.AUTH_REQUIRED,
                f"Server {where} {need}. Calling one of its tools opens a sign-in page in the user's browser.",
                server=self.name,
                tool=tool,
            )
        then = "its tools are then listed" if tool == "sign_in" else "then call this tool again"
        return UpstreamError(
            Code.AUTH_REQUIRED,
            f"Server {where} {need}. A sign-in page opened in the user's browser: ask the user to finish "
            f"signing in there; {then}. (From a terminal: {login}.)",
            retry_after_ms=5000,
            server=self.name,
            tool=tool,
        )

    async def needed(self, tool: str | None = None) -> PatchbayError:
        """A call needs a sign-in: start one unless one runs (or the user runs ``login``
        themselves), wait a moment for the browser to open, and say what the user must do.

        A sign-in that completes within that moment (a browser that remembered the user's
        consent) answers ``SignedIn``: the call waits for the server to be ready and is sent again."""
        completed = self._completed
        if self.settings.open_browser and not self._running and not self._limited():
            self.last_failure = None
            self.browser_opened = None
            self._opened = anyio.Event()
            self._running = True
            self._wanted.set()
        if self._running:
            with anyio.move_on_after(BROWSER_WAIT):
                await self._opened.wait()
            with anyio.move_on_after(QUICK_SIGN_IN):
                await completed.wait()
        if completed.is_set():
            return SignedIn(
                Code.SERVER_STARTING,
                f"Signed in to server '{self.name}' just now; it is connecting. Call this tool again.",
                retry_after_ms=1000,
                server=self.name,
                tool=tool,
            )
        return self.required(tool)

    def _limited(self) -> bool:
        now = time.monotonic()
        while self._started and now - self._started[0] > SIGN_IN_WINDOW:
            self._started.popleft()
        return len(self._started) >= MAX_SIGN_INS and not self._running

    async def run(self) -> None:
        """Run the sign-ins calls ask for, one at a time, for as long as the upstream lives."""
        from mcp_patchbay.oauth.signin import SIGN_IN_TIMEOUT, open_in_browser, sign_in

        while True:
            await self._wanted.wait()
            self._wanted = anyio.Event()
            opened = self._opened
            attempt = anyio.CancelScope()

            async def show(url: str, opened: anyio.Event = opened, attempt: anyio.CancelScope = attempt) -> None:
                self.browser_opened = await open_in_browser(url)
                opened.set()
                if not self.browser_opened:
                    # No one can finish it: end it now (the answer names the login command), rather
                    # than hold the callback port that command will want. Cancelled as well as
                    # raised: a transport that swallows the error (the SDK's SSE writer) must not
                    # leave the sign-in waiting for its timeout.
                    attempt.cancel()
                    raise NoBrowser(self.name)
                self._started.append(time.monotonic())  # the limit counts browser windows opened
                logger.warning("sign-in to '%s': opened the browser on its authorization page", self.name)

            try:
                done = False
                with attempt:
                    done = await sign_in(self.name, self.spec, self.store, show, challenge=self.challenge)
                if attempt.cancelled_caught:
                    raise NoBrowser(self.name)
            except NoBrowser:
                logger.warning("sign-in to '%s': no browser could be opened; run %s", self.name, self.login_command)
            except UpstreamError as exc:
                if self.browser_opened is False:
                    logger.warning("sign-in to '%s': no browser could be opened; run %s", self.name, self.login_command)
                else:
                    self.last_failure = exc
                    logger.error("sign-in to '%s' failed: %s (%s)", self.name, exc.code.value, exc.detail)
            except Exception as exc:  # never let a sign-in end the upstream
                logger.exception("sign-in to '%s' failed unexpectedly", self.name)
                self.last_failure = sign_in_failure(exc, self.name, self.spec.url, timeout=SIGN_IN_TIMEOUT)
            else:
                self.challenge = None
                logger.warning("sign-in to '%s' %s", self.name, "completed" if done else "was not asked for")
                completed, self._completed = self._completed, anyio.Event()
                completed.set()
            finally:
                self._running = False
                opened.set()

    async def wait_signed_in(self) -> None:
        """Return once there are tokens other than those the server refused: a sign-in here, or
        ``mcp-patchbay login`` in another process (the stored file is looked at every 2 s; a
        registration or metadata written meanwhile does not count)."""
        while True:
            completed = self._completed
            with anyio.move_on_after(STORE_POLL):
                await completed.wait()
            if completed.is_set() or self.store.fingerprint() != self._refused:
                self.last_failure = None
                return


class NoBrowser(UpstreamError):
    """A served sign-in found no browser to open (``SignInGate.run`` ends it at once)."""

    def __init__(self, server: str) -> None:
        super().__init__(Code.AUTH_REQUIRED, f"No browser could be opened to sign in to '{server}'.", server=server)


__all__ = ["NoBrowser", "SignInGate"]
