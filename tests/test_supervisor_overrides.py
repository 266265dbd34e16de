"""The supervisor's catalog names the config file in a skipped override's warning."""

from __future__ import annotations

import logging
from typing import Any

import mcp_types as types
import pytest
from mcp.server.context import ServerRequestContext

from tests.harness import FakeTool, MemoryUpstreams, config_from, connected, make_server, text

pytestmark = pytest.mark.anyio


async def _echo(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
    return text("echo")


async def test_a_skipped_override_s_warning_names_the_config_file(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="mcp_patchbay.catalog.merge")
    config = config_from({"notes": {"command": "x", "tools": {"overrides": {"missing": {"name": "other"}}}}})
    upstreams = MemoryUpstreams({"notes": make_server("notes", {"add": FakeTool(_echo)})})
    async with connected(config, upstreams) as (proxy, client):
        assert [t.name for t in (await client.list_tools()).tools] == ["notes__add"]
        assert [r.key for r in proxy.supervisor.catalog.remarks] == ["notes.tools.overrides.missing"]
    told = [r.getMessage() for r in caplog.records if "override skipped" in r.getMessage()]
    assert told and all(message.startswith(f"override skipped in {config.path}: ") for message in told)
