"""Search mode through the proxy: the listing, find_tools and call_tool, in memory."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import jsonschema
import mcp_types as types
import pytest
from mcp.server.context import ServerRequestContext

from mcp_patchbay.search import OUTPUT_SCHEMA
from tests.harness import (
    FakeTool,
    GatedUpstreams,
    MemoryUpstreams,
    config_from,
    connected,
    error_info,
    make_server,
    result_text,
    text,
)

pytestmark = pytest.mark.anyio

FIND = "patchbay__find_tools"
READ = "patchbay__call_read"
CALL = "patchbay__call_tool"


async def _echo(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"ran with {sorted(args.items())}")],
        structured_content={"args": args},
    )


def _github() -> Any:
    issue = {
        "type": "object",
        "properties": {"repo": {"type": "string"}, "title": {"type": "string"}, "body": {"type": "string"}},
        "required": ["repo", "title"],
    }
    return make_server(
        "github",
        {
            "create_issue": FakeTool(_echo, issue, description="Create a new issue in a GitHub repository."),
            "list_pull_requests": FakeTool(_echo, description="List pull requests of a repository."),
            "merge_pull_request": FakeTool(_echo, description="Merge a pull request."),
        },
    )


def _files() -> Any:
    read = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    return make_server(
        "files",
        {
            "read_file": FakeTool(_echo, read, description="Read the complete contents of a file from disk."),
            "write_file": FakeTool(_echo, description="Create or overwrite a file with new content."),
            "list_directory": FakeTool(_echo, description="List the files and folders in a directory."),
        },
    )


def _config(patchbay: dict[str, Any] | None = None, **entries: Any) -> Any:
    servers = {"github": {"command": "x"}, "files": {"command": "x"}}
    servers.update(entries)
    return config_from(servers, {"expose": "search", **(patchbay or {})})


def _upstreams(**extra: Any) -> MemoryUpstreams:
    return MemoryUpstreams({"github": _github(), "files": _files(), **extra})


async def test_search_mode_lists_find_tools_and_the_call_routes_and_nothing_else() -> None:
    async with connected(_config(), _upstreams()) as (_, client):
        tools = (await client.list_tools()).tools
    assert [t.name for t in tools] == [FIND, READ, CALL]
    find = tools[0]
    assert find.description is not None and "github" in find.description and "files" in find.description
    assert find.output_schema is not None


async def test_auto_mode_follows_the_threshold() -> None:
    small = config_from({"github": {"command": "x"}, "files": {"command": "x"}}, {"search_threshold": 10})
    async with connected(small, _upstreams()) as (_, client):
        assert len((await client.list_tools()).tools) == 6  # 6 tools: all listed
    large = config_from({"github": {"command": "x"}, "files": {"command": "x"}}, {"search_threshold": 5})
    async with connected(large, _upstreams()) as (_, client):
        assert [t.name for t in (await client.list_tools()).tools] == [FIND, READ, CALL]


async def test_always_list_keeps_chosen_tools_listed_in_search_mode() -> None:
    config = _config(
        github={"command": "x", "tools": {"always_list": ["create_issue"]}},
        files={"command": "x", "tools": {"always_list": ["*"]}},
    )
    async with connected(config, _upstreams()) as (_, client):
        names = [t.name for t in (await client.list_tools()).tools]
    assert names == [
        FIND,
        READ,
        CALL,
        "github__create_issue",
        "files__list_directory",  # each server's tools by name: a deterministic list
        "files__read_file",
        "files__write_file",
    ]


async def test_find_tools_answers_a_task_with_the_right_tool_and_its_schema() -> None:
    async with connected(_config(), _upstreams()) as (_, client):
        result = await client.call_tool(FIND, {"query": "open a new bug report on the repo"})
    assert not result.is_error, result_text(result)
    structured = result.structured_content
    assert structured is not None
    jsonschema.validate(structured, OUTPUT_SCHEMA)
    first = structured["tools"][0]
    assert first["name"] == "github__create_issue"
    assert first["server"] == "github" and first["tool"] == "create_issue"
    assert first["inputSchema"]["required"] == ["repo", "title"]
    assert "github__create_issue" in result_text(result)
    assert len(result_text(result)) < 10_000


async def test_the_structured_answer_says_what_to_do_as_the_text_does() -> None:
    """Claude Code and Codex show the model the structured answer in place of the text: how to
    call what was found, and its required arguments, are in it, first."""
    async with connected(_config(), _upstreams()) as (_, client):
        found = await client.call_tool(FIND, {"query": "open a new bug report on the repo"})
        nothing = await client.call_tool(FIND, {"query": "zzqx wobble"})
    structured = found.structured_content
    assert structured is not None and next(iter(structured)) == "next"
    assert structured["next"].startswith('Call a tool with the tool its "via" names: ')
    assert f'{CALL} {{"name": <its name>, "arguments": {{...}}}}' in structured["next"]
    assert 'Give every argument in its "required"' in structured["next"]
    assert structured["tools"][0]["required"] == ["repo", "title"]
    assert nothing.structured_content is not None
    assert nothing.structured_content["next"] == "No tool matches. Search again with other words, or fewer."


async def test_find_tools_puts_a_mistaken_name_first_and_clamps_the_limit() -> None:
    async with connected(_config(), _upstreams()) as (_, client):
        result = await client.call_tool(FIND, {"query": "files.readFile", "limit": 500})
        restricted = await client.call_tool(FIND, {"query": "list", "server": "files", "limit": "0"})
    assert result.structured_content is not None
    assert result.structured_content["tools"][0]["name"] == "files__read_file"
    assert 1 <= len(result.structured_content["tools"]) <= 6  # 500 clamped to 20; six tools exist
    assert restricted.structured_content is not None
    assert [t["server"] for t in restricted.structured_content["tools"]] == ["files"]  # limit 0 -> 1


async def test_find_tools_without_a_query_says_what_to_send() -> None:
    async with connected(_config(), _upstreams()) as (_, client):
        result = await client.call_tool(FIND, {})
    assert result.is_error and "query" in result_text(result)
    assert result.structured_content is None  # find_tools declares an outputSchema: an error is text only


async def test_errors_of_tools_with_an_output_schema_carry_no_structured_content() -> None:
    """Inspector 0.15 and 2.12 (the TypeScript SDK) dropped the proxy's error answer for such a
    tool: they check structured content against the outputSchema even when isError is set."""
    typed = FakeTool(
        _echo,
        {"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]},
        description="The current time in a zone.",
    )
    upstreams = MemoryUpstreams({"clock": make_server("clock", {"now": typed})})
    config = config_from({"clock": {"command": "x"}}, {"expose": "all", "call_tool": True})
    async with connected(config, upstreams) as (proxy, client):
        await client.list_tools()
        catalog = proxy.supervisor.catalog
        tool = catalog.by_exposed["clock__now"]
        schema = {"type": "object", "properties": {"time": {"type": "string"}}, "required": ["time"]}
        definition = tool.definition.model_copy(update={"output_schema": schema})
        catalog.by_exposed["clock__now"] = dataclasses.replace(tool, definition=definition)
        direct = await client.call_tool("clock__now", {})  # invalid: 'zone' is missing
        routed = await client.call_tool(CALL, {"name": "clock__now", "arguments": {}})
    assert direct.is_error and "zone" in result_text(direct) and direct.structured_content is None
    assert error_info(routed)["code"] == "INVALID_ARGUMENTS"  # call_tool declares no outputSchema


@asynccontextmanager
async def _with_jira_down() -> AsyncIterator[Any]:
    """github and files up, jira (whose command cannot start) down after its first attempt."""
    upstreams = _upstreams()
    upstreams.refuse.add("jira")
    async with connected(_config(jira={"command": "x"}), upstreams) as (proxy, client):
        with anyio.fail_after(10):
            await proxy.supervisor.upstreams["jira"].first_attempt_done.wait()
        yield client


async def test_find_tools_server_filter_takes_names_as_the_index_does_and_names_unknown_ones() -> None:
    async with _with_jira_down() as client:
        cased = await client.call_tool(FIND, {"query": "read a file", "server": "Files"})
        unknown = await client.call_tool(FIND, {"query": "read a file", "server": "nosuch"})
    assert cased.structured_content is not None
    assert cased.structured_content["tools"][0]["name"] == "files__read_file"
    assert unknown.is_error and "No server is named 'nosuch'" in result_text(unknown)
    assert "jira" in result_text(unknown)  # servers that are down are servers too


async def test_call_tool_runs_exactly_the_named_tool_with_its_result_unchanged() -> None:
    async with connected(_config(), _upstreams()) as (_, client):
        result = await client.call_tool(CALL, {"name": "files__read_file", "arguments": {"path": "README.md"}})
    assert not result.is_error
    assert result.structured_content == {"args": {"path": "README.md"}}
    assert result_text(result) == "ran with [('path', 'README.md')]"


async def test_call_tool_resolves_mistaken_names_and_checks_arguments() -> None:
    async with connected(_config(), _upstreams()) as (_, client):
        resolved = await client.call_tool(CALL, {"name": "files/read_file", "arguments": {"path": "a"}})
        invalid = await client.call_tool(CALL, {"name": "github__create_issue", "arguments": {"repo": "x"}})
        unknown = await client.call_tool(CALL, {"name": "github__create_isue", "arguments": {}})
        nothing = await client.call_tool(CALL, {"name": "zzz_qqq", "arguments": {}})
        no_name = await client.call_tool(CALL, {"arguments": {}})
    assert resolved.structured_content == {"args": {"path": "a"}}
    assert error_info(invalid)["code"] == "INVALID_ARGUMENTS" and "title" in result_text(invalid)
    info = error_info(unknown)
    assert info["code"] == "TOOL_NOT_FOUND" or info["code"] == "TOOL_AMBIGUOUS" or unknown.structured_content
    assert error_info(nothing)["code"] == "TOOL_NOT_FOUND"
    assert FIND in result_text(nothing)
    assert len(result_text(nothing)) < 500
    assert error_info(no_name)["code"] == "INVALID_ARGUMENTS"


async def test_call_tool_unknown_name_is_a_result_even_in_strict_unknown_tool_mode() -> None:
    async with connected(_config({"unknown_tool": "error"}), _upstreams()) as (_, client):
        result = await client.call_tool(CALL, {"name": "nope_nothing", "arguments": {}})
    assert error_info(result)["code"] == "TOOL_NOT_FOUND"


async def test_call_tool_reaches_a_broken_server_and_find_tools_names_it() -> None:
    async with _with_jira_down() as client:
        called = await client.call_tool(CALL, {"name": "jira__create_ticket", "arguments": {}})
        found = await client.call_tool(FIND, {"query": "create a jira ticket"})
    assert error_info(called)["code"] == "SERVER_UNAVAILABLE"
    assert found.structured_content is not None
    notes = found.structured_content.get("unavailable")
    assert notes and notes[0]["server"] == "jira", found.structured_content
    assert "jira" in result_text(found)


async def test_call_tool_forwards_progress_and_meta() -> None:
    async def work(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        for step in range(3):
            await ctx.session.report_progress(step + 1, 3)
        return text(str((ctx.meta or {}).get("traceparent")))

    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    upstreams = MemoryUpstreams({"svc": make_server("svc", {"work": FakeTool(work)})})
    config = config_from({"svc": {"command": "x"}}, {"expose": "search"})
    async with connected(config, upstreams) as (_, client):
        result = await client.call_tool(
            CALL, {"name": "svc__work", "arguments": {}}, progress_callback=on_progress, meta={"traceparent": "tp"}
        )
    assert result_text(result) == "tp"
    assert seen == [1, 2, 3]


async def test_find_tools_waits_for_servers_still_starting() -> None:
    gate = anyio.Event()

    config = _config({"startup_wait": 10})
    async with connected(config, GatedUpstreams({"github": _github(), "files": _files()}, {"files": gate})) as (
        _,
        client,
    ):
        async with anyio.create_task_group() as tg:
            results: list[types.CallToolResult] = []

            async def search() -> None:
                results.append(await client.call_tool(FIND, {"query": "read a file from disk"}))

            tg.start_soon(search)
            await anyio.wait_all_tasks_blocked()
            assert results == []  # waiting for 'files', not answering from half an index
            gate.set()
    assert results[0].structured_content is not None
    assert results[0].structured_content["tools"][0]["name"] == "files__read_file"


async def test_all_mode_can_add_call_tool_for_clients_that_refuse_unlisted_names() -> None:
    config = config_from({"github": {"command": "x"}, "files": {"command": "x"}}, {"expose": "all", "call_tool": True})
    async with connected(config, _upstreams()) as (_, client):
        names = [t.name for t in (await client.list_tools()).tools]
        result = await client.call_tool(CALL, {"name": "github__list_pull_requests"})
    assert names[-2:] == [READ, CALL] and len(names) == 8 and FIND not in names
    assert not result.is_error


async def test_search_mode_uses_the_configured_separator() -> None:
    config = _config({"separator": "-"})
    async with connected(config, _upstreams()) as (_, client):
        names = [t.name for t in (await client.list_tools()).tools]
        result = await client.call_tool("patchbay-call_tool", {"name": "files-read_file", "arguments": {"path": "x"}})
    assert names == ["patchbay-find_tools", "patchbay-call_read", "patchbay-call_tool"]
    assert not result.is_error


async def test_call_tool_in_all_mode_does_not_point_at_an_unlisted_find_tools() -> None:
    config = config_from({"github": {"command": "x"}}, {"expose": "all", "call_tool": True})
    async with connected(config, MemoryUpstreams({"github": _github()})) as (_, client):
        call = next(t for t in (await client.list_tools()).tools if t.name == CALL)
    assert call.description is not None and "find_tools" not in call.description


def test_a_note_for_a_server_searched_by_another_spelling_is_kept() -> None:
    from mcp_patchbay.search import ServerNote, render_answer

    structured, text = render_answer(
        [], query="weather", unavailable=[ServerNote("my_server", "starting", "wait")], server="My-Server"
    )
    assert structured["unavailable"][0]["server"] == "my_server" and "starting" in text


# --- approvals: the tools found join the listing; call_tool's annotations are true -----------------


async def test_the_tools_a_search_found_join_the_listing_and_the_client_is_told() -> None:
    """Clients approve tools by name: a tool found is listed under its own name and annotations
    (with list_changed), so the client asks for it on its own, not once for call_tool."""
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with connected(_config({"found_tools": 2}), _upstreams(), message_handler=on_message) as (_, client):
        assert [t.name for t in (await client.list_tools()).tools] == [FIND, READ, CALL]
        found = await client.call_tool(FIND, {"query": "open a new bug report on the repo", "limit": 1})
        assert found.structured_content is not None
        assert "join your tool list" in found.structured_content["next"] and "join your tool list" in result_text(found)
        with anyio.fail_after(5):
            await changed.wait()
        assert [t.name for t in (await client.list_tools()).tools] == [FIND, READ, CALL, "github__create_issue"]
        result = await client.call_tool("github__create_issue", {"repo": "r", "title": "t"})
        assert not result.is_error
        # The most recently found are kept, at most found_tools of them, in the catalog's order.
        await client.call_tool(FIND, {"query": "read a file", "limit": 1})
        await client.call_tool(FIND, {"query": "list the files in a folder", "limit": 1})
        listed = [t.name for t in (await client.list_tools()).tools]
    assert listed == [FIND, READ, CALL, "files__list_directory", "files__read_file"]


async def test_found_tools_zero_lists_only_the_two() -> None:
    async with connected(_config({"found_tools": 0}), _upstreams()) as (_, client):
        found = await client.call_tool(FIND, {"query": "open a new bug report on the repo"})
        assert found.structured_content is not None and "join your tool list" not in found.structured_content["next"]
        assert [t.name for t in (await client.list_tools()).tools] == [FIND, READ, CALL]


async def test_call_tool_says_what_its_targets_may_do() -> None:
    """Codex runs a tool without asking only when it is read-only: call_tool is, only when every
    tool it can reach is; otherwise it says it may destroy, as an unannotated tool may."""
    async with connected(_config(), _upstreams()) as (_, client):
        call = next(t for t in (await client.list_tools()).tools if t.name == CALL)
    assert call.annotations is not None
    assert (call.annotations.read_only_hint, call.annotations.destructive_hint) == (False, True)
    reader = make_server(
        "reader",
        {"read": FakeTool(_echo, annotations=types.ToolAnnotations(read_only_hint=True), description="Read.")},
    )
    config = config_from({"reader": {"command": "x"}}, {"expose": "search"})
    async with connected(config, MemoryUpstreams({"reader": reader})) as (_, client):
        await client.call_tool(FIND, {"query": "read"})  # after startup: search mode lists before it
        call = next(t for t in (await client.list_tools()).tools if t.name == CALL)
    assert call.annotations is not None and call.annotations.read_only_hint is True


@pytest.mark.parametrize(("action", "ran"), [("accept", True), ("decline", False), ("cancel", False)])
async def test_confirm_asks_the_user_before_call_tool_runs_what_may_change_things(action: str, ran: bool) -> None:
    """patchbay.confirm: the client approved call_tool once, not what it reaches; a tool that does
    not say it only reads is put to the user first (elicitation), and runs only if accepted."""
    asked: list[str] = []
    runs: list[str] = []

    async def write(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        runs.append("write")
        return text("written")

    async def read(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
        runs.append("read")
        return text("read")

    async def elicitation(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action=action)  # type: ignore[arg-type]

    only_reads = types.ToolAnnotations(read_only_hint=True)
    server = make_server(
        "disk", {"write": FakeTool(write, description="Write."), "read": FakeTool(read, annotations=only_reads)}
    )
    config = config_from({"disk": {"command": "x"}}, {"expose": "search", "confirm": True})
    async with connected(config, MemoryUpstreams({"disk": server}), elicitation_callback=elicitation) as (_, client):
        wrote = await client.call_tool(CALL, {"name": "disk__write", "arguments": {"path": "a"}})
        assert asked and asked[0].startswith('Run disk__write (server \'disk\') with {"path": "a"}?')
        assert result_text(await client.call_tool(CALL, {"name": "disk__read"})) == "read"  # read-only: not asked
        assert len(asked) == 1
    assert ("write" in runs) is ran
    if ran:
        assert result_text(wrote) == "written"
    else:
        assert error_info(wrote)["code"] == "USER_DECLINED" and "did not approve" in result_text(wrote)


async def test_confirm_leaves_the_call_to_a_client_that_cannot_ask() -> None:
    server = make_server("disk", {"write": FakeTool(_echo, description="Write.")})
    config = config_from({"disk": {"command": "x"}}, {"expose": "search", "confirm": True})
    async with connected(config, MemoryUpstreams({"disk": server})) as (_, client):  # no elicitation capability
        result = await client.call_tool(CALL, {"name": "disk__write", "arguments": {}})
    assert not result.is_error
