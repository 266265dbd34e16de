"""End to end: the proxy launched as users launch it, in front of real MCP servers.

``python -m mcp_patchbay --config FILE`` as a subprocess, driven by the SDK's ``Client``
over stdio, in front of the pinned npm servers in tests/e2e/node_modules (server-everything,
server-memory, server-sequential-thinking, server-filesystem), PyPI's mcp-server-time, and
broken entries (a missing command, a server that exits at startup, an entry with a config
mistake, a server that never answers). One proxy serves the whole module; the tests that
need a proxy of their own (raw stdout, SIGTERM, the 2026 protocol era, MCP Inspector) start
a small one.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import anyio
import anyio.abc
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from tests.e2e_util import (
    NODE_MODULES,
    ROOT,
    alive,
    assert_clean_model_text,
    descendants_of,
    error_info,
    fault_entry,
    result_text,
    start_time,
    wait_gone,
)
from tests.processes import cmdline

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

NAME = re.compile(r"^[A-Za-z0-9_-]{1,48}$")
PACKAGES = NODE_MODULES / "@modelcontextprotocol"
EVERYTHING = PACKAGES / "server-everything" / "dist" / "index.js"
MEMORY = PACKAGES / "server-memory" / "dist" / "index.js"
THINKING = PACKAGES / "server-sequential-thinking" / "dist" / "index.js"
FILESYSTEM = PACKAGES / "server-filesystem" / "dist" / "index.js"
INSPECTOR = NODE_MODULES / ".bin" / "mcp-inspector"
TIME = Path(sys.executable).parent / "mcp-server-time"
NODE = shutil.which("node")
ENV_MARK = "from-the-patchbay-config"
STARTUP_WAIT = 5.0
GOOD = ("everything", "memory", "sequential-thinking", "filesystem", "time")

if NODE is None or not all(p.exists() for p in (EVERYTHING, MEMORY, THINKING, FILESYSTEM)) or not TIME.exists():
    pytest.skip("node, tests/e2e/node_modules or mcp-server-time missing: run scripts/install", allow_module_level=True)


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def good_servers(tmp: Path) -> dict[str, Any]:
    files = tmp / "files"
    files.mkdir(exist_ok=True)
    return {
        "everything": {"command": NODE, "args": [str(EVERYTHING)], "env": {"PATCHBAY_E2E_MARK": ENV_MARK}},
        "memory": {"command": NODE, "args": [str(MEMORY)], "env": {"MEMORY_FILE_PATH": str(tmp / "memory.jsonl")}},
        "sequential-thinking": {"command": NODE, "args": [str(THINKING)]},
        "filesystem": {"command": NODE, "args": [str(FILESYSTEM), str(files)]},
        "time": {"command": "mcp-server-time", "args": ["--local-timezone", "UTC"]},
    }


def broken_servers() -> dict[str, Any]:
    return {
        "missing": {"command": "patchbay-e2e-no-such-server"},
        "dies": fault_entry("dies", "--exit-at-startup", "2"),
        "mistake": {"command": NODE, "argz": [str(EVERYTHING)]},  # config mistake: 'argz'
        "mute": fault_entry("mute", "--never-answer"),
    }


def write_config(tmp: Path, servers: dict[str, Any], **settings: Any) -> Path:
    path = tmp / "patchbay.json"
    settings = {"startup_wait": STARTUP_WAIT, "connect_timeout": 30, "watch": False, **settings}
    path.write_text(json.dumps({"mcpServers": servers, "patchbay": settings}, indent=1))
    return path


def proxy_command(config: Path, log: Path) -> list[str]:
    return [sys.executable, "-m", "mcp_patchbay", "--config", str(config), "--log-file", str(log)]


def proxy_pid(config: Path) -> int:
    """The proxy process we started (our child whose command line names this config)."""
    for pid in descendants_of(os.getpid()):
        command = cmdline(pid).split(" ")
        if "mcp_patchbay" in command and str(config) in command:
            return pid
    raise AssertionError(f"no proxy process for {config}")


def tree(pid: int) -> list[tuple[int, int | None]]:
    """A process's descendants, with start times (so a reused pid is not taken for one of them)."""
    return [(p, start_time(p)) for p in descendants_of(pid)]


