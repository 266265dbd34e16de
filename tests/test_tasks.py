"""Tasks through the proxy (issue 33): a task-augmented call reaches the upstream as one, and the
client polls, reads, lists and cancels it with the proxy's own ids; what a client that does not
speak tasks gets; the proxy's own tasks; ids that collide upstream; limits and the ttl; the
2026-07-28 extension. The gateway's members and replicas are in ``test_tasks_gateway``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.extension import advertise
from mcp.server.context import ServerRequestContext
from mcp.server.request_state import RequestStateSecurity
from mcp.shared.exceptions import MCPError

from mcp_patchbay.session.proxy import Proxy
from mcp_patchbay.tasks import EXTENSION
from mcp_patchbay.tasks.ids import TaskRef, opened, seal
from tests.harness import FakeTool, MemoryUpstreams, config_from, connected, make_server, result_text, text, until
from tests.task_upstream import RELATED, Heard, TaskUpstream, ask

pytestmark = pytest.mark.anyio


async def refused(client: Client, method: str, params: dict[str, Any]) -> MCPError:
    with pytest.raises(MCPError) as caught:
        await ask(client, method, params)
    return caught.value


@asynccontextmanager
async def through_proxy(
    servers: dict[str, Any], patchbay: dict[str, Any] | None = None, **client_kwargs: Any
) -> AsyncIterator[tuple[Proxy, Client]]:
    config = config_from({name: {"command": name} for name in servers}, {"watch": False, **(patchbay or {})})
    memory = MemoryUpstreams({name: getattr(s, "server", s) for name, s in servers.items()})
    async with connected(config, memory, **client_kwargs) as (proxy, client):
        await proxy.supervisor.wait_startup()
        yield proxy, client


async def test_a_task_call_reaches_the_upstream_as_one_and_is_served_under_the_proxys_id() -> None:
    ev = TaskUpstream("ev", {"research": "required"})
    async with through_proxy({"ev": ev}) as (proxy, client):
        caps = client.session.initialize_result
        assert caps is not None and caps.capabilities.tasks is not None  # pyright: ignore[reportAttributeAccessIssue]
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert listed["ev__research"].execution == types.ToolExecution(task_support="required")
        created = await ask(
            client, "tools/call", {"name": "ev__research", "arguments": {"topic": "x"}, "task": {"ttl": 60_000}}
        )
        task = created["task"]
        assert ev.calls[-1]["task"] == {"ttl": 60_000}  # forwarded as a task, the arguments with it
        assert ev.calls[-1]["arguments"] == {"topic": "x"}
        assert task["status"] == "working" and task["ttl"] == 60_000
        assert task["taskId"] != "task-1" and "task-1" not in task["taskId"]
        got = await ask(client, "tasks/get", {"taskId": task["taskId"]})
        assert got["taskId"] == task["taskId"] and got["status"] == "working"
        await ev.say("task-1", "halfway")
        assert (await ask(client, "tasks/get", {"taskId": task["taskId"]}))["statusMessage"] == "halfway"
        await ev.finish("task-1", "the report")
        result = await ask(client, "tasks/result", {"taskId": task["taskId"]})
        assert result["content"] == [{"type": "text", "text": "the report"}]
        assert result["_meta"][RELATED] == {"taskId": task["taskId"]}
        listed_tasks = (await ask(client, "tasks/list", {}))["tasks"]
        assert [(t["taskId"], t["status"]) for t in listed_tasks] == [(task["taskId"], "completed")]
        assert len(proxy.tasks.table) == 1


async def test_a_server_asking_for_input_during_its_task_names_the_task_by_the_clients_id() -> None:
    """A server asking for input while its task runs names the task in the request's related-task
    ``_meta`` by its own id; that id reached the client, which knows only the proxy's."""
    ev = TaskUpstream("ev", {"research": "required"})
    named: list[Any] = []

    async def answer(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        named.append((params.meta or {}).get(RELATED))
        return types.ElicitResult(action="accept", content={})

    async with through_proxy({"ev": ev}, elicitation_callback=answer) as (_, client):
        created = await ask(client, "tools/call", {"name": "ev__research", "arguments": {}, "task": {"ttl": 60_000}})
        with anyio.fail_after(5):
            answered = await ev.ask_input("task-1", "Which sources?")
        assert answered.action == "accept"
        await ev.ask_input("task-9", "A task the proxy never saw")  # not named at all
    assert named == [{"taskId": created["task"]["taskId"]}, None]


async def test_status_notices_and_progress_reach_the_client_under_the_proxys_id_and_token() -> None:
    ev = TaskUpstream("ev", {"research": "required"})
    heard = Heard()
    progress: list[types.ProgressNotificationParams] = []

    async def handler(message: Any) -> None:
        if isinstance(message, types.ProgressNotification):
            progress.append(message.params)

    async with through_proxy({"ev": ev}, extensions=[heard], message_handler=handler) as (_, client):
        params = {"name": "ev__research", "task": {}, "_meta": {"progressToken": "mine"}}
        task_id = (await ask(client, "tools/call", params))["task"]["taskId"]
        assert ev.calls[-1]["_meta"]["progressToken"] != "mine"  # the proxy's own token goes upstream
        await ev.say("task-1", "reading sources")
        await until(lambda: any(n.status_message == "reading sources" for n in heard.notices))
        await ev.progress("task-1", 0.5, "half")
        await until(lambda: progress)
        assert (progress[0].progress_token, progress[0].progress, progress[0].message) == ("mine", 0.5, "half")
        await ev.finish("task-1", "done")
        await until(lambda: any(n.status == "completed" for n in heard.notices))
        assert {n.task_id for n in heard.notices} == {task_id}


async def test_unknown_and_upstream_ids_are_invalid_params() -> None:
    ev = TaskUpstream("ev", {"research": "required"})
    async with through_proxy({"ev": ev}) as (_, client):
        await ask(client, "tools/call", {"name": "ev__research", "task": {}})
        for method in ("tasks/get", "tasks/result", "tasks/cancel"):
            for task_id in ("task-1", "nope", "v1.AAAA"):  # the upstream's own id is no id here
                assert (await refused(client, method, {"taskId": task_id})).code == types.INVALID_PARAMS
        assert (await refused(client, "tasks/list", {"cursor": "not ours"})).code == types.INVALID_PARAMS


async def test_cancel_reaches_the_upstream_and_a_cancelled_task_stays_cancelled() -> None:
    ev = TaskUpstream("ev", {"research": "required"})
    async with through_proxy({"ev": ev}) as (_, client):
        task_id = (await ask(client, "tools/call", {"name": "ev__research", "task": {}}))["task"]["taskId"]
        cancelled = await ask(client, "tasks/cancel", {"taskId": task_id})
        assert (cancelled["taskId"], cancelled["status"]) == (task_id, "cancelled")
        assert ev.cancelled == ["task-1"]
        assert (await refused(client, "tasks/cancel", {"taskId": task_id})).code == types.INVALID_PARAMS
        assert (await ask(client, "tasks/get", {"taskId": task_id}))["status"] == "cancelled"
        assert (await refused(client, "tasks/result", {"taskId": task_id})).code == types.INVALID_PARAMS


async def test_two_upstreams_numbering_their_tasks_alike_stay_apart() -> None:
    a = TaskUpstream("a", {"job": "optional"})
    b = TaskUpstream("b", {"job": "optional"})
    async with through_proxy({"a": a, "b": b}) as (_, client):
        first = (await ask(client, "tools/call", {"name": "a__job", "task": {}}))["task"]["taskId"]
        second = (await ask(client, "tools/call", {"name": "b__job", "task": {}}))["task"]["taskId"]
        assert list(a.jobs) == list(b.jobs) == ["task-1"] and first != second
        await ask(client, "tasks/cancel", {"taskId": second})
        assert (a.cancelled, b.cancelled) == ([], ["task-1"])
        await a.finish("task-1", "from a")
        assert result_text(types.CallToolResult.model_validate(await ask(client, "tasks/result", {"taskId": first})))
        assert (await ask(client, "tasks/result", {"taskId": first}))["content"][0]["text"] == "from a"
        assert (await ask(client, "tasks/get", {"taskId": second}))["status"] == "cancelled"


async def test_a_client_that_does_not_speak_tasks_gets_the_final_result_with_progress() -> None:
    ev = TaskUpstream("ev", {"research": "required"})
    said: list[tuple[float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        said.append((progress, message))

    async with through_proxy({"ev": ev}) as (_, client):
        async with anyio.create_task_group() as tg:

            async def upstream_side() -> None:
                await until(lambda: "task-1" in ev.jobs)
                await ev.say("task-1", "analyzing")
                await until(lambda: (2.0, "analyzing") in said)
                await ev.finish("task-1", "final report")

            tg.start_soon(upstream_side)
            result = await client.call_tool("ev__research", {"topic": "y"}, progress_callback=on_progress)
        assert result_text(result) == "final report" and not result.is_error
        assert ev.calls[-1]["task"] and ev.calls[-1]["arguments"] == {"topic": "y"}
        assert said[:2] == [(1.0, "started"), (2.0, "analyzing")]  # its status messages, as progress


async def test_a_task_run_for_a_client_that_does_not_speak_tasks_is_bounded_by_task_timeout() -> None:
    ev = TaskUpstream("ev", {"research": "required"})
    async with through_proxy({"ev": ev}, {"task_timeout": 0.2}) as (_, client):
        result = await client.call_tool("ev__research", {})
        assert result.is_error and result.structured_content is not None
        assert result.structured_content["error"]["code"] == "TIMEOUT"
        assert "0.2s" in result_text(result)
        await until(lambda: ev.cancelled == ["task-1"])  # the task is not left running upstream


async def test_a_task_on_a_tool_whose_upstream_cannot_run_one_is_run_by_the_proxy() -> None:
    release = anyio.Event()

    async def slow(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        await release.wait()
        return text(f"slow {args['n']}")

    heard = Heard()
    plain = make_server("plain", {"slow": FakeTool(slow)})
    async with through_proxy({"plain": plain}, extensions=[heard]) as (_, client):
        created = await ask(client, "tools/call", {"name": "plain__slow", "arguments": {"n": 1}, "task": {}})
        task_id = created["task"]["taskId"]
        assert (await ask(client, "tasks/get", {"taskId": task_id}))["status"] == "working"
        release.set()
        result = await ask(client, "tasks/result", {"taskId": task_id})
        assert result["content"][0]["text"] == "slow 1" and result["_meta"][RELATED] == {"taskId": task_id}
        await until(lambda: [n.status for n in heard.notices] == ["completed"])
        unknown = await ask(client, "tools/call", {"name": "plain__nothing", "task": {}})
        failed = await ask(client, "tasks/result", {"taskId": unknown["task"]["taskId"]})
        assert failed["isError"] and failed["structuredContent"]["error"]["code"] == "TOOL_NOT_FOUND"


async def test_tasks_are_bounded_per_caller_and_by_their_ttl() -> None:
    release = anyio.Event()

    async def slow(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        if args.get("wait"):
            await release.wait()
        return text("ok")

    plain = make_server("plain", {"slow": FakeTool(slow)})
    async with through_proxy({"plain": plain}, {"max_tasks": 2, "task_ttl": 60}) as (proxy, client):
        now = [proxy.tasks.table.clock()]
        proxy.tasks.table.clock = lambda: now[0]
        running = [
            (await ask(client, "tools/call", {"name": "plain__slow", "arguments": {"wait": True}, "task": {}}))["task"]
            for _ in range(2)
        ]
        assert running[0]["ttl"] == 60_000  # none asked: the most the proxy keeps a task
        full = await refused(client, "tools/call", {"name": "plain__slow", "task": {"ttl": 10**9}})
        assert "max_tasks" in full.message
        release.set()
        await ask(client, "tasks/result", {"taskId": running[0]["taskId"]})
        await ask(client, "tasks/result", {"taskId": running[1]["taskId"]})
        third = (await ask(client, "tools/call", {"name": "plain__slow", "task": {"ttl": 10**9}}))["task"]
        assert third["ttl"] == 60_000  # capped
        ids = [t["taskId"] for t in (await ask(client, "tasks/list", {}))["tasks"]]
        assert ids == [running[1]["taskId"], third["taskId"]]  # the oldest finished one made room
        now[0] += 61
        assert (await refused(client, "tasks/get", {"taskId": third["taskId"]})).code == types.INVALID_PARAMS
        assert (await ask(client, "tasks/list", {}))["tasks"] == []
        assert len(proxy.tasks.table) == 0  # results are not kept past the ttl


async def test_the_2026_extension_gets_a_task_for_a_tool_that_requires_one() -> None:
    ev = TaskUpstream("ev", {"research": "required", "quick": "optional"})
    async with through_proxy({"ev": ev}, mode="2026-07-28", extensions=[advertise(EXTENSION)]) as (_, client):
        created = await ask(client, "tools/call", {"name": "ev__research", "arguments": {}})
        assert created["resultType"] == "task" and created["status"] == "working" and "ttlMs" in created
        task_id = created["taskId"]
        quick = await ask(client, "tools/call", {"name": "ev__quick", "arguments": {}})
        assert quick["content"][0]["text"] == "quick answered at once"  # the proxy decides: no task needed
        assert (await ask(client, "tasks/get", {"taskId": task_id}))["status"] == "working"
        await ev.finish("task-1", "inline")
        got: dict[str, Any] = {}

        async def completed() -> bool:
            got.update(await ask(client, "tasks/get", {"taskId": task_id}))
            return got["status"] == "completed"

        await until(completed)
        assert got["result"]["content"] == [{"type": "text", "text": "inline"}] and got["resultType"] == "complete"
        assert (await refused(client, "tasks/list", {})).code == types.METHOD_NOT_FOUND
        assert await ask(client, "tasks/update", {"taskId": task_id, "inputResponses": {}}) == {
            "resultType": "complete",
            "_meta": got["_meta"],
        }


async def test_the_2026_extension_methods_need_the_extension_declared() -> None:
    ev = TaskUpstream("ev", {"research": "required"})
    async with through_proxy({"ev": ev}, mode="2026-07-28") as (_, client):
        assert (await refused(client, "tasks/get", {"taskId": "x"})).code == -32021
        async with anyio.create_task_group() as tg:

            async def upstream_side() -> None:
                await until(lambda: "task-1" in ev.jobs)
                await ev.finish("task-1", "waited for")

            tg.start_soon(upstream_side)
            result = await client.call_tool("ev__research", {})  # no extension: the proxy runs it and waits
        assert result_text(result) == "waited for"


def test_a_task_id_opens_only_as_this_proxys_task_id() -> None:
    codec = RequestStateSecurity(keys=["a" * 40]).codec
    ref = TaskRef("ev", "task-1", "alice (token)", 1e10)
    token = seal(codec, ref)
    back = opened(codec, token)
    assert back is not None and (back.server, back.upstream_id, back.owner, back.expires) == (
        "ev",
        "task-1",
        "alice (token)",
        1e10,
    )
    assert seal(codec, ref) != token  # two tasks alike still get two ids
    assert "task-1" not in token and "alice" not in token
    assert opened(RequestStateSecurity(keys=["b" * 40]).codec, token) is None  # another proxy's keys
    assert opened(codec, token[:-2] + ("A" if token[-2] != "A" else "B") + token[-1]) is None
    assert opened(codec, codec.seal(b'{"not": "a task"}')) is None  # a requestState is no task id


async def test_a_running_task_past_its_ttl_is_stopped_and_forgotten() -> None:
    stopped = anyio.Event()

    async def forever(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        try:
            await anyio.sleep_forever()
        finally:
            stopped.set()
        return text("never")  # pragma: no cover

    ev = TaskUpstream("ev", {"research": "required"})
    plain = make_server("plain", {"forever": FakeTool(forever)})
    async with through_proxy({"plain": plain, "ev": ev}) as (proxy, client):
        now = [proxy.tasks.table.clock()]
        proxy.tasks.table.clock = lambda: now[0]
        here = (await ask(client, "tools/call", {"name": "plain__forever", "task": {"ttl": 1000}}))["task"]
        there = (await ask(client, "tools/call", {"name": "ev__research", "task": {"ttl": 1000}}))["task"]
        await until(lambda: "task-1" in ev.jobs)
        now[0] += 2
        assert (await refused(client, "tasks/get", {"taskId": here["taskId"]})).code == types.INVALID_PARAMS
        with anyio.fail_after(5):
            await stopped.wait()  # the proxy's own call was cancelled at its server
        await until(lambda: ev.cancelled == ["task-1"])  # the upstream's task too
        assert (await refused(client, "tasks/result", {"taskId": there["taskId"]})).code == types.INVALID_PARAMS
