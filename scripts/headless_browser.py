#!/usr/bin/env python3
"""A browser for sign-in tests: fetch one URL and follow its redirects, nothing more.

Point ``BROWSER`` at this file and Python's ``webbrowser.open(url)`` runs it with the URL
as its only argument (it is run as one executable, not through a shell, so ``BROWSER``
must name the file itself). An authorization server that approves at once (the MCP
conformance suite's does) answers the authorization URL with a redirect to the client's
loopback ``redirect_uri``; following it delivers the code, as a person's browser would.

Exit 0 when the last response is not an error (below 400), 1 otherwise. Every hop is
logged to stderr with its query values left out (they carry codes and state); stdout
stays empty, since a proxy serving stdio may have given us its protocol stream. Standard
library only: it runs on whatever ``python3`` is first on PATH.
"""

from __future__ import annotations

import http.cookiejar
import sys
import time
import urllib.error
import urllib.request
from email.message import Message
from urllib.parse import parse_qsl, urljoin, urlsplit

MAX_HOPS = 10
DEADLINE = 20.0
"""Seconds for the whole walk, so a server that never answers cannot hold a sign-in."""

REDIRECTS = frozenset({301, 302, 303, 307, 308})


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Hand every redirect back to the loop below, which logs it and follows it itself."""

    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def shown(url: str) -> str:
    """The URL with its query values left out."""
    parts = urlsplit(url)
    keys = "&".join(sorted({key for key, _ in parse_qsl(parts.query, keep_blank_values=True)}))
    return f"{parts.scheme}://{parts.netloc}{parts.path}" + (f"?{keys}" if keys else "")


def fetch(opener: urllib.request.OpenerDirector, url: str, timeout: float) -> tuple[int, Message]:
    try:
        with opener.open(url, timeout=timeout) as response:
            response.read()
            return response.status, response.headers
    except urllib.error.HTTPError as exc:  # 3xx (redirects are not followed here) and 4xx/5xx
        exc.read()
        return exc.code, exc.headers


def walk(url: str) -> int:
    # No proxies from the environment: the callback is on loopback.
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}),
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()),
        _NoRedirects(),
    )
    deadline = time.monotonic() + DEADLINE
    for _ in range(MAX_HOPS):
        if urlsplit(url).scheme not in ("http", "https"):
            print(f"headless_browser: cannot open {shown(url)}", file=sys.stderr)
            return 1
        left = deadline - time.monotonic()
        if left <= 0:
            print(f"headless_browser: gave up after {DEADLINE:.0f}s", file=sys.stderr)
            return 1
        try:
            status, headers = fetch(opener, url, left)
        except (OSError, ValueError) as exc:  # URLError, timeouts, refused connections, bad URLs
            print(f"headless_browser: GET {shown(url)} failed: {exc}", file=sys.stderr)
            return 1
        print(f"headless_browser: GET {shown(url)} -> {status}", file=sys.stderr)
        location = headers.get("Location")
        if status in REDIRECTS and location:
            url = urljoin(url, location)
            continue
        return 0 if status < 400 else 1
    print(f"headless_browser: more than {MAX_HOPS} redirects", file=sys.stderr)
    return 1


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: headless_browser.py URL", file=sys.stderr)
        return 2
    return walk(argv[1])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
