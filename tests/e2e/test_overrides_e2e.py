"""End to end: overrides (issue 24) on a real third-party server, PyPI's mcp-server-time.

The proxy launched as users launch it (``python -m mcp_patchbay --config FILE``), the SDK's
``Client`` over stdio: the client lists the changed definitions, calls reach mcp-server-time
under its own names with the fixed and default values, the old name still resolves, and the
mistakes are named (the file's in the entry's problem, the listing's in a warning).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tests.e2e_util import ROOT, result_text

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

TIME = Path(sys.executable).parent / "mcp-server-time"

if not TIME.exists():
    pytest.skip("mcp-server-time missing: run scripts/install", allow_module_level=True)


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


OVERRIDES: dict[str, Any] = {
    "get_current_time": {
        "name": "now",
        "description_append": "It always answers for Tokyo.",
        "arguments": {"timezone": {"value": "Asia/Tokyo"}},
    },
    "convert_time": {
        "arguments": {
            "source_timezone": {"default": "UTC"},
            "target_timezone": {"name": "to", "description": "Where to."},
            "tz": {"value": "UTC"},  # the tool takes no 'tz': skipped, said in the log
        },
        "annotations": {"title": "Time converter"},
    },
}


async def test_overrides_on_mcp_server_time(tmp_path: Path) -> None:
    servers = {
        "time": {"command": str(TIME), "args": ["--local-timezone", "UTC"], "tools": {"overrides": OVERRIDES}},
        "broken": {"command": str(TIME), "tools": {"overrides": {"now": {"nme": "x"}}}},
    }
    config = tmp_path / "patchbay.json"
    config.write_text(json.dumps({"mcpServers": servers, "patchbay": {"watch": False, "connect_timeout": 30}}))
    log = tmp_path / "p.log"
    command = [sys.executable, "-m", "mcp_patchbay", "--config", str(config), "--log-file", str(log)]
    params = StdioServerParameters(command=command[0], args=command[1:], cwd=str(ROOT))
    with anyio.fail_after(60):
        async with Client(params, cache=None) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert sorted(tools) == ["time__convert_time", "time__now"]
            now = tools["time__now"]
            assert now.description == "Get current time in a specific timezone\n\nIt always answers for Tokyo."
            assert now.input_schema.get("properties") == {} and "required" not in now.input_schema
            convert = tools["time__convert_time"]
            properties = convert.input_schema["properties"]
            assert list(properties) == ["source_timezone", "time", "to"]
            assert properties["source_timezone"]["default"] == "UTC"
            assert properties["to"]["description"] == "Where to."
            assert convert.input_schema["required"] == ["time", "to"]
            assert convert.annotations is not None and convert.annotations.title == "Time converter"
            assert convert.annotations.read_only_hint is True  # merged: the server's own kept

            # The hidden argument omitted: mcp-server-time receives it, under its own name.
            answer = await client.call_tool("time__now", {})
            assert not answer.is_error, result_text(answer)
            assert json.loads(result_text(answer))["timezone"] == "Asia/Tokyo"

            # A renamed argument and a default: sent under the server's names.
            converted = await client.call_tool("time__convert_time", {"time": "12:00", "to": "Asia/Tokyo"})
            assert not converted.is_error, result_text(converted)
            both = json.loads(result_text(converted))
            assert both["source"]["timezone"] == "UTC" and both["target"]["timezone"] == "Asia/Tokyo"
            assert both["target"]["datetime"][11:16] == "21:00"

            # The server's own name still resolves to the renamed tool.
            old = await client.call_tool("time__get_current_time", {"timezone": "Europe/Paris"})
            assert not old.is_error, result_text(old)
            assert json.loads(result_text(old))["timezone"] == "Asia/Tokyo"  # the fixed value wins

    written = log.read_text(encoding="utf-8")
    assert (
        "mcpServers.broken.tools.overrides.now: unknown key 'nme' (did you mean 'name'?)" in written
        and str(config) in written
    ), written
    assert "time.tools.overrides.convert_time.arguments.tz: the tool takes no argument 'tz'" in written, written
