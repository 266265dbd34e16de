"""Who sees what behind the gateway: ``AccessPolicy`` over static tokens and JWT claims."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from mcp.server.auth.provider import AccessToken

from mcp_patchbay.config.gateway import GatewaySettings
from mcp_patchbay.gateway.access import EVERYTHING, NOTHING, Access, AccessPolicy

ALICE = "alice-token-0123456789"
CI = "ci-token-0123456789abc"
BOB = "bob-token-0123456789ab"


def settings(access: list[dict[str, Any]] | None, *, oauth: bool = True) -> GatewaySettings:
    data: dict[str, Any] = {"tokens": {"alice": ALICE, "ci": CI, "bob": BOB}}
    if oauth:
        data["oauth"] = {"issuer": "https://id.example.com"}
    if access is not None:
        data["access"] = access
    return GatewaySettings.model_validate(data)


def static(name: str) -> AccessToken:
    return AccessToken(token="x" * 20, client_id=name, scopes=[])


def jwt(**claims: Any) -> AccessToken:
    return AccessToken(
        token="a.b.c", client_id="app", scopes=[], subject="someone", claims={"sub": "someone", **claims}
    )


def test_without_rules_or_settings_everyone_sees_everything() -> None:
    assert AccessPolicy(None).for_token(None) is EVERYTHING
    policy = AccessPolicy(settings(None))
    for token in (static("alice"), jwt(groups=["x"]), None):
        access = policy.for_token(token)
        assert access is EVERYTHING and access.everything
        assert access.permits_server("anything") and access.permits("anything", "delete_all")


def test_a_caller_no_rule_matches_sees_nothing() -> None:
    policy = AccessPolicy(settings([{"tokens": ["ci"], "servers": ["time"]}]))
    for token in (static("alice"), jwt(groups=["eng"]), None):
        access = policy.for_token(token)
        assert access == NOTHING and not access.everything
        assert not access.permits_server("time") and not access.permits("time", "get_current_time")


def test_rules_by_token_name_grant_their_servers_only() -> None:
    policy = AccessPolicy(settings([{"tokens": ["ci"], "servers": ["time"]}, {"tokens": ["alice"]}]))
    ci = policy.for_token(static("ci"))
    assert ci.permits_server("time") and ci.permits("time", "convert_time")
    assert not ci.permits_server("github") and not ci.permits("github", "search")
    alice = policy.for_token(static("alice"))  # servers default to "*"
    assert alice.permits_server("github") and alice.permits("time", "convert_time")
    assert not policy.for_token(static("bob")).permits_server("time")


def test_a_jwt_never_matches_a_token_rule_by_its_client_id() -> None:
    policy = AccessPolicy(settings([{"tokens": ["ci"], "servers": ["time"]}]))
    spoof = AccessToken(token="a.b.c", client_id="ci", scopes=[], claims={"client_id": "ci"})
    assert policy.for_token(spoof) == NOTHING


def test_claims_match_as_strings_or_lists_and_nested_by_dots() -> None:
    policy = AccessPolicy(
        settings(
            [
                {"claim": "groups", "values": ["eng", "ops"], "servers": ["github"]},
                {"claim": "email", "values": ["boss@example.com"], "servers": ["billing"]},
                {"claim": "realm_access.roles", "values": ["admin"], "servers": ["admin"]},
                {"claim": "scope", "values": ["time:read"], "servers": ["time"]},
            ]
        )
    )
    assert policy.for_token(jwt(groups=["sales", "ops"])).permits_server("github")
    assert policy.for_token(jwt(groups="eng")).permits_server("github")
    assert not policy.for_token(jwt(groups=["sales"])).permits_server("github")
    assert not policy.for_token(jwt(groups=[1, {"eng": True}])).permits_server("github")
    assert not policy.for_token(jwt(groups={"eng": True})).permits_server("github")
    boss = policy.for_token(jwt(email="boss@example.com"))
    assert boss.permits_server("billing") and not boss.permits_server("github")
    assert policy.for_token(jwt(realm_access={"roles": ["admin"]})).permits_server("admin")
    assert not policy.for_token(jwt(realm_access=["admin"])).permits_server("admin")
    assert policy.for_token(jwt(scope="openid time:read")).permits_server("time")
    assert policy.for_token(jwt()) == NOTHING


def test_the_union_of_matching_rules_counts_tool_by_tool() -> None:
    policy = AccessPolicy(
        settings(
            [
                {"claim": "groups", "values": ["eng"], "servers": ["*"], "tools": {"github": {"deny": ["delete_*"]}}},
                {"claim": "groups", "values": ["admins"], "servers": ["github"]},
                {
                    "claim": "groups",
                    "values": ["readers"],
                    "servers": ["git*"],
                    "tools": {"github": {"allow": ["get_*"]}},
                },
            ]
        )
    )
    eng = policy.for_token(jwt(groups=["eng"]))
    assert eng.permits("github", "create_issue") and not eng.permits("github", "delete_repo")
    assert eng.permits("time", "anything")  # no tools entry for it: the whole server
    both = policy.for_token(jwt(groups=["eng", "admins"]))
    assert both.permits("github", "delete_repo")  # the admins rule grants it whole
    readers = policy.for_token(jwt(groups=["readers"]))
    assert readers.permits("github", "get_file") and not readers.permits("github", "create_issue")
    assert readers.permits("gitlab", "anything") and not readers.permits_server("time")
    assert policy.for_token(jwt(groups=["readers", "eng"])).permits("github", "create_issue")


def test_a_tools_entry_for_a_server_the_rule_does_not_grant_grants_nothing() -> None:
    policy = AccessPolicy(settings([{"tokens": ["ci"], "servers": ["time"], "tools": {"github": {"allow": ["*"]}}}]))
    ci = policy.for_token(static("ci"))
    assert not ci.permits_server("github") and not ci.permits("github", "search")


def test_server_globs_match_whole_names_case_sensitively() -> None:
    policy = AccessPolicy(settings([{"tokens": ["ci"], "servers": ["time", "db-?", "web[12]"]}]))
    ci = policy.for_token(static("ci"))
    assert [s for s in ("time", "timer", "Time", "db-1", "db-10", "web1", "web3") if ci.permits_server(s)] == [
        "time",
        "db-1",
        "web1",
    ]


def test_accesses_with_the_same_grants_share_a_key_and_are_memoised() -> None:
    policy = AccessPolicy(
        settings(
            [
                {"tokens": ["alice", "bob"], "servers": ["github"], "tools": {"github": {"deny": ["delete_*"]}}},
                {
                    "claim": "groups",
                    "values": ["eng"],
                    "servers": ["github"],
                    "tools": {"github": {"deny": ["delete_*"]}},
                },
                {"tokens": ["ci"], "servers": ["time"]},
            ]
        )
    )
    alice, bob, eng = (
        policy.for_token(static("alice")),
        policy.for_token(static("bob")),
        policy.for_token(jwt(groups=["eng"])),
    )
    assert alice == bob == eng and alice.key == bob.key == eng.key and hash(alice) == hash(eng)
    assert policy.for_token(static("ci")).key != alice.key
    assert {alice.key, EVERYTHING.key, NOTHING.key} == {bob.key, EVERYTHING.key, NOTHING.key}
    assert policy.for_token(static("alice")) is alice  # a dict hit, not a new Access
    other = jwt(groups=["eng"], email="someone-else@example.com", iat=123)
    assert policy.for_token(other) is eng  # claims no rule reads do not split the cache


def test_access_values_are_frozen() -> None:
    access = AccessPolicy(settings([{"tokens": ["ci"]}])).for_token(static("ci"))
    assert isinstance(access, Access)
    with pytest.raises(dataclasses.FrozenInstanceError):
        access.everything = True  # type: ignore[misc]


def test_a_rule_naming_a_profile_permits_that_profile_s_servers_and_tools() -> None:
    from pathlib import Path

    from mcp_patchbay.config import parse_config

    document = {
        "mcpServers": {name: {"command": name} for name in ("docs", "notion", "github")},
        "profiles": {"writing": {"servers": ["docs", "notion"], "tools": {"docs": {"deny": ["delete_*"]}}}},
        "gateway": {
            "tokens": {"alice": ALICE, "ci": CI},
            "access": [{"tokens": ["alice"], "profile": "writing"}, {"tokens": ["ci"], "servers": ["github"]}],
        },
    }
    config = parse_config(json.dumps(document), Path("/etc/patchbay.json"), {})
    policy = AccessPolicy(config.gateway)
    alice = policy.for_token(static("alice"))
    assert alice.permits_server("docs") and alice.permits_server("notion") and not alice.permits_server("github")
    assert alice.permits("docs", "search") and not alice.permits("docs", "delete_page")
    assert alice.permits("notion", "delete_page")
    ci = policy.for_token(static("ci"))
    assert ci.permits("github", "search") and not ci.permits_server("docs")
