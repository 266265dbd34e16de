"""Overrides (issue 24): what the model sees of a tool or prompt, shaped by the user in the server's entry.

The file's ``tools.overrides`` and ``prompts.overrides`` read strictly (``config.overrides``); the
changed definitions built from a server's listing (``mcp_patchbay.catalog.overrides``, pure); and through
the proxy, in memory: the listing, calls reaching the upstream with its own names and fixed
values, the old names resolving, search, prompts, the mistakes only a listing shows, reloads.
"""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.server.context import ServerRequestContext

from mcp_patchbay.catalog.merge import Source, build_catalog
from mcp_patchbay.catalog.overrides import change_tools
from mcp_patchbay.config import ConfigError, ToolOverride, parse_config
from mcp_patchbay.config.models import STRICT_MODEL
from mcp_patchbay.config.overrides import _STRICT  # pyright: ignore[reportPrivateUsage]
from tests.harness import FakeTool, MemoryUpstreams, connected, error_info, make_server, result_text, until

CFG = Path("/etc/patchbay/patchbay.json")

ISSUE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "owner": {"type": "string", "description": "Repository owner"},
        "repo": {"type": "string"},
        "title": {"type": "string"},
        "body": {"type": "string", "description": "Issue text"},
        "labels": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["owner", "repo", "title"],
    "additionalProperties": False,
}

OVERRIDE: dict[str, Any] = {
    "name": "new_issue",
    "description_append": "Always add a label.",
    "arguments": {
        "owner": {"value": "acme"},
        "repo": {"default": "widgets"},
        "body": {"name": "text", "description": "Markdown text"},
    },
    "annotations": {"openWorldHint": False},
}


def parse(servers: dict[str, Any], **top: Any) -> Any:
    return parse_config(json.dumps({"servers": servers, **top}), CFG, {})


def entry_problem(override: object, key: str = "tools") -> str:
    section = {"overrides": {"create_issue": override}}
    config = parse({"github": {"command": "gh", key: section}})
    problem = config.servers[0].problem
    assert problem is not None and config.servers[0].spec is None
    return problem


# --- the file ---------------------------------------------------------------------------------


def test_overrides_are_read_from_an_entry() -> None:
    config = parse(
        {"github": {"command": "gh", "tools": {"overrides": {"create_issue": OVERRIDE}}, "prompts": {"overrides": {}}}}
    )
    spec = config.servers[0].spec
    assert spec is not None
    override = spec.tools.overrides["create_issue"]
    assert override.name == "new_issue" and override.arguments["owner"].fixed
    assert override.arguments["repo"].defaulted and not override.arguments["repo"].fixed
    assert override.annotations is not None and override.annotations.said() == {"openWorldHint": False}
    assert hash(config) == hash(
        parse({"github": {"command": "gh", "tools": {"overrides": {"create_issue": OVERRIDE}}}})
    )


def test_a_fixed_null_is_not_an_absent_key() -> None:
    fixed = ToolOverride.model_validate({"arguments": {"a": {"value": None}}})
    described = ToolOverride.model_validate({"arguments": {"a": {"description": "x"}}})
    assert fixed.arguments["a"].fixed and fixed != described and hash(fixed) != hash(described)
    assert fixed == ToolOverride.model_validate({"arguments": {"a": {"value": None}}})


