"""What reaches each gateway session, and what one session or member can hold (issue 20).

Over real HTTP (an in-process uvicorn, ``tests.test_gateway.running``): a session that
never reads its GET stream is closed and delays no other; ``subscriptions/listen``
streams within their quotas and their audience; resource subscriptions and log levels
per session, only for servers the caller may use.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any, cast

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError

from mcp_patchbay.gateway.event_store import MemoryEventStore
from tests.harness import FakeTool, MemoryUpstreams, logged, make_server, text, until
from tests.test_gateway import ALICE, BOB, client, gateway_config, running

pytestmark = pytest.mark.anyio

HANDSHAKE = "2025-11-25"
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
LONG_URI = "feed://stuck/" + "x" * 8000
"""Big updates fill the stuck client's socket buffers quickly."""


class Feed:
    """An upstream whose ``burst`` tool sends resource updates, then grows its tool list."""

    def __init__(self, uri: str = LONG_URI) -> None:
        self.uri = uri
        self.tools = ["burst", "touch", "log"]
        self.subscribed: list[str] = []
        self.levels: list[str] = []

    def server(self) -> Server[Any]:
        async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
            return types.ListToolsResult(
                tools=[types.Tool(name=n, input_schema={"type": "object"}) for n in self.tools]
            )

        async def call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> Any:
            args = params.arguments or {}
            if params.name == "burst":
                for _ in range(int(args.get("updates", 0))):
                    await ctx.session.send_resource_updated(self.uri)
                self.tools.append(f"fresh{len(self.tools)}")
                await ctx.session.send_tool_list_changed()
            elif params.name == "touch":
                await ctx.session.send_resource_updated(str(args["uri"]))
            elif params.name == "log":
                for level in ("info", "error"):
                    await ctx.session.send_log_message(level, f"{level} line", logger="feed")  # pyright: ignore[reportDeprecated]
            return text("done")

        async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
            return types.ListResourcesResult(resources=[types.Resource(uri=self.uri, name="feed")])

        async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
            return types.ReadResourceResult(contents=[types.TextResourceContents(uri=params.uri, text="x")])

        async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
            self.subscribed.append(str(params.uri))
            return types.EmptyResult()

        async def unsubscribe(ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
            return types.EmptyResult()

        async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
            return types.ListResourceTemplatesResult(resource_templates=[])

        async def set_level(ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
            self.levels.append(params.level)
            return types.EmptyResult()

        server: Server[Any] = Server(
            "feed",
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            on_list_resources=list_resources,
            on_read_resource=read_resource,
            on_subscribe_resource=subscribe,
            on_unsubscribe_resource=unsubscribe,
            on_list_resource_templates=list_templates,
        )
        server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_level)
        return server


def memory(feed: Feed) -> MemoryUpstreams:
    return MemoryUpstreams({"time": make_server("time", {}), "notes": feed.server()})


async def _post(http: httpx2.AsyncClient, body: dict[str, Any], session: str | None = None) -> httpx2.Response:
    headers = dict(HEADERS)
    if session is not None:
        headers |= {"mcp-session-id": session, "mcp-protocol-version": HANDSHAKE}
    return await http.post("/mcp", json=body, headers=headers)


async def _open_session(http: httpx2.AsyncClient) -> str:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "stuck", "version": "1"}},
    }
    opened = await _post(http, initialize)
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    await _post(http, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    return session


@asynccontextmanager
async def stuck_get_stream(host: str, port: int, session: str) -> AsyncGenerator[socket.socket]:
    """A GET stream opened with a tiny receive buffer and never read past its headers."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    try:
        await loop.sock_connect(sock, (host, port))
        request = (
            f"GET /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: text/event-stream\r\n"
            f"Mcp-Session-Id: {session}\r\nMcp-Protocol-Version: {HANDSHAKE}\r\n\r\n"
        )
        await loop.sock_sendall(sock, request.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += await loop.sock_recv(sock, 1)
        assert head.startswith(b"HTTP/1.1 200"), head
        yield sock
    finally:
        sock.close()


async def test_a_session_that_never_reads_its_get_stream_is_closed_and_delays_no_other(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 20: one session's unread GET stream grew memory without bound (a task per
    upstream notice, each waiting on it), was never reaped, and stopped tools/list_changed
    for every other session."""
    caplog.set_level(logging.WARNING, "mcp_patchbay.session.outbox")
    feed = Feed()
    config = gateway_config({"send_timeout": 0.5, "max_queued_messages": 64})
    told = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            told.set()

    async with running(config, memory(feed)) as (gateway, base):
        host, port = base.removeprefix("http://").split(":")
        async with httpx2.AsyncClient(base_url=base, timeout=10) as http:
            session = await _open_session(http)
            listed = await _post(http, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, session)
            assert listed.status_code == 200
            sub = {"jsonrpc": "2.0", "id": 3, "method": "resources/subscribe", "params": {"uri": LONG_URI}}
            assert "error" not in (await _post(http, sub, session)).text
            async with (
                stuck_get_stream(host, int(port), session) as stuck,
                client(base, message_handler=on_message) as normal,
            ):
                await normal.list_tools()
                tasks_before = len(asyncio.all_tasks())
                with (
                    anyio.fail_after(10),
                    logged("mcp_patchbay.session.outbox", f"closing session {session}") as closing,
                ):
                    # 2,000 updates of 8 KB (16 MB) for a client that reads none of them.
                    await normal.call_tool("notes__burst", {"updates": 2000})
                    await told.wait()  # the other session hears of the change all the same
                    await closing.wait()  # its send_timeout (0.5 s) passes unread: the outbox ends it
                    await until(lambda: session not in gateway.manager._server_instances)  # pyright: ignore[reportPrivateUsage]
                assert f"closing session {session}" in caplog.text
                # Its connection is dropped at once, unread data and all (it lingered with its unsent
                # data until uvicorn's 5 s keep-alive timer closed it; a bound of 2 s tells them apart).
                server = gateway._server  # pyright: ignore[reportPrivateUsage]
                assert server is not None
                stuck_port = stuck.getsockname()[1]
                connections = server.server_state.connections
                await until(lambda: not any(c.client and c.client[1] == stuck_port for c in connections), within=2)  # pyright: ignore[reportAttributeAccessIssue]
                outboxes = gateway.proxy.outboxes
                assert outboxes is not None
                await until(lambda: not outboxes.senders)
                assert len(asyncio.all_tasks()) < tasks_before + 20, "tasks left waiting on the stuck session"
                gone = await _post(http, {"jsonrpc": "2.0", "id": 4, "method": "ping"}, session)
                assert gone.status_code == 404
                assert result_text_of(await normal.call_tool("notes__touch", {"uri": "feed://other"})) == "done"


def result_text_of(result: types.CallToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, types.TextContent))