@dataclass
class Session:
    client: Client
    tmp: Path
    config: Path
    log: Path
    listed_after: float
    tools: dict[str, types.Tool]
    direct: dict[str, set[str]]
    pid: int
    children: list[tuple[int, int | None]] = field(default_factory=lambda: list[tuple[int, int | None]]())

    async def call(self, name: str, arguments: dict[str, Any] | None = None, within: float = 20) -> Any:
        with anyio.fail_after(within):
            return await self.client.call_tool(name, arguments or {})

    async def ok(self, name: str, arguments: dict[str, Any] | None = None) -> str:
        result = await self.call(name, arguments)
        assert not result.is_error, (name, result)
        return result_text(result)


async def list_directly(server: dict[str, Any]) -> set[str]:
    """An upstream's own tool list, read without the proxy."""
    command = str(TIME) if server["command"] == "mcp-server-time" else server["command"]
    params = StdioServerParameters(command=command, args=server["args"], env=server.get("env"))
    async with Client(params, mode="legacy", cache=None) as client:
        return {t.name for t in (await client.list_tools()).tools}


async def wait_for_tools(client: Client, changed: list[anyio.Event], expected: set[str], within: float) -> set[str]:
    """tools/list until ``expected`` are all there, re-listing on each tools/list_changed."""
    with anyio.fail_after(within):
        while True:
            event = anyio.Event()
            changed.append(event)
            names = {t.name for t in (await client.list_tools()).tools}
            if expected <= names:
                return names
            await event.wait()


@pytest.fixture(scope="module")
async def session(tmp_path_factory: pytest.TempPathFactory) -> AsyncGenerator[Session]:
    tmp = tmp_path_factory.mktemp("e2e")
    good = good_servers(tmp)
    config = write_config(tmp, {**good, **broken_servers()})
    log = tmp / "proxy.log"
    changed: list[anyio.Event] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            for event in changed:
                event.set()
            changed.clear()

    params = StdioServerParameters(command=sys.executable, args=proxy_command(config, log)[1:], cwd=str(ROOT))
    direct: dict[str, set[str]] = {}
    # A bound on the module as a whole (this proxy lives until the module's last test); the
    # tests bound their own waits precisely.
    with anyio.fail_after(240):
        async with Client(params, mode="legacy", cache=None, message_handler=on_message) as client:
            began = time.monotonic()

            async def read(name: str) -> None:
                direct[name] = await list_directly(good[name])

            async def list_first() -> None:
                nonlocal first, listed_after
                first = await client.list_tools()
                listed_after = time.monotonic() - began

            first = types.ListToolsResult(tools=[])
            listed_after = math.inf
            async with anyio.create_task_group() as tg:
                for name in GOOD:  # each upstream's own list, read directly, meanwhile
                    tg.start_soon(read, name)
                tg.start_soon(list_first)
            expected = {f"{server}__{tool}" for server, tools in direct.items() for tool in tools}
            if expected <= {t.name for t in first.tools}:
                tools = {t.name: t for t in first.tools}
            else:  # a slow upstream came up after startup_wait: the proxy says so with list_changed
                await wait_for_tools(client, changed, expected, within=30)
                tools = {t.name: t for t in (await client.list_tools()).tools}
            pid = proxy_pid(config)
            session = Session(client, tmp, config, log, listed_after, tools, direct, pid, tree(pid))
            yield session
            session.children += tree(pid)  # restarts since (the 'dies' entry keeps being retried)
    # After the client closed: the proxy and every process it started are gone.
    await wait_gone([(pid, None), *session.children], timeout=15)


# --- the module's proxy -------------------------------------------------------------------------