def test_the_strict_config_is_the_models_twin() -> None:
    assert _STRICT == STRICT_MODEL


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ({"nme": "x"}, "servers.github.tools.overrides.create_issue: unknown key 'nme' (did you mean 'name'?)"),
        (
            {"arguments": {"owner": {"value": 1, "default": 2}}},
            "servers.github.tools.overrides.create_issue.arguments.owner: 'value' hides the argument and always "
            "sends it, so it cannot be combined with 'default', 'description' or 'name'",
        ),
        (
            {"arguments": {"owner": {"valeu": 1}}},
            "servers.github.tools.overrides.create_issue.arguments.owner: unknown key 'valeu' (did you mean 'value'?)",
        ),
        (
            {"description": "a", "description_append": "b"},
            "servers.github.tools.overrides.create_issue: give 'description' (replaces) or 'description_append' "
            "(adds), not both",
        ),
        (
            {"annotations": {}, "replace_annotations": {}},
            "servers.github.tools.overrides.create_issue: give 'annotations' (merged) or 'replace_annotations' "
            "(replaces), not both",
        ),
        (
            {"annotations": {"readOnly": True}},
            "servers.github.tools.overrides.create_issue.annotations: unknown key 'readOnly' (did you mean "
            "'readOnlyHint'?)",
        ),
        (
            {"annotations": {"readOnlyHint": "yes"}},
            "servers.github.tools.overrides.create_issue.annotations.readOnlyHint: expected true or false",
        ),
        (
            {"name": "new issue"},
            "servers.github.tools.overrides.create_issue.name: 'new issue' is not a valid tool name: use letters, "
            "digits, '_' and '-'",
        ),
        (
            {"arguments": {"a": {"name": "b"}, "b": {"description": "x"}}},
            "servers.github.tools.overrides.create_issue: arguments 'a' and 'b' would both be 'b'",
        ),
        (
            {"arguments": {"a": {}}},
            "servers.github.tools.overrides.create_issue.arguments.a: say what to change: 'value', 'default', "
            "'description' or 'name'",
        ),
    ],
)
def test_a_mistake_in_a_tool_override_is_named_by_its_key(override: object, expected: str) -> None:
    assert entry_problem(override) == expected


def test_a_mistake_in_a_prompt_override_is_named_by_its_key() -> None:
    assert entry_problem({"title": "x"}, "prompts") == (
        "servers.github.prompts.overrides.create_issue: unknown key 'title'"
    )
    config = parse({"github": {"command": "gh", "prompts": {"overides": {}}}})
    assert config.servers[0].problem == "servers.github.prompts: unknown key 'overides' (did you mean 'overrides'?)"


def test_a_profile_refuses_overrides_they_belong_to_the_entry() -> None:
    profiles = {"coding": {"tools": {"github": {"overrides": {"create_issue": {"name": "x"}}}}}}
    with pytest.raises(ConfigError) as info:
        parse({"github": {"command": "gh"}}, profiles=profiles)
    assert str(info.value) == (
        f"{CFG}: profiles.coding.tools.github.overrides: overrides belong to the server's entry (its 'tools': "
        '{"overrides": ...}), where every profile gets them; a profile only chooses servers and tools'
    )


def test_a_profile_keeps_the_entrys_overrides() -> None:
    from mcp_patchbay.config import apply_profile

    servers = {"github": {"command": "gh", "tools": {"allow": ["create_*"], "overrides": {"create_issue": OVERRIDE}}}}
    for narrowing in ({"deny": ["x"]}, {"allow": ["create_issue"]}):
        config = parse(servers, profiles={"p": {"tools": {"github": narrowing}}})
        spec = apply_profile(config, "p").servers[0].spec
        assert spec is not None and spec.tools.overrides == config.servers[0].spec.tools.overrides  # type: ignore[union-attr]


# --- applying them, pure ------------------------------------------------------------------------


def _tool(name: str = "create_issue", **fields: Any) -> types.Tool:
    fields.setdefault("input_schema", copy.deepcopy(ISSUE_SCHEMA))
    return types.Tool(name=name, description=fields.pop("description", "Create an issue."), **fields)


