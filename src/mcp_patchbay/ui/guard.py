"""Who may read the page and act through it: the token, Host and Origin, and the form token.

Pure checks on a request's headers (``Check``, values in, a refusal or None out) and the form
tokens' signing; the app (``app``) applies them to every request before anything is read. A
request refused (here, or by an action: ``UiRefused``) gets its status and one line.

- **Host** must be one the page is served as (DNS rebinding: a hostile name resolved to
  127.0.0.1 reaches the listener, but with its own name in ``Host``): else 403.
- **Origin**: a request that carries one must come from the page's own origin (403). A POST
  must carry it (every browser sends it on a POST) or say ``Sec-Fetch-Site: same-origin``: a
  page of another origin can make a browser POST a form anywhere, never with our Origin.
- **Who**: ``mcp-patchbay ui`` prints a URL with a random token; its first load sets the token as
  a cookie (HttpOnly, SameSite=Strict: never sent with a request another site starts) and
  redirects to the address without it. A request without the token or the cookie gets 401 and
  nothing else. On the gateway the caller is its bearer token's identity, and only an identity
  an access rule names ``"admin": true`` is served (``ui.gateway``).
- **Form token**: every form and every htmx request carries a token the page was rendered with
  (``FormTokens``: a random nonce signed with HMAC-SHA256 under a key made at start, bound to
  the caller), checked on every POST; a request without it gets 403.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = [
    "COOKIE_PREFIX",
    "FORM_FIELD",
    "FORM_HEADER",
    "FORM_TOKEN_LIFE",
    "FormTokens",
    "HostOrigin",
    "UiRefused",
    "matches",
    "same_token",
]

COOKIE_PREFIX = "patchbay_ui_"
"""The cookie's name, followed by the port: cookies are not kept apart by port, two pages are."""
FORM_FIELD = "form_token"
FORM_HEADER = "x-patchbay-form"
FORM_TOKEN_LIFE = 24 * 3600.0
"""Seconds a rendered page's form token stays good (a tab left open a day asks for a reload)."""


class UiRefused(Exception):
    """A request the page does not serve: its status and the one line it gets."""

    def __init__(self, status: int, text: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(text)
        self.status = status
        self.text = text
        self.headers = headers or {}


def matches(value: str, allowed: Iterable[str]) -> bool:
    """``value`` is one of ``allowed``, or has the form ``base:PORT`` of an allowed ``base:*``
    (the SDK's rule for Host and Origin lists)."""
    for pattern in allowed:
        if value == pattern:
            return True
        if pattern.endswith(":*"):
            base = pattern[:-2]
            rest = value[len(base) + 1 :] if value.startswith(base + ":") else ""
            if rest.isdigit():
                return True
    return False


def same_token(given: str | None, expected: str) -> bool:
    """Constant-time comparison (no early exit on the first different character)."""
    return given is not None and hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode())


@dataclass(frozen=True)
class HostOrigin:
    """The names the page is served as (``hosts``; empty: not checked, a wildcard bind of the
    gateway without ``url``) and the origins other than its own it accepts (``origins``)."""

    hosts: tuple[str, ...]
    origins: tuple[str, ...] = ()

    def refusal(self, method: str, scheme: str, headers: Mapping[str, str]) -> str | None:
        """Why a request with these headers is refused (a sentence for the log), or None."""
        host = headers.get("host", "")
        if self.hosts and not matches(host, self.hosts):
            return f"Host {host!r} is not one this page is served as"
        origin = headers.get("origin")
        own = f"{scheme}://{host}"
        if origin is not None:
            if origin != own and not matches(origin, self.origins):
                return f"Origin {origin!r} is not this page's own"
        elif method not in ("GET", "HEAD") and headers.get("sec-fetch-site") != "same-origin":
            return "a POST without an Origin (browsers send one: made by a script, or a page of another origin)"
        if method in ("GET", "HEAD") and headers.get("sec-fetch-site") == "cross-site" and origin is not None:
            return "a request another site started"
        return None


class FormTokens:
    """Tokens put in each rendered page's forms, bound to who it was rendered for."""

    def __init__(self, key: bytes | None = None, *, life: float = FORM_TOKEN_LIFE) -> None:
        self._key = key or secrets.token_bytes(32)
        self.life = life

    def issue(self, who: str, now: float | None = None) -> str:
        stamp = str(int(time.time() if now is None else now))
        nonce = secrets.token_urlsafe(12)
        return f"{stamp}.{nonce}.{self._sign(who, stamp, nonce)}"

    def valid(self, token: str | None, who: str, now: float | None = None) -> bool:
        if not token or token.count(".") != 2:
            return False
        stamp, nonce, signature = token.split(".")
        if not stamp.isdigit():
            return False
        age = (time.time() if now is None else now) - int(stamp)
        if age < -60 or age > self.life:
            return False
        return hmac.compare_digest(signature, self._sign(who, stamp, nonce))

    def _sign(self, who: str, stamp: str, nonce: str) -> str:
        message = f"{who}\0{stamp}\0{nonce}".encode("utf-8", "surrogatepass")
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()[:32]
