"""Three gateway replicas behind a real HAProxy, clients of both eras, one replica SIGKILLed mid-run.

    scripts/replicas [--duration 20] [--kill-at 6] [--term-at 0] [--legacy 4] [--modern 4] [--json FILE]

Starts, on loopback ports picked at random:

- ``--replicas`` (3) replicas of ``mcp-patchbay serve --http 127.0.0.1:PORT --config CONFIG``,
  all on one config whose one upstream is benchmarks/replicas_upstream.py over stdio (each
  replica starts its own; its answers name the replica);
- HAProxy (Debian's package) with deploy/haproxy/haproxy.cfg as it is, its addresses given
  through the environment variables the file reads (or, with ``--balancer nginx``, nginx with
  deploy/nginx/patchbay.conf, its ports rewritten);

waits until every replica's ``/readyz`` answers 200 and HAProxy sees them all up (bounded),
then drives calls through HAProxy from SDK clients of both eras (benchmarks/replicas_clients.py)
for ``--duration`` seconds. At ``--kill-at`` it SIGKILLs one replica (``--kill``, r2); with
``--term-at`` it also sends SIGTERM to another (``--term``, r3) to watch it drain. Every call
and every client opening is bounded by ``--call-timeout``: one that runs past it is a hang.

Prints what every call got, per era: ok results, isError results, errors the client saw
(transport or JSON-RPC), hangs, wrong answers; what calls in flight at the kill got; how long
until new calls succeeded again; which replicas served whom (stateless requests spread,
sessions stick). ``--json FILE`` writes all of it, every call included.

Each upstream writes down every call it receives (its ledger, benchmarks/replicas_upstream.py),
so a failed call is judged by where it went: lost in flight on the killed replica (it began
before the replica was gone, and reached it or no replica at all: expected), lost with its
2025-era session (the session lived on it: expected), or a new-call failure (begun after the
replica was gone, or having reached a live replica): see benchmarks/replicas_report.py.

Exit status 1 when a call or opening hung, an answer was wrong, a session's calls were
served by two replicas, a call reached an upstream twice (it was sent again), a new call or
client opening failed around a kill, or new calls did not all succeed again within
``--recover-within`` seconds of the kill; 2 when the replicas or HAProxy could not be
started. Every process it starts is stopped on the way out, Ctrl-C included; the run's files
(config, logs, the upstreams' ledgers) are kept with ``--keep``.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import logging
import math
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import anyio
import httpx2
from tests.processes import free_ports, has_environ, pids, running

from benchmarks import replicas_report
from benchmarks.replicas_clients import LEGACY, MODERN, Plan, Record, worker

ROOT = Path(__file__).resolve().parent.parent
HAPROXY_CFG = ROOT / "deploy" / "haproxy" / "haproxy.cfg"
NGINX_CONF = ROOT / "deploy" / "nginx" / "patchbay.conf"
UPSTREAM = ROOT / "benchmarks" / "replicas_upstream.py"
DEFAULT_GATEWAY = shlex.quote(str(ROOT / ".venv" / "bin" / "mcp-patchbay")) + " serve --http {addr} --config {config}"
SERVER = "fast"
"""The upstream's name in the config: its tools are ``fast__echo``, ``fast__sleep``, ``fast__ask``."""


class StartupFailed(Exception):
    """The replicas or HAProxy did not come up; the message says which and why."""


# ---- processes ---------------------------------------------------------------------------------