def test_the_changed_schema_stays_valid_json_schema_and_the_upstreams_is_untouched() -> None:
    import jsonschema

    tool = _tool(annotations=types.ToolAnnotations(read_only_hint=False, idempotent_hint=True))
    changed, remarks = change_tools("github", [tool], {"create_issue": ToolOverride.model_validate(OVERRIDE)})
    assert remarks == []
    definition = changed["create_issue"].definition
    assert definition.name == "new_issue"
    assert definition.description == "Create an issue.\n\nAlways add a label."
    assert definition.input_schema == {
        "type": "object",
        "properties": {
            "repo": {"type": "string", "default": "widgets"},
            "title": {"type": "string"},
            "text": {"type": "string", "description": "Markdown text"},
            "labels": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["title"],
        "additionalProperties": False,
    }
    jsonschema.Draft202012Validator.check_schema(definition.input_schema)
    assert definition.annotations == types.ToolAnnotations(
        read_only_hint=False, idempotent_hint=True, open_world_hint=False
    )
    assert tool.input_schema == ISSUE_SCHEMA and tool.name == "create_issue"  # the upstream's, as listed

    to_upstream = changed["create_issue"].to_upstream
    assert to_upstream is not None
    assert to_upstream({"title": "Bug", "text": "It broke"}) == {
        "title": "Bug",
        "body": "It broke",
        "repo": "widgets",
        "owner": "acme",
    }
    assert to_upstream(None) == {"repo": "widgets", "owner": "acme"}
    assert to_upstream({"title": "t", "repo": "gadgets", "owner": "someone"}) == {
        "title": "t",
        "repo": "gadgets",
        "owner": "acme",  # always the fixed value
    }


def test_replace_annotations_replaces_and_a_description_replaces() -> None:
    tool = _tool(annotations=types.ToolAnnotations(destructive_hint=True, title="Create"))
    override = ToolOverride.model_validate({"description": "New.", "replace_annotations": {"readOnlyHint": True}})
    changed, _ = change_tools("github", [tool], {"create_issue": override})
    definition = changed["create_issue"].definition
    assert definition.annotations == types.ToolAnnotations(read_only_hint=True)
    assert definition.description == "New." and changed["create_issue"].to_upstream is None


def test_a_fixed_list_is_never_shared_between_calls() -> None:
    override = ToolOverride.model_validate({"arguments": {"labels": {"value": ["a"]}}})
    changed, _ = change_tools("github", [_tool()], {"create_issue": override})
    to_upstream = changed["create_issue"].to_upstream
    assert to_upstream is not None
    first = to_upstream({})
    assert first is not None
    first["labels"].append("b")
    assert to_upstream({}) == {"labels": ["a"]}


def test_mistakes_only_the_listing_shows_skip_only_their_override() -> None:
    overrides = {
        "create_issue": ToolOverride.model_validate(
            {
                "description": "Kept.",
                "arguments": {
                    "ownr": {"value": "acme"},
                    "repo": {"value": 5},
                    "labels": {"default": "triage"},
                    "title": {"name": "repo"},
                    "body": {"description": "Kept too."},
                },
            }
        ),
        "close_issue": ToolOverride.model_validate({"name": "shut"}),
        "list_issues": ToolOverride.model_validate({"name": "search_issues"}),
    }
    tools = [_tool(), _tool("list_issues"), _tool("search_issues")]
    changed, remarks = change_tools("github", tools, overrides)
    assert [str(r) for r in remarks] == [
        "github.tools.overrides.close_issue: server 'github' lists no tool 'close_issue' (did you mean "
        "'list_issues'?); this override is skipped",
        "github.tools.overrides.list_issues.name: another tool of this server is called 'search_issues' already; "
        "the name is not changed",
        "github.tools.overrides.create_issue.arguments.labels.default: the tool's schema refuses it: Parameter "
        "'labels' must be an array, got string; this argument is not changed",
        "github.tools.overrides.create_issue.arguments.ownr: the tool takes no argument 'ownr' (did you mean "
        "'owner'?) (its arguments: body, labels, owner, repo, title); skipped",
        "github.tools.overrides.create_issue.arguments.repo.value: the tool's schema refuses it: Parameter 'repo' "
        "must be a string, got integer; this argument is not changed",
        "github.tools.overrides.create_issue.arguments.title.name: the tool has an argument called 'repo' "
        "already; this argument is not changed",
    ]
    assert all(r.server == "github" for r in remarks)
    definition = changed["create_issue"].definition
    assert definition.description == "Kept."
    assert definition.input_schema["properties"]["body"]["description"] == "Kept too."
    assert definition.input_schema["properties"].keys() == ISSUE_SCHEMA["properties"].keys()
    assert changed["list_issues"].definition.name == "list_issues"


def test_a_value_is_checked_against_definitions_the_argument_refers_to() -> None:
    schema = {
        "type": "object",
        "$defs": {"Mode": {"enum": ["fast", "slow"]}},
        "properties": {"mode": {"$ref": "#/$defs/Mode"}},
    }
    tool = types.Tool(name="run", input_schema=schema)
    bad = {"run": ToolOverride.model_validate({"arguments": {"mode": {"value": "medium"}}})}
    _, remarks = change_tools("s", [tool], bad)
    assert [r.key for r in remarks] == ["s.tools.overrides.run.arguments.mode.value"]
    good = {"run": ToolOverride.model_validate({"arguments": {"mode": {"value": "slow"}}})}
    changed, remarks = change_tools("s", [tool], good)
    assert remarks == [] and changed["run"].definition.input_schema["properties"] == {}


def _catalog(spec_servers: dict[str, Any], tools: dict[str, list[types.Tool]], **options: Any) -> Any:
    config = parse(spec_servers)
    sources = [
        Source(e.name, tools=tools.get(e.name, ()), tool_filter=e.spec.tools, spec=e.spec) for e in config.servers
    ]
    options = {"separator": "__", "max_length": 48, "validate_arguments": True, **options}
    return build_catalog(sources, **options)


def test_a_new_name_over_the_budget_is_shortened_and_said() -> None:
    long_name = "create_an_issue_in_the_repository_with_labels"
    servers = {"github": {"command": "gh", "tools": {"overrides": {"create_issue": {"name": long_name}}}}}
    catalog = _catalog(servers, {"github": [_tool()]})
    (exposed,) = catalog.by_exposed
    assert len(exposed) == 48 and exposed.startswith("github__create_an_issue")
    assert [r.key for r in catalog.remarks] == ["github.tools.overrides.create_issue.name"]
    assert "longer than the 48 characters" in catalog.remarks[0].sentence


def test_a_server_not_yet_listed_is_not_judged() -> None:
    config = parse({"github": {"command": "gh", "tools": {"overrides": {"nothing": {"name": "x"}}}}})
    entry = config.servers[0]
    source = Source("github", unavailable="still starting", tool_filter=entry.spec.tools, spec=entry.spec)
    catalog = build_catalog([source], separator="__", max_length=48, validate_arguments=True)
    assert catalog.remarks == []


def test_a_skipped_override_is_logged_once_per_listing_with_the_file(caplog: pytest.LogCaptureFixture) -> None:
    config = parse({"github": {"command": "gh", "tools": {"overrides": {"nothing": {"name": "x"}}}}})
    entry = config.servers[0]
    listing = (_tool(),)
    source = Source("github", tools=listing, tool_filter=entry.spec.tools, spec=entry.spec)
    caplog.set_level(logging.WARNING, logger="mcp_patchbay.catalog.merge")
    for _ in range(3):
        catalog = build_catalog([source], separator="__", max_length=48, validate_arguments=True, config_path=CFG)
        assert len(catalog.remarks) == 1
    lines = [r.getMessage() for r in caplog.records if "override skipped" in r.getMessage()]
    assert lines == [
        f"override skipped in {CFG}: github.tools.overrides.nothing: server 'github' lists no tool 'nothing'; "
        "this override is skipped"
    ]
    relisted = Source("github", tools=(_tool(),), tool_filter=entry.spec.tools, spec=entry.spec)
    build_catalog([relisted], separator="__", max_length=48, validate_arguments=True, config_path=CFG)
    assert len([r for r in caplog.records if "override skipped" in r.getMessage()]) == 2


# --- through the proxy ------------------------------------------------------------------------------


async def _echo(ctx: ServerRequestContext[Any, Any], args: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(args, sort_keys=True))], structured_content=args
    )


