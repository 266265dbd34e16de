"""``mcp-patchbay tools``' exit status with servers not running by the config's choice.

A lazy server not needed yet (``not_started``) or stopped after ``idle_stop`` (``stopped_idle``) is
fine, as ``diagnosis.Diagnosis.ok`` says: ``tools`` lists it from its last listing and exits 0; a
server that failed still makes it exit 1.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.server.context import ServerRequestContext

from mcp_patchbay.cli import terminal, tools
from mcp_patchbay.upstreams.availability import State
from tests.harness import FakeTool, MemoryUpstreams, config_from, connected, make_server, text, until

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test its own data folder: the listings kept are its own."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    return tmp_path / "data" / "mcp-patchbay"


async def _echo(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
    return text("echo")


def _upstreams(*refused: str) -> MemoryUpstreams:
    upstreams = MemoryUpstreams({"notes": make_server("notes", {"add": FakeTool(_echo, description="Add a note.")})})
    upstreams.refuse.update(refused)
    return upstreams


async def test_tools_exits_0_with_a_lazy_server_not_started_and_1_with_a_failed_one(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = config_from({"notes": {"command": "notes-server", "start": "lazy"}})
    async with connected(config, _upstreams()) as (proxy, _):  # learns the listing, then stops it
        await until(lambda: proxy.supervisor.upstreams["notes"].state is State.NOT_STARTED)
        await until(lambda: (data_dir / "listings.json").exists())
        await proxy.supervisor.listing_cache.flush()
    capsys.readouterr()

    assert await tools.list_tools(config, as_json=True, connector=_upstreams()) == terminal.EXIT_OK
    report = json.loads(capsys.readouterr().out)
    [state] = report["servers"]
    assert state["state"] == "not_started"
    assert [row["tool"] for row in state["tools"]] == ["add"]

    failing = config_from({"notes": {"command": "notes-server"}}, {"retry_attempts": 0, "connect_timeout": 1})
    assert await tools.list_tools(failing, as_json=True, connector=_upstreams("notes")) == terminal.EXIT_FAILED
    [state] = json.loads(capsys.readouterr().out)["servers"]
    assert state["state"] == "failed"
