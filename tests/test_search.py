"""Search mode's pure core (mcp_patchbay.search): ranking, limits, answers, description."""

from __future__ import annotations

import json
import time
from typing import Any

import jsonschema
import pytest

from mcp_patchbay.search import (
    MAX_LIMIT,
    OUTPUT_SCHEMA,
    TEXT_BUDGET,
    IndexedTool,
    ServerNote,
    ToolIndex,
    brief_schema,
    clamp_limit,
    compact_schema,
    find_tools_description,
    note_match,
    render_answer,
    server_summary,
)
from mcp_patchbay.search.text import expand_phrases, fold, split_words, terms


def obj(**props: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: {"type": "string", "description": desc} for name, desc in props.items()},
        "required": list(props)[:1],
    }


def tool(server: str, name: str, description: str, schema: dict[str, Any] | None = None, **kw: Any) -> IndexedTool:
    return IndexedTool(
        name=f"{server}__{name}",
        server=server,
        tool=name,
        description=description,
        input_schema=schema or {"type": "object"},
        **kw,
    )


TOOLS = [
    tool(
        "github", "create_issue", "Create a new issue in a GitHub repository", obj(owner="Owner", repo="Repo", title="")
    ),
    tool("github", "create_pull_request", "Create a new pull request in a GitHub repository", obj(head="Branch")),
    tool("github", "list_commits", "Get list of commits of a branch in a GitHub repository", obj(sha="Branch")),
    tool("github", "merge_pull_request", "Merge a pull request", obj(pull_number="PR number")),
    tool("gitlab", "create_issue", "Create a new issue in a GitLab project", obj(project_id="Project")),
    tool("filesystem", "read_text_file", "Read the complete contents of a file as text", obj(path="File path")),
    tool("filesystem", "list_directory", "Get a detailed listing of all files and directories", obj(path="Dir")),
    tool("playwright", "browserTakeScreenshot", "Take a screenshot of the current page", obj(filename="File")),
    tool("playwright", "browser.navigate", "Navigate to a URL", obj(url="The URL to navigate to")),
    tool("slack", "slack-post-message", "Post a new message to a Slack channel", obj(channel_id="", text="")),
    tool("mongodb", "list-collections", "List all collections for a given database", obj(database="Database")),
    tool("time", "get_current_time", "Get current time in a specific timezone", obj(timezone="IANA name")),
    tool("notion", "API-post-search", "Search by title", obj(query="Text"), server_instructions="Notion pages."),
]


@pytest.fixture(scope="module")
def index() -> ToolIndex:
    return ToolIndex.build(TOOLS)


def names(index: ToolIndex, query: str, **kw: Any) -> list[str]:
    return [hit.tool.name for hit in index.search(query, **kw)]


# --- words ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("create_pull_request", ["create", "pull", "request"]),
        ("browserTakeScreenshot", ["browser", "take", "screenshot"]),
        ("slack-post-message", ["slack", "post", "message"]),
        ("browser.navigate", ["browser", "navigate"]),
        ("HTTPRequest", ["http", "request"]),
        ("API-post-search", ["api", "post", "search"]),
        ("v2api", ["v", "2", "api"]),
    ],
)
def test_split_words(name: str, words: list[str]) -> None:
    assert split_words(name) == words


def test_folding_plurals_and_forms() -> None:
    assert fold("issues") == fold("issue")
    assert fold("repositories") == fold("repository")
    assert fold("listing") == fold("list")
    assert fold("status") == "status"  # not a plural
    assert terms("Please list the files") == [fold("list"), fold("files")]