def _github() -> Any:
    return make_server(
        "github",
        {
            "create_issue": FakeTool(
                _echo, copy.deepcopy(ISSUE_SCHEMA), description="Create an issue in a repository."
            ),
            "list_issues": FakeTool(_echo, description="List the issues of a repository."),
            "delete_repo": FakeTool(
                _echo, description="Delete a repository.", annotations=types.ToolAnnotations(destructive_hint=True)
            ),
        },
        prompts=[types.Prompt(name="triage", description="Triage the open issues.")],
    )


def _servers(overrides: dict[str, Any] | None = None, **entry: Any) -> dict[str, Any]:
    tools = {"overrides": {"create_issue": OVERRIDE} if overrides is None else overrides}
    return {"github": {"command": "gh", "tools": tools, **entry}}


def _config(servers: dict[str, Any], **patchbay: Any) -> Any:
    return parse_config(json.dumps({"mcpServers": servers, "patchbay": patchbay}), CFG, {})


@pytest.mark.anyio
async def test_the_client_lists_exactly_the_changed_definitions() -> None:
    upstreams = MemoryUpstreams({"github": _github()})
    async with connected(_config(_servers()), upstreams) as (_, client):
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert sorted(tools) == ["github__delete_repo", "github__list_issues", "github__new_issue"]
    listed = tools["github__new_issue"].model_dump(by_alias=True, exclude_none=True)
    assert listed == {
        "name": "github__new_issue",
        "description": "Create an issue in a repository.\n\nAlways add a label.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "repo": {"type": "string", "default": "widgets"},
                "title": {"type": "string"},
                "text": {"type": "string", "description": "Markdown text"},
                "labels": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["title"],
            "additionalProperties": False,
        },
        "annotations": {"openWorldHint": False},
    }


