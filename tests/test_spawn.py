"""Starting upstreams before the config check (``spawn.early``) and keeping only what it launches (``spawn.settle``)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_patchbay import cli
from mcp_patchbay.config import IGNORED_ENTRY_KEYS, StdioSpec, load_config
from mcp_patchbay.upstreams.early_start import EARLY_KEYS, EARLY_MARK, Early, early, settle
from mcp_patchbay.upstreams.spawn import discard

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="nothing starts early on Windows")

SLEEPER = [sys.executable, "-c", "import time; time.sleep(30)"]


def sleeper(**extra: Any) -> dict[str, Any]:
    return {"command": SLEEPER[0], "args": SLEEPER[1:], **extra}


def write(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "patchbay.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def gone(process: subprocess.Popen[bytes], timeout: float = 10.0) -> bool:
    """Whether the process has ended within ``timeout`` (it is reaped here)."""
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        return False
    return True


def stop(processes: dict[str, subprocess.Popen[bytes]]) -> None:
    """``discard``, then reap them (a test must not leave a running Popen to the collector)."""
    waiting = list(processes.values())
    discard(processes)
    for process in waiting:
        assert gone(process)


@pytest.fixture
def started() -> Iterator[dict[str, Early]]:
    """What a test started early; whatever is left is stopped at the end."""
    processes: dict[str, Early] = {}
    yield processes
    stop({name: item.process for name, item in processes.items()})


@pytest.fixture(autouse=True)
def not_an_early_child(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(EARLY_MARK, raising=False)


def test_the_keys_early_knows_are_keys_the_config_accepts() -> None:
    assert set(StdioSpec.model_fields) | {"type"} | IGNORED_ENTRY_KEYS >= EARLY_KEYS


def test_plain_stdio_entries_start_early_and_the_checked_config_keeps_them(
    tmp_path: Path, started: dict[str, Early]
) -> None:
    path = write(
        tmp_path,
        {
            "mcpServers": {"one": sleeper(env={"A": "1"}, description="ignored", timeout=5)},
            "servers": {"two": sleeper(type="stdio", tools={"deny": ["x"]})},
        },
    )
    started.update(early(str(path)))
    assert set(started) == {"one", "two"}
    processes = {name: item.process for name, item in started.items()}
    kept = settle(started, load_config(path).servers)
    try:
        assert kept == processes
        assert started == {}
        assert all(p.poll() is None for p in kept.values())
    finally:
        stop(kept)


@pytest.mark.parametrize(
    "entry",
    [
        pytest.param(sleeper(env={"TOKEN": "${TOKEN}"}), id="a variable"),
        pytest.param(sleeper(cwd="."), id="a cwd"),
        pytest.param(sleeper(disabled=True), id="disabled"),
        pytest.param(sleeper(disabeld=True), id="an unknown key"),
        pytest.param(sleeper(type="sse"), id="another type"),
        pytest.param({"url": "http://127.0.0.1:9/mcp"}, id="a url"),
        pytest.param({"command": "", "args": []}, id="an empty command"),
        pytest.param({"command": SLEEPER[0], "args": "-c pass"}, id="args not a list"),
        pytest.param({"command": SLEEPER[0], "args": [1]}, id="an argument not text"),
        pytest.param(sleeper(env=["A=1"]), id="env not an object"),
    ],
)
def test_entries_that_need_the_config_check_are_left_to_it(
    tmp_path: Path, started: dict[str, Early], entry: dict[str, Any]
) -> None:
    started.update(early(str(write(tmp_path, {"mcpServers": {"one": entry}}))))
    assert started == {}


def test_a_name_in_both_shapes_is_left_to_the_config_check(tmp_path: Path, started: dict[str, Early]) -> None:
    path = write(tmp_path, {"mcpServers": {"one": sleeper()}, "servers": {"one": sleeper()}})
    started.update(early(str(path)))
    assert started == {}


@pytest.mark.parametrize("text", ["{not json", "[]", '{"mcpServers": []}', ""])
def test_a_file_that_is_not_a_config_starts_nothing(tmp_path: Path, text: str) -> None:
    path = tmp_path / "patchbay.json"
    path.write_text(text, encoding="utf-8")
    assert early(str(path)) == {}
    assert early(str(tmp_path / "missing.json")) == {}


def test_a_process_started_early_is_marked_and_a_marked_patchbay_starts_nothing_early(
    tmp_path: Path, started: dict[str, Early], monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "env.txt"
    code = f"import os, pathlib; pathlib.Path({str(marker)!r}).write_text(os.environ.get({EARLY_MARK!r}, ''))"
    path = write(tmp_path, {"mcpServers": {"one": {"command": sys.executable, "args": ["-c", code]}}})
    started.update(early(str(path)))
    assert gone(started["one"].process)
    assert marker.read_text() == "1"
    monkeypatch.setenv(EARLY_MARK, "1")
    assert early(str(path)) == {}


def test_an_entry_launching_patchbay_with_this_config_is_stopped_once_the_check_refuses_it(
    tmp_path: Path, started: dict[str, Early]
) -> None:
    path = tmp_path / "patchbay.json"
    entry = {"command": sys.executable, "args": ["-m", "mcp_patchbay", "--config", str(path)]}
    path.write_text(json.dumps({"mcpServers": {"self": entry, "other": sleeper()}}), encoding="utf-8")
    started.update(early(str(path)))
    assert set(started) == {"self", "other"}
    loop = started["self"].process
    config = load_config(path)
    assert next(e for e in config.servers if e.name == "self").self_reference
    kept = settle(started, config.servers)
    try:
        assert set(kept) == {"other"}
        assert gone(loop)
    finally:
        stop(kept)


def test_a_changed_launch_is_stopped_not_adopted(tmp_path: Path, started: dict[str, Early]) -> None:
    path = write(tmp_path, {"mcpServers": {"one": sleeper(env={"A": "1"})}})
    started.update(early(str(path)))
    first = started["one"].process
    write(tmp_path, {"mcpServers": {"one": sleeper(env={"A": "2"})}})  # edited between the two reads
    kept = settle(started, load_config(path).servers)
    assert kept == {}
    assert gone(first)


def test_the_cli_stops_what_it_started_early_when_the_config_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path, {"mcpServers": {"one": sleeper()}, "patchbay": {"timout": 5}})  # a fatal mistake
    seen: list[Early] = []

    def spy(config_path: str) -> dict[str, Early]:
        result = early(config_path)
        seen.extend(result.values())
        return result

    monkeypatch.setattr(cli, "early", spy)
    monkeypatch.setattr(sys, "stdin", io.StringIO())
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)  # a person at a terminal: told, and it ends
    assert cli.main(["--config", str(path)]) == cli.EXIT_CONFIG
    assert len(seen) == 1
    assert gone(seen[0].process)


def test_discard_never_signals_a_group_it_no_longer_tracks() -> None:
    """A process reaped and untracked by its transport: its number may be someone else's group
    by the end, so ``discard`` (and ``Prespawned.stop_all``) must not killpg it."""
    import signal
    import subprocess
    from unittest import mock

    from mcp_patchbay.upstreams import spawn

    process = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    process.wait(timeout=30)
    spawn.untrack(process.pid)
    with mock.patch.object(spawn.os, "killpg") as killpg:
        spawn.discard({"gone": process})
    assert not any(call.args[1] == signal.SIGKILL for call in killpg.call_args_list)


def test_shutdown_signals_every_group_once() -> None:
    from unittest import mock

    from mcp_patchbay.upstreams.transports import stdio

    with mock.patch.object(stdio, "terminate_all") as terminate, mock.patch.object(stdio, "_SHUTTING_DOWN", []):
        stdio.shutdown()
        stdio.shutdown()
    assert terminate.call_count == 1


# --- the reaper threads and the watchdog's pipe ----------------------------------------------------


@pytest.fixture
def watchdog(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A watchdog of the test's own (the module's one stays untouched), closed at the end."""
    from mcp_patchbay.upstreams import spawn

    own = spawn._Watchdog()  # pyright: ignore[reportPrivateUsage]
    monkeypatch.setattr(spawn, "_WATCHDOG", own)
    yield own
    own.close()