# --- ranking -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("github__create_issue", "github__create_issue"),  # exact exposed name
        ("gitlab__create_issue", "gitlab__create_issue"),  # same upstream name, other server
        ("GitHub.Create-Issue", "github__create_issue"),  # wrong case and separators
        ("gihub__create_isue", "github__create_issue"),  # typos
        ("mcp__patchbay__github__list_commits", "github__list_commits"),  # client prefix
        ("list_comits", "github__list_commits"),  # upstream name with a typo, no server
        ("browser_take_screenshot", "playwright__browserTakeScreenshot"),  # snake for camel
        ("browserTakeScreenshot", "playwright__browserTakeScreenshot"),
        ("slack_post_message", "slack__slack-post-message"),  # snake for kebab
        ("playwright__browser_navigate", "playwright__browser.navigate"),  # dotted upstream name
        ("API-post-search", "notion__API-post-search"),
    ],
)
def test_names_rank_first(index: ToolIndex, query: str, expected: str) -> None:
    assert names(index, query)[0] == expected


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("open a pull request from my feature branch", "github__create_pull_request"),
        ("what files are in this folder", "filesystem__list_directory"),
        ("capture an image of the page", "playwright__browserTakeScreenshot"),
        ("send a message to the team channel on slack", "slack__slack-post-message"),
        ("what time is it in Tokyo", "time__get_current_time"),
        ("show the commit history of the branch", "github__list_commits"),
        ("which collections are in the mongo database", "mongodb__list-collections"),
        ("go to https://example.com in the browser", "playwright__browser.navigate"),
    ],
)
def test_needs_rank_first(index: ToolIndex, query: str, expected: str) -> None:
    assert names(index, query)[0] == expected


def test_server_named_in_query_prefers_its_tool(index: ToolIndex) -> None:
    assert names(index, "file a new issue in gitlab")[0] == "gitlab__create_issue"
    assert names(index, "file a new issue on github")[0] == "github__create_issue"


def test_noun_number_agreement() -> None:
    pair = [
        tool("gh", "get_issue", "Get details of a specific issue in a repository"),
        tool("gh", "list_issues", "List issues in a repository"),
    ]
    index = ToolIndex.build(pair)
    assert names(index, "which issues are open in the repo")[0] == "gh__list_issues"
    assert names(index, "look at issue 12 in the repo")[0] == "gh__get_issue"


def test_domain_synonyms() -> None:
    index = ToolIndex.build(
        [
            tool("web", "browser_navigate", "Navigate to a URL"),
            tool("web", "browser_click", "Click an element"),
            tool("tracker", "add_issue_comment", "Add a comment to an issue"),
            tool("tracker", "create_issue", "Create a new issue"),
        ]
    )
    assert names(index, "load the staging site")[0] == "web__browser_navigate"
    assert names(index, "reply on the ticket")[0] == "tracker__add_issue_comment"


def test_phrases_expand_queries() -> None:
    assert expand_phrases("please look up the weather") == "please look up the weather lookup search"
    assert expand_phrases("list files") == "list files"
    index = ToolIndex.build(
        [tool("auth", "login", "Authenticate the session"), tool("auth", "get_profile", "Get the signed user")]
    )
    assert names(index, "sign in to the site")[0] == "auth__login"
    assert names(index, "log in")[0] == "auth__login"  # a name-like query is still compared as given


def test_compound_spellings() -> None:
    index = ToolIndex.build(
        [
            tool("fs", "directory_tree", "Show the filesystem tree"),
            tool("web", "map_site", "Map every url of a site"),
            tool("web", "get_page", "Get one page"),
        ]
    )
    assert names(index, "show the file system layout")[0] == "fs__directory_tree"
    assert names(index, "make a sitemap")[0] == "web__map_site"


def test_server_named_by_a_plural(index: ToolIndex) -> None:
    memory = tool("memory", "search_nodes", "Search for nodes in the knowledge graph")
    k8s = tool("kubernetes", "kubectl_get", "Get kubernetes resources")
    both = ToolIndex.build([k8s, memory])
    assert names(both, "look through my saved memories for kubernetes")[0] == "memory__search_nodes"