@pytest.mark.anyio
async def test_a_call_reaches_the_upstream_under_its_own_names_with_the_fixed_value() -> None:
    upstreams = MemoryUpstreams({"github": _github()})
    async with connected(_config(_servers()), upstreams) as (_, client):
        result = await client.call_tool("github__new_issue", {"title": "Bug", "text": "It broke"})
        assert not result.is_error, result_text(result)
        assert result.structured_content == {"owner": "acme", "repo": "widgets", "title": "Bug", "body": "It broke"}

        # A default the model gives is sent as given.
        given = await client.call_tool("github__new_issue", {"title": "Bug", "repo": "gadgets"})
        assert given.structured_content == {"owner": "acme", "repo": "gadgets", "title": "Bug"}

        # The checks read the changed schema: the hidden argument, or an old argument name, is refused.
        for arguments in ({"title": "Bug", "owner": "me"}, {"title": "Bug", "body": "x"}):
            refused = await client.call_tool("github__new_issue", arguments)
            info = error_info(refused)
            assert info["code"] == "INVALID_ARGUMENTS", info
            assert "repo, title, text, labels" in result_text(refused)
        missing = await client.call_tool("github__new_issue", {"text": "x"})
        assert "Missing required parameter 'title'" in result_text(missing)


@pytest.mark.anyio
async def test_the_upstreams_own_name_still_resolves_and_a_typo_suggests_the_new_one() -> None:
    upstreams = MemoryUpstreams({"github": _github()})
    async with connected(_config(_servers()), upstreams) as (_, client):
        for old in ("github__create_issue", "create_issue", "github_create_issue"):
            result = await client.call_tool(old, {"title": "Bug"})
            assert not result.is_error, (old, result_text(result))
            assert result.structured_content == {"owner": "acme", "repo": "widgets", "title": "Bug"}
        typo = await client.call_tool("github__new_isue", {"title": "Bug"})
        assert error_info(typo)["suggestions"] == ["github__new_issue"]


@pytest.mark.anyio
async def test_read_only_annotation_makes_call_tools_view_of_it_read_only() -> None:
    read_only = {"annotations": {"readOnlyHint": True}}
    servers = _servers({"create_issue": read_only, "list_issues": read_only})
    servers["github"]["tools"]["deny"] = ["delete_repo"]
    plain = {"github": {"command": "gh", "tools": {"deny": ["delete_repo"]}}}
    seen: list[tuple[bool | None, bool]] = []
    for config in (_config(servers, expose="search"), _config(plain, expose="search")):
        async with connected(config, MemoryUpstreams({"github": _github()})) as (proxy, client):
            await until(lambda: "github__create_issue" in proxy.supervisor.catalog.by_exposed)
            tools = {t.name: t for t in (await client.list_tools()).tools}
            annotations = tools["patchbay__call_tool"].annotations
            target = proxy.supervisor.catalog.by_exposed["github__create_issue"]
            seen.append((annotations.read_only_hint if annotations is not None else None, target.retry_safe))
    assert seen == [(True, True), (False, False)]