@pytest.fixture
def group() -> Iterator[subprocess.Popen[bytes]]:
    """A sleeper leading its own process group, not reaped before the test ends (so its
    number is never someone else's while a watchdog may signal it)."""
    process = subprocess.Popen(SLEEPER, start_new_session=True)
    yield process
    process.kill()
    process.wait(10)


def test_a_reaper_untracking_as_the_proxy_exits_never_writes_to_a_closed_pipe(
    watchdog: Any, group: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: an invalid config with several stdio entries started early printed, now and
    then, a traceback from a ``patchbay-reap`` thread (``OSError: [Errno 9] Bad file
    descriptor``): ``discard`` starts a reaper per process, the CLI returns, and the exit's
    ``_Watchdog.close`` closed the pipe while a reaper was writing its ``-PGID`` line to it.
    Here the reaper is held inside its write while the exit closes the watchdog."""
    import os
    import threading

    from mcp_patchbay.upstreams import spawn

    spawn.track(group.pid)
    first = watchdog.process
    pipe = watchdog.fd
    assert first is not None and pipe is not None
    real_write, real_close = os.write, os.close
    writing, pipe_closed = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def held_write(fd: int, data: bytes) -> int:
        if threading.current_thread().name == "patchbay-reap" and fd == pipe:
            writing.set()
            pipe_closed.wait(1.0)  # the exit closes the pipe now, unless it has to wait for this write
        return real_write(fd, data)

    def noted_close(fd: int) -> None:
        real_close(fd)
        if fd == pipe:
            pipe_closed.set()

    def reaper() -> None:
        try:
            spawn.untrack(group.pid)
        except BaseException as exc:  # what would have been the thread's traceback
            failures.append(exc)

    monkeypatch.setattr(spawn.os, "write", held_write)
    monkeypatch.setattr(spawn.os, "close", noted_close)
    reaping = threading.Thread(target=reaper, name="patchbay-reap", daemon=True)
    reaping.start()
    assert writing.wait(10)
    exiting = threading.Thread(target=watchdog.close, name="atexit", daemon=True)
    exiting.start()
    reaping.join(10)
    exiting.join(10)
    assert not reaping.is_alive() and not exiting.is_alive()
    assert failures == []
    assert pipe_closed.is_set() and watchdog.fd is None
    assert watchdog.process is first, "a watchdog was started again at exit"
    assert spawn.tracked() == frozenset()


def test_a_reaper_finishing_after_the_exit_closed_the_watchdog_starts_no_new_one(
    watchdog: Any, group: subprocess.Popen[bytes]
) -> None:
    """The same race, its other order: the reaper's untrack after the exit's close found no pipe
    and started a second watchdog (a process spawned while the interpreter exits)."""
    from mcp_patchbay.upstreams import spawn

    spawn.track(group.pid)
    first = watchdog.process
    assert first is not None
    watchdog.close()
    spawn.untrack(group.pid)
    assert watchdog.process is first and watchdog.fd is None
    assert spawn.tracked() == frozenset()


# --- command lookup, every OS's branch -----------------------------------------------------------


def _tool(folder: Path, name: str, executable: bool = True) -> Path:
    path = folder / name
    path.write_text("")
    path.chmod(0o755 if executable else 0o644)
    return path


def test_windows_lookup_tries_pathext_in_order_and_needs_no_execute_bit(tmp_path: Path) -> None:
    from mcp_patchbay.upstreams.command_lookup import which

    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    _tool(second, "npx.CMD", executable=False)
    _tool(second, "npx", executable=False)  # the extension-less shim npm writes beside it is not runnable there
    env = {"PATH": f"{first};{second}", "PATHEXT": ".COM;.EXE;.BAT;.CMD"}
    assert which("npx", env, platform="win32") == str(second / "npx.CMD")
    _tool(first, "npx.EXE", executable=False)
    assert which("npx", env, platform="win32") == str(first / "npx.EXE")  # PATH order first, then PATHEXT's
    assert which("npx.CMD", env, platform="win32") == str(second / "npx.CMD")  # an extension given is kept
    assert which("npx", {"PATH": str(second)}, platform="win32") == str(second / "npx.CMD")  # default PATHEXT


def test_posix_lookup_needs_the_execute_bit_and_falls_back_beside_our_interpreter(tmp_path: Path) -> None:
    from mcp_patchbay.upstreams.command_lookup import search_path, which

    _tool(tmp_path, "plain", executable=False)
    _tool(tmp_path, "runnable")
    for platform in ("linux", "darwin"):
        env = {"PATH": str(tmp_path)}
        assert which("runnable", env, platform=platform) == str(tmp_path / "runnable")
        assert which("plain", env, platform=platform) is None
        assert search_path(env, platform)[-1] == str(Path(sys.executable).parent)
    assert which(Path(sys.executable).name, {"PATH": str(tmp_path)}) == sys.executable  # patchbay's own venv


def test_the_search_path_is_split_as_the_os_writes_it() -> None:
    from mcp_patchbay.upstreams.command_lookup import search_path

    assert search_path({"PATH": r"C:\a;C:\b"}, "win32")[:2] == [r"C:\a", r"C:\b"]
    assert search_path({"PATH": "/a:/b"}, "darwin")[:2] == ["/a", "/b"]
