"""End to end: a 2026-07-28 client answers a 2025-era server's sampling and elicitation through the proxy.

``mcp-patchbay serve CONFIG`` over real stdio, and ``mcp-patchbay serve --http 127.0.0.1:0
CONFIG`` over real HTTP, in front of the pinned server-everything (which speaks the 2025
era and asks its client mid-call in ``trigger-sampling-request`` and
``trigger-elicitation-request``). The client is the SDK's ``Client`` in its default mode:
it speaks 2026-07-28, so it is asked through ``input_required`` results and answers by
calling again. Before ``rounds``, these calls failed with -32600.

fast-agent 0.10 (a real client that speaks 2026-07-28 over stdio) runs too when
``PATCHBAY_FAST_AGENT_PYTHON`` names a Python with ``fast-agent-mcp`` installed: its
``passthrough`` model answers the sampling request with the prompt it was given.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.e2e_util import NODE_MODULES, ROOT, result_text

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

EVERYTHING = NODE_MODULES / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
NODE = shutil.which("node")
MODERN = "2026-07-28"
SAMPLE = "everything__trigger-sampling-request"
ELICIT = "everything__trigger-elicitation-request"
SERVING = re.compile(rb"serving MCP at (http://\S+/mcp)")
FAST_AGENT_PYTHON = os.environ.get("PATCHBAY_FAST_AGENT_PYTHON")

if NODE is None or not EVERYTHING.exists():
    pytest.skip("node or tests/e2e/node_modules missing: run scripts/install", allow_module_level=True)


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def write_config(tmp: Path) -> Path:
    path = tmp / "patchbay.json"
    servers = {"everything": {"command": NODE, "args": [str(EVERYTHING)]}}
    path.write_text(json.dumps({"mcpServers": servers, "patchbay": {"watch": False, "startup_wait": 10}}))
    return path


class Answers:
    """The client's side: what it was asked, and its answers."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.tools_changed = anyio.Event()
        """Set by the proxy's next tools/list_changed (replaced before each listing)."""

    async def sampling(self, ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        content = params.messages[0].content
        self.asked.append(content.text if isinstance(content, types.TextContent) else "?")
        text = types.TextContent(type="text", text="answered by the 2026 client")
        return types.CreateMessageResult(role="assistant", content=text, model="rounds-e2e")

    async def elicitation(self, ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Ada Lovelace", "check": True})

    async def on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.tools_changed.set()

    def callbacks(self) -> dict[str, Any]:
        return {
            "sampling_callback": self.sampling,
            "elicitation_callback": self.elicitation,
            "message_handler": self.on_message,
        }


async def exercise(client: Client, answers: Answers) -> None:
    """Both kinds of question, each answered through the proxy's rounds."""
    assert client.session.protocol_version == MODERN  # pyright: ignore[reportAttributeAccessIssue]
    # server-everything adds its asking tools right after the handshake (for a client that
    # offers sampling and elicitation) and says so with list_changed: the proxy re-lists.
    names: set[str] = set()
    with anyio.move_on_after(10):
        while True:
            answers.tools_changed = anyio.Event()  # before listing: a change during it is not missed
            names = {tool.name for tool in (await client.list_tools()).tools}
            if {SAMPLE, ELICIT} <= names:
                break
            await answers.tools_changed.wait()
    assert {SAMPLE, ELICIT} <= names, names

    sampled = await client.call_tool(SAMPLE, {"prompt": "name a colour", "maxTokens": 10})
    assert not sampled.is_error, sampled
    reply = json.loads(result_text(sampled).split("\n", 1)[1])
    assert reply == {
        "model": "rounds-e2e",
        "role": "assistant",
        "content": {"type": "text", "text": "answered by the 2026 client"},
    }

    elicited = await client.call_tool(ELICIT, {})
    assert not elicited.is_error, elicited
    assert "Ada Lovelace" in result_text(elicited)
    assert answers.asked == [
        "Resource trigger-sampling-request context: name a colour",
        "Please provide inputs for the following fields:",
    ]


async def test_a_2026_client_answers_over_stdio(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    command = ["-m", "mcp_patchbay", "serve", "--log-file", str(tmp_path / "p.log"), str(config)]
    params = StdioServerParameters(command=sys.executable, args=command, cwd=str(ROOT))
    answers = Answers()
    with anyio.fail_after(60):
        async with Client(params, cache=None, **answers.callbacks()) as client:
            await exercise(client, answers)


@asynccontextmanager
async def gateway(config: Path) -> AsyncGenerator[str]:
    """``mcp-patchbay serve --http 127.0.0.1:0``; yields the address it prints."""
    command = [sys.executable, "-m", "mcp_patchbay", "serve", "--http", "127.0.0.1:0", str(config)]
    process = await anyio.open_process(command, cwd=ROOT, stderr=subprocess.PIPE)
    stderr = process.stderr
    assert stderr is not None
    try:
        seen = b""
        with anyio.fail_after(30):
            while (found := SERVING.search(seen)) is None:
                seen += await stderr.receive()
        async with anyio.create_task_group() as tg:

            async def drain() -> None:  # a full pipe would stall the gateway's logging
                async for _ in stderr:
                    pass

            tg.start_soon(drain)
            yield found.group(1).decode()
            tg.cancel_scope.cancel()
    finally:
        process.terminate()
        with anyio.fail_after(30):
            await process.wait()


async def test_a_2026_client_answers_over_http(tmp_path: Path) -> None:
    answers = Answers()
    with anyio.fail_after(90):
        async with gateway(write_config(tmp_path)) as url, httpx2.AsyncClient(timeout=httpx2.Timeout(30)) as http:
            transport = streamable_http_client(url, http_client=http)
            async with Client(transport, cache=None, **answers.callbacks()) as client:  # pyright: ignore[reportArgumentType]
                await exercise(client, answers)


FAST_AGENT_DRIVER = """
import asyncio, sys
from fast_agent import FastAgent

fast = FastAgent("rounds-e2e", config_path=sys.argv[1], parse_cli_args=False, quiet=True)


@fast.agent(name="probe", servers=["patchbay"], model="passthrough")
async def main() -> None:
    async with fast.run() as app:
        call = '***CALL_TOOL patchbay__everything__trigger-sampling-request {"prompt": "from fast-agent"}'
        print("REPLY:", await app.probe.send(call))


asyncio.run(main())
"""


@pytest.mark.skipif(not FAST_AGENT_PYTHON, reason="PATCHBAY_FAST_AGENT_PYTHON (a Python with fast-agent-mcp) not set")
async def test_fast_agent_keeps_sampling_through_the_proxy(tmp_path: Path) -> None:
    assert FAST_AGENT_PYTHON is not None
    proxy = [sys.executable, "-m", "mcp_patchbay", "serve", str(write_config(tmp_path))]
    server = {"command": proxy[0], "args": proxy[1:], "cwd": str(ROOT), "sampling": {"model": "passthrough"}}
    settings = {
        "default_model": "passthrough",
        "logger": {"level": "warning", "progress_display": False, "show_chat": False, "show_tools": False},
        "mcp": {"servers": {"patchbay": server}},
    }
    config = tmp_path / "fastagent.config.yaml"
    config.write_text(json.dumps(settings))  # JSON is YAML
    driver = tmp_path / "driver.py"
    driver.write_text(FAST_AGENT_DRIVER)
    home = tmp_path / "home"
    home.mkdir()
    with anyio.fail_after(120):
        done = await anyio.run_process(
            [FAST_AGENT_PYTHON, str(driver), str(config)], cwd=tmp_path, env={**os.environ, "HOME": str(home)}
        )
    reply = done.stdout.decode()
    assert "REPLY: LLM sampling result:" in reply, reply
    assert '"text": "Resource trigger-sampling-request context: from fast-agent"' in reply, reply
    assert "-32600" not in reply
