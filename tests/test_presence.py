"""Presence: a running proxy's snapshot file (``presence``), what ``mcp-patchbay ui`` reads of it."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from mcp_patchbay.presence import folder
from mcp_patchbay.presence.publish import publish, snapshot
from tests.harness import FakeTool, MemoryUpstreams, config_from, make_server, running_proxy, text, until


def test_a_file_whose_process_is_gone_is_ignored_and_removed(tmp_path: Path) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True)
    dead_pid = int(gone.stdout)
    folder.write({"pid": dead_pid, "started_at": 1.0}, tmp_path)
    folder.write({"pid": os.getpid(), "started_at": 2.0}, tmp_path)
    (tmp_path / "notes.txt").write_text("not a snapshot")
    seen = folder.read_all(tmp_path)
    assert [s["pid"] for s in seen] == [os.getpid()]
    assert not (tmp_path / f"{dead_pid}.json").exists()


def test_a_snapshot_is_private(tmp_path: Path) -> None:
    path = folder.write({"pid": os.getpid()}, tmp_path / "running")
    if os.name != "nt":
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_an_unreadable_or_foreign_file_is_skipped(tmp_path: Path) -> None:
    (tmp_path / f"{os.getpid()}.json").write_text("{broken")
    assert folder.read_all(tmp_path) == []
    (tmp_path / f"{os.getpid()}.json").write_text(json.dumps({"pid": 1}))  # names another process
    assert folder.read_all(tmp_path) == []


async def _time(ctx: Any, args: dict[str, Any]) -> types.CallToolResult:
    return text("12:00")


@pytest.mark.anyio
async def test_a_running_proxy_publishes_its_servers_tools_and_problems_and_removes_its_file(tmp_path: Path) -> None:
    tools = {"now": FakeTool(_time, description="What time it is"), "secret": FakeTool(_time)}
    upstreams = MemoryUpstreams({"clock": make_server("clock", tools)})
    config = config_from(
        {
            "clock": {"command": "clock", "tools": {"deny": ["secret"]}},
            "broken": {"command": "definitely-not-a-command-here"},
        }
    )
    async with running_proxy(config, upstreams) as proxy:
        await until(lambda: proxy.supervisor.upstreams["clock"].state.value == "ready")
        await until(lambda: proxy.supervisor.upstreams["broken"].state.value == "failed")
        await until(lambda: proxy.supervisor.catalog.tools)
        data = snapshot(proxy, started_at=1.0)
        servers = {s["name"]: s for s in data["servers"]}
        assert servers["clock"]["state"] == "ready" and servers["clock"]["tools"] == 2
        assert servers["clock"]["tools_off"] == ["secret"] and servers["clock"]["problem"] is None
        assert [t["name"] for t in data["tools"]] == ["clock__now"]
        assert data["tools"][0]["description"] == "What time it is"
        assert servers["broken"]["state"] == "failed" and servers["broken"]["problem"]
        assert data["pid"] == os.getpid() and data["config"] == str(config.path)

        where = tmp_path / "running"
        async with anyio.create_task_group() as tg:
            tg.start_soon(publish, proxy, where)
            await until(lambda: (where / f"{os.getpid()}.json").exists())
            [published] = folder.read_all(where)
            assert {s["name"] for s in published["servers"]} == {"clock", "broken"}
            tg.cancel_scope.cancel()
        assert not (where / f"{os.getpid()}.json").exists()