@dataclass
class Processes:
    """Every process this run starts, each in its own session, and their stop on the way out.

    Children are found again by ``PATCHBAY_REPLICAS_RUN`` in their environment (the replicas
    pass it to their upstreams through the config), so an upstream that outlived its replica
    is stopped too.
    """

    run_id: str
    directory: Path
    started: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict[str, "subprocess.Popen[bytes]"])

    def start(self, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        log = (self.directory / f"{name}.log").open("wb")
        try:
            process = subprocess.Popen(
                argv, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        finally:
            log.close()
        self.started[name] = process
        return process

    @property
    def ledger(self) -> Path:
        """The folder where each replica's upstream names the calls it received (``REPLICA.calls``)."""
        return self.directory / "ledger"

    def reached(self) -> dict[str, list[str]]:
        """Call text -> the replicas whose upstream received it, once per receipt."""
        seen: dict[str, list[str]] = {}
        for path in sorted(self.ledger.glob("*.calls")):
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                seen.setdefault(line, []).append(path.stem)
        return seen

    def log_tail(self, name: str, lines: int = 15) -> str:
        path = self.directory / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def ours(self) -> list[int]:
        """Processes whose environment carries this run's id (replicas, their upstreams)."""
        marker = f"PATCHBAY_REPLICAS_RUN={self.run_id}"
        return [pid for pid in pids() if pid != os.getpid() and has_environ(pid, marker)]

    def upstreams_of(self, replica: str) -> list[int]:
        marker = f"PATCHBAY_REPLICA={replica}"
        started = {p.pid for p in self.started.values()}
        return [pid for pid in self.ours() if has_environ(pid, marker) and pid not in started]

    def stop_all(self) -> None:
        alive = [p for p in self.started.values() if p.poll() is None]
        for process in alive:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGCONT)  # a frozen replica (--kill-signal STOP) too
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        for process in alive:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
        for process in self.started.values():
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=2)
        for pid in self.ours():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def find_binary(name: str, given: str | None) -> str:
    """``haproxy`` or ``nginx``: the option, ``$HAPROXY``/``$NGINX``, PATH, /usr/sbin, or unpacked in .cache/NAME."""
    for candidate in (
        given,
        os.environ.get(name.upper()),
        shutil.which(name),
        f"/usr/sbin/{name}",
        str(ROOT / ".cache" / name / "usr" / "sbin" / name),
    ):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise StartupFailed(
        f"{name} not found: apt-get install {name} (Debian's package), or without root "
        f"`apt-get download {name} && dpkg -x {name}_*.deb .cache/{name}` (its libraries must be there), "
        f"or --{name} PATH"
    )


# ---- setup -------------------------------------------------------------------------------------


@dataclass
class Setup:
    names: list[str]
    ports: dict[str, int]  # replica name -> port
    metrics: dict[str, int]  # replica name -> its /metrics listener's port (gateway.metrics)
    front: int
    stats: int
    tokens: list[str]
    config: Path
    balancer: str  # haproxy | nginx
    balancer_version: str

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.front}/mcp"

    @property
    def stats_url(self) -> str:
        return f"http://127.0.0.1:{self.stats}/stats;csv"


def write_config(path: Path, front: int, drain_grace: float, tokens: int) -> None:
    gateway: dict[str, Any] = {
        # The address clients use is the load balancer's: Host checks and metadata follow it.
        "url": f"http://127.0.0.1:{front}/mcp",
        "allowed_hosts": [f"127.0.0.1:{front}", f"localhost:{front}"],
        # One key for every replica: a requestState sealed by one opens on any.
        "request_state_keys": ["${PATCHBAY_STATE_KEY}"],
        "drain_grace": drain_grace,
        # /metrics on a listener of its own, never the clients': each replica's port from its environment.
        "metrics": "127.0.0.1:${PATCHBAY_METRICS_PORT}",
    }
    if tokens:
        # One token per client, as a team's members each have their own.
        gateway["tokens"] = {f"member{i}": f"${{PATCHBAY_REPLICAS_TOKEN_{i}}}" for i in range(tokens)}
    config = {
        "mcpServers": {
            SERVER: {
                "command": sys.executable,
                "args": [str(UPSTREAM)],
                "env": {
                    "PATCHBAY_REPLICA": "${PATCHBAY_REPLICA}",
                    "PATCHBAY_REPLICAS_RUN": "${PATCHBAY_REPLICAS_RUN}",
                    "PATCHBAY_REPLICAS_LEDGER": "${PATCHBAY_REPLICAS_LEDGER}",
                },
            }
        },
        "patchbay": {"startup_wait": 20},
        "gateway": gateway,
    }
    path.write_text(json.dumps(config, indent=2) + "\n")


