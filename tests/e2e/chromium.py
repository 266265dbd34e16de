"""Debian's Chromium for the end-to-end tests that drive a page with Playwright (no browser
download), and what those tests share around it.

- ``CHROMIUM``, ``CHROMIUM_ARGS``, ``launch_options``: the one way a test (or
  ``scripts/ui-screenshots``) launches it, sync or async: ``playwright.chromium.launch(**launch_options())``.
- ``skip_without_chromium``: a module-level skip naming what installs what is missing (the
  Playwright package, or ``/usr/bin/chromium``; ``PLAYWRIGHT_MISSING`` for a module whose
  import of Playwright failed first). The ``chromium`` fixture (``conftest``) is a
  sync browser for a whole module.
- ``static_site``: a folder served on 127.0.0.1 at a port of its own, so a page comes from an
  origin other than the server under test (CORS, a form posted from another site).

Standard library only at import: Playwright is imported by whoever drives the page.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
"""Debian's Chromium (``apt-get install -y chromium``; ``.ci/run`` installs it)."""
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PLAYWRIGHT_MISSING = "playwright missing: run scripts/install"
STOP_WITHIN = 10.0
"""Seconds for a static site's thread to end once it is shut down."""


def chromium_missing() -> str | None:
    """Why no page can be driven here (with what installs it), or None."""
    if importlib.util.find_spec("playwright") is None:
        return PLAYWRIGHT_MISSING
    if not CHROMIUM.exists():
        return f"no {CHROMIUM}: apt-get install -y chromium (.ci/run does)"
    return None


def skip_without_chromium() -> None:
    """Skip the calling test module when ``chromium_missing`` says why."""
    if (why := chromium_missing()) is not None:
        pytest.skip(why, allow_module_level=True)


def launch_options() -> dict[str, Any]:
    """Keyword arguments of Playwright's ``chromium.launch`` (sync or async) for Debian's Chromium."""
    return {"executable_path": str(CHROMIUM), "args": CHROMIUM_ARGS}


@contextmanager
def static_site(folder: Path) -> Iterator[str]:
    """``folder`` served on 127.0.0.1 at a port of its own, quietly; yields the origin."""

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=STOP_WITHIN)