def test_server_filter(index: ToolIndex) -> None:
    assert names(index, "create issue", server="gitlab") == ["gitlab__create_issue"]
    assert {n.split("__")[0] for n in names(index, "create", server="github", limit=20)} == {"github"}
    assert names(index, "create issue", server="GitLab") == ["gitlab__create_issue"]  # normalized
    assert names(index, "create issue", server="nope") == []
    # an empty query within a server lists that server's tools
    assert names(index, "", server="github", limit=2) == ["github__create_issue", "github__create_pull_request"]
    assert names(index, "") == []


@pytest.mark.parametrize(("limit", "clamped"), [(0, 1), (-3, 1), (1, 1), (5, 5), (20, 20), (21, 20), (10**9, 20)])
def test_limit_clamped(limit: int, clamped: int) -> None:
    assert clamp_limit(limit) == clamped


def test_limit_applied(index: ToolIndex) -> None:
    assert len(index.search("github", limit=0)) == 1
    assert len(index.search("create", limit=99)) <= MAX_LIMIT
    assert len(index.search("repository")) <= 5
    assert clamp_limit(None) == 5


def test_odd_queries(index: ToolIndex) -> None:
    for query in ("", "   ", "!!!", "the a of", "__", "a" * 5_000):
        assert names(index, query) == []
    started = time.perf_counter()
    assert names(index, "create issue " * 20_000)  # cut to MAX_QUERY_CHARS, still found
    assert time.perf_counter() - started < 1.0


def test_deterministic_and_order_independent_ties() -> None:
    a = ToolIndex.build(TOOLS)
    b = ToolIndex.build(TOOLS)
    for query in ("create issue", "list", "github__create_issue", "pull request"):
        assert names(a, query) == names(b, query)


def test_search_is_fast_at_scale() -> None:
    big = [
        IndexedTool(
            name=f"{t.server}{n}__{t.tool}",
            server=f"{t.server}{n}",
            tool=t.tool,
            description=t.description,
            input_schema=t.input_schema,
        )
        for n in range(200)
        for t in TOOLS
    ]  # 2,600 tools
    started = time.perf_counter()
    index = ToolIndex.build(big)
    assert time.perf_counter() - started < 5.0  # generous for slow CI; the bench measures it properly
    started = time.perf_counter()
    for _ in range(20):
        index.search("create a pull request in the repository")
        index.search("gihub3__create_isue")
    assert (time.perf_counter() - started) / 40 < 0.05


def test_indexed_tool_of_an_sdk_definition() -> None:
    import mcp_types as types

    definition = types.Tool(
        name="create_issue",
        description="Create an issue",
        input_schema={"type": "object", "properties": {"title": {"type": "string"}}},
        annotations=types.ToolAnnotations(title="Create issue"),
    )
    indexed = IndexedTool.of("gh__create_issue", "gh", "create_issue", definition, "GitHub issues.")
    assert indexed == IndexedTool(
        name="gh__create_issue",
        server="gh",
        tool="create_issue",
        description="Create an issue",
        title="Create issue",
        input_schema={"type": "object", "properties": {"title": {"type": "string"}}},
        server_instructions="GitHub issues.",
    )
    assert ToolIndex.build([indexed]).search("open a new issue")[0].tool is indexed


# --- answers -------------------------------------------------------------------------


def huge_tool(number: int) -> IndexedTool:
    props = {
        f"param_{i}": {
            "type": "string",
            "title": f"Param {i}",
            "description": "A very long parameter description. " * 40,
            "enum": [f"value-{j}" for j in range(30)],
        }
        for i in range(60)
    }
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": props,
        "required": ["param_0"],
        "additionalProperties": False,
    }
    return tool("huge", f"huge_tool_{number}", "An enormous description. " * 500, schema)


def validate(structured: dict[str, Any]) -> None:
    jsonschema.validate(structured, OUTPUT_SCHEMA)
    jsonschema.Draft202012Validator.check_schema(OUTPUT_SCHEMA)
    assert "patchbay__" not in json.dumps(OUTPUT_SCHEMA)  # the call tool's name is configurable
    for entry in structured["tools"]:
        jsonschema.Draft202012Validator.check_schema(entry["inputSchema"])