async def test_every_tool_of_every_good_upstream_is_listed_under_a_valid_unique_name(session: Session) -> None:
    assert set(session.direct) == set(GOOD)
    for server, tools in session.direct.items():
        assert tools, server
        for tool in tools:
            assert f"{server}__{tool}" in session.tools, (server, tool)
    names = list(session.tools)
    assert len(names) == len(set(names))
    bad = [n for n in names if not NAME.match(n)]
    assert not bad, bad
    # Nothing from the broken entries, and only what the good ones offer (plus nothing else).
    assert {n.split("__")[0] for n in names} == set(GOOD)


async def test_broken_entries_do_not_block_startup(session: Session) -> None:
    # 'mute' never answers: tools/list came back once startup_wait passed, not at connect_timeout.
    assert session.listed_after < STARTUP_WAIT + 4, session.listed_after
    for name, words in (
        ("missing__anything", "could not start"),
        ("dies__echo", "exited during startup with exit code 2"),
        ("mistake__get-sum", "config has a mistake"),
    ):
        result = await session.call(name, {}, within=5)
        info = error_info(result)
        assert info["code"] == "SERVER_UNAVAILABLE" and words in info["message"], (name, info)
        assert_clean_model_text(result)
    mute = error_info(await session.call("mute__echo", {}, within=5))
    assert mute["code"] in ("SERVER_STARTING", "SERVER_UNAVAILABLE") and mute["retryable"] is True


async def test_real_calls_return_real_results(session: Session) -> None:
    assert await session.ok("everything__get-sum", {"a": 19, "b": 23}) == "The sum of 19 and 23 is 42."
    now = json.loads(await session.ok("time__get_current_time", {"timezone": "UTC"}))
    assert now["timezone"] == "UTC" and now["datetime"].endswith("+00:00")
    thought = json.loads(
        await session.ok(
            "sequential-thinking__sequentialthinking",
            {"thought": "First, list the servers.", "nextThoughtNeeded": True, "thoughtNumber": 1, "totalThoughts": 2},
        )
    )
    assert thought["thoughtNumber"] == 1 and thought["nextThoughtNeeded"] is True


async def test_memory_state_persists_between_calls(session: Session) -> None:
    entity = {"name": "patchbay", "entityType": "project", "observations": ["proxies MCP servers"]}
    await session.ok("memory__create_entities", {"entities": [entity]})
    graph = json.loads(await session.ok("memory__read_graph"))
    assert entity in graph["entities"]
    assert "patchbay" in (session.tmp / "memory.jsonl").read_text()


async def test_filesystem_writes_and_reads_in_its_folder(session: Session) -> None:
    path = session.tmp / "files" / "note.txt"
    await session.ok("filesystem__write_file", {"path": str(path), "content": "hello through the patchbay"})
    assert path.read_text() == "hello through the patchbay"
    assert await session.ok("filesystem__read_text_file", {"path": str(path)}) == "hello through the patchbay"


async def test_config_env_reaches_the_upstream(session: Session) -> None:
    env = json.loads(await session.ok("everything__get-env"))
    assert env["PATCHBAY_E2E_MARK"] == ENV_MARK


async def test_an_upstream_is_error_passes_through_unchanged(session: Session) -> None:
    result = await session.call("filesystem__read_text_file", {"path": "/etc/hostname"})
    assert result.is_error and result.structured_content is None
    assert result_text(result).startswith("Access denied - path outside allowed directories")


async def test_mistaken_names_get_the_tool_or_a_suggestion_and_the_session_goes_on(session: Session) -> None:
    typo = await session.call("evrything__get-sum", {"a": 1, "b": 2})
    if typo.is_error:
        info = error_info(typo)
        assert info["code"] == "TOOL_NOT_FOUND" and info["suggestions"][0] == "everything__get-sum"
        assert_clean_model_text(typo)
    else:
        assert result_text(typo) == "The sum of 1 and 2 is 3."
    bare = json.loads(await session.ok("get_current_time", {"timezone": "UTC"}))
    assert bare["timezone"] == "UTC"
    server_only = json.loads(
        await session.ok(
            "sequential-thinking",
            {"thought": "Only the server's name.", "nextThoughtNeeded": False, "thoughtNumber": 1, "totalThoughts": 1},
        )
    )
    assert server_only["nextThoughtNeeded"] is False
    with anyio.fail_after(10):
        await session.client.send_ping()  # pyright: ignore[reportDeprecated] - legacy mode
    assert await session.ok("everything__get-sum", {"a": 2, "b": 2}) == "The sum of 2 and 2 is 4."