async def test_one_member_cannot_take_every_listen_stream() -> None:
    """Issue 20: one token could take all 1,024 subscriptions/listen streams of the gateway."""
    config = gateway_config(
        {"tokens": {"alice": ALICE, "bob": BOB}, "max_listen_streams": 3, "max_listen_streams_per_identity": 2}
    )
    async with running(config, memory(Feed())) as (gateway, base):
        async with client(base, token=ALICE, mode="auto") as alice, client(base, token=BOB, mode="auto") as bob:
            async with alice.listen(tools_list_changed=True), alice.listen(tools_list_changed=True):
                with pytest.raises(MCPError) as refused:
                    async with alice.listen(tools_list_changed=True):
                        pass
                assert "the most one member may hold" in refused.value.error.message
                async with bob.listen(tools_list_changed=True):  # another member still gets one
                    with pytest.raises(MCPError) as full:
                        async with bob.listen(tools_list_changed=True):
                            pass
                    assert "its limit" in full.value.error.message
            await until(lambda: not gateway.proxy.changes.listen_streams)  # a stream's end counts it down
            async with alice.listen(tools_list_changed=True), alice.listen(tools_list_changed=True):
                pass


async def test_listeners_hear_only_of_what_they_may_see() -> None:
    """Issue 20: every 2026-07-28 listener shared one audience, so a hidden server's list
    change and resource updates reached everyone."""
    feed = Feed(uri="notes://private")
    config = gateway_config(
        {
            "tokens": {"alice": ALICE, "bob": BOB},
            "access": [{"tokens": ["alice"], "servers": ["*"]}, {"tokens": ["bob"], "servers": ["time"]}],
        }
    )
    async with running(config, memory(feed)) as (_, base):
        async with client(base, token=ALICE, mode="auto") as alice, client(base, token=BOB, mode="auto") as bob:
            await alice.list_tools()
            await bob.list_tools()
            heard: dict[str, list[object]] = {"alice": [], "bob": []}
            alice_done = anyio.Event()

            async def listen(name: str, c: Any, ready: anyio.Event) -> None:
                async with c.listen(tools_list_changed=True, resource_subscriptions=["notes://private"]) as sub:
                    ready.set()
                    async for event in sub:
                        heard[name].append(event)
                        if name == "alice" and len(heard[name]) == 2:
                            alice_done.set()

            with anyio.fail_after(10):
                async with anyio.create_task_group() as tg:
                    ready = {"alice": anyio.Event(), "bob": anyio.Event()}
                    tg.start_soon(listen, "alice", alice, ready["alice"])
                    tg.start_soon(listen, "bob", bob, ready["bob"])
                    await ready["alice"].wait()
                    await ready["bob"].wait()
                    await alice.call_tool("notes__touch", {"uri": "notes://private"})
                    await alice.call_tool("notes__burst", {"updates": 0})  # a new tool on the hidden server
                    await alice_done.wait()
                    tg.cancel_scope.cancel()
            assert len(heard["alice"]) == 2
            assert heard["bob"] == []