@pytest.mark.anyio
async def test_a_renamed_prompt_reaches_get_prompt_under_its_own_name() -> None:
    servers = _servers({}, prompts={"overrides": {"triage": {"name": "sort_issues", "description": "Sort them."}}})
    async with connected(_config(servers), MemoryUpstreams({"github": _github()})) as (_, client):
        prompts = (await client.list_prompts()).prompts
        assert [(p.name, p.description) for p in prompts] == [("github__sort_issues", "Sort them.")]
        for name in ("github__sort_issues", "github__triage"):
            answer = await client.get_prompt(name, {"n": "1"})
            content = answer.messages[0].content
            assert isinstance(content, types.TextContent) and content.text == "github:triage:{'n': '1'}"


@pytest.mark.anyio
async def test_mistakes_in_overrides_are_kept_for_check_and_lose_nothing_else() -> None:
    overrides = {"create_issue": {"name": "new_issue", "arguments": {"ownr": {"value": "acme"}}}, "close": {}}
    servers = _servers(overrides, prompts={"overrides": {"triag": {"name": "x"}}})
    async with connected(_config(servers), MemoryUpstreams({"github": _github()})) as (proxy, client):
        names = sorted(t.name for t in (await client.list_tools()).tools)
        assert names == ["github__delete_repo", "github__list_issues", "github__new_issue"]
        remarks = proxy.supervisor.catalog.remarks
    assert [(r.server, r.key) for r in remarks] == [
        ("github", "github.tools.overrides.close"),
        ("github", "github.tools.overrides.create_issue.arguments.ownr"),
        ("github", "github.prompts.overrides.triag"),
    ]


@pytest.mark.anyio
async def test_a_reload_changing_only_overrides_restarts_nothing() -> None:
    upstreams = MemoryUpstreams({"github": _github()})
    async with connected(_config(_servers({})), upstreams) as (proxy, client):
        before = proxy.supervisor.upstreams["github"]
        assert "github__create_issue" in {t.name for t in (await client.list_tools()).tools}
        prompts = {"overrides": {"triage": {"name": "sort_issues"}}}
        proxy.supervisor.apply(_config(_servers({"create_issue": {"name": "open_issue"}}, prompts=prompts)))
        with anyio.fail_after(5):
            names = {t.name for t in (await client.list_tools()).tools}
        assert "github__open_issue" in names and "github__create_issue" not in names
        assert [p.name for p in (await client.list_prompts()).prompts] == ["github__sort_issues"]
        assert proxy.supervisor.upstreams["github"] is before
        assert upstreams.connects == {"github": 1}


@pytest.mark.anyio
async def test_search_finds_the_renamed_tool_by_its_new_text_and_its_old_name() -> None:
    overrides = {"list_issues": {"name": "browse_tickets", "description": "Browse the support tickets of a product."}}
    config = _config(_servers(overrides), expose="search")
    async with connected(config, MemoryUpstreams({"github": _github()})) as (_, client):
        for query in ("support tickets", "browse_tickets", "list_issues"):
            found = await client.call_tool("patchbay__find_tools", {"query": query})
            assert found.structured_content is not None, result_text(found)
            first = found.structured_content["tools"][0]
            assert first["name"] == "github__browse_tickets", (query, found.structured_content)
            assert first["description"] == "Browse the support tickets of a product."


# --- the docs ---------------------------------------------------------------------------------------


