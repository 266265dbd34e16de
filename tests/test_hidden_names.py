"""What a tool name, an unknown-name answer and the status may reveal to a member restricted
by the gateway's access rules (issue 20, "what a member may not see").

In memory: the proxy with an ``access_for`` that answers the current member's ``Access``,
as the gateway's sign-in does, and a real ``Client`` per era. A tool a member may not use
must answer exactly as a tool that never existed: the reference is the same proxy built
without it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.server.context import ServerRequestContext

from mcp_patchbay.catalog.merge import Source, build_catalog
from mcp_patchbay.config.models import ToolFilter
from mcp_patchbay.errors.tree import ClientError, Code, UpstreamError
from mcp_patchbay.gateway.access import Access, Grant
from mcp_patchbay.session.proxy import Proxy
from mcp_patchbay.session.status import StatusRegistry, Viewer
from tests.harness import FakeTool, MemoryUpstreams, config_from, error_info, make_server, proxy_transport, text

pytestmark = pytest.mark.anyio

BOB = Access(grants=frozenset({Grant(servers=("time",))}))
"""Bob may use the time server only."""
ALICE = Access(grants=frozenset({Grant(servers=("*",), tools=(("notes", ToolFilter(deny=("delete_*",))),))}))
"""Alice may use every server, but none of the notes server's delete tools."""