async def test_upstream_processes_are_children_of_the_proxy(session: Session) -> None:
    # The node servers and mcp-server-time run under the proxy (checked gone at module end).
    commands: list[str] = []
    for pid, start in session.children:
        if alive(pid, start):
            commands.append(cmdline(pid))
    for script in (EVERYTHING, MEMORY, THINKING, FILESYSTEM):
        assert any(str(script) in c for c in commands), (script, commands)
    assert any("mcp-server-time" in c for c in commands), commands


# --- proxies of their own ----------------------------------------------------------------------


def _raw(method: str, id: int | None = None, params: dict[str, Any] | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if id is not None:
        message["id"] = id
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode() + b"\n"


INITIALIZE = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "raw-e2e", "version": "1"},
}


class RawProxy:
    """The proxy with plain pipes: every stdout line is read and must be one JSON-RPC message."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self.messages: list[dict[str, Any]] = []
        self._buffer = b""
        self._changed = anyio.Event()

    async def read_stdout(self) -> None:
        assert self.process.stdout is not None
        async for chunk in self.process.stdout:
            self._buffer += chunk
            *lines, self._buffer = self._buffer.split(b"\n")
            for line in lines:
                message: Any = json.loads(line)  # anything but JSON on stdout fails the test here
                assert isinstance(message, dict), line
                message = cast("dict[str, Any]", message)
                assert message.get("jsonrpc") == "2.0", line
                self.messages.append(message)
            self._changed.set()
            self._changed = anyio.Event()
        assert not self._buffer.strip(), self._buffer

    async def send(self, data: bytes) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(data)

    async def response(self, id: int, within: float = 20) -> dict[str, Any]:
        with anyio.fail_after(within):
            while True:
                for message in self.messages:
                    if message.get("id") == id and ("result" in message or "error" in message):
                        return message
                await self._changed.wait()


async def test_stdout_carries_only_jsonrpc(tmp_path: Path) -> None:
    servers = {
        "noisy": fault_entry("noisy", "--garbage"),
        "chatty": fault_entry("chatty", "--stderr-chatter"),
        "sequential-thinking": {"command": NODE, "args": [str(THINKING)]},
    }
    config = write_config(tmp_path, servers)
    log = tmp_path / "proxy.log"
    with (tmp_path / "stderr.txt").open("wb") as stderr:
        process = await anyio.open_process(proxy_command(config, log), cwd=ROOT, stderr=stderr)
    raw = RawProxy(process)
    try:
        with anyio.fail_after(40):
            async with anyio.create_task_group() as tg:
                tg.start_soon(raw.read_stdout)
                await raw.send(_raw("initialize", 1, INITIALIZE))
                assert "result" in await raw.response(1)
                await raw.send(_raw("notifications/initialized"))
                await raw.send(_raw("tools/list", 2, {}))
                names = {t["name"] for t in (await raw.response(2))["result"]["tools"]}
                assert {"noisy__echo", "chatty__echo", "sequential-thinking__sequentialthinking"} <= names
                calls = [
                    ("noisy__echo", {"text": "through the noise"}),
                    ("chatty__echo", {"text": "over the chatter"}),
                    ("chatty__stderr", {"text": "a line on stderr"}),
                    (
                        "sequential-thinking__sequentialthinking",
                        {"thought": "t", "nextThoughtNeeded": False, "thoughtNumber": 1, "totalThoughts": 1},
                    ),
                ]
                for n, (tool, arguments) in enumerate(calls, start=3):
                    await raw.send(_raw("tools/call", n, {"name": tool, "arguments": arguments}))
                for n in range(3, 3 + len(calls)):
                    assert (await raw.response(n))["result"].get("isError") is not True, raw.messages
                assert process.stdin is not None
                await process.stdin.aclose()  # the client leaves: the proxy ends
                assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    answers = {m["id"]: m["result"]["content"][0]["text"] for m in raw.messages if m.get("id") in (3, 4)}
    assert answers == {3: "through the noise", 4: "over the chatter"}
    logged = log.read_text()
    assert "not JSON-RPC" in logged and "fault_server banner" in logged


async def test_sigterm_stops_the_proxy_and_every_process_it_started(tmp_path: Path) -> None:
    """SIGTERM with the client's stdin still open (a process manager, ``kill``): every upstream
    and every child of one dies, and the proxy exits."""
    record = tmp_path / "processes.jsonl"
    servers = {
        "sequential-thinking": {"command": NODE, "args": [str(THINKING)]},
        "parent": fault_entry("parent", record=record),
        "stubborn": fault_entry("stubborn", "--ignore-sigterm", "--ignore-eof", record=record),
    }
    config = write_config(tmp_path, servers)
    command = proxy_command(config, tmp_path / "proxy.log")
    process = await anyio.open_process(command, cwd=ROOT, stderr=subprocess.DEVNULL)
    raw = RawProxy(process)
    exited_on_sigterm = False
    try:
        with anyio.fail_after(40):
            async with anyio.create_task_group() as tg:
                tg.start_soon(raw.read_stdout)
                await raw.send(_raw("initialize", 1, INITIALIZE))
                await raw.response(1)
                await raw.send(_raw("notifications/initialized"))
                await raw.send(_raw("tools/list", 2, {}))
                names = {t["name"] for t in (await raw.response(2))["result"]["tools"]}
                assert {"parent__child", "stubborn__echo", "sequential-thinking__sequentialthinking"} <= names
                await raw.send(_raw("tools/call", 3, {"name": "parent__child", "arguments": {}}))
                grandchild = int((await raw.response(3))["result"]["content"][0]["text"])
                children = tree(process.pid)
                assert any(pid == grandchild for pid, _ in children)
                assert len(children) >= 4, children  # node, two fault servers, the grandchild
                process.send_signal(signal.SIGTERM)
                # The stubborn server ignores both stdin's end and SIGTERM: on the proxy's own
                # stop it gets SIGTERM with the end of its stdin, then SIGKILL 0.5 s later.
                await wait_gone(children, timeout=15)
                with anyio.move_on_after(10):
                    await process.wait()
                exited_on_sigterm = process.returncode is not None
                if not exited_on_sigterm:
                    assert process.stdin is not None
                    await process.stdin.aclose()  # unblock it, to see whether stdin's end does it
                    with anyio.move_on_after(10):
                        await process.wait()
                tg.cancel_scope.cancel()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert exited_on_sigterm, (
        "the proxy stopped its upstreams on SIGTERM but did not exit until its stdin was closed "
        f"(then exit code {process.returncode})"
    )
    assert process.returncode == 0


async def test_the_2026_protocol_era_over_stdio(tmp_path: Path) -> None:
    servers = {key: value for key, value in good_servers(tmp_path).items() if key in ("everything", "time")}
    config = write_config(tmp_path, servers)
    command = proxy_command(config, tmp_path / "p.log")
    params = StdioServerParameters(command=command[0], args=command[1:], cwd=str(ROOT))
    with anyio.fail_after(40):
        async with Client(params, cache=None) as client:  # mode="auto": the 2026-07-28 protocol when offered
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"everything__get-sum", "time__get_current_time"} <= names
            result = await client.call_tool("everything__get-sum", {"a": 3, "b": 4})
            assert result_text(result) == "The sum of 3 and 4 is 7."
            bare = await client.call_tool("get_current_time", {"timezone": "UTC"})
            assert json.loads(result_text(bare))["timezone"] == "UTC"
            typo = await client.call_tool("evrything__get-sum", {"a": 1, "b": 1})
            assert typo.is_error or result_text(typo) == "The sum of 1 and 1 is 2."
            pid = proxy_pid(config)
            children = tree(pid)
    await wait_gone([(pid, None), *children], timeout=15)


@pytest.mark.skipif(not INSPECTOR.exists(), reason="MCP Inspector not installed: run scripts/install")
async def test_mcp_inspector_cli_drives_the_proxy(tmp_path: Path) -> None:
    servers = {key: value for key, value in good_servers(tmp_path).items() if key in ("everything",)}
    config = write_config(tmp_path, servers)
    inspector_config = tmp_path / "inspector.json"
    proxy = {"command": sys.executable, "args": proxy_command(config, tmp_path / "p.log")[1:]}
    inspector_config.write_text(json.dumps({"mcpServers": {"patchbay": proxy}}))

    async def inspect(tool: str, *args: str) -> tuple[int, dict[str, Any]]:
        command = [str(INSPECTOR), "--cli", "--config", str(inspector_config), "--server", "patchbay"]
        command += ["--method", "tools/call", "--tool-name", tool]
        for arg in args:
            command += ["--tool-arg", arg]
        with anyio.fail_after(40):
            done = await anyio.run_process(command, cwd=ROOT, check=False)
        return done.returncode, json.loads(done.stdout)

    outcomes: dict[str, tuple[int, dict[str, Any]]] = {}

    async def run(tool: str) -> None:
        outcomes[tool] = await inspect(tool, "a=2", "b=3")

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, "everything__get-sum")
        tg.start_soon(run, "evrything__get-sum")
    code, result = outcomes["everything__get-sum"]
    assert code == 0 and result["content"][0]["text"] == "The sum of 2 and 3 is 5."
    code, result = outcomes["evrything__get-sum"]
    assert code == 0
    if result.get("isError"):
        assert result["structuredContent"]["error"]["suggestions"][0] == "everything__get-sum"
    else:
        assert result["content"][0]["text"] == "The sum of 2 and 3 is 5."


# --- search mode, as a client that refuses unlisted names uses it --------------------------------


async def test_search_mode_over_stdio_finds_and_calls_real_tools(tmp_path: Path) -> None:
    servers = {key: value for key, value in good_servers(tmp_path).items() if key in ("everything", "time", "memory")}
    servers["missing"] = broken_servers()["missing"]
    config = write_config(tmp_path, servers, expose="search")
    command = proxy_command(config, tmp_path / "p.log")
    params = StdioServerParameters(command=command[0], args=command[1:], cwd=str(ROOT))
    with anyio.fail_after(60):
        async with Client(params, mode="legacy", cache=None) as client:
            listed = [t.name for t in (await client.list_tools()).tools]
            assert listed == ["patchbay__find_tools", "patchbay__call_read", "patchbay__call_tool"]
            found = await client.call_tool("patchbay__find_tools", {"query": "add two numbers together"})
            assert found.structured_content is not None
            top = [t["name"] for t in found.structured_content["tools"]]
            assert "everything__get-sum" in top[:3], top
            assert len(result_text(found)) < 10_000
            summed = await client.call_tool(
                "patchbay__call_tool", {"name": "everything__get-sum", "arguments": {"a": 3, "b": 4}}
            )
            assert result_text(summed) == "The sum of 3 and 4 is 7."
            mistaken = await client.call_tool(
                "patchbay__call_tool", {"name": "Everything.get_sum", "arguments": {"a": 1, "b": 1}}
            )
            assert result_text(mistaken) == "The sum of 1 and 1 is 2."
            broken = await client.call_tool("patchbay__call_tool", {"name": "missing__anything", "arguments": {}})
            assert error_info(broken)["code"] == "SERVER_UNAVAILABLE"
            assert_clean_model_text(broken)
            entity = await client.call_tool("patchbay__find_tools", {"query": "remember a new entity in the graph"})
            assert entity.structured_content is not None
            assert entity.structured_content["tools"][0]["server"] == "memory"
            pid = proxy_pid(config)
            children = tree(pid)
    await wait_gone([(pid, None), *children], timeout=15)