def test_answer_budget_with_huge_schemas() -> None:
    huge = ToolIndex.build([huge_tool(n) for n in range(30)])
    hits = huge.search("huge tool", limit=20)
    assert len(hits) == 20
    notes = [ServerNote("jira", "needs sign-in", "Ask the user to sign in. " * 20, match=1.0)]
    structured, text = render_answer(hits, query="huge tool " * 100, unavailable=notes)
    assert len(text) <= TEXT_BUDGET < 10_000
    validate(structured)
    shown = structured["tools"]
    assert len(shown) + structured.get("omitted", 0) == 20
    for entry in shown:  # the text names every tool the structured answer carries, and vice versa
        assert entry["name"] in text
    assert [e["name"] for e in shown] == [h.tool.name for h in hits[: len(shown)]]
    brief = [e for e in shown if e["detail"] == "brief"]
    assert brief and all(e["moreParameters"] == 60 - len(e["inputSchema"]["properties"]) for e in brief)
    assert f", +{brief[0]['moreParameters']} more" in text


def test_answer_full_schemas_for_top_results(index: ToolIndex) -> None:
    hits = index.search("create", limit=10)
    structured, text = render_answer(hits, query="create")
    validate(structured)
    details = [e["detail"] for e in structured["tools"]]
    assert details[:3] == ["full"] * min(3, len(details))
    assert all(d == "brief" for d in details[3:])
    first = structured["tools"][0]
    assert first["inputSchema"] == compact_schema(hits[0].tool.input_schema)
    assert json.dumps(first["inputSchema"], separators=(",", ":")) in text
    assert '"name"' in text and "patchbay__call_tool" in text
    assert len(text) <= TEXT_BUDGET


def test_answer_keys(index: ToolIndex) -> None:
    structured, _ = render_answer(index.search("slack message"), query="slack message")
    entry = structured["tools"][0]
    assert entry["name"] == "slack__slack-post-message"
    assert entry["server"] == "slack"
    assert entry["tool"] == "slack-post-message"
    assert set(entry) >= {"name", "server", "tool", "title", "description", "inputSchema"}


def test_empty_answer_validates() -> None:
    structured, text = render_answer([], query="nothing here")
    validate(structured)
    assert structured["tools"] == []
    assert "No tools match" in text


