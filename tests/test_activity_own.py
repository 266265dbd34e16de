"""The activity log and what the proxy answers itself: its status resource is a read like any other."""

from __future__ import annotations

import pytest

from mcp_patchbay.session.status import STATUS_URI
from tests.harness import MemoryUpstreams, config_from
from tests.test_activity import Rows, client, files_server, logged_proxy

pytestmark = pytest.mark.anyio


async def test_a_read_of_the_status_resource_is_a_row_without_a_server() -> None:
    rows = Rows()
    config = config_from({"files": {"command": "x"}})
    async with logged_proxy(config, MemoryUpstreams({"files": files_server()}), rows) as (proxy, _):
        async with client(proxy) as c:
            await c.read_resource(STATUS_URI)
        (read,) = await rows.wait_for("resource_read")
    assert (read.exposed, read.server, read.upstream, read.outcome, read.client) == (
        STATUS_URI,
        None,
        None,
        "ok",
        "test-client 7.1",
    )
    assert read.bytes_in == len(f'{{"uri":"{STATUS_URI}"}}') and read.bytes_out and read.bytes_out > 100


async def test_the_proxy_s_own_tools_are_rows_without_a_server() -> None:
    rows = Rows()
    config = config_from({"files": {"command": "x"}}, {"expose": "search", "status_tool": True})
    async with logged_proxy(config, MemoryUpstreams({"files": files_server()}), rows) as (proxy, _):
        async with client(proxy) as c:
            found = await c.call_tool("patchbay__find_tools", {"query": "echo"})
            status = await c.call_tool("patchbay__status", {})
        logged = await rows.wait_for("tool_call", 2)
    assert not found.is_error and not status.is_error
    assert [(row.exposed, row.server, row.upstream, row.outcome) for row in logged] == [
        ("patchbay__find_tools", None, None, "ok"),
        ("patchbay__status", None, None, "ok"),
    ]
    assert all(row.bytes_out and row.bytes_out > 50 for row in logged)
