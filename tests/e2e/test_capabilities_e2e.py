"""End to end: the pinned server-everything behind the proxy sees a URL-elicitation client as one.

server-everything lists ``trigger-url-elicitation`` only to a client that declared URL
elicitation, asks for a URL in ``elicitation/create`` (its request path) or answers ``-32042``
(its error path, ``errorPath: true``); and it names itself "Everything Reference Server".
The proxy runs in process over the real server's stdio; the client is the SDK's.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_patchbay.session.proxy import Proxy
from tests.e2e_util import NODE_MODULES, make_config, result_text
from tests.harness import proxy_transport

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

EVERYTHING = NODE_MODULES / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
NODE = shutil.which("node")
URL_TOOL = "everything__trigger-url-elicitation"

if NODE is None or not EVERYTHING.exists():
    pytest.skip("node or tests/e2e/node_modules missing: run scripts/install", allow_module_level=True)


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


class User:
    """The client's side: the URLs it was asked to open, and list changes."""

    def __init__(self) -> None:
        self.urls: list[str] = []
        self.tools_changed = anyio.Event()

    async def elicitation(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestURLParams)
        self.urls.append(params.url)
        return types.ElicitResult(action="accept")

    async def on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.tools_changed.set()


async def test_server_everything_asks_a_url_client_for_urls_and_names_itself(tmp_path: Path) -> None:
    config = make_config(tmp_path, {"everything": {"command": NODE, "args": [str(EVERYTHING)]}}, {})
    user = User()
    proxy = Proxy(config)
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            await tg.start(proxy.run)
            async with Client(
                proxy_transport(proxy),  # pyright: ignore[reportArgumentType]
                mode="legacy",
                cache=None,
                elicitation_callback=user.elicitation,
                message_handler=user.on_message,
            ) as client:
                names: set[str] = set()
                while URL_TOOL not in names:  # listed once the server saw the client's capabilities
                    user.tools_changed = anyio.Event()
                    names = {tool.name for tool in (await client.list_tools()).tools}
                    if URL_TOOL not in names:
                        await user.tools_changed.wait()

                with pytest.raises(MCPError) as raised:
                    await client.call_tool(URL_TOOL, {"url": "https://example.com/first", "errorPath": True})
                asked = await client.call_tool(URL_TOOL, {"url": "https://example.com/second"})
                status = await client.read_resource("patchbay://status")
            tg.cancel_scope.cancel()

    assert raised.value.code == types.URL_ELICITATION_REQUIRED
    (page,) = raised.value.data["elicitations"]
    assert page["mode"] == "url" and page["url"] == "https://modelcontextprotocol.io" and page["elicitationId"]
    assert not asked.is_error and "User completed the URL elicitation flow" in result_text(asked)
    assert user.urls == ["https://example.com/second"]
    content = status.contents[0]
    assert isinstance(content, types.TextResourceContents)
    assert json.loads(content.text)["servers"]["everything"]["title"] == "Everything Reference Server"
