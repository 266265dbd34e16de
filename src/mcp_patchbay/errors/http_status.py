"""What an upstream's HTTP status means, as one of the proxy's errors: ``from_http_status``.

``errors.foreign.translate`` calls it with the status an HTTP link tied to the SDK's stand-in
error (``errors.foreign.http_status_of``), or an ``httpx`` status error's. Pure.
"""

from __future__ import annotations

from mcp_patchbay.errors.tree import Code, PatchbayError, SessionExpired, UpstreamError

__all__ = ["from_http_status", "parse_retry_after"]


def from_http_status(status: int, retry_after: str | None, *, server: str) -> PatchbayError:
    """An HTTP status seen on an upstream's transport, as an error."""
    where = f"'{server}'"
    if status in (401, 403):
        return UpstreamError(
            Code.AUTH_FAILED,
            f"Server {where} refused the proxy's credentials (HTTP {status}). Tell the user to check the "
            "server's headers or token in the patchbay config.",
            detail=f"HTTP {status}",
            server=server,
        )
    if status == 404:
        return SessionExpired(
            Code.CONNECTION_LOST,
            f"Server {where} ended the session. Retry the call.",
            detail="HTTP 404 on a request carrying a session id",
            server=server,
        )
    if status == 429:
        after = parse_retry_after(retry_after)
        wait = f" Wait {max(1, round(after / 1000))}s, then retry." if after is not None else " Wait, then retry."
        return UpstreamError(
            Code.RATE_LIMITED,
            f"Server {where} is rate limiting requests (HTTP 429).{wait}",
            detail=f"HTTP 429 retry-after={retry_after!r}",
            server=server,
            retry_after_ms=after,
        )
    if status >= 500:
        return UpstreamError(
            Code.SERVER_ERROR,
            f"Server {where} had an internal error (HTTP {status}). Retry in a little while.",
            detail=f"HTTP {status}",
            server=server,
            retry_after_ms=parse_retry_after(retry_after),
        )
    return UpstreamError(
        Code.PROTOCOL_ERROR,
        f"Server {where} answered with HTTP {status}. Tell the user to check the server's url.",
        detail=f"HTTP {status}",
        server=server,
    )


def parse_retry_after(value: str | None) -> int | None:
    """Retry-After in seconds (the HTTP-date form is rare for APIs; treated as absent)."""
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return max(0, int(seconds * 1000))