async def _answer(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
    return text("done")


async def _fail(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
    raise RuntimeError("alice's secret file /home/alice/plans.txt is locked")


def _servers(*, notes: bool = True, delete_all: bool = True, clock: bool = True) -> dict[str, Any]:
    servers: dict[str, Any] = {"time": make_server("time", {"now": FakeTool(_answer), "zone": FakeTool(_fail)})}
    if notes:
        tools = {"add": FakeTool(_answer), "broken": FakeTool(_fail)}
        if delete_all:
            tools["delete_all"] = FakeTool(_answer)
        servers["notes"] = make_server("notes", tools)
    if clock:  # a second server with a tool named "now": only time's is visible to Bob
        servers["clock"] = make_server("clock", {"now": FakeTool(_answer)})
    return servers


class Member:
    """Whose request the proxy is serving (the gateway's sign-in, in memory): its access,
    and its name as the gateway's ``identity`` would give it."""

    def __init__(self, access: Access, name: str = "member") -> None:
        self.access = access
        self.name = name

    def __call__(self) -> Access:
        return self.access

    def identity(self, ctx: object) -> str:
        return self.name


@asynccontextmanager
async def serving(
    servers: dict[str, Any],
    member: Member,
    *,
    mode: str = "legacy",
    entries: dict[str, Any] | None = None,
    **patchbay: Any,
) -> AsyncGenerator[tuple[Proxy, Client]]:
    """The proxy over ``servers`` (config ``entries`` where given), a client connected to it."""
    config = config_from({name: {"command": "x"} for name in servers} | (entries or {}), {"watch": False, **patchbay})
    proxy = Proxy(
        config, connector=MemoryUpstreams(servers), access_for=member, shared=True, identity_of=member.identity
    )
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            await tg.start(proxy.run)
            await proxy.supervisor.wait_startup()
            async with Client(proxy_transport(proxy), mode=mode, cache=None) as client:  # pyright: ignore[reportArgumentType]
                yield proxy, client
            tg.cancel_scope.cancel()


def _wire(result: types.CallToolResult, called: str) -> str:
    """The answer as the client got it, the called name replaced by a placeholder."""
    return result.model_dump_json(by_alias=True, exclude_none=True).replace(called, "<called>")


async def _answers(
    servers: dict[str, Any], access: Access, names: list[str], *, mode: str = "legacy", **patchbay: Any
) -> dict[str, str]:
    async with serving(servers, Member(access), mode=mode, **patchbay) as (_, client):
        return {name: _wire(await client.call_tool(name, {}), name) for name in names}


# --- finding 2: a hidden tool answers as a tool that never existed -----------------------------------


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_hidden_server_s_tools_answer_as_tools_that_never_existed(mode: str) -> None:
    """Regression: Bob's call to a tool of a server he may not use answered TOOL_NOT_AVAILABLE
    naming the server (for its exact name, its bare name and a typo of it), where a name
    nothing ever had answers TOOL_NOT_FOUND: an existence oracle."""
    hidden = ["notes__delete_all", "delete_all", "notes__delete_al", "Notes.DeleteAll", "notes__add", "add"]
    never = "ledger__wipe_records"
    seen = await _answers(_servers(), BOB, [*hidden, never], mode=mode)
    reference = await _answers(_servers(notes=False), BOB, [*hidden, never], mode=mode)
    assert seen == reference  # byte for byte: as if the notes server did not exist
    for name in hidden:
        assert seen[name] == seen[never], name  # and as a name nothing ever had
        assert json.loads(seen[name])["structuredContent"]["error"]["code"] == "TOOL_NOT_FOUND"
        assert "notes" not in seen[name] and "delete" not in seen[name]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_tool_hidden_on_a_server_a_member_may_use_answers_as_one_that_never_existed(mode: str) -> None:
    """The same for a tool hidden by a rule's ``tools`` filter on a server Alice may use."""
    hidden = ["notes__delete_all", "delete_all", "notes__delete_al", "notes.delete-all"]
    seen = await _answers(_servers(), ALICE, hidden, mode=mode)
    reference = await _answers(_servers(delete_all=False), ALICE, hidden, mode=mode)
    assert seen == reference
    never = (await _answers(_servers(), ALICE, ["notes__qqqqqqqqq"], mode=mode))["notes__qqqqqqqqq"]
    for name in hidden:
        assert seen[name] == never, name
        assert "delete" not in seen[name]


async def test_the_one_visible_candidate_is_resolved_not_called_ambiguous() -> None:
    """Regression: ``now`` matched time's visible tool and clock's hidden one, and Bob got
    TOOL_AMBIGUOUS with a single candidate; now clock's does not exist for him."""
    async with serving(_servers(), Member(BOB)) as (_, client):
        result = await client.call_tool("now", {})
        assert not result.is_error and result.content[0].model_dump()["text"] == "done"


async def test_in_strict_mode_the_json_rpc_error_is_the_same_as_for_a_name_never_seen() -> None:
    from mcp.shared.exceptions import MCPError

    async def errors(servers: dict[str, Any]) -> list[str]:
        out: list[str] = []
        async with serving(servers, Member(BOB), unknown_tool="error") as (_, client):
            for name in ("notes__delete_all", "delete_all", "notes__delete_al"):
                with pytest.raises(MCPError) as caught:
                    await client.call_tool(name, {})
                out.append(json.dumps([caught.value.error.message, caught.value.error.data]).replace(name, "<called>"))
        return out

    seen = await errors(_servers())
    assert seen == await errors(_servers(notes=False))
    assert all("notes" not in answer for answer in seen)


async def test_search_mode_names_no_hidden_server_or_tool() -> None:
    async with serving(_servers(), Member(BOB), expose="search") as (_, client):
        found = await client.call_tool("patchbay__find_tools", {"query": "delete all"})
        assert "notes" not in found.model_dump_json()
        through = await client.call_tool("patchbay__call_tool", {"name": "notes__delete_all", "arguments": {}})
        assert error_info(through)["code"] == "TOOL_NOT_FOUND" and "notes" not in _wire(through, "notes__delete_all")


async def test_a_tool_the_config_turns_off_keeps_its_documented_answer() -> None:
    """patchbay's own ``tools`` filter is the user's choice: TOOL_NOT_AVAILABLE, as documented,
    for a member who would otherwise have had the tool; for one who would not, it never existed."""
    entries = {
        "time": {"command": "x", "tools": {"deny": ["zone"]}},
        "notes": {"command": "x", "tools": {"deny": ["add"]}},
    }
    async with serving(_servers(), Member(ALICE), entries=entries) as (_, client):
        assert error_info(await client.call_tool("time__zone", {}))["code"] == "TOOL_NOT_AVAILABLE"
    async with serving(_servers(), Member(BOB), entries=entries) as (_, client):
        assert error_info(await client.call_tool("time__zone", {}))["code"] == "TOOL_NOT_AVAILABLE"
        hidden = await client.call_tool("notes__add", {})
        assert error_info(hidden)["code"] == "TOOL_NOT_FOUND" and "notes" not in _wire(hidden, "notes__add")


# --- finding 3: the "no similar name" overview -------------------------------------------------------


async def test_the_no_similar_name_overview_shows_exposed_names_of_visible_tools_only() -> None:
    """Regression: the overview listed raw upstream names (``time (now, zone)``), which the
    model cannot call as they are."""
    async with serving(_servers(), Member(ALICE)) as (_, client):
        answer = await client.call_tool("zzzzzzzzzz", {})
        message = answer.content[0].model_dump()["text"]
        assert "time (time__now, time__zone)" in message
        assert "notes (notes__add, notes__broken)" in message
        assert "delete" not in message


# --- finding 4: an upstream listing a name twice ---------------------------------------------------


def test_a_listing_that_repeats_tool_names_is_logged_once_with_a_few_names(caplog: pytest.LogCaptureFixture) -> None:
    """Regression: duplicate tool names from an upstream were dropped without a log line."""
    tool = types.Tool(name="twice", input_schema={"type": "object"})
    repeated = tuple(types.Tool(name=f"t{i}", input_schema={"type": "object"}) for i in range(8))
    listing = (tool, tool.model_copy(update={"description": "second"}), *repeated, *repeated)
    sources = [Source("dupes-server", tools=listing), Source("clean", tools=(tool,))]
    with caplog.at_level(logging.WARNING, logger="mcp_patchbay.catalog.merge"):
        catalog = build_catalog(sources, separator="__", max_length=64, validate_arguments=False)
        build_catalog(sources, separator="__", max_length=64, validate_arguments=False)  # the same listing
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "'dupes-server'" in warnings[0] and "9 tool name(s)" in warnings[0] and "and 4 more" in warnings[0]
    assert "'clean'" not in warnings[0]
    assert catalog.by_exposed["dupes-server__twice"].definition.description is None  # the first one is kept
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="mcp_patchbay.catalog.merge"):
        build_catalog(
            [Source("dupes-server", tools=list(listing))], separator="__", max_length=64, validate_arguments=False
        )  # listed again
    assert len(caplog.records) == 1


# --- finding 1: the status a restricted member reads ------------------------------------------------

SECRET = "alice's secret file /home/alice/plans.txt"


async def _status_both_ways(client: Client) -> list[dict[str, Any]]:
    """The status as the patchbay__status tool and as the patchbay://status resource give it."""
    tool = await client.call_tool("patchbay__status", {})
    assert not tool.is_error and tool.structured_content is not None
    resource = await client.read_resource("patchbay://status")
    text = resource.contents[0]
    assert isinstance(text, types.TextResourceContents)
    return [tool.structured_content, json.loads(text.text)]


async def test_the_status_shows_a_restricted_member_no_other_member_s_failed_calls() -> None:
    """Regression: ``patchbay://status`` and the status tool filtered ``servers`` by the
    caller's access but not ``recent_errors``: Bob read Alice's failed calls, with hidden
    server names, tool names and the upstream's error text."""
    member = Member(ALICE, "alice (token)")
    async with serving(_servers(), member, status_tool=True) as (_, client):
        assert (await client.call_tool("notes__broken", {})).is_error  # a server Bob may not use
        assert (await client.call_tool("time__zone", {})).is_error  # a server both may use
        assert (await client.call_tool("alice_private_project_x", {})).is_error  # a name nothing has
        member.access, member.name = BOB, "bob (token)"
        for status in await _status_both_ways(client):
            dumped = json.dumps(status)
            for leak in ("notes", "broken", "secret", "alice", "plans", "private_project"):
                assert leak not in dumped, (leak, dumped)
            assert set(status["servers"]) == {"time"}
            assert status["unresolved_names"] == {}
            (shared,) = status["recent_errors"]  # Alice's error on time, as health only
            assert set(shared) == {"at", "code", "server", "tool"}
            assert (shared["server"], shared["tool"]) == ("time", "zone")
            assert status["servers"]["time"]["last_error"] == shared
            assert status["servers"]["time"]["tool_stats"]["zone"]["errors"] == {shared["code"]: 1}


async def test_a_member_does_not_see_errors_of_tools_hidden_from_it_on_a_server_it_may_use() -> None:
    admin = Access(everything=True)
    member = Member(admin, "admin (token)")
    async with serving(_servers(), member, status_tool=True) as (_, client):
        await client.call_tool("notes__delete_all", {"x": 1})  # fine for the admin
        assert (await client.call_tool("notes__broken", {})).is_error
        member.access, member.name = ALICE, "alice (token)"
        for status in await _status_both_ways(client):
            assert "delete_all" not in json.dumps(status)
            assert [e["tool"] for e in status["recent_errors"]] == ["broken"]
        member.access, member.name = admin, "admin (token)"
        (everything,) = {json.dumps(s["recent_errors"]) for s in await _status_both_ways(client)}
        assert SECRET in everything  # a member who may use everything sees it all, as on stdio


def test_a_member_sees_its_own_errors_whole_and_others_as_health() -> None:
    """The registry's rule: one's own errors whole (also a name one got wrong), another
    member's only as health on servers one may use, nothing of hidden servers or tools."""
    registry = StatusRegistry()
    wrong = ClientError(Code.TOOL_NOT_FOUND, "Unknown tool 'x'.")
    failed = UpstreamError(Code.SERVER_ERROR, f"The tool failed: {SECRET}")
    registry.record_error(wrong, called="bob_typo", server=None, tool=None, caller="bob (token)")
    registry.record_error(wrong, called="alice_typo", server=None, tool=None, caller="alice (token)")
    registry.record_error(failed, called="time__zone", server="time", tool="zone", caller="alice (token)")
    registry.record_error(failed, called="time__zone", server="time", tool="zone", caller="bob (token)")
    registry.record_error(failed, called="notes__broken", server="notes", tool="broken", caller="bob (token)")
    registry.record_error(failed, called="notes__delete_all", server="notes", tool="delete_all", caller="carol (token)")
    health = {"state": "ready"}
    bob = registry.snapshot({"time": health}, Viewer(BOB, "bob (token)"))
    assert [e.get("called") for e in bob["recent_errors"]] == ["bob_typo", None, "time__zone"]
    assert bob["unresolved_names"] == {"TOOL_NOT_FOUND": 1}
    assert bob["servers"]["time"]["last_error"]["message"] == failed.message  # his own, the last
    alice = registry.snapshot({"time": health, "notes": health}, Viewer(ALICE, "alice (token)"))
    assert [(e["server"], e["tool"], e.get("called")) for e in alice["recent_errors"]] == [
        (None, None, "alice_typo"),
        ("time", "zone", "time__zone"),
        ("time", "zone", None),
        ("notes", "broken", None),
        ("notes", None, None),  # a tool hidden from her: the server's health, not the tool's name
    ]
    assert "delete_all" not in json.dumps(alice) and set(alice["servers"]["notes"]["tool_stats"]) == {"broken"}
    assert "last_error" in alice["servers"]["notes"] and "message" not in alice["servers"]["notes"]["last_error"]
    assert len(registry.snapshot({"time": health, "notes": health})["recent_errors"]) == 6  # stdio: everything


async def test_a_member_sees_its_own_failed_calls_whole_in_the_status() -> None:
    """The status names a member's own mistakes (the name it got wrong, the text it was told)
    while another member's stay health only: ``Proxy._fail`` records who called. (On the
    gateway every call comes through the SDK's server; in memory, the 2026-07-28 era does.)"""
    member = Member(BOB, "bob (token)")
    async with serving(_servers(), member, mode="auto", status_tool=True) as (_, client):
        assert (await client.call_tool("bob_typo_tool", {})).is_error
        assert (await client.call_tool("time__zone", {})).is_error
        (status,) = {json.dumps(s) for s in await _status_both_ways(client)}
        assert "bob_typo_tool" in status
        recent = json.loads(status)["recent_errors"]
        assert [e["called"] for e in recent] == ["bob_typo_tool", "time__zone"]
        member.name = "bob2 (token)"  # another member with the same access
        for other in await _status_both_ways(client):
            assert "bob_typo_tool" not in json.dumps(other)
            assert [set(e) for e in other["recent_errors"]] == [{"at", "code", "server", "tool"}]
