"""Profiles (issue 24): one config, several client registrations, each served its own share.

The file's ``"profiles"`` are read as strictly as the rest; ``apply_profile`` narrows a Config to
one (its servers only, each entry's tool filter narrowed by the profile's); the gateway's access
rules may name one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_patchbay.config import Config, ConfigError, ToolFilter, apply_profile, parse_config
from mcp_patchbay.config.profiles import NarrowedFilter, narrow_filter

CFG = Path("/etc/patchbay/patchbay.json")

SERVERS: dict[str, Any] = {
    "github": {"command": "gh-mcp", "tools": {"deny": ["delete_*"]}},
    "gitlab": {"command": "gl-mcp"},
    "docs": {"url": "https://docs.example.com/mcp", "tools": {"allow": ["search_*", "read_*"]}},
    "notion": {"command": "notion-mcp"},
}


def parse(profiles: object, servers: dict[str, Any] | None = None, **top: Any) -> Config:
    document = {"mcpServers": SERVERS if servers is None else servers, "profiles": profiles, **top}
    return parse_config(json.dumps(document), CFG, {})


def problems(profiles: object, **top: Any) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse(profiles, **top)
    assert info.value.path == CFG
    return str(info.value).splitlines()  # each "<file>: <key>: <message>"


# --- reading the file ------------------------------------------------------------------------


def test_profiles_are_read_in_file_order_with_their_defaults() -> None:
    config = parse({"coding": {"servers": ["git*"], "tools": {"github": {"allow": ["search_*"]}}}, "all": {}})
    assert [name for name, _ in config.profiles] == ["coding", "all"]
    coding = config.profile_named("coding")
    assert coding is not None and coding.servers == ("git*",)
    assert coding.tools == {"github": ToolFilter(allow=("search_*",))}
    everything = config.profile_named("all")
    assert everything is not None and everything.servers == ("*",) and everything.tools == {}
    assert config.profile is None and config.profile_named("nope") is None
    assert hash(config) == hash(
        parse({"coding": {"servers": ["git*"], "tools": {"github": {"allow": ["search_*"]}}}, "all": {}})
    )


def test_an_unknown_key_in_a_profile_is_refused_with_a_did_you_mean() -> None:
    assert problems({"coding": {"server": ["github"]}}) == [
        f"{CFG}: profiles.coding: unknown key 'server' (did you mean 'servers'?)"
    ]
    assert problems({"coding": {"servers": ["github"], "tools": {"github": {"dney": ["x"]}}}}) == [
        f"{CFG}: profiles.coding.tools.github: unknown key 'dney' (did you mean 'deny'?)"
    ]


def test_a_misspelt_profiles_key_is_a_top_level_mistake() -> None:
    with pytest.raises(ConfigError, match="unknown top-level key 'profile' \\(did you mean 'profiles'\\?\\)"):
        parse_config(json.dumps({"mcpServers": SERVERS, "profile": {}}), CFG, {})


def test_a_server_the_file_does_not_have_is_named_with_its_key_path() -> None:
    assert problems({"coding": {"servers": ["github", "gitlub"]}}) == [
        f"{CFG}: profiles.coding.servers[1]: no server 'gitlub' in the file (did you mean 'gitlab'?)"
    ]
    assert problems({"coding": {"servers": ["github"], "tools": {"gihub": {"deny": ["x"]}}}}) == [
        f"{CFG}: profiles.coding.tools.gihub: no server 'gihub' in the file (did you mean 'github'?)"
    ]


def test_a_glob_may_match_no_server() -> None:
    config = parse({"later": {"servers": ["jira*", "[xy]-?"]}})
    assert apply_profile(config, "later").servers == ()


def test_a_tools_filter_for_a_server_the_profile_does_not_serve_is_a_mistake() -> None:
    assert problems({"writing": {"servers": ["docs"], "tools": {"github": {"deny": ["x"]}}}}) == [
        f"{CFG}: profiles.writing.tools.github: server 'github' is not among the profile's 'servers': add it there"
    ]


@pytest.mark.parametrize(
    ("profiles", "message"),
    [
        ([], "profiles: expected an object mapping profile names to profiles"),
        ({"coding": ["github"]}, 'profiles.coding: expected an object, like {"servers": ["github"]}'),
        ({"coding": {"servers": []}}, "profiles.coding.servers: name at least one server (or '*')"),
        ({"coding": {"servers": "github"}}, "profiles.coding.servers: expected a list of strings"),
        ({"": {}}, "profiles: profile name must not be empty"),
    ],
)
def test_malformed_profiles_are_named(profiles: object, message: str) -> None:
    assert problems(profiles) == [f"{CFG}: {message}"]


def test_a_profile_given_twice_is_named() -> None:
    text = '{"mcpServers": {"a": {"command": "x"}}, "profiles": {"p": {}, "p": {"servers": ["a"]}}}'
    with pytest.raises(ConfigError, match=r"profiles\.p: profile 'p' given more than once"):
        parse_config(text, CFG, {})


# --- narrowing a config to one profile ---------------------------------------------------------


def test_apply_profile_keeps_only_the_profile_s_servers_in_file_order() -> None:
    config = parse({"coding": {"servers": ["gitlab", "git*"]}, "writing": {"servers": ["notion", "docs"]}})
    coding = apply_profile(config, "coding")
    assert [e.name for e in coding.servers] == ["github", "gitlab"]
    assert coding.profile == "coding" and coding.profiles == config.profiles
    assert coding.settings == config.settings and coding.path == config.path
    assert [e.name for e in apply_profile(config, "writing").servers] == ["docs", "notion"]
    # The entries of the profile's servers are the file's, untouched when the profile says nothing of their tools.
    assert coding.servers[0] == config.servers[0]


def test_apply_profile_narrows_each_entry_s_filter_by_the_profile_s() -> None:
    config = parse(
        {
            "p": {
                "servers": ["*"],
                "tools": {
                    "github": {"allow": ["search_*", "delete_*"]},  # the entry denies delete_*
                    "docs": {"allow": ["search_*", "list_*"], "deny": ["search_secrets"]},
                    "gitlab": {"deny": ["push"]},
                },
            }
        }
    )
    narrowed = {e.name: e for e in apply_profile(config, "p").servers}
    github = narrowed["github"].spec
    assert github is not None
    assert [t for t in ("search_code", "delete_repo", "create_issue") if github.tools.permits(t)] == ["search_code"]
    docs = narrowed["docs"].spec
    assert docs is not None and isinstance(docs.tools, NarrowedFilter)
    # Both filters allow: a tool must match both lists (read_* only the entry's, list_* only the profile's).
    candidates = ("search_pages", "search_secrets", "read_page", "list_pages")
    assert [t for t in candidates if docs.tools.permits(t)] == ["search_pages"]
    gitlab = narrowed["gitlab"].spec
    assert gitlab is not None and not gitlab.tools.permits("push") and gitlab.tools.permits("pull")
    # A server the profile says nothing of keeps its entry's filter.
    assert narrowed["notion"] == config.servers[3]


def test_narrow_filter_unions_deny_and_always_list() -> None:
    entry = ToolFilter(deny=("a",), always_list=("x",))
    narrowed = narrow_filter(entry, ToolFilter(allow=("a", "b", "c"), deny=("b",), always_list=("y",)))
    assert type(narrowed) is ToolFilter
    assert narrowed == ToolFilter(allow=("a", "b", "c"), deny=("a", "b"), always_list=("x", "y"))
    assert [t for t in "abcd" if narrowed.permits(t)] == ["c"]
    assert narrow_filter(entry, None) is entry and narrow_filter(entry, ToolFilter()) is entry


def test_narrowed_filters_compare_and_hash_by_both_filters() -> None:
    def both(profile_allow: tuple[str, ...]) -> ToolFilter:
        return narrow_filter(ToolFilter(allow=("a*",)), ToolFilter(allow=profile_allow))

    assert both(("*b",)) == both(("*b",)) and hash(both(("*b",))) == hash(both(("*b",)))
    assert both(("*b",)) != both(("*c",))
    assert both(("*b",)) != ToolFilter(allow=("a*",)) and ToolFilter(allow=("a*",)) != both(("*b",))


def test_an_entry_with_a_mistake_stays_with_its_problem_and_a_disabled_one_stays_disabled() -> None:
    servers = {"bad": {"command": "x", "timeout": -1}, "off": {"command": "y", "disabled": True}, "z": {"command": "z"}}
    config = apply_profile(parse({"p": {"servers": ["bad", "off"]}}, servers), "p")
    bad, off = config.servers
    assert bad.spec is None and bad.problem is not None and "timeout" in bad.problem
    assert off.disabled


def test_an_unknown_profile_is_a_config_mistake_with_a_did_you_mean() -> None:
    config = parse({"coding": {"servers": ["github"]}, "writing": {"servers": ["docs"]}})
    with pytest.raises(ConfigError) as info:
        apply_profile(config, "codng")
    assert str(info.value) == (
        f"{CFG}: profiles: unknown profile 'codng' (did you mean 'coding'?); the file's profiles: coding, writing"
    )
    without = parse_config(json.dumps({"mcpServers": SERVERS}), CFG, {})
    with pytest.raises(ConfigError, match=r"unknown profile 'coding': the file has no 'profiles'"):
        apply_profile(without, "coding")


def test_a_config_is_narrowed_once() -> None:
    config = apply_profile(parse({"p": {"servers": ["docs"]}}), "p")
    with pytest.raises(ValueError, match="narrowed to profile 'p' already"):
        apply_profile(config, "p")


def test_load_config_narrows_to_a_profile(tmp_path: Path) -> None:
    from mcp_patchbay.config import load_config

    path = tmp_path / "patchbay.json"
    path.write_text(json.dumps({"mcpServers": SERVERS, "profiles": {"writing": {"servers": ["docs", "notion"]}}}))
    assert [e.name for e in load_config(path, {}, profile="writing").servers] == ["docs", "notion"]
    assert len(load_config(path, {}).servers) == 4


# --- the gateway's access rules ----------------------------------------------------------------

TOKENS = {"alice": "alice-token-0123456789", "ci": "ci-token-0123456789abc"}


def gateway(access: list[dict[str, Any]]) -> dict[str, Any]:
    return {"tokens": TOKENS, "access": access}


def test_an_access_rule_naming_a_profile_grants_its_servers_and_tools() -> None:
    profiles = {"writing": {"servers": ["docs", "notion"], "tools": {"docs": {"deny": ["read_*"]}}}}
    config = parse(profiles, gateway=gateway([{"tokens": ["alice"], "profile": "writing"}, {"tokens": ["ci"]}]))
    assert config.gateway is not None and config.gateway.access is not None
    rule, other = config.gateway.access
    assert rule.profile == "writing" and rule.servers == ("docs", "notion")
    assert rule.tools == {"docs": ToolFilter(deny=("read_*",))}
    assert other.servers == ("*",) and other.profile is None


def test_an_access_rule_naming_an_unknown_profile_is_a_mistake() -> None:
    assert problems({"writing": {"servers": ["docs"]}}, gateway=gateway([{"tokens": ["ci"], "profile": "writng"}])) == [
        f"{CFG}: gateway.access[0].profile: unknown profile 'writng' (did you mean 'writing'?); "
        "the file's profiles: writing"
    ]


def test_an_access_rule_with_a_profile_and_its_own_servers_is_a_mistake() -> None:
    found = problems(
        {"writing": {"servers": ["docs"]}},
        gateway=gateway([{"tokens": ["ci"], "profile": "writing", "servers": ["x"]}]),
    )
    assert (
        len(found) == 1
        and "gateway.access[0]: a rule with 'profile' grants that profile's servers and tools" in found[0]
    )


# --- serving a profile, and reloading it -------------------------------------------------------


def _servers(*names: str) -> dict[str, Any]:
    from tests.harness import FakeTool, make_server, text

    async def answer(ctx: Any, arguments: dict[str, Any]) -> Any:
        return text("ok")

    return {name: make_server(name, {t: FakeTool(answer) for t in ("search", "delete")}) for name in names}


def _file(profiles: dict[str, Any], servers: tuple[str, ...] = ("code", "docs", "mail")) -> Config:
    return parse_config(
        json.dumps({"mcpServers": {name: {"command": name} for name in servers}, "profiles": profiles}), CFG, {}
    )


@pytest.mark.anyio
async def test_a_profile_serves_only_its_servers_and_tools_and_reload_keeps_it() -> None:
    from tests.harness import MemoryUpstreams, connected

    profiles: dict[str, Any] = {"coding": {"servers": ["code", "docs"], "tools": {"docs": {"deny": ["delete"]}}}}
    upstreams = MemoryUpstreams(_servers("code", "docs", "mail"))
    async with connected(apply_profile(_file(profiles), "coding"), upstreams) as (proxy, client):
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == {"code__search", "code__delete", "docs__search"}
        assert "mail" not in upstreams.connects and set(proxy.supervisor.upstreams) == {"code", "docs"}

        # The whole file again, its coding profile now denying code's delete too: narrowed to the
        # same profile, and neither server restarted for a filter's change.
        code, docs = proxy.supervisor.upstreams["code"], proxy.supervisor.upstreams["docs"]
        profiles["coding"]["tools"]["code"] = {"deny": ["delete"]}
        proxy.supervisor.apply(_file(profiles))
        assert proxy.supervisor.config.profile == "coding"
        assert {t.name for t in (await client.list_tools()).tools} == {"code__search", "docs__search"}
        assert proxy.supervisor.upstreams["code"] is code and proxy.supervisor.upstreams["docs"] is docs
        assert upstreams.connects == {"code": 1, "docs": 1}

        # A file without that profile any more is refused: the last good config keeps serving.
        proxy.supervisor.apply(_file({"writing": {"servers": ["mail"]}}))
        assert proxy.supervisor.config.profile == "coding" and set(proxy.supervisor.upstreams) == {"code", "docs"}
        assert "mail" not in upstreams.connects

        # The profile now takes mail instead of docs: docs stops, mail starts, code is untouched.
        proxy.supervisor.apply(_file({"coding": {"servers": ["code", "mail"]}}))
        assert set(proxy.supervisor.upstreams) == {"code", "mail"} and proxy.supervisor.upstreams["code"] is code
        with anyio.fail_after(5):
            while {t.name for t in (await client.list_tools()).tools} != {
                "code__search",
                "code__delete",
                "mail__search",
                "mail__delete",
            }:
                await anyio.sleep(0.01)
        assert upstreams.connects == {"code": 1, "docs": 1, "mail": 1}


@pytest.mark.anyio
async def test_a_launch_change_still_restarts_the_server() -> None:
    from tests.harness import MemoryUpstreams, running_proxy

    upstreams = MemoryUpstreams(_servers("code"))
    async with running_proxy(_file({}, ("code",)), upstreams) as proxy:
        before = proxy.supervisor.upstreams["code"]
        changed = parse_config(json.dumps({"mcpServers": {"code": {"command": "code", "args": ["-v"]}}}), CFG, {})
        proxy.supervisor.apply(changed)
        assert proxy.supervisor.upstreams["code"] is not before


# --- tools and call from the terminal ------------------------------------------------------------


def test_tools_and_call_load_the_config_narrowed_to_the_profile(tmp_path: Path) -> None:
    from mcp_patchbay.cli import calling, terminal, tools
    from mcp_patchbay.cli.options import UsageError

    path = tmp_path / "patchbay.json"
    path.write_text(json.dumps({"mcpServers": SERVERS, "profiles": {"writing": {"servers": ["docs", "notion"]}}}))
    assert [e.name for e in terminal.load(str(path), {}, profile="writing").servers] == ["docs", "notion"]
    from_env = terminal.load(str(path), {"PATCHBAY_PROFILE": "writing"})
    assert from_env.profile == "writing" and len(from_env.servers) == 2
    assert len(terminal.load(str(path), {}).servers) == 4
    with pytest.raises(UsageError, match=r"unknown profile 'writng' \(did you mean 'writing'\?\)"):
        terminal.load(str(path), {}, profile="writng")
    assert tools._tools_parser().parse_intermixed_args(["--profile", "writing"]).profile == "writing"  # pyright: ignore[reportPrivateUsage]
    assert calling._parser().parse_intermixed_args(["x", "--profile", "writing"]).profile == "writing"  # pyright: ignore[reportPrivateUsage]


def test_the_example_in_config_md_is_a_valid_config_and_means_what_it_says() -> None:
    page = (Path(__file__).resolve().parent.parent / "docs" / "CONFIG.md").read_text(encoding="utf-8")
    example = page.split("## Profiles", 1)[1].split("```json", 1)[1].split("```", 1)[0]
    config = parse_config(example, CFG, {})
    coding = {e.name: e.spec for e in apply_profile(config, "coding").servers}
    assert list(coding) == ["github", "git"]
    github = coding["github"]
    assert github is not None and not github.tools.permits("delete_repo")
    assert not github.tools.permits("merge_pull_request") and github.tools.permits("create_issue")
    assert [e.name for e in apply_profile(config, "writing").servers] == ["docs", "notion"]


@pytest.mark.anyio
async def test_a_run_on_a_profile_is_no_start_to_learn_the_catalog_s_size_from() -> None:
    from mcp_patchbay.cli import terminal
    from tests.harness import MemoryUpstreams

    upstreams = MemoryUpstreams(_servers("code", "docs"))
    config = _file({"coding": {"servers": ["code"]}}, ("code", "docs"))
    async with terminal.running(apply_profile(config, "coding"), connector=upstreams) as proxy:
        assert not proxy.remembers_start and set(proxy.supervisor.upstreams) == {"code"}
    async with terminal.running(config, connector=upstreams) as proxy:
        assert proxy.remembers_start
