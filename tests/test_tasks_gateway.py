"""Tasks on the gateway (issue 33): a task is its member's (another can neither read, list nor cancel
it, nor tell it exists), ``max_tasks`` counts per member, and a replica sharing the gateway's keys
follows a task another replica started on a remote upstream."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

from mcp_patchbay.config import Config, parse_config
from tests.harness import (
    FakeTool,
    MemoryUpstreams,
    config_from,
    make_server,
    proxy_transport,
    running_proxy,
    text,
    until,
)
from tests.task_upstream import Heard, TaskUpstream, ask
from tests.test_gateway import ALICE, BOB, client, running

pytestmark = pytest.mark.anyio

KEY = "k" * 40


def config(servers: dict[str, Any], patchbay: dict[str, Any] | None = None, **gateway: Any) -> Config:
    document = {
        "mcpServers": servers,
        "gateway": {"tokens": {"alice": ALICE, "bob": BOB}, **gateway},
        "patchbay": {"watch": False, **(patchbay or {})},
    }
    return parse_config(json.dumps(document), Path("/virtual/patchbay.json").resolve(), environ={})


async def refusal(c: Any, method: str, params: dict[str, Any]) -> MCPError:
    with pytest.raises(MCPError) as caught:
        await ask(c, method, params)
    return caught.value


async def test_a_members_task_is_hidden_from_every_other_member() -> None:
    ev = TaskUpstream("ev", {"research": "required"})
    heard = Heard()
    async with running(config({"ev": {"command": "x"}}), MemoryUpstreams({"ev": ev.server})) as (_, base):
        async with client(base, token=ALICE, extensions=[heard]) as alice, client(base, token=BOB) as bob:
            task_id = (await ask(alice, "tools/call", {"name": "ev__research", "task": {}}))["task"]["taskId"]
            never = await refusal(bob, "tasks/get", {"taskId": task_id.replace("A", "B", 1)})
            for method in ("tasks/get", "tasks/result", "tasks/cancel"):
                refused = await refusal(bob, method, {"taskId": task_id})
                assert (refused.code, refused.message) == (never.code, never.message)  # as one that never was
            assert (await ask(bob, "tasks/list", {}))["tasks"] == []
            assert ev.cancelled == []
            await ev.say("task-1", "still alice's")
            await until(lambda: [n.status_message for n in heard.notices] == ["still alice's"])
            async with client(base, token=ALICE) as again:  # the member's, not the session's
                assert (await ask(again, "tasks/get", {"taskId": task_id}))["statusMessage"] == "still alice's"
            await ev.finish("task-1", "for alice")
            assert (await ask(alice, "tasks/result", {"taskId": task_id}))["content"][0]["text"] == "for alice"


async def test_max_tasks_counts_per_member_and_a_proxy_run_task_keeps_its_members_access() -> None:
    release = anyio.Event()

    async def slow(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        await release.wait()
        return text("slow done")

    memory = MemoryUpstreams({"plain": make_server("plain", {"slow": FakeTool(slow)})})
    access = [{"tokens": ["alice"], "servers": ["*"]}, {"tokens": ["bob"], "servers": []}]
    async with running(config({"plain": {"command": "x"}}, {"max_tasks": 1}, access=access), memory) as (_, base):
        async with client(base, token=ALICE) as alice, client(base, token=BOB) as bob:
            first = (await ask(alice, "tools/call", {"name": "plain__slow", "task": {}}))["task"]["taskId"]
            assert "max_tasks" in (await refusal(alice, "tools/call", {"name": "plain__slow", "task": {}})).message
            denied = (await ask(bob, "tools/call", {"name": "plain__slow", "task": {}}))["task"]["taskId"]
            outcome = await ask(bob, "tasks/result", {"taskId": denied})  # run in the background, as bob
            assert outcome["structuredContent"]["error"]["code"] == "TOOL_NOT_FOUND"
            release.set()
            assert (await ask(alice, "tasks/result", {"taskId": first}))["content"][0]["text"] == "slow done"


async def test_a_replica_follows_a_task_another_started_on_a_remote_upstream() -> None:
    ev = TaskUpstream("ev", {"research": "required"})
    servers = {"ev": {"url": "http://ev.invalid/mcp"}, "local": {"command": "x"}}
    shared = config_from(servers, {"watch": False})
    local = TaskUpstream("local", {"job": "required"})
    first = MemoryUpstreams({"ev": ev.server, "local": local.server})
    second = MemoryUpstreams({"ev": ev.server, "local": TaskUpstream("local", {"job": "required"}).server})
    async with (
        running_proxy(shared, first, request_state_keys=[KEY]) as a,
        running_proxy(shared, second, request_state_keys=[KEY]) as b,
        Client(proxy_transport(a), mode="legacy", cache=None) as one,  # pyright: ignore[reportArgumentType]
        Client(proxy_transport(b), mode="legacy", cache=None) as other,  # pyright: ignore[reportArgumentType]
    ):
        await a.supervisor.wait_startup()
        await b.supervisor.wait_startup()
        remote = (await ask(one, "tools/call", {"name": "ev__research", "task": {}}))["task"]["taskId"]
        held = (await ask(one, "tools/call", {"name": "local__job", "task": {}}))["task"]["taskId"]
        assert (await ask(other, "tasks/get", {"taskId": remote}))["status"] == "working"
        await ev.finish("task-1", "read elsewhere")
        assert (await ask(other, "tasks/result", {"taskId": remote}))["content"][0]["text"] == "read elsewhere"
        elsewhere = await refusal(other, "tasks/get", {"taskId": held})
        assert elsewhere.code == types.INVALID_PARAMS and "here" in elsewhere.message
