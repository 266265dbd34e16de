"""End to end: tasks through the proxy over stdio, with server-everything's ``simulate-research-query``.

server-everything (2026.8.31) declares ``tasks`` and lists ``simulate-research-query`` with
``execution.taskSupport: "required"``: a plain call of it is refused, a task-augmented one runs
four one-second stages. Before issue 33 the proxy declared no tasks, dropped the call's ``task``,
answered ``tasks/*`` with -32601, and gave a client that does not speak tasks the server's
"requires task augmentation" error.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from tests.e2e_util import NODE_MODULES, ROOT, result_text
from tests.task_upstream import RELATED, Heard, ask

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

NODE = shutil.which("node")
EVERYTHING = NODE_MODULES / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
TOOL = "ev__simulate-research-query"

if NODE is None or not EVERYTHING.exists():
    pytest.skip("node or tests/e2e/node_modules missing: run scripts/install", allow_module_level=True)


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


async def test_server_everythings_research_task_through_the_proxy(tmp_path: Path) -> None:
    config = tmp_path / "patchbay.json"
    servers = {"ev": {"command": NODE, "args": [str(EVERYTHING), "stdio"]}}
    config.write_text(json.dumps({"mcpServers": servers, "patchbay": {"watch": False, "connect_timeout": 30}}))
    args = ["-m", "mcp_patchbay", "--config", str(config), "--log-file", str(tmp_path / "p.log")]
    params = StdioServerParameters(command=sys.executable, args=args, cwd=str(ROOT))
    heard = Heard()
    said: list[str | None] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        said.append(message)

    changed = [anyio.Event()]

    async def on_message(message: object) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed[0].set()

    with anyio.fail_after(60):
        async with Client(params, mode="legacy", cache=None, extensions=[heard], message_handler=on_message) as client:
            init = client.session.initialize_result
            assert init is not None and init.capabilities.tasks is not None
            assert init.capabilities.tasks.requests is not None
            listed = {t.name: t for t in (await client.list_tools()).tools}
            while TOOL not in listed:  # the server adds it once it knows its client (then list_changed)
                await changed[0].wait()
                changed[0] = anyio.Event()
                listed = {t.name: t for t in (await client.list_tools()).tools}
            assert listed[TOOL].execution == types.ToolExecution(task_support="required")

            created = await ask(client, "tools/call", {"name": TOOL, "arguments": {"topic": "tides"}, "task": {}})
            task_id = created["task"]["taskId"]
            assert not re.fullmatch(r"[0-9a-f]{32}", task_id)  # the proxy's id, not the server's
            assert created["task"]["status"] == "working"
            got = await ask(client, "tasks/get", {"taskId": task_id})
            assert got["taskId"] == task_id and got["status"] in ("working", "completed")
            assert [t["taskId"] for t in (await ask(client, "tasks/list", {}))["tasks"]] == [task_id]

            doomed = (await ask(client, "tools/call", {"name": TOOL, "arguments": {"topic": "x"}, "task": {}}))["task"]
            cancelled = await ask(client, "tasks/cancel", {"taskId": doomed["taskId"]})
            assert cancelled["status"] == "cancelled"

            # A client that does not speak tasks: the proxy runs the task for it and waits.
            plain = await client.call_tool(TOOL, {"topic": "reefs"}, progress_callback=on_progress)
            assert not plain.is_error and "# Research Report: reefs" in result_text(plain)
            assert "Analyzing content..." in said

            result = await ask(client, "tasks/result", {"taskId": task_id})
            assert "# Research Report: tides" in result["content"][0]["text"]
            assert result["_meta"][RELATED] == {"taskId": task_id}
            assert (await ask(client, "tasks/get", {"taskId": task_id}))["status"] == "completed"
            assert any(n.task_id == task_id and n.status_message == "Synthesizing findings..." for n in heard.notices)
            assert {n.task_id for n in heard.notices} <= {task_id, doomed["taskId"]}
            with pytest.raises(MCPError) as unknown:
                await ask(client, "tasks/get", {"taskId": "0123456789abcdef0123456789abcdef"})
            assert unknown.value.code == types.INVALID_PARAMS
