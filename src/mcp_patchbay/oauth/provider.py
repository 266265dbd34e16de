"""The SDK's OAuth client, as the proxy needs it: ``UpstreamAuth``.

The SDK's ``OAuthClientProvider`` (an ``httpx2.Auth``) does discovery (RFC 9728, RFC 8414
and OpenID, the 2025-03-26 fallbacks), PKCE, resource indicators, scope selection,
step-up on ``403 insufficient_scope``, refresh, and registration (a client ID metadata
document, dynamic registration, or a pre-registered client). When a request needs a
sign-in it runs the whole flow inline, waiting on a person in a browser. A proxy that
serves a client with no terminal must not: ``UpstreamAuth`` has two modes.

- ``interactive=False`` (every served connection): stored tokens are used and refreshed
  (a little before expiry, and once on a ``401``); when only a person can help (no token,
  a refresh refused, a ``403 insufficient_scope`` for a scope not yet granted), the
  request's own answer is returned as it is and ``challenge`` says what was asked for.
  The upstream then reports ``AUTH_REQUIRED`` and starts a sign-in (``oauth.signin``).
- ``interactive=True`` (a sign-in: ``mcp-patchbay login``, or one the proxy started): the
  SDK's flow as it is, fed the challenge that made the sign-in necessary, so that a scope
  step-up asks for the union of the granted and the challenged scopes.

Every address the sign-in takes from a server is checked before it is used (``oauth.urls``):
the authorization, token and registration endpoints in the authorization server's metadata
as it arrives (before the SDK reads it), and every request the SDK's flow makes. One that
fails raises ``urls.RefusedUrl`` (``AUTH_FAILED``): nothing more is sent, no browser opens.

It relies on the SDK provider's protected members (``context``, ``_initialize``,
``_initialized``, ``_auth_flow``, ``_refresh_token``, ``_handle_refresh_response``,
``_exchange_token_authorization_code``, ``_add_auth_header``); tests/test_sdk.py guards
them, as it guards the other SDK internals the proxy uses (``sdk``).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, NoReturn

import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.utils import extract_field_from_www_auth, union_scopes
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from pydantic import PrivateAttr

from mcp_patchbay.config import OAuthSettings
from mcp_patchbay.oauth.store import TokenStore, fingerprint_of
from mcp_patchbay.oauth.urls import RefusedUrl, endpoint_refusal, metadata_refusal, shown

logger = logging.getLogger(__name__)
# The SDK's OAuth logger quotes servers' answers (which may hold tokens) in its tracebacks; the
# proxy says what failed in its own words (``errors.foreign.sign_in_failure``), so the SDK's stays quiet.
logging.getLogger("mcp.client.auth").setLevel(logging.CRITICAL)

REFRESH_MARGIN = 60.0
"""Seconds before expiry at which an access token is refreshed (at most a quarter of its life)."""

GRANT_TYPES = ["authorization_code", "refresh_token"]


@dataclass(frozen=True, slots=True)
class Challenge:
    """What an upstream asked for that only a sign-in can give."""

    status: int
    """401 (no valid token) or 403 (``insufficient_scope``: a step-up)."""
    www_authenticate: str
    """The challenge as sent, for the sign-in to act on (resource metadata URL, scope)."""
    scope: str | None
    """The scope the challenge names, if any."""

    @property
    def step_up(self) -> bool:
        return self.status == 403


def scopes(text: str | None) -> set[str]:
    return set((text or "").split())


class _ClientMetadata(OAuthClientMetadata):
    """Client metadata whose scope keeps the configured one: the SDK's flow sets the scope to
    what each challenge names, which would drop scopes the user asked for in the config."""

    _configured: str | None = PrivateAttr(default=None)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "scope" and self._configured is not None:
            value = union_scopes(self._configured, value)
        super().__setattr__(name, value)


def client_metadata(redirect_uri: str, oauth: OAuthSettings | None) -> OAuthClientMetadata:
    """What the proxy says about itself when it registers."""
    from pydantic import AnyUrl

    from mcp_patchbay import __version__

    metadata = _ClientMetadata(
        client_name="mcp-patchbay",
        client_uri=None,
        software_id="mcp-patchbay",
        software_version=__version__,
        redirect_uris=[AnyUrl(redirect_uri)],
        grant_types=list(GRANT_TYPES),
        response_types=["code"],
        scope=oauth.scope if oauth is not None else None,
    )
    metadata._configured = oauth.scope if oauth is not None else None  # pyright: ignore[reportPrivateUsage]
    return metadata


class UpstreamAuth(OAuthClientProvider):
    """OAuth for one upstream URL; see the module docstring for the two modes."""

    def __init__(
        self,
        server_url: str,
        store: TokenStore,
        oauth: OAuthSettings | None,
        redirect_uri: str,
        *,
        interactive: bool,
        redirect_handler: Callable[[str], Awaitable[None]] | None = None,
        callback_handler: Callable[[], Awaitable[AuthorizationCodeResult]] | None = None,
        challenge: Challenge | None = None,
        fresh: bool = False,
    ) -> None:
        super().__init__(
            server_url,
            client_metadata(redirect_uri, oauth),
            store,
            redirect_handler=redirect_handler,
            callback_handler=callback_handler,
            client_metadata_url=oauth.client_metadata_url if oauth is not None else None,
        )
        self.store = store
        self.oauth = oauth
        self.redirect_uri = redirect_uri
        self.interactive = interactive
        self._fresh = fresh
        self._feed = challenge if interactive else None
        self._seen_version = -1
        self.challenge: Challenge | None = None
        """Set (non-interactive mode) when the server asked for what only a sign-in can give."""
        self.refresh_trouble: int | None = None
        """The HTTP status of the last refresh, when it failed in passing (5xx, 429)."""
        self.refused = ""
        """The fingerprint of the token the server last refused (as ``TokenStore.fingerprint``)."""
        self.exchanged = False
        """A sign-in completed here: an authorization code was exchanged for tokens."""
        self.challenge_covered = False
        """The last ``403 insufficient_scope`` named only scopes already granted: a sign-in
        cannot help (the server refuses whatever the user grants)."""

    # --- loading what is stored -----------------------------------------------------------

    async def _initialize(self) -> None:
        self._seen_version = self.store.version()
        await super()._initialize()
        ctx = self.context
        if self._fresh:
            ctx.current_tokens = None
            self._fresh = False
        ctx.token_expiry_time = self.store.expires_at() if ctx.current_tokens is not None else None
        self._expire_early()
        if ctx.oauth_metadata is None:  # discovered by the sign-in, in this process or another
            server, resource = self.store.metadata()
            ctx.oauth_metadata = server
            if resource is not None and ctx.protected_resource_metadata is None:
                ctx.protected_resource_metadata = resource
                if resource.authorization_servers:
                    ctx.auth_server_url = str(resource.authorization_servers[0])
        configured = self._configured_client()
        if configured is not None and (ctx.client_info is None or ctx.client_info.client_id != configured.client_id):
            if ctx.client_info is not None:  # the config names another client: its tokens are not ours
                ctx.current_tokens = None
            ctx.client_info = configured

    def _configured_client(self) -> OAuthClientInformationFull | None:
        if self.oauth is None or self.oauth.client_id is None:
            return None
        return OAuthClientInformationFull(
            client_id=self.oauth.client_id,
            client_secret=self.oauth.client_secret,
            redirect_uris=[self.redirect_uri],  # type: ignore[list-item]  # pydantic parses it
            grant_types=list(GRANT_TYPES),
        )

    def _expire_early(self) -> None:
        """Count a token that expires within the margin as expired, so the flow refreshes it now."""
        ctx = self.context
        tokens = ctx.current_tokens
        if tokens is None or ctx.token_expiry_time is None:
            return
        lifetime = float(tokens.expires_in) if tokens.expires_in else REFRESH_MARGIN * 4
        if time.time() >= ctx.token_expiry_time - min(REFRESH_MARGIN, lifetime / 4):
            ctx.token_expiry_time = time.time() - 1

    # --- the token endpoint ----------------------------------------------------------------

    def _settle_auth_method(self) -> None:
        """A pre-registered client with a secret authenticates as the authorization server says
        it accepts: HTTP Basic if listed (or nothing is listed: RFC 6749 requires it), else POST."""
        info = self.context.client_info
        if info is None or info.token_endpoint_auth_method is not None or self.oauth is None:
            return
        if info.client_id != self.oauth.client_id:
            return
        if info.client_secret is None:
            info.token_endpoint_auth_method = "none"
            return
        metadata = self.context.oauth_metadata
        supported = (metadata.token_endpoint_auth_methods_supported if metadata is not None else None) or []
        if not supported or "client_secret_basic" in supported or "client_secret_post" not in supported:
            info.token_endpoint_auth_method = "client_secret_basic"
        else:
            info.token_endpoint_auth_method = "client_secret_post"

    async def _exchange_token_authorization_code(self, auth_code: str, code_verifier: str) -> httpx2.Request:
        self._settle_auth_method()
        return await super()._exchange_token_authorization_code(auth_code, code_verifier)

    async def _refresh_token(self) -> httpx2.Request:
        self._settle_auth_method()
        return self._checked(await super()._refresh_token())

    def _checked(self, outgoing: httpx2.Request) -> httpx2.Request:
        """``outgoing``, a request of the sign-in's own (discovery, registration, token), if its
        address may be used (``urls.endpoint_refusal``; plain http at the config's own origin)."""
        url = str(outgoing.url)
        reason = endpoint_refusal(url, http_origin=self.context.server_url)
        if reason is not None:
            what = "metadata address"
            if outgoing.method == "POST":  # registration sends JSON, the token endpoint a form
                json_body = outgoing.headers.get("content-type", "").startswith("application/json")
                what = "registration endpoint" if json_body else "token endpoint"
            self._refuse(what, url, reason)
        return outgoing

    async def _refused_metadata(self, outgoing: httpx2.Request, response: httpx2.Response) -> None:
        """The endpoints a metadata document names, checked before the SDK reads it."""
        if outgoing.method != "GET" or response.status_code != 200:
            return
        try:
            body = json.loads(await response.aread())
        except ValueError:
            return  # not JSON: the SDK finds no metadata in it
        refused = metadata_refusal(body)
        if refused is not None:
            self._refuse(*refused)

    def _refuse(self, what: str, url: str, reason: str) -> NoReturn:
        logger.warning("sign-in to %s: refused the %s %s: %s", self.context.server_url, what, shown(url), reason)
        raise RefusedUrl(what, url, reason)

    async def _handle_token_response(self, response: httpx2.Response) -> None:
        await super()._handle_token_response(response)
        self.exchanged = True
        self.store.set_metadata(self.context.oauth_metadata, self.context.protected_resource_metadata)

    # --- the flow ------------------------------------------------------------------------------

    async def _handle_refresh_response(self, response: httpx2.Response) -> bool:
        """The SDK's, except that a transient failure (5xx, 429) of an early refresh keeps the
        access token that still works, rather than forgetting it and asking for a sign-in."""
        ctx = self.context
        kept, expires = ctx.current_tokens, self.store.expires_at()
        refreshed = await super()._handle_refresh_response(response)
        transient = response.status_code >= 500 or response.status_code == 429
        self.refresh_trouble = None if refreshed or not transient else response.status_code
        if not refreshed and transient and kept is not None and expires is not None and expires > time.time() + 5:
            logger.warning(
                "refreshing the token for %s failed (HTTP %d): keeping the current one",
                ctx.server_url,
                response.status_code,
            )
            ctx.current_tokens, ctx.token_expiry_time = kept, expires
        return refreshed

    # Long on purpose: mirrors the SDK's own _auth_flow, step for step, so its updates can be compared.
    async def _auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:  # noqa: PLR0912, PLR0915
        self.refresh_trouble = None
        if self._initialized and self.store.version() != self._seen_version:
            self._initialized = False  # signed in meanwhile (another process, or a sign-in here): reload
        if self._initialized:
            self._expire_early()
        ctx = self.context
        refusal: httpx2.Response | None = None
        if not self.interactive and self._initialized and ctx.is_token_valid() and not ctx.lock.locked():
            # The common case, a served request with a good token: what the SDK's flow would do,
            # without its generator and lock (about a third of the flow's cost per call).
            ctx.protocol_version = request.headers.get(MCP_PROTOCOL_VERSION_HEADER)
            self._add_auth_header(request)
            response = yield request
            if not _asks_for_sign_in(response):
                return
            refusal = response
        else:
            inner = super()._auth_flow(request)
            try:
                outgoing = await inner.__anext__()
                while True:
                    if outgoing is not request:
                        response = yield self._checked(outgoing)
                        await self._refused_metadata(outgoing, response)
                    elif (feed := self._take_feed(request)) is not None:
                        # A sign-in made necessary by a refusal: let the SDK see the challenge the
                        # server gave, without sending the request only to be refused again.
                        headers = {"www-authenticate": feed.www_authenticate}
                        response = httpx2.Response(feed.status, headers=headers, request=request)
                    else:
                        response = yield request
                        if not self.interactive and _asks_for_sign_in(response):
                            refusal = response
                            break
                    outgoing = await inner.asend(response)
            except StopAsyncIteration:
                return
            finally:
                await inner.aclose()  # before the lock is taken again below: the SDK's flow holds it

        # A served connection was refused: do only what needs no person, in this one frame (so
        # that closing the flow at any yield releases the lock in the task that holds it).
        self.challenge, self.challenge_covered = None, False
        sent = request.headers.get("authorization")
        if refusal.status_code == 401 and sent is not None:
            resend = False
            async with ctx.lock:
                current = ctx.current_tokens
                if current is not None and ctx.is_token_valid() and f"Bearer {current.access_token}" != sent:
                    resend = True  # another request refreshed meanwhile
                elif ctx.can_refresh_token():
                    resend = True
                    if await self._handle_refresh_response((yield await self._refresh_token())):
                        logger.info("refreshed the access token for %s after a 401", ctx.server_url)
                    elif self.refresh_trouble is None:
                        logger.warning("the token refresh for %s was refused: a new sign-in is needed", ctx.server_url)
                if resend:
                    if ctx.is_token_valid() and f"Bearer {ctx.current_tokens.access_token}" != sent:  # type: ignore[union-attr]
                        self._add_auth_header(request)
                    else:  # never the token just refused: the resource's own refusal, without one
                        del request.headers["authorization"]
            if resend:
                # The answer httpx returns is the last one: the resource's, never the token endpoint's.
                refusal = yield request
                if not _asks_for_sign_in(refusal):
                    return
        self.refused = _fingerprint(sent)
        if self.refresh_trouble is not None:
            return  # the authorization server's passing trouble: retried, not a sign-in (gate.judge)
        header = refusal.headers.get("www-authenticate", "")
        scope = extract_field_from_www_auth(refusal, "scope")
        if refusal.status_code == 403:
            granted = scopes(ctx.current_tokens.scope if ctx.current_tokens else None)
            if scope and scopes(scope) <= granted:
                self.challenge_covered = True
                logger.warning("%s refused a request for lack of scope %r, already granted", ctx.server_url, scope)
                return
        self.challenge = Challenge(refusal.status_code, header, scope)

    def _take_feed(self, request: httpx2.Request) -> Challenge | None:
        """The challenge to feed the SDK's flow, once: the first time the request goes out. A
        step-up needs the token it steps up from; without one the server's own refusal will do."""
        feed, self._feed = self._feed, None
        if feed is not None and feed.step_up and "authorization" not in request.headers:
            return None
        return feed


def _fingerprint(authorization: str | None) -> str:
    """The fingerprint of the token in an ``Authorization`` header (``store.fingerprint_of``)."""
    if not authorization or not authorization.lower().startswith("bearer "):
        return ""
    return fingerprint_of(authorization[7:])


def _asks_for_sign_in(response: httpx2.Response) -> bool:
    """A refusal that a token could answer: any 401, or a 403 naming ``insufficient_scope``."""
    if response.status_code == 401:
        return True
    return response.status_code == 403 and extract_field_from_www_auth(response, "error") == "insufficient_scope"


def bearer_challenge_text(challenge: Challenge) -> bool:
    """The challenge asks for a Bearer token (RFC 6750): what marks a server that signs in with
    OAuth, for entries that do not say so."""
    return challenge.www_authenticate.strip().lower().startswith("bearer")


__all__ = [
    "Challenge",
    "RefusedUrl",
    "UpstreamAuth",
    "bearer_challenge_text",
    "client_metadata",
    "scopes",
]