def test_compact_schema_keeps_meaning() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
            "owner": {"type": "string", "title": "Owner", "description": ""},
            "state": {"type": "string", "enum": ["open", "closed"], "default": "open", "title": "Issue state"},
            "labels": {"type": "array", "items": {"type": "string", "additionalProperties": False}},
        },
        "required": ["owner"],
        "additionalProperties": False,
    }
    compact = compact_schema(schema)
    assert compact == {
        "type": "object",
        "properties": {
            "owner": {"type": "string"},
            "state": {"type": "string", "enum": ["open", "closed"], "default": "open", "title": "Issue state"},
            "labels": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["owner"],
    }
    assert compact_schema({}) == {"type": "object"}
    brief = brief_schema(schema)
    assert brief == {
        "type": "object",
        "properties": {"owner": {"type": "string"}, "state": {"type": "string"}, "labels": {"type": "array"}},
        "required": ["owner"],
    }


def test_notes_name_only_matching_unavailable_servers(index: ToolIndex) -> None:
    query = "create a jira ticket for the login bug"
    jira = ServerNote("jira", "needs sign-in", "Ask the user to sign in.", note_match(query, "jira", "create_issue"))
    slack = ServerNote("slack2", "starting", "Try again in a few seconds.", note_match(query, "slack2", "post message"))
    assert jira.match > 0.3 > slack.match
    structured, text = render_answer(index.search(query), query=query, unavailable=[jira, slack])
    validate(structured)
    assert [n["server"] for n in structured["unavailable"]] == ["jira"]
    assert "jira (needs sign-in). Ask the user to sign in." in text.splitlines()[-1]
    assert "slack2" not in text
    # restricted to an unavailable server: always named
    structured, _ = render_answer([], query="x", unavailable=[slack], server="slack2")
    assert structured["unavailable"][0]["server"] == "slack2"


# --- description ---------------------------------------------------------------------


def test_description_names_servers_and_usage() -> None:
    text = find_tools_description(
        TOOLS,
        servers={s: None for s in dict.fromkeys(t.server for t in TOOLS)}
        | {"notion": "Notion: pages and databases. More text here.", "jira": None},
    )
    for server in ("github", "gitlab", "filesystem", "playwright", "slack", "mongodb", "time", "notion", "jira"):
        assert f"- {server} (" in text
    assert "patchbay__call_tool" in text and '"name"' in text and '"arguments"' in text
    assert "patchbay__find_tools again with a tool's exact name" in text
    custom = find_tools_description(TOOLS, find_tools="x__find", call_tool="x__call")
    assert "x__find again" in custom and "x__call" in custom and "patchbay__" not in custom
    assert "Notion: pages and databases" in text
    assert "- jira (0): not available now" in text.splitlines()
    assert "More text" not in text
    assert len(text) < 2_000


def test_description_topics_from_tool_names() -> None:
    browser = [tool("web", f"browser_{name}", "") for name in ("click", "navigate", "take_screenshot", "close")]
    assert server_summary("web", None, browser).startswith("browser, ")  # the common word once, first
    github = [t for t in TOOLS if t.server == "github"]
    summary = server_summary("github", None, github)
    assert "issue" in summary and "pull request" in summary and "github" not in summary
    assert server_summary("github", "# GitHub\n\nIssues and **pull requests**. More.", github) == (
        "Issues and pull requests"
    )
    assert server_summary("pg", None, [tool("pg", "query", "Run a read-only query")]) == "query"


def test_description_bounded_with_many_servers() -> None:
    many = [
        tool(f"server-number-{n}", f"do_something_special_{i}", "Does a very particular thing. " * 10)
        for n in range(40)
        for i in range(5)
    ]
    servers = {f"server-number-{n}": ("Long instructions. " * 50 if n % 2 else None) for n in range(40)}
    text = find_tools_description(many, servers=servers)
    assert len(text) <= 2_000
    assert "server-number-0" in text
    assert "more servers" in text or "server-number-39" in text


def test_a_first_sentence_about_the_instructions_themselves_gives_way_to_the_tools() -> None:
    """server-everything's instructions open with "Audience: These instructions are written for
    an LLM ...", which said nothing of what the server is for in find_tools' description."""
    from mcp_patchbay.search import IndexedTool, server_summary

    tools = [IndexedTool(name="everything__get-sum", server="everything", tool="get-sum", description="Sum.")]
    meta = "# Title\n\nAudience: These instructions are written for an LLM. Follow them.\n"
    summary = server_summary("everything", meta, tools)
    assert "Audience" not in summary and "instructions" not in summary
    assert "sum" in summary.lower()


def test_arithmetic_and_clock_phrases_find_sum_and_current_time_first() -> None:
    """Seen through MCP Inspector: "add two numbers" ranked memory's add_observations above
    server-everything's get-sum, and "what time is it in Tokyo" convert_time above get_current_time."""
    from mcp_patchbay.search import IndexedTool, ToolIndex

    tools = [
        IndexedTool("everything__get-sum", "everything", "get-sum", "Returns the sum of two numbers."),
        IndexedTool("memory__add_observations", "memory", "add_observations", "Add new observations to entities."),
        IndexedTool("time__get_current_time", "time", "get_current_time", "Get current time in a timezone."),
        IndexedTool("time__convert_time", "time", "convert_time", "Convert time between timezones."),
    ]
    index = ToolIndex.build(tools)
    assert index.search("add two numbers")[0].tool.name == "everything__get-sum"
    assert index.search("what time is it in Tokyo")[0].tool.name == "time__get_current_time"