async def test_a_subscription_to_a_hidden_servers_uri_is_answered_as_a_missing_one() -> None:
    """Issue 20: a restricted member's resources/subscribe to a hidden server's URI failed
    with a misleading message but was recorded, and its updates were delivered."""
    feed = Feed(uri="notes://private")
    config = gateway_config(
        {
            "tokens": {"alice": ALICE, "bob": BOB},
            "access": [{"tokens": ["alice"], "servers": ["*"]}, {"tokens": ["bob"], "servers": ["time"]}],
        }
    )
    updates: dict[str, list[str]] = {"alice": [], "bob": []}
    alice_told = anyio.Event()

    def handler(name: str) -> Any:
        async def on_message(message: Any) -> None:
            if isinstance(message, types.ResourceUpdatedNotification):
                updates[name].append(str(message.params.uri))
                if name == "alice":
                    alice_told.set()

        return on_message

    async with running(config, memory(feed)) as (gateway, base):
        async with (
            client(base, token=ALICE, message_handler=handler("alice")) as alice,
            client(base, token=BOB, message_handler=handler("bob")) as bob,
        ):
            await alice.subscribe_resource("notes://private")  # pyright: ignore[reportDeprecated]
            answers: list[tuple[int, str]] = []
            for uri in ("notes://private", "nothing://here"):
                with pytest.raises(MCPError) as refused:
                    await bob.subscribe_resource(uri)  # pyright: ignore[reportDeprecated]
                answers.append((refused.value.error.code, refused.value.error.message.replace(uri, "URI")))
            assert answers[0] == answers[1]
            held = [set(uris) for uris in gateway.proxy.channel._subscribers.values()]  # pyright: ignore[reportPrivateUsage]
            assert held == [{"notes://private"}]  # alice's only: bob's refusal recorded nothing
            assert feed.subscribed == ["notes://private"]
            await alice.call_tool("notes__touch", {"uri": "notes://private"})
            with anyio.fail_after(5):
                await alice_told.wait()
            await bob.list_tools()
            assert updates == {"alice": ["notes://private"], "bob": []}


async def test_a_members_log_level_is_its_sessions_own() -> None:
    """Issue 20: a member's logging/setLevel reached hidden servers and set the level for everyone."""
    feed = Feed()
    logs: dict[str, list[str]] = {"alice": [], "bob": []}
    got = {"alice": anyio.Event(), "bob": anyio.Event()}

    def logging_callback(name: str) -> Any:
        async def on_log(params: types.LoggingMessageNotificationParams) -> None:
            logs[name].append(f"{params.level} {params.logger}")
            if params.level == "error":
                got[name].set()

        return on_log

    async with running(gateway_config(), memory(feed)) as (_, base):
        async with (
            client(base, logging_callback=logging_callback("alice")) as alice,
            client(base, logging_callback=logging_callback("bob")) as bob,
        ):
            await alice.set_logging_level("error")  # pyright: ignore[reportDeprecated]
            await bob.set_logging_level("debug")  # pyright: ignore[reportDeprecated]
            for name, c in (("alice", alice), ("bob", bob)):
                await c.call_tool("notes__log", {})
                with anyio.fail_after(5):
                    await got[name].wait()
            assert logs == {"alice": ["error notes/feed"], "bob": ["info notes/feed", "error notes/feed"]}
            assert feed.levels == []  # no member sets an upstream's level for every other


