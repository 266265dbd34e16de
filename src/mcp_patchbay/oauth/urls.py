"""Sign-in addresses checked before they are used: ``endpoint_refusal``, ``browser_refusal``.

An authorization server names its endpoints in its metadata, and the proxy would open the
authorization endpoint in the user's browser and send requests to the token and
registration endpoints. A hostile or broken server can name anything there: mcp-remote
handed such a URL to the OS's opener, where ``a:$(cmd)`` ran a command (CVE-2025-6514).
So an endpoint must be:

- ``https``, or ``http`` on a loopback host (``127.0.0.0/8``, ``::1``, ``localhost``): never
  ``file:``, ``javascript:``, ``data:`` or any other scheme;
- well formed: a host, no user name or password before it, a valid port;
- plain: printable ASCII, no spaces or control characters, none of the characters a shell or
  an OS opener gives a meaning (`` $ ` ; | & < > " ' \\ { } ^ ``).

The URL the browser is sent to is the authorization endpoint (checked so) plus the query the
SDK builds (``?`` then ``urlencode``'s alphabet: letters, digits, ``_.~-%+=&``). A refusal is a
sentence naming what is wrong; the URL itself, for logs, goes through ``shown`` (the values of
query parameters that may be secret cut: a code, a state, a token). Pure.
"""

from __future__ import annotations

import ipaddress
import re
import urllib.parse
from typing import Final, cast

from mcp_patchbay.errors.tree import Code, UpstreamError
from mcp_patchbay.redaction import redact

__all__ = [
    "METADATA_ENDPOINTS",
    "SHELL_CHARACTERS",
    "RefusedUrl",
    "browser_refusal",
    "endpoint_refusal",
    "metadata_refusal",
    "shown",
]

SHELL_CHARACTERS: Final = frozenset("$`;|&<>\"'\\{}^")
"""Characters an endpoint never needs and a shell, or an OS's URL opener, gives a meaning."""

_QUERY: Final = re.compile(r"[A-Za-z0-9_.~%+=&-]*\Z")
"""What ``urllib.parse.urlencode`` writes (``quote_plus``): the query the SDK appends."""


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def endpoint_refusal(url: str, *, http_origin: str | None = None) -> str | None:
    """Why ``url`` may not be used as a sign-in endpoint, or None when it may (see the module doc).

    ``http_origin``: a URL (the server's, from the config) at whose origin plain http is accepted
    too: the user chose that address, and the SDK's fallbacks (``/token`` on a server without
    metadata) are built from it."""
    if not url.isascii() or not url.isprintable() or any(c.isspace() for c in url):
        return "it holds spaces, control characters or characters beyond ASCII"
    bad = sorted(SHELL_CHARACTERS.intersection(url))
    if bad:
        return f"it holds characters a shell would act on ({' '.join(bad)})"
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018  # raises ValueError for a port that is not one
    except ValueError:
        return "it is not a well-formed URL"
    scheme = parts.scheme.lower()
    if scheme not in ("https", "http"):
        return f"its scheme is {scheme + ':' if scheme else 'missing'}, not https:"
    if "@" in parts.netloc:
        return "it names a user before its host"
    host = parts.hostname
    if not host:
        return "it names no host"
    if scheme == "http" and not _is_loopback(host) and not _same_origin(parts, http_origin):
        return "it is plain http:// to a host other than this machine; only https:// is accepted"
    return None


def _same_origin(parts: urllib.parse.SplitResult, other: str | None) -> bool:
    if other is None:
        return False
    theirs = urllib.parse.urlsplit(other)
    try:
        return (parts.scheme.lower(), parts.hostname, parts.port or 80) == (
            theirs.scheme.lower(),
            theirs.hostname,
            theirs.port or 80,
        )
    except ValueError:
        return False


METADATA_ENDPOINTS: Final = ("authorization_endpoint", "token_endpoint", "registration_endpoint")
"""The endpoints of an authorization server's metadata (RFC 8414) a sign-in uses."""


def metadata_refusal(body: object) -> tuple[str, str, str] | None:
    """The first address a metadata document names that ``endpoint_refusal`` refuses, as (what it
    is, the URL, why): one of :data:`METADATA_ENDPOINTS`, or an authorization server named by
    protected resource metadata (RFC 9728). None when all may be used (or the body is no object:
    the SDK then finds no metadata in it)."""
    if not isinstance(body, dict):
        return None
    fields = cast("dict[str, object]", body)
    named: list[tuple[str, object]] = [(key.replace("_", " "), fields.get(key)) for key in METADATA_ENDPOINTS]
    servers = fields.get("authorization_servers")
    if isinstance(servers, list):
        named += [("authorization server", item) for item in cast("list[object]", servers)]
    for what, value in named:
        if isinstance(value, str) and (reason := endpoint_refusal(value)) is not None:
            return what, value, reason
    return None


class RefusedUrl(UpstreamError):
    """A server named a sign-in address the proxy will not use: nothing was sent to it and no
    browser opened (``AUTH_FAILED``). ``errors.foreign.sign_in_failure`` says it with the server's name."""

    def __init__(self, what: str, url: str, reason: str) -> None:
        self.what, self.reason = what, reason
        self.article = f"{'an' if what[0] in 'aeiou' else 'a'} {what}"
        """``what`` with its article: "an authorization endpoint"."""
        super().__init__(
            Code.AUTH_FAILED,
            f"The server's sign-in names {self.article} the proxy refuses to use ({reason}). Nothing was opened; "
            "tell the user.",
            detail=f"refused the {what} {shown(url)}: {reason}",
        )


def browser_refusal(url: str) -> str | None:
    """Why the browser may not be sent to ``url`` (an authorization endpoint and the query the
    SDK appends to it), or None when it may."""
    endpoint, mark, query = url.rpartition("?")
    if not mark:
        return endpoint_refusal(url)
    if not _QUERY.match(query):
        return "its query holds characters the proxy never writes there"
    return endpoint_refusal(endpoint)


_SECRET_PARAMETERS: Final = frozenset(
    {
        "code",
        "state",
        "code_verifier",
        "code_challenge",
        "token",
        "access_token",
        "refresh_token",
        "id_token",
        "client_secret",
        "password",
        "api_key",
        "apikey",
        "key",
        "secret",
    }
)


def shown(url: str, limit: int = 300) -> str:
    """``url`` for a log line: the values of query parameters that may be secret (a code, a state,
    a token) cut, unprintable characters escaped, at most ``limit`` characters."""
    base, mark, query = url.partition("?")
    if mark:
        pairs = [
            f"{pair.partition('=')[0]}=***"
            if pair.partition("=")[0].lower() in _SECRET_PARAMETERS and pair.partition("=")[1]
            else pair
            for pair in query.split("&")
        ]
        url = base + mark + "&".join(pairs)
    text = redact(url).encode("ascii", "backslashreplace").decode("ascii")
    text = "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)
    return text if len(text) <= limit else text[:limit] + "..."