def start(args: argparse.Namespace, processes: Processes) -> Setup:
    if args.replicas != 3:
        raise StartupFailed("deploy/haproxy/haproxy.cfg and deploy/nginx/patchbay.conf name three replicas")
    binary = find_binary(args.balancer, args.haproxy if args.balancer == "haproxy" else args.nginx)
    flag = "-v"
    probe = subprocess.run([binary, flag], capture_output=True, text=True, timeout=10, check=False)
    version = (probe.stdout or probe.stderr).split("\n", 1)[0].strip()
    names = [f"r{i}" for i in range(1, args.replicas + 1)]
    count = args.replicas
    *ports, front, stats = free_ports(2 * count + 2)  # one call: no port handed out twice
    replica_ports, metrics_ports = ports[:count], ports[count:]
    clients = args.legacy + args.modern
    tokens = [] if args.no_token else [secrets.token_urlsafe(32) for _ in range(clients)]
    setup = Setup(
        names=names,
        ports=dict(zip(names, replica_ports, strict=True)),
        metrics=dict(zip(names, metrics_ports, strict=True)),
        front=front,
        stats=stats,
        tokens=tokens,
        config=processes.directory / "config.json",
        balancer=args.balancer,
        balancer_version=version,
    )
    write_config(setup.config, front, args.drain_grace, len(tokens))

    base = {k: v for k, v in os.environ.items() if not k.startswith("PATCHBAY_")}
    base["PATCHBAY_REPLICAS_RUN"] = processes.run_id
    processes.ledger.mkdir()
    base["PATCHBAY_REPLICAS_LEDGER"] = str(processes.ledger)
    base["PATCHBAY_STATE_KEY"] = secrets.token_urlsafe(48)
    base |= {f"PATCHBAY_REPLICAS_TOKEN_{i}": token for i, token in enumerate(tokens)}
    for name in names:
        argv = shlex.split(args.gateway.format(addr=f"127.0.0.1:{setup.ports[name]}", config=setup.config))
        argv += ["--log-file", str(processes.directory / f"{name}.detail.log")]
        processes.start(
            name, argv, {**base, "PATCHBAY_REPLICA": name, "PATCHBAY_METRICS_PORT": str(setup.metrics[name])}
        )
    if args.balancer == "haproxy":
        start_haproxy(binary, setup, processes)
    else:
        start_nginx(binary, setup, processes, args.nginx_hash)
    return setup


def start_haproxy(binary: str, setup: Setup, processes: Processes) -> None:
    """deploy/haproxy/haproxy.cfg as it is, its addresses from the environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHBAY_")}
    env |= {"PATCHBAY_LISTEN": f"127.0.0.1:{setup.front}", "PATCHBAY_STATS": f"127.0.0.1:{setup.stats}"}
    env |= {f"PATCHBAY_R{i}": f"127.0.0.1:{setup.ports[name]}" for i, name in enumerate(setup.names, 1)}
    check = subprocess.run(
        [binary, "-c", "-q", "-f", str(HAPROXY_CFG)], env=env, capture_output=True, text=True, timeout=10, check=False
    )
    if check.returncode != 0:
        raise StartupFailed(f"haproxy -c refused {HAPROXY_CFG}:\n{check.stdout}{check.stderr}")
    processes.start("balancer", [binary, "-db", "-f", str(HAPROXY_CFG)], env)


def start_nginx(binary: str, setup: Setup, processes: Processes, hash_key: str | None) -> None:
    """deploy/nginx/patchbay.conf with this run's ports (and, if asked, another hash key) inside a
    minimal nginx.conf whose files all live in the run's folder."""
    directory = processes.directory
    snippet = NGINX_CONF.read_text()
    snippet = snippet.replace("listen 127.0.0.1:8080;", f"listen 127.0.0.1:{setup.front};")
    for i, name in enumerate(setup.names, 1):
        snippet = snippet.replace(f"server 127.0.0.1:{8080 + i} ", f"server 127.0.0.1:{setup.ports[name]} ")
    if hash_key is not None:
        line = f"    hash {hash_key} consistent;\n" if hash_key else ""
        snippet = re.sub(r"^    hash .*;\n", lambda _: line, snippet, count=1, flags=re.MULTILINE)
    (directory / "patchbay.conf").write_text(snippet)
    temp = directory / "nginx-temp"
    temp.mkdir()
    (directory / "nginx.conf").write_text(
        f"daemon off;\nworker_processes 1;\npid {directory}/nginx.pid;\nerror_log {directory}/balancer.log notice;\n"
        "events { worker_connections 4096; }\n"
        f"http {{\n    access_log {directory}/nginx-access.log;\n"
        + "".join(
            f"    {kind}_temp_path {temp}/{kind};\n" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        )
        + f"    include {directory}/patchbay.conf;\n}}\n"
    )
    argv = [binary, "-p", str(directory), "-c", str(directory / "nginx.conf"), "-e", str(directory / "balancer.log")]
    check = subprocess.run([*argv, "-t", "-q"], capture_output=True, text=True, timeout=10, check=False)
    if check.returncode != 0:
        raise StartupFailed(f"nginx -t refused {NGINX_CONF}:\n{check.stdout}{check.stderr}")
    processes.start("balancer", argv, dict(os.environ))


