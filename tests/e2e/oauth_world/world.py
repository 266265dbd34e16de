"""The OAuth world the end-to-end sign-in tests run in, all on loopback:

- ``authorization_server.mjs``: panva's oidc-provider (dynamic registration, PKCE S256
  required, RFC 8707 resource indicators with JWT access tokens, refresh tokens, interactions
  that approve at once, or deny with ``deny=True``),
- ``mcp_server.py``: an MCP server on the SDK that accepts only that server's tokens for
  its own URL (tools ``whoami`` and ``echo``),
- a headless browser for ``BROWSER``: ``tests/fixtures/headless_browser.py`` (fetches the URL and
  follows redirects with cookies, as a person's browser would once they approved), behind a
  small executable that first records each URL it is given, so a test can count openings.

Each server picks a free port and announces itself with one JSON line on stdout; ``start``
waits for that line (bounded), so nothing waits on a sleep. Both servers write one JSON line
per request they care about to an events file (never a token): ``World.events``.
"""

from __future__ import annotations

import io
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
AUTHORIZATION_SERVER = HERE / "authorization_server.mjs"
MCP_SERVER = HERE / "mcp_server.py"
HEADLESS_BROWSER = ROOT / "tests" / "fixtures" / "headless_browser.py"
OIDC_PROVIDER = ROOT / "tests" / "e2e" / "node_modules" / "oidc-provider"
NODE = shutil.which("node")
START_WITHIN = 60.0
STOP_WITHIN = 10.0


def missing() -> str | None:
    """Why the world cannot run here, or None."""
    if NODE is None:
        return "node not found"
    if not (OIDC_PROVIDER / "package.json").exists():
        return "oidc-provider missing from tests/e2e/node_modules: run scripts/install"
    if not HEADLESS_BROWSER.exists():
        return "tests/fixtures/headless_browser.py missing"
    return None


class Announced:
    """A server process that said where it listens with one JSON line on stdout."""

    def __init__(self, command: list[str], stderr: Path, within: float = START_WITHIN) -> None:
        self.stderr_path = stderr
        self._stderr = stderr.open("wb")
        self.process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._stderr, cwd=ROOT
        )
        try:
            self.announced: dict[str, Any] = json.loads(self._first_line(within))
        except BaseException:
            self.stop()
            raise
        # Anything it writes later is read and dropped, so it never blocks on a full pipe.
        self._drainer = threading.Thread(target=self._drain, daemon=True)
        self._drainer.start()

    def _first_line(self, within: float) -> bytes:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = time.monotonic() + within
        line = b""
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError(f"no announcement within {within}s: {self._tail()}")
            chunk = os.read(fd, 1)
            if not chunk:
                self.process.wait(timeout=STOP_WITHIN)
                raise RuntimeError(f"exited with {self.process.returncode} before announcing: {self._tail()}")
            line += chunk
        return line

    def _drain(self) -> None:
        stdout: IO[bytes] | None = self.process.stdout
        if stdout is not None:
            with stdout:
                while cast(io.BufferedReader, stdout).read1(4096):  # Popen's stdout, unbuffered=False
                    pass

    def _tail(self) -> str:
        self._stderr.flush()
        return self.stderr_path.read_text(errors="replace")[-2000:]

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it is still there after STOP_WITHIN seconds."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=STOP_WITHIN)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=STOP_WITHIN)
        drainer = getattr(self, "_drainer", None)
        if drainer is not None:
            drainer.join(timeout=STOP_WITHIN)  # stdout ends with the process (unless it left children)
        elif self.process.stdout is not None:
            self.process.stdout.close()
        self._stderr.close()


@dataclass
class World:
    tmp: Path
    issuer: str
    url: str
    authorization_server: Announced
    mcp_server: Announced
    auth_events: Path
    mcp_events: Path

    def events(self, event: str | None = None) -> list[dict[str, Any]]:
        """What the authorization server recorded (authorization, resume, interaction, token, registration)."""
        return _read_events(self.auth_events, event)

    def token_grants(self) -> list[str]:
        """The grant types of the token requests the authorization server answered with success."""
        return [e["grant_type"] for e in self.events("token") if e["status"] == 200]

    def mcp_requests(self) -> list[dict[str, Any]]:
        return _read_events(self.mcp_events, "mcp")

    def approve(self) -> None:
        """The person approves one consent (``hold_consent=True``): the one waiting, or the next."""
        request = urllib.request.Request(f"{self.issuer}/e2e/approve", method="POST")
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(request, timeout=10) as response:
            assert response.status == 204, response.status

    def stop_authorization_server(self) -> None:
        self.authorization_server.stop()


def _read_events(path: Path, event: str | None) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [row for row in rows if event is None or row["event"] == event]


@contextmanager
def running_world(
    tmp: Path,
    *,
    access_token_ttl: int = 3600,
    deny: bool = False,
    hold_consent: bool = False,
    client: tuple[str, str] | None = None,
) -> Iterator[World]:
    """The authorization server and the MCP server it protects, stopped on the way out.

    ``deny``: the person declines every sign-in. ``hold_consent``: each consent page answers
    only after a ``World.approve()`` (a person taking their time). ``client``: (id, secret)
    of a client registered beforehand (confidential, any loopback redirect port)."""
    assert NODE is not None
    tmp.mkdir(parents=True, exist_ok=True)
    auth_events, mcp_events = tmp / "authorization-server.events", tmp / "mcp-server.events"
    command = [NODE, str(AUTHORIZATION_SERVER), "--events", str(auth_events)]
    command += ["--access-token-ttl", str(access_token_ttl)]
    command += [*(["--deny"] if deny else []), *(["--hold-consent"] if hold_consent else [])]
    if client is not None:
        command += ["--client-id", client[0], "--client-secret", client[1]]
    authorization = Announced(command, tmp / "authorization-server.stderr")
    try:
        issuer = authorization.announced["issuer"]
        command = [sys.executable, str(MCP_SERVER), "--issuer", issuer, "--events", str(mcp_events)]
        mcp = Announced(command, tmp / "mcp-server.stderr")
        try:
            yield World(tmp, issuer, mcp.announced["url"], authorization, mcp, auth_events, mcp_events)
        finally:
            mcp.stop()
    finally:
        authorization.stop()


def browser(tmp: Path, *, background: bool = False) -> Path:
    """An executable for ``BROWSER``: records the URL in ``tmp/browser.urls``, then runs the
    headless browser on it (``webbrowser`` runs ``BROWSER`` as one executable with the URL
    as its argument, without a shell, so the interpreter cannot be named in the variable).

    ``background``: return at once and browse meanwhile, as a desktop browser does (what a
    person who takes their time on the consent page needs; the headless browser gives up
    after 20 s by itself)."""
    path = tmp / "browser"
    urls = tmp / "browser.urls"
    run = f"'{sys.executable}' '{HEADLESS_BROWSER}' \"$@\""
    run = f"{run} < /dev/null >> '{tmp / 'browser.out'}' 2>&1 &" if background else f"exec {run}"
    path.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$1\" >> '{urls}'\n{run}\n")
    path.chmod(0o755)
    return path


def browser_urls(tmp: Path) -> list[str]:
    """The URLs the browser from ``browser(tmp)`` was opened on, in order."""
    path = tmp / "browser.urls"
    return path.read_text().splitlines() if path.exists() else []
