"""Starting upstream processes; light enough to run before the MCP SDK is imported.

Importing the SDK takes the proxy most of a second. ``prespawn`` starts every stdio
upstream first, right after the config is read, so their own start (an interpreter,
node, imports) runs beside ours on another core instead of after it. Only the process
starts early: the MCP handshake still waits for the client's ``initialize``, so the
upstream still learns what the client can do. POSIX only; elsewhere, and for every
restart, ``transports.stdio.stdio_transport`` spawns as usual.

Reading the config takes pydantic, which is itself a tenth of a second: ``upstreams.early_start``
starts the plain stdio entries before that, and keeps only what the validated config launches.

No upstream outlives the proxy. Every process ``popen`` starts leads its own process
group (``start_new_session``) and is tracked here. On POSIX a watchdog, started with the
first upstream, guards them: a ``/bin/sh`` loop (about a millisecond to start, no
interpreter) in a session of its own, reading the group ids from a pipe whose only
writer is the proxy. When the proxy ends in any way, SIGKILL included, the pipe closes
and the watchdog sends SIGTERM to every group still tracked, then SIGKILL to those left
after ``WATCHDOG_GRACE`` seconds. A group reaches the upstream's children too (``npx``
and the node it starts): only a process that leaves its group (a daemon that calls
``setsid``) escapes. This works the same on Linux and macOS; no ``PR_SET_PDEATHSIG``
(Linux only, fires when the forking *thread* exits, and reaches the direct child only,
never npx's node) and no ``preexec_fn`` (not fork-safe, and it forbids the fast
``vfork`` spawn). Windows: ``stdio`` starts upstreams through the SDK, which puts each in
a Job Object with ``JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE``: the system kills the tree when
the proxy's handle closes, which it does when the proxy dies.

An upstream's environment (``child_environment``) is the proxy's own plus its entry's ``env``,
less what the proxy holds for its own use and the entry does not name (``config.withheld``: the
gateway's tokens, client secrets, other servers' headers, ``$PATCHBAY_STATE_KEY``). ``early_start``
withholds the same names.

A server started when needed (``"start": "lazy"``, or ``patchbay.start``; ``upstreams.on_demand``) is
never started early nor prespawned: not starting it is the point.

``terminate_all`` sends SIGTERM to every tracked group at once: the proxy's first act on
SIGTERM, SIGINT or the client's end, before the orderly stop (``stdio``) waits for them.

This module imports nothing heavy (no SDK, no pydantic) on purpose.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Collection, Generator, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from typing import Any, Protocol

from mcp_patchbay.config.withheld import OWN_NAMES
from mcp_patchbay.upstreams.command_lookup import resolve_command

logger = logging.getLogger(__name__)


def child_environment(extra: Mapping[str, str] | None, withheld: Collection[str], server: str = "") -> dict[str, str]:
    """The proxy's own environment less ``withheld``, plus the entry's ``env``.

    ``withheld``: what the proxy holds for its own use and the entry does not name (``config.withheld``:
    the gateway's tokens, client secrets, ``$PATCHBAY_STATE_KEY`` ...); the rest is what users
    expect to reach their servers. The names left out are logged at DEBUG, never their values.
    """
    extra = extra or {}
    inherited = {name: value for name, value in os.environ.items() if name not in withheld or name in extra}
    if server and len(inherited) < len(os.environ):
        left_out = sorted(set(os.environ) - set(inherited))
        logger.debug("not passed to '%s' (held for the proxy's own use): %s", server, ", ".join(left_out))
    return {**inherited, **extra}


def popen(
    command: str,
    args: Sequence[str],
    env: Mapping[str, str] | None,
    cwd: str | None,
    *,
    withheld: Collection[str] = OWN_NAMES,
    server: str = "",
) -> subprocess.Popen[bytes]:
    """Start one upstream in its own session (process group), pipes on all three streams; its
    environment is ``child_environment``'s (``withheld``: a stdio entry's ``withheld``)."""
    full_env = child_environment(env, withheld, server)
    process = subprocess.Popen(
        [resolve_command(command, full_env), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=full_env,
        cwd=cwd,
        start_new_session=True,
    )
    track(process.pid)
    return process


# --- no upstream outlives the proxy ----------------------------------------------------

WATCHDOG_GRACE = 0.5
"""Seconds the watchdog gives the groups between SIGTERM and SIGKILL once the proxy is gone."""

WATCHDOG_SCRIPT = """\
trap '' HUP INT QUIT TERM PIPE
g=' '
while IFS= read -r l; do
  case $l in
    +*) g="$g${l#+} " ;;
    -*) p=${l#-}; case $g in *" $p "*) g="${g%% $p *} ${g#* $p }" ;; esac ;;
  esac
done
for p in $g; do kill -s TERM -- -"$p" 2>/dev/null; done
n=0
while [ "$n" -lt POLLS ]; do
  a=''
  for p in $g; do kill -s 0 -- -"$p" 2>/dev/null && a="$a $p"; done
  [ -z "$a" ] && exit 0
  g=$a; n=$((n+1)); sleep 0.02
done
for p in $g; do kill -s KILL -- -"$p" 2>/dev/null; done
""".replace("POLLS", str(int(WATCHDOG_GRACE / 0.02)))
"""Reads ``+PGID`` and ``-PGID`` lines until EOF (the proxy is gone), then stops what is left."""


class _Watchdog:
    """The proxy's side of the watchdog: the groups it answers for, and the pipe to the watchdog.

    Reaper threads (``discard``) untrack groups while the main thread tracks others and, at
    exit, closes the pipe: one lock orders every use of the pipe, so no thread writes to a
    descriptor another has closed (or whose number a new file has taken), and once closed
    nothing starts a watchdog again.
    """

    def __init__(self) -> None:
        self.tracked: set[int] = set()
        self.process: subprocess.Popen[bytes] | None = None
        self.fd: int | None = None
        self.held = False
        """While a batch of upstreams starts, a watchdog not yet running waits (it is told everything after)."""
        self.closed = False
        """Closed at exit: the watchdog has its last word (EOF), and no change is told any more."""
        self.lock = threading.RLock()

    @contextmanager
    def batch(self) -> Generator[None]:
        """Start several upstreams, then the watchdog: its own start delays none of them."""
        with self.lock:
            held, self.held = self.held, True
        try:
            yield
        finally:
            with self.lock:
                self.held = held
                if not held and self.fd is None and self.tracked:
                    self.tell("")

    def add(self, pid: int) -> None:
        with self.lock:
            self.tracked.add(pid)
            self.tell(f"+{pid}\n")

    def remove(self, pid: int) -> None:
        with self.lock:
            if pid in self.tracked:
                self.tracked.discard(pid)
                self.tell(f"-{pid}\n")

    def tell(self, line: str) -> None:
        if sys.platform == "win32":
            return
        with self.lock:
            if self.closed:
                return  # the proxy is exiting: the watchdog stops whatever is still running
            if self.fd is None and self.held:
                return  # started (and told everything tracked) when the batch ends
            if self.fd is None or (self.process is not None and self.process.poll() is not None):
                if not self._start():
                    return
                line = "".join(f"+{pid}\n" for pid in sorted(self.tracked))  # tracked already holds this change
            assert self.fd is not None
            try:
                os.write(self.fd, line.encode())
            except OSError:  # it died; the next change starts another with everything tracked
                os.close(self.fd)
                self.fd = None

    def _start(self) -> bool:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        read, write = os.pipe()  # not inheritable (PEP 446): no upstream holds the write end open
        try:
            self.process = subprocess.Popen(
                ["/bin/sh", "-c", WATCHDOG_SCRIPT],
                stdin=read,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a signal to the proxy's group (Ctrl-C, killpg) spares it
            )
        except OSError as exc:
            os.close(write)
            logger.warning("could not start the watchdog that stops upstreams if the proxy dies: %s", exc)
            return False
        finally:
            os.close(read)
        self.fd = write
        atexit.register(self.close)
        return True

    def close(self) -> None:
        """At a normal exit: the watchdog stops what is still tracked (normally nothing) and ends."""
        with self.lock:  # after any write in progress (a reaper's), and no other after it
            self.closed = True
            if self.fd is not None:
                os.close(self.fd)
                self.fd = None
            process = self.process
        if process is not None:
            with suppress(subprocess.TimeoutExpired):
                process.wait(WATCHDOG_GRACE + 0.5)


_WATCHDOG = _Watchdog()


def batch() -> AbstractContextManager[None]:
    """Start several upstreams, then the watchdog: its own start delays none of them."""
    return _WATCHDOG.batch()


def track(pid: int) -> None:
    """The group ``pid`` leads is the proxy's until ``untrack``: the watchdog stops it if the proxy dies."""
    _WATCHDOG.add(pid)


def untrack(pid: int) -> None:
    """The group is stopped (or was never started); the watchdog forgets it."""
    _WATCHDOG.remove(pid)


def tracked() -> frozenset[int]:
    """The process groups the proxy still answers for."""
    with _WATCHDOG.lock:
        return frozenset(_WATCHDOG.tracked)


def terminate_all() -> None:
    """SIGTERM to every tracked group, now: the first step of the proxy's own shutdown."""
    if sys.platform == "win32":
        return
    for pid in tracked():
        try:
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        except PermissionError:
            logger.debug("no permission to signal process group %d", pid)


class SpawnEntry(Protocol):
    """What ``prespawn`` and ``settle`` need of a config entry (``config.ServerEntry``)."""

    @property
    def name(self) -> str: ...

    @property
    def spec(self) -> Any: ...


class Prespawned:
    r"""The processes started before the SDK was imported, by server name: the one owner of them.

    Made by the CLI from ``early`` and ``prespawn``; an upstream's first connection ``take``\s
    its own (``transports.stdio`` adopts it), and a process nobody takes is stopped: when its
    entry is not started (``keep_only``), when its upstream stops before connecting
    (``discard``), and, for the last word, everything still alive when serving ends (``stop_all``).
    """

    def __init__(self, processes: dict[str, subprocess.Popen[bytes]] | None = None) -> None:
        self._waiting = dict(processes or {})
        self._all = dict(self._waiting)

    def __len__(self) -> int:
        return len(self._waiting)

    def take(self, name: str) -> subprocess.Popen[bytes] | None:
        """The process started for ``name``, once: the caller now owns it."""
        return self._waiting.pop(name, None)

    def discard(self, name: str) -> None:
        process = self._waiting.pop(name, None)
        if process is not None:
            discard({name: process})

    def keep_only(self, names: Iterable[str]) -> None:
        """Stop the processes of entries that are not started (removed, disabled, invalid)."""
        wanted = set(names)
        discard({name: self._waiting.pop(name) for name in list(self._waiting) if name not in wanted})

    def stop_all(self) -> None:
        """The last word: every process started here, adopted or not, is stopped if still alive."""
        self._waiting.clear()
        discard(self._all)


def starts_now(entry: SpawnEntry, default_start: str) -> bool:
    """Whether a validated entry's server starts with the proxy: not lazy (its ``start``, else
    ``patchbay.start``, ``default_start``). Only those are prespawned, or kept by ``settle``."""
    return (getattr(entry.spec, "start", None) or default_start) != "lazy"


def prespawn(
    entries: Iterable[SpawnEntry], started: dict[str, subprocess.Popen[bytes]] | None = None
) -> dict[str, subprocess.Popen[bytes]]:
    """Start every runnable stdio entry not in ``started`` yet; what cannot start is left to the normal path."""
    started = dict(started or {})
    if sys.platform == "win32":
        return started
    with batch():
        _prespawn(entries, started)
    return started


def _prespawn(entries: Iterable[SpawnEntry], started: dict[str, subprocess.Popen[bytes]]) -> None:
    for entry in entries:
        spec = entry.spec
        if spec is None or spec.transport != "stdio" or spec.disabled:
            continue
        name = entry.name
        if name in started:
            continue
        try:
            started[name] = popen(spec.command, spec.args, spec.env, spec.cwd, withheld=spec.withheld, server=name)
        except (OSError, ValueError) as exc:
            logger.debug("could not prespawn '%s' (%s); it will be started the usual way", name, exc)


def discard(processes: dict[str, subprocess.Popen[bytes]]) -> None:
    """Stop prespawned processes nobody adopted (their entry was removed, or the proxy is ending).

    SIGTERM to the group now; a reaper thread forgets it once it exits, and until then the
    watchdog sends SIGKILL if it outlives the proxy. A group whose leader is already gone is
    signalled only while still tracked: once reaped and untracked (its transport stopped it),
    its number may belong to someone else's group.
    """
    for process in processes.values():
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except OSError:
                process.kill()
            threading.Thread(target=_reap, args=(process,), daemon=True, name="patchbay-reap").start()
        elif process.pid in _WATCHDOG.tracked:
            with suppress(OSError):
                os.killpg(process.pid, signal.SIGKILL)  # the leader is gone; so is anything it left
            untrack(process.pid)
        for pipe in (process.stdin, process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
    processes.clear()


def _reap(process: subprocess.Popen[bytes]) -> None:
    """Wait for a discarded process, then forget its group (so its number is never signalled again)."""
    with suppress(Exception):
        process.wait()
    untrack(process.pid)