def _get(url: str, timeout: float = 2.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, ""
    except OSError:
        return 0, ""


def haproxy_states(stats_url: str) -> dict[str, str]:
    status, body = _get(stats_url)
    if status != 200:
        return {}
    rows = csv.DictReader(io.StringIO(body.lstrip("# ")))
    return {row["svname"]: row["status"] for row in rows if row.get("pxname") == "patchbay"}


def wait_ready(setup: Setup, processes: Processes, timeout: float) -> float:
    """Seconds until every replica answered /readyz 200 and the load balancer saw them all up
    (HAProxy's stats; nginx has no active checks: its port answering)."""
    began = time.monotonic()
    deadline = began + timeout
    pending = set(setup.names)
    while pending:
        for name in sorted(pending):
            process = processes.started[name]
            if process.poll() is not None:
                raise StartupFailed(f"replica {name} exited with {process.returncode}:\n{processes.log_tail(name)}")
            if _get(f"http://127.0.0.1:{setup.ports[name]}/readyz", timeout=1)[0] == 200:
                pending.discard(name)
        if processes.started["balancer"].poll() is not None:
            raise StartupFailed(f"{setup.balancer} exited:\n{processes.log_tail('balancer')}")
        if pending and time.monotonic() > deadline:
            tails = "\n".join(f"--- {n}:\n{processes.log_tail(n)}" for n in sorted(pending))
            raise StartupFailed(f"not ready within {timeout:g} s: {', '.join(sorted(pending))}\n{tails}")
        if pending:
            time.sleep(0.1)
    while True:
        if setup.balancer == "haproxy":
            states = haproxy_states(setup.stats_url)
            if states and all(states.get(n, "").startswith("UP") for n in setup.names):
                return time.monotonic() - began
        else:
            states = {}
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", setup.front), timeout=1):
                return time.monotonic() - began
        if processes.started["balancer"].poll() is not None:
            raise StartupFailed(f"{setup.balancer} exited:\n{processes.log_tail('balancer')}")
        if time.monotonic() > deadline:
            raise StartupFailed(f"{setup.balancer} does not see every replica up within {timeout:g} s: {states}")
        time.sleep(0.1)


# ---- the run -----------------------------------------------------------------------------------


@dataclass
class Event:
    kind: str  # SIGKILL | SIGTERM
    replica: str
    at: float  # seconds from the drive's start
    notes: dict[str, Any] = field(default_factory=dict[str, Any])


@dataclass
class Run:
    record: Record = field(default_factory=Record)
    events: list[Event] = field(default_factory=list[Event])
    transitions: list[tuple[float, str, str, str]] = field(default_factory=list[tuple[float, str, str, str]])
    after: dict[str, Any] = field(default_factory=dict[str, Any])


async def monitor_haproxy(setup: Setup, t0: float, run: Run) -> None:
    last: dict[str, str] = {}
    async with httpx2.AsyncClient(timeout=1.0) as http:
        while True:
            with contextlib.suppress(httpx2.HTTPError):
                response = await http.get(setup.stats_url)
                rows = csv.DictReader(io.StringIO(response.text.lstrip("# ")))
                for row in rows:
                    if row.get("pxname") != "patchbay" or row["svname"] not in setup.ports:
                        continue
                    state = row["status"]
                    if last.get(row["svname"]) != state:
                        if row["svname"] in last:
                            run.transitions.append((time.monotonic() - t0, row["svname"], last[row["svname"]], state))
                        last[row["svname"]] = state
            await anyio.sleep(0.1)


async def kill_replica(event: Event, setup: Setup, processes: Processes, t0: float) -> None:
    await anyio.sleep(max(0.0, t0 + event.at - time.monotonic()))
    process = processes.started[event.replica]
    upstreams = processes.upstreams_of(event.replica)
    event.at = time.monotonic() - t0
    # The replica alone, as a crash (or, SIGSTOP, a freeze): not its process group.
    os.kill(process.pid, signal.Signals[event.kind])
    event.notes["upstream_pids"] = upstreams
    if event.kind != "SIGKILL":
        return
    # A killed process lives on for some milliseconds (the kernel frees its memory, then closes
    # its sockets): a connection made meanwhile is accepted, and its request lost with the calls
    # in flight. Reaped means gone, sockets closed: from then on a connection to it is refused.
    reaped = await anyio.to_thread.run_sync(_reaped_at, process)
    event.notes["gone_after"] = round(reaped - t0 - event.at, 4)
    # The replica's stdio upstream must not outlive it (the proxy's watchdog stops it).
    began = time.monotonic()
    while time.monotonic() - began < 10:
        if not any(running(pid) for pid in upstreams):
            event.notes["upstream_gone_after"] = round(time.monotonic() - began, 3)
            break
        await anyio.sleep(0.05)
    else:
        event.notes["upstream_gone_after"] = None


def _reaped_at(process: subprocess.Popen[bytes]) -> float:
    """When the process ended, read in the thread that waits for it (the event loop may lag)."""
    process.wait()
    return time.monotonic()


async def term_replica(event: Event, setup: Setup, processes: Processes, t0: float) -> None:
    await anyio.sleep(max(0.0, t0 + event.at - time.monotonic()))
    process = processes.started[event.replica]
    event.at = time.monotonic() - t0
    os.kill(process.pid, signal.SIGTERM)
    began = time.monotonic()
    url = f"http://127.0.0.1:{setup.ports[event.replica]}/readyz"
    async with httpx2.AsyncClient(timeout=1.0) as http:
        while time.monotonic() - began < 60 and process.poll() is None:
            if "readyz_draining_after" not in event.notes:
                with contextlib.suppress(httpx2.HTTPError):
                    if (await http.get(url)).status_code == 404:  # draining
                        event.notes["readyz_draining_after"] = round(time.monotonic() - began, 3)
            await anyio.sleep(0.05)
    event.notes["exit_code"] = process.poll()
    event.notes["exited_after"] = round(time.monotonic() - began, 3) if process.poll() is not None else None


async def drive(args: argparse.Namespace, setup: Setup, processes: Processes) -> tuple[Run, float]:
    run = Run()
    t0 = time.monotonic()
    plan = Plan(
        url=setup.url,
        tokens=setup.tokens,
        legacy_workers=args.legacy,
        call_timeout=args.call_timeout,
        end_at=args.duration,
        clock=lambda: time.monotonic() - t0,
        session_calls=args.session_calls,
        sleep_share=args.sleep_share,
        progress_share=args.progress_share,
        ask_share=args.ask_share,
        tool_prefix=f"{SERVER}__",
        seed=args.seed,
    )
    if args.kill_at > 0:
        run.events.append(Event(f"SIG{args.kill_signal}", args.kill, args.kill_at))
    if args.term_at > 0:
        run.events.append(Event("SIGTERM", args.term, args.term_at))
    # Past this, whatever still runs is cancelled and counted as hung: the run always ends.
    watchdog = args.duration + args.call_timeout + 15
    with anyio.move_on_after(watchdog):
        async with anyio.create_task_group() as outer:
            if setup.balancer == "haproxy":
                outer.start_soon(monitor_haproxy, setup, t0, run)
            async with anyio.create_task_group() as tg:
                for event in run.events:
                    action = term_replica if event.kind == "SIGTERM" else kill_replica
                    tg.start_soon(action, event, setup, processes, t0)
                for index in range(args.legacy):
                    tg.start_soon(worker, LEGACY, index, plan, run.record)
                for index in range(args.modern):
                    tg.start_soon(worker, MODERN, index, plan, run.record)
            await anyio.sleep(0.3)  # the last HAProxy state changes
            outer.cancel_scope.cancel()
    elapsed = time.monotonic() - t0
    for call in run.record.calls:
        if math.isnan(call.end):
            call.end, call.outcome, call.detail = elapsed, "hang", "still running when the run ended"
    for opening in run.record.openings:
        if opening.outcome == "":
            opening.end, opening.outcome, opening.detail = elapsed, "hang", "still opening when the run ended"

    reached = processes.reached()
    for call in run.record.calls:
        call.reached = reached.get(call.serial, [])

    for name in setup.names:
        if processes.started[name].poll() is None:
            health = _get(f"http://127.0.0.1:{setup.ports[name]}/healthz")[0]
            metrics_status, metrics = _get(f"http://127.0.0.1:{setup.metrics[name]}/metrics")
            samples = sum(1 for line in metrics.splitlines() if line and not line.startswith("#"))
            run.after[name] = {"healthz": health, "metrics": metrics_status, "metric_samples": samples}
        else:
            run.after[name] = {"exit_code": processes.started[name].returncode}
    return run, elapsed


# ---- main --------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replicas", type=int, default=3, help="gateway replicas (the HAProxy file names 3)")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of calls (default 20)")
    parser.add_argument("--kill-at", type=float, default=6.0, help="SIGKILL --kill at this second (0: never)")
    parser.add_argument("--kill", default="r2", help="the replica to SIGKILL (default r2)")
    parser.add_argument(
        "--kill-signal",
        choices=("KILL", "STOP"),
        default="KILL",
        help="KILL (a crash, the default) or STOP (a frozen replica: its connections stay open)",
    )
    parser.add_argument("--term-at", type=float, default=0.0, help="SIGTERM --term at this second (default: never)")
    parser.add_argument("--term", default="r3", help="the replica to SIGTERM (default r3)")
    parser.add_argument("--legacy", type=int, default=4, help="2025-11-25 clients (sessions; default 4)")
    parser.add_argument("--modern", type=int, default=4, help="2026-07-28 clients (stateless; default 4)")
    parser.add_argument("--session-calls", type=int, default=25, help="calls per 2025-era session (default 25)")
    parser.add_argument("--sleep-share", type=float, default=0.3, help="share of calls to the slow tool (0.05-0.4 s)")
    parser.add_argument(
        "--progress-share",
        type=float,
        default=0.5,
        help="share of slow-tool calls that ask for progress: answered as an SSE stream from the start (default 0.5)",
    )
    parser.add_argument(
        "--ask-share",
        type=float,
        default=0.0,
        help="share of 2026-07-28 calls to the tool that asks for sampling (multi-round-trip)",
    )
    parser.add_argument("--call-timeout", type=float, default=10.0, help="a call or opening past this is a hang")
    parser.add_argument(
        "--recover-within",
        type=float,
        default=10.0,
        help="new calls must all succeed again within this many seconds of the kill",
    )
    parser.add_argument("--drain-grace", type=float, default=5.0, help="the config's gateway.drain_grace")
    parser.add_argument("--startup-timeout", type=float, default=60.0)
    parser.add_argument("--no-token", action="store_true", help="no bearer token (loopback needs none)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--balancer",
        choices=("haproxy", "nginx"),
        default="haproxy",
        help="deploy/haproxy/haproxy.cfg (default) or deploy/nginx/patchbay.conf",
    )
    parser.add_argument(
        "--nginx-hash",
        metavar="KEY",
        help="nginx: hash on KEY instead of the file's (e.g. '$http_mcp_session_id'; '' for round robin)",
    )
    parser.add_argument("--haproxy", help="the haproxy binary (default: $HAPROXY, then PATH)")
    parser.add_argument("--nginx", help="the nginx binary (default: $NGINX, then PATH)")
    parser.add_argument(
        "--gateway",
        default=DEFAULT_GATEWAY,
        help="the replica's command, with {addr} and {config} (default: this checkout's)",
    )
    parser.add_argument("--json", help="write the results, every call included, to this file")
    parser.add_argument("--keep", action="store_true", help="keep the run's folder (config, logs)")
    return parser.parse_args(argv)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # Ctrl-C, SIGTERM and SIGHUP all end the run through the cleanup below, even when this
    # process was started with SIGINT ignored (a background job of a non-interactive shell).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)
    directory = Path(tempfile.mkdtemp(prefix="patchbay-replicas-"))
    logging.basicConfig(
        filename=directory / "clients.log",
        level=logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    processes = Processes(run_id=secrets.token_hex(8), directory=directory)
    try:
        try:
            setup = start(args, processes)
            ready_in = wait_ready(setup, processes, args.startup_timeout)
        except StartupFailed as exc:
            print(f"replicas: {exc}", file=sys.stderr)
            return 2
        run, elapsed = anyio.run(drive, args, setup, processes)
        summary = replicas_report.summarize(args, setup, run, elapsed, ready_in)
        print(replicas_report.render(summary))
        if args.json:
            Path(args.json).write_text(json.dumps(replicas_report.to_json(summary, run), indent=1) + "\n")
        return 0 if summary["passed"] else 1
    except KeyboardInterrupt:
        print("replicas: interrupted; stopping everything", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the cleanup short
        processes.stop_all()
        if args.keep:
            print(f"replicas: the run's files are in {directory}", file=sys.stderr)
        else:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