async def test_a_member_who_never_answers_an_elicitation_does_not_hold_the_server() -> None:
    """Every call to a server is paused while a person answers its elicitation (a 2025-era
    session): a member whose client never answered held the server's concurrency slot, and
    froze every other call's deadline to it, for good. On the gateway the person has
    patchbay.max_call_time; then the server hears that no one answered, and the call ends."""

    async def ask(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        try:
            await ctx.session.elicit_form("Which one?", {"type": "object", "properties": {}})
        except MCPError as exc:
            return text(f"no answer: {exc.error.message}", is_error=True)
        return text("answered")

    async def now(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        return text("12:00")

    never = anyio.Event()

    async def walked_away(ctx: Any, params: Any) -> Any:
        await never.wait()

    servers = MemoryUpstreams({"time": make_server("time", {"ask": FakeTool(ask), "now": FakeTool(now)})})
    config = gateway_config(
        {"tokens": {"alice": ALICE, "bob": BOB}},
        {"timeout": 0.5, "max_call_time": 1.0, "max_concurrency": 1, "queue_timeout": 5},
    )
    async with running(config, servers) as (_, base):
        async with client(base, token=ALICE, elicitation_callback=walked_away) as alice, client(base, token=BOB) as bob:
            with anyio.fail_after(10):  # it waited for good
                answer = await alice.call_tool("time__ask", {})
            assert answer.is_error and "did not answer within 1 s" in result_text_of(answer), answer
            # The server's one slot is free again for another member.
            assert result_text_of(await bob.call_tool("time__now", {})) == "12:00"
            never.set()


async def test_a_client_that_never_reads_its_call_s_progress_stalls_no_one_else() -> None:
    """Progress rides a call's own answer stream: a client that asked for progress and never
    read its POST's answer left a task per notice waiting on it (57 MiB for these 3,000
    notices of 8 KB); with a stdio upstream the forwarding is awaited by the reader every
    member's calls share. Progress to a gateway session is now posted, not awaited: the
    latest value waits while one is written, and a client that reads nothing for
    send_timeout gets no more."""
    started, finished = anyio.Event(), anyio.Event()

    async def chatty(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        started.set()
        for n in range(3000):  # 24 MB of progress for a client that reads none of it
            await ctx.session.send_progress_notification(
                cast(dict[str, Any], ctx.meta)["progress_token"] if ctx.meta else 0,
                n,
                3000,
                "x" * 8000,
                related_request_id=cast(str | None, ctx.request_id),
            )
        finished.set()
        return text("done talking")

    async def now(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        return text("12:00")

    servers = MemoryUpstreams({"time": make_server("time", {"chatty": FakeTool(chatty), "now": FakeTool(now)})})
    config = gateway_config({"tokens": {"alice": ALICE, "bob": BOB}, "send_timeout": 0.5}, {"timeout": 30})
    async with running(config, servers) as (_, base):
        host, port = base.removeprefix("http://").split(":")
        async with httpx2.AsyncClient(base_url=base, timeout=10, headers={"authorization": f"Bearer {ALICE}"}) as http:
            session = await _open_session(http)
            call = {
                "jsonrpc": "2.0",
                "id": 5,
                "method": "tools/call",
                "params": {"name": "time__chatty", "arguments": {}, "_meta": {"progressToken": "p"}},
            }
            body = json.dumps(call).encode()
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
            sock.setblocking(False)
            loop = asyncio.get_running_loop()
            try:
                await loop.sock_connect(sock, (host, int(port)))
                head = (
                    f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {ALICE}\r\n"
                    f"Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
                    f"Mcp-Session-Id: {session}\r\nMcp-Protocol-Version: {HANDSHAKE}\r\n"
                    f"Content-Length: {len(body)}\r\n\r\n"
                )
                tasks_before = len(asyncio.all_tasks())
                await loop.sock_sendall(sock, head.encode() + body)  # and never read the answer
                with anyio.fail_after(10):
                    await started.wait()
                    await finished.wait()
                    assert len(asyncio.all_tasks()) < tasks_before + 30, "a task left waiting per progress notice"
                    async with client(base, token=BOB) as bob:
                        for _ in range(3):
                            assert result_text_of(await bob.call_tool("time__now", {})) == "12:00"
            finally:
                sock.close()


async def test_a_members_roots_change_reaches_no_upstream() -> None:
    """Issue 32: a member's notifications/roots/list_changed went to every upstream, hidden
    ones included (5 of 5 reached a server the member may not use), although the gateway offers
    its upstreams no roots: a shared upstream must not hear what one member did."""
    heard: list[str] = []

    async def on_roots_changed(ctx: Any, params: Any) -> None:
        heard.append("notes")

    feed = Feed()
    servers = memory(feed)
    servers.servers["notes"].add_notification_handler(
        "notifications/roots/list_changed", types.NotificationParams, on_roots_changed
    )
    config = gateway_config(
        {
            "tokens": {"alice": ALICE, "bob": BOB},
            "access": [{"tokens": ["alice"], "servers": ["*"]}, {"tokens": ["bob"], "servers": ["time"]}],
        }
    )

    async def roots(ctx: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[])

    async with running(config, servers) as (_, base):
        async with client(base, token=BOB, list_roots_callback=roots) as bob:
            for _ in range(5):
                with logged("mcp_patchbay.session.passthrough", "not passed on") as handled:
                    await bob.send_roots_list_changed()  # pyright: ignore[reportDeprecated]
                    with anyio.fail_after(5):
                        await handled.wait()
    assert heard == []


def _event_ids(sse: str) -> list[str]:
    return [line[len("id:") :].strip() for line in sse.splitlines() if line.startswith("id:")]


def _resume_headers(session: str, last_event_id: str) -> dict[str, str]:
    return {
        "accept": "text/event-stream",
        "mcp-session-id": session,
        "mcp-protocol-version": HANDSHAKE,
        "last-event-id": last_event_id,
    }


async def test_a_resumed_stream_of_an_answered_request_ends_after_its_answer() -> None:
    """Issue 32: a GET with Last-Event-ID for a request already answered replayed the answer,
    then stayed open (8 of 8 still open after 4 s), past every listen-stream quota."""
    async with running(gateway_config(), memory(Feed())) as (_, base):
        async with httpx2.AsyncClient(base_url=base, timeout=10) as http:
            session = await _open_session(http)
            listed = await _post(http, {"jsonrpc": "2.0", "id": 7, "method": "tools/list"}, session)
            ids = _event_ids(listed.text)
            assert len(ids) >= 2, listed.text  # a priming event, then the answer
            for _ in range(8):
                with anyio.fail_after(5):  # read whole: the stream ends
                    resumed = await http.get("/mcp", headers=_resume_headers(session, ids[0]))
                assert resumed.status_code == 200
                assert '"id":7' in resumed.text.replace(" ", "") and _event_ids(resumed.text)[-1] == ids[-1]
            with anyio.fail_after(5):  # resumed after the answer: nothing more, and the end
                after = await http.get("/mcp", headers=_resume_headers(session, ids[-1]))
            assert '"id":7' not in after.text.replace(" ", "")


async def test_a_resumed_stream_of_a_running_request_gets_its_answer_then_ends() -> None:
    """The same for a request still running when the client resumes: its answer arrives on the
    resumed stream, which then ends (left to the SDK it stayed open after the answer)."""
    release = anyio.Event()

    async def slow(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        await release.wait()
        return text("finally")

    servers = MemoryUpstreams({"time": make_server("time", {"slow": FakeTool(slow)}), "notes": Feed().server()})
    config = gateway_config({}, {"fast_path": False})  # the SDK's path stores every event for resuming
    async with running(config, servers) as (_, base):
        async with httpx2.AsyncClient(base_url=base, timeout=10) as http:
            session = await _open_session(http)
            call = {"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "time__slow"}}
            headers = {**HEADERS, "mcp-session-id": session, "mcp-protocol-version": HANDSHAKE}
            async with http.stream("POST", "/mcp", json=call, headers=headers) as posted:
                with anyio.fail_after(5):
                    async for line in posted.aiter_lines():
                        if line.startswith("id:"):
                            priming = line[len("id:") :].strip()
                            break
            # The client dropped the call's stream; it resumes, and the answer comes on the new one.
            async with http.stream("GET", "/mcp", headers=_resume_headers(session, priming)) as resumed:
                assert resumed.status_code == 200
                release.set()
                with anyio.fail_after(5):
                    body = "".join([chunk async for chunk in resumed.aiter_text()])
            assert "finally" in body


async def test_only_the_latest_resume_of_a_stream_is_followed_and_the_session_s_end_ends_it() -> None:
    store = MemoryEventStore()
    first_event = await store.store_event("9", None)  # the priming event of request 9
    ends: list[str] = []

    async def follow(name: str) -> None:
        async def sent(message: Any) -> None:
            pass

        assert await store.replay_events_after(first_event, sent) is None
        ends.append(name)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(follow, "earlier")
            await anyio.wait_all_tasks_blocked()
            tg.start_soon(follow, "later")
            await anyio.wait_all_tasks_blocked()
            assert ends == ["earlier"]  # the client reconnected: its earlier stream ends
            store.close()
    assert ends == ["earlier", "later"]