def test_the_example_in_config_md_is_a_valid_config_and_means_what_it_says() -> None:
    page = (Path(__file__).resolve().parent.parent / "docs" / "CONFIG.md").read_text(encoding="utf-8")
    example = page.split("## Overrides", 1)[1].split("```json", 1)[1].split("```", 1)[0]
    config = parse_config(example, CFG, {})
    assert all(entry.problem is None for entry in config.servers)
    issue = _tool(input_schema={**copy.deepcopy(ISSUE_SCHEMA), "additionalProperties": True})
    search = types.Tool(name="search_issues", input_schema={"type": "object", "properties": {"q": {"type": "string"}}})
    now = types.Tool(
        name="get_current_time",
        input_schema={"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]},
    )
    tools = {"github": [issue, search], "time": [now]}
    sources = [Source(e.name, tools=tools[e.name], tool_filter=e.spec.tools, spec=e.spec) for e in config.servers]  # type: ignore[union-attr]
    catalog = build_catalog(sources, separator="__", max_length=48, validate_arguments=True)
    assert catalog.remarks == []
    assert sorted(catalog.by_exposed) == ["github__new_issue", "github__search_issues", "time__now"]
    new_issue = catalog.by_exposed["github__new_issue"]
    assert new_issue.to_upstream is not None
    sent = new_issue.to_upstream({"title": "Crash", "text": "Steps: ..."})
    assert sent == {"owner": "acme", "repo": "widgets", "title": "Crash", "body": "Steps: ..."}
    assert catalog.by_exposed["github__search_issues"].retry_safe
    time_now = catalog.by_exposed["time__now"]
    assert time_now.definition.input_schema == {"type": "object", "properties": {}}  # no empty 'required'

    assert time_now.to_upstream is not None and time_now.to_upstream(None) == {"timezone": "UTC"}


def test_a_rebuild_for_the_same_listing_and_entry_does_not_apply_the_overrides_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import mcp_patchbay.catalog.merge as catalog_module

    applied: list[str] = []
    real = catalog_module.change_tools

    def counting(server: str, *args: Any) -> Any:
        applied.append(server)
        return real(server, *args)

    monkeypatch.setattr(catalog_module, "change_tools", counting)
    config = parse({"cached": {"command": "gh", "tools": {"overrides": {"create_issue": OVERRIDE}}}})
    entry = config.servers[0]
    source = Source("cached", tools=(_tool(),), tool_filter=entry.spec.tools, spec=entry.spec)
    for _ in range(3):
        catalog = build_catalog([source], separator="__", max_length=48, validate_arguments=True)
        assert list(catalog.by_exposed) == ["cached__new_issue"]
    assert applied == ["cached"]
    relisted = Source("cached", tools=(_tool(),), tool_filter=entry.spec.tools, spec=entry.spec)
    build_catalog([relisted], separator="__", max_length=48, validate_arguments=True)
    reloaded = parse({"cached": {"command": "gh", "tools": {"overrides": {"create_issue": {"name": "open"}}}}})
    spec = reloaded.servers[0].spec
    changed = Source("cached", tools=relisted.tools, tool_filter=spec.tools, spec=spec)
    assert list(build_catalog([changed], separator="__", max_length=48, validate_arguments=True).by_exposed) == [
        "cached__open"
    ]
    assert applied == ["cached"] * 3


# --- check ------------------------------------------------------------------------------------------


def test_check_names_the_overrides_skipped_with_their_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from mcp_patchbay import cli
    from tests.test_cli import upstream, write

    entry = upstream("plain", "pid")
    entry["tools"] = {
        "overrides": {"pid": {"name": "process_id", "arguments": {"signal": {"value": 9}}}, "kill": {"name": "x"}}
    }
    config = write(tmp_path, {"plain": entry})
    assert cli.main(["check", str(config), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["overrides_skipped"] == [
        {
            "server": "plain",
            "key": "plain.tools.overrides.kill",
            "problem": "server 'plain' lists no tool 'kill'; this override is skipped",
        },
        {
            "server": "plain",
            "key": "plain.tools.overrides.pid.arguments.signal",
            "problem": "the tool takes no argument 'signal' (its arguments: none); skipped",
        },
    ]
    assert cli.main(["check", str(config)]) == 0
    out = capsys.readouterr().out
    assert f"warning: 2 override(s) skipped, not fitting what the server listed ({config}):" in out
    assert "  plain.tools.overrides.kill: server 'plain' lists no tool 'kill'; this override is skipped" in out


def test_a_gateway_access_rule_refuses_overrides_which_belong_to_the_entry() -> None:
    token = "t" * 32
    rule = {"tokens": ["alice"], "tools": {"time": {"overrides": {"get_time": {"name": "now"}}}}}
    document = {"mcpServers": {"time": {"command": "x"}}, "gateway": {"tokens": {"alice": token}, "access": [rule]}}
    with pytest.raises(ConfigError) as raised:
        parse_config(json.dumps(document), CFG, {})
    assert "gateway.access[0]" in str(raised.value) and "tools.time.overrides" in str(raised.value)
    assert "belong to the server's entry" in str(raised.value)
