"""Exposed names, resolution of mistaken names, and suggestions (catalog.naming, .resolution, .suggestions)."""

from __future__ import annotations

import hashlib
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_patchbay.catalog.naming import NAME_CHARS, build_names, normalize, sanitize
from mcp_patchbay.catalog.resolution import NameEntry, Resolution, Resolver

CATALOG: dict[str, list[str]] = {
    "filesystem": [
        "read_file",
        "read_multiple_files",
        "write_file",
        "edit_file",
        "list_directory",
        "directory_tree",
        "move_file",
        "search_files",
        "get_file_info",
    ],
    "github": [
        "create_issue",
        "get_issue",
        "list_issues",
        "update_issue",
        "create_pull_request",
        "get_pull_request",
        "list_commits",
        "search_repositories",
        "create_or_update_file",
        "get_file_contents",
    ],
    "memory": [
        "create_entities",
        "create_relations",
        "add_observations",
        "delete_entities",
        "read_graph",
        "search_nodes",
        "open_nodes",
    ],
    "everything": ["echo", "get-sum", "get-env", "trigger-long-running-operation", "get-tiny-image"],
    "time": ["get_current_time", "convert_time"],
    "sequential-thinking": ["sequentialthinking"],
    "slack": ["slack_post_message", "slack_list_channels", "slack_get_channel_history"],
    "jira": ["create_issue", "get_issue", "search_issues"],
    "gitlab": ["delete_issue", "list_merge_requests"],
    "enterprise-knowledge-base": ["search_documents_by_semantic_similarity_with_filters"],
    "my server": ["do thing"],
}
PAIRS = [(server, item) for server, items in CATALOG.items() for item in items]
LONG = ("enterprise-knowledge-base", "search_documents_by_semantic_similarity_with_filters")


def make_resolver(
    pairs: list[tuple[str, str]] = PAIRS,
    *,
    separator: str = "__",
    hidden: list[tuple[str, str]] | None = None,
    unavailable: dict[str, str] | None = None,
) -> Resolver:
    names = build_names(pairs, separator=separator, max_length=48)
    entries = [NameEntry(exposed, server, item) for (server, item), exposed in names.items()]
    return Resolver(entries, separator=separator, hidden=hidden or (), unavailable=unavailable or {})


RESOLVER = make_resolver()
EXPOSED = build_names(PAIRS, separator="__", max_length=48)


def short_hash(server: str, item: str, length: int = 6) -> str:
    return hashlib.sha256(f"{server}\0{item}".encode()).hexdigest()[:length]


# --- sanitize and build_names ---------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("filesystem", "filesystem"),
        ("sequential-thinking", "sequential-thinking"),
        ("my server", "my_server"),
        ("a.b/c:d", "a_b_c_d"),
        ("café", "caf_"),
        ("", "_"),
        ("x\n", "x_"),
    ],
)
def test_sanitize(raw: str, expected: str) -> None:
    assert sanitize(raw) == expected


@pytest.mark.parametrize(
    ("pair", "expected"),
    [
        (("filesystem", "read_file"), "filesystem__read_file"),
        (("everything", "get-sum"), "everything__get-sum"),
        (("sequential-thinking", "sequentialthinking"), "sequential-thinking__sequentialthinking"),
        (("my server", "do thing"), "my_server__do_thing"),
        (("api.v2", "list/items"), "api_v2__list_items"),
    ],
)
def test_plain_names_keep_hyphens_and_sanitise_the_rest(pair: tuple[str, str], expected: str) -> None:
    assert build_names([pair], separator="__", max_length=48) == {pair: expected}


def test_long_names_are_shortened_to_a_readable_head_and_a_hash() -> None:
    name = build_names([LONG], separator="__", max_length=48)[LONG]
    assert len(name) == 48
    assert name.startswith("enterprise-knowledge-base__search_docu")
    assert name.endswith("_" + short_hash(*LONG))


def test_collision_keeps_the_plain_name_for_the_pair_that_already_is_it() -> None:
    names = build_names([("my server", "tool"), ("my_server", "tool")], separator="__", max_length=48)
    assert names[("my_server", "tool")] == "my_server__tool"
    assert names[("my server", "tool")] == "my_server__tool_" + short_hash("my server", "tool")


def test_collision_between_two_sanitised_pairs_hashes_both() -> None:
    names = build_names([("a b", "t"), ("a.b", "t")], separator="__", max_length=48)
    assert names == {("a b", "t"): "a_b__t_" + short_hash("a b", "t"), ("a.b", "t"): "a_b__t_" + short_hash("a.b", "t")}


def test_collision_between_two_clean_pairs_keeps_the_smallest() -> None:
    names = build_names([("a__b", "c"), ("a", "b__c")], separator="__", max_length=48)
    assert names[("a", "b__c")] == "a__b__c"
    assert names[("a__b", "c")] == "a__b__c_" + short_hash("a__b", "c")


def test_a_hashed_name_that_is_taken_gets_a_longer_hash() -> None:
    squatter = ("x_y", "t_" + short_hash("x y", "t"))  # its plain name is the hashed name of ("x y", "t")
    names = build_names([("x y", "t"), ("x_y", "t"), squatter], separator="__", max_length=48)
    assert names[squatter] == "x_y__t_" + short_hash("x y", "t")
    assert names[("x y", "t")] == "x_y__t_" + short_hash("x y", "t", 7)
    assert len(set(names.values())) == 3


def test_names_do_not_depend_on_input_order() -> None:
    pairs = [*PAIRS, ("my_server", "do_thing"), ("a b", "t"), ("a.b", "t"), (LONG[0], LONG[1] + "_v2")]
    expected = build_names(pairs, separator="__", max_length=48)
    rng = random.Random(7)
    for _ in range(20):
        shuffled = pairs[:]
        rng.shuffle(shuffled)
        assert build_names(shuffled, separator="__", max_length=48) == expected


@pytest.mark.parametrize(("separator", "max_length"), [("__", 10), ("a b", 48), ("", 48), ("__\n", 48)])
def test_bad_settings_are_refused(separator: str, max_length: int) -> None:
    with pytest.raises(ValueError):
        build_names(PAIRS, separator=separator, max_length=max_length)


names_text = st.text(
    st.sampled_from("abcAB_-.: /é0") | st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=70
)


@settings(max_examples=300, deadline=None)
@given(
    pairs=st.lists(st.tuples(names_text, names_text), max_size=12),
    separator=st.sampled_from(["__", "-", "_x_"]),
    max_length=st.integers(16, 64),
    seed=st.integers(0, 1000),
)
def test_built_names_are_valid_unique_short_and_order_independent(
    pairs: list[tuple[str, str]], separator: str, max_length: int, seed: int
) -> None:
    names = build_names(pairs, separator=separator, max_length=max_length)
    assert set(names) == set(pairs)
    assert len(set(names.values())) == len(names)
    for name in names.values():
        assert NAME_CHARS.match(name), name
        assert len(name) <= max_length
    shuffled = pairs[:]
    random.Random(seed).shuffle(shuffled)
    assert build_names(shuffled, separator=separator, max_length=max_length) == names


@settings(max_examples=200, deadline=None)
@given(pairs=st.lists(st.tuples(names_text, names_text), max_size=10), extra=st.tuples(names_text, names_text))
def test_adding_a_pair_never_renames_a_plain_name(pairs: list[tuple[str, str]], extra: tuple[str, str]) -> None:
    before = build_names(pairs, separator="__", max_length=48)
    after = build_names([*pairs, extra], separator="__", max_length=48)
    for pair, name in before.items():
        raw = pair[0] + "__" + pair[1]
        if name == raw and len(raw) <= 48 and (extra[0] + "__" + extra[1] != raw or pair <= extra):
            assert after[pair] == name


# --- resolution rules -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("called", "exposed", "rule"),
    [
        # normalized: case, separators and punctuation do not matter
        ("filesystem.read_file", "filesystem__read_file", "normalized"),
        ("filesystem/read_file", "filesystem__read_file", "normalized"),
        ("Filesystem__Read_File", "filesystem__read_file", "normalized"),
        ("filesystem__readFile", "filesystem__read_file", "normalized"),
        ("filesystem__read-file", "filesystem__read_file", "normalized"),
        ("filesystem:read_file", "filesystem__read_file", "normalized"),
        ("filesystem read file", "filesystem__read_file", "normalized"),
        ("everything__get_sum", "everything__get-sum", "normalized"),
        ("everything.getTinyImage", "everything__get-tiny-image", "normalized"),
        ("sequential_thinking__sequential_thinking", "sequential-thinking__sequentialthinking", "normalized"),
        # prefix-stripped: what clients and models put in front
        ("mcp__patchbay__github__get_issue", "github__get_issue", "prefix-stripped"),
        ("mcp__patchbay__filesystem.read_file", "filesystem__read_file", "prefix-stripped"),
        ("patchbay__time__convert_time", "time__convert_time", "prefix-stripped"),
        ("functions__memory__read_graph", "memory__read_graph", "prefix-stripped"),
        ("filesystem__filesystem__read_file", "filesystem__read_file", "prefix-stripped"),
        # bare-name: the upstream name alone, when one server has it
        ("read_file", "filesystem__read_file", "bare-name"),
        ("get_current_time", "time__get_current_time", "bare-name"),
        ("getCurrentTime", "time__get_current_time", "bare-name"),
        ("get-sum", "everything__get-sum", "bare-name"),
        ("get_sum", "everything__get-sum", "bare-name"),
        ("delete_issue", "gitlab__delete_issue", "bare-name"),
        # server-only: a server with exactly one tool
        ("sequential-thinking", "sequential-thinking__sequentialthinking", "server-only"),
        ("Sequential_Thinking", "sequential-thinking__sequentialthinking", "server-only"),
        # unshortened and unsanitised full names
        (f"{LONG[0]}__{LONG[1]}", EXPOSED[LONG], "unshortened"),
        ("my server__do thing", "my_server__do_thing", "unshortened"),
        # ... which also resolve normalized or behind a prefix
        (f"{LONG[0]}.{LONG[1]}", EXPOSED[LONG], "normalized"),
        (f"mcp__patchbay__{LONG[0]}__{LONG[1]}", EXPOSED[LONG], "prefix-stripped"),
    ],
)
def test_names_that_resolve(called: str, exposed: str, rule: str) -> None:
    resolution = RESOLVER.resolve(called)
    assert resolution.kind == "resolved", resolution
    assert resolution.entry is not None
    assert resolution.entry.exposed == exposed
    assert resolution.rule == rule


def test_an_exposed_name_is_exact() -> None:
    for exposed in EXPOSED.values():
        resolution = RESOLVER.resolve(exposed)
        assert resolution.kind == "exact"
        assert resolution.entry is not None
        assert resolution.entry.exposed == exposed


@pytest.mark.parametrize(
    ("called", "candidates"),
    [
        ("get_issue", ("github__get_issue", "jira__get_issue")),
        ("create_issue", ("github__create_issue", "jira__create_issue")),
        ("getIssue", ("github__get_issue", "jira__get_issue")),
    ],
)
def test_names_shared_by_two_servers_are_ambiguous(called: str, candidates: tuple[str, ...]) -> None:
    resolution = RESOLVER.resolve(called)
    assert resolution == Resolution("ambiguous", called, candidates=candidates)


def test_a_prefix_stripped_down_to_a_bare_name_names_nothing() -> None:
    resolution = RESOLVER.resolve("mcp__patchbay__get_issue")
    assert resolution.kind == "unknown"
    assert set(resolution.candidates[:2]) == {"github__get_issue", "jira__get_issue"}


@pytest.mark.parametrize("called", ["abc", "a.bc", "A__BC", "ab.c", "ABC"])
def test_normalization_collisions_are_ambiguous(called: str) -> None:
    resolver = make_resolver([("a", "bc"), ("ab", "c")])
    assert resolver.resolve(called) == Resolution("ambiguous", called, candidates=("a__bc", "ab__c"))


def test_rules_naming_different_tools_together_are_ambiguous() -> None:
    # "Echo" is everything's tool by its normalized name and the only tool of server "echo".
    resolver = make_resolver([*PAIRS, ("echo", "ping")])
    resolution = resolver.resolve("Echo")
    assert resolution.kind == "ambiguous"
    assert resolution.candidates == ("echo__ping", "everything__echo")
    exact = resolver.resolve("echo")  # everything's own name, exactly: that one
    assert exact.entry is not None and exact.entry.exposed == "everything__echo"


def test_an_exact_upstream_name_wins_over_a_separator_typo_reading() -> None:
    # Issue 33: "alpha_refresh" on server alpha was refused as ambiguous between alpha__alpha_refresh
    # (its own name) and alpha__refresh ("alpha_" read as a mistyped separator).
    resolver = make_resolver([("alpha", "alpha_refresh"), ("alpha", "refresh"), ("beta", "refresh")])
    resolution = resolver.resolve("alpha_refresh")
    assert resolution.kind == "resolved", resolution
    assert resolution.entry is not None and resolution.entry.exposed == "alpha__alpha_refresh"
    assert resolution.rule == "bare-name"


def test_an_exact_upstream_name_of_two_tools_or_a_hidden_one_stays_ambiguous() -> None:
    shared = make_resolver([("alpha", "alpha_refresh"), ("beta", "alpha_refresh"), ("alpha", "refresh")])
    assert shared.resolve("alpha_refresh").kind == "ambiguous"
    turned_off = make_resolver([("alpha", "alpha_refresh"), ("alpha", "refresh")], hidden=[("alpha", "alpha_refresh")])
    assert turned_off.resolve("alpha_refresh").entry is None  # never alpha__refresh in its place


def test_a_stripped_prefix_never_falls_back_to_a_bare_name() -> None:
    # jira has no delete_issue: gitlab's must not run (it may be suggested).
    resolution = RESOLVER.resolve("jira__delete_issue")
    assert resolution.kind == "unknown"
    assert resolution.entry is None
    assert RESOLVER.resolve("delete_issue").kind == "resolved"  # while the bare name alone does run it


def test_a_named_server_keeps_prefix_stripping_on_that_server() -> None:
    # "delete__issue" is a real tool of server "delete"; "jira__delete_issue" still names jira.
    resolver = make_resolver([*PAIRS, ("delete", "issue")])
    assert resolver.resolve("jira__delete_issue").kind == "unknown"
    resolved = resolver.resolve("whatever__delete_issue")  # no server named "whatever": a client prefix
    assert resolved.entry == NameEntry("delete__issue", "delete", "issue")


def test_a_server_with_several_tools_is_not_enough() -> None:
    resolution = RESOLVER.resolve("filesystem")
    assert resolution.kind == "unknown"
    assert resolution.candidates
    assert all(name.startswith("filesystem__") for name in resolution.candidates)


def test_a_typo_never_runs() -> None:
    for called in ("filesystem__raed_file", "filesytem__read_file", "reed_file", "sequential-thinkin"):
        resolution = RESOLVER.resolve(called)
        assert resolution.kind == "unknown"
        assert resolution.entry is None


@pytest.mark.parametrize("separator", ["-", "_x_", "--"])
def test_other_separators(separator: str) -> None:
    resolver = make_resolver(separator=separator)
    exposed = f"filesystem{separator}read_file"
    assert resolver.resolve(exposed).kind == "exact"
    for called in ("filesystem.read_file", "Filesystem__Read_File", "mcp__patchbay__filesystem__read_file"):
        resolution = resolver.resolve(called)
        assert resolution.kind == "resolved", (called, resolution)
        assert resolution.entry is not None
        assert resolution.entry.exposed == exposed


def test_servers_and_entries_of() -> None:
    assert RESOLVER.servers() == tuple(CATALOG)
    assert [e.item for e in RESOLVER.entries_of("time")] == ["get_current_time", "convert_time"]
    assert RESOLVER.entries_of("nope") == ()


def test_duplicate_exposed_names_are_refused() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        Resolver([NameEntry("a__b", "a", "b"), NameEntry("a__b", "a", "b2")], separator="__")


# --- hidden and unavailable ------------------------------------------------------------

HIDDEN = [("github", "delete_repository"), ("filesystem", "delete_file"), ("archive", "move_file")]


@pytest.mark.parametrize(
    ("called", "server"),
    [
        ("github__delete_repository", "github"),
        ("GitHub.deleteRepository", "github"),
        ("mcp__patchbay__github__delete_repository", "github"),
        ("delete_repository", "github"),
        ("delete_file", "filesystem"),
        ("archive__move_file", "archive"),
    ],
)
def test_hidden_tools_are_reported_as_hidden(called: str, server: str) -> None:
    resolver = make_resolver(hidden=HIDDEN)
    assert resolver.resolve(called) == Resolution("hidden", called, server=server)


def test_a_hidden_tool_blocks_a_loose_match_on_a_visible_one() -> None:
    resolver = make_resolver(hidden=HIDDEN)
    resolution = resolver.resolve("move_file")  # filesystem's is visible, archive's is hidden
    assert resolution == Resolution("ambiguous", "move_file", candidates=("filesystem__move_file",))


def test_hidden_tools_are_never_suggested() -> None:
    resolver = make_resolver(hidden=HIDDEN)
    for called in ("github__delete_repositori", "delete_repositry", "github__delete_repository", "delete_fil"):
        assert not any("delete_repository" in name or "delete_file" in name for name in resolver.suggest(called))


def test_an_entry_that_is_also_hidden_is_hidden() -> None:
    resolver = make_resolver(hidden=[("filesystem", "read_file")])
    assert resolver.resolve("filesystem__read_file").kind == "hidden"
    assert "filesystem__read_file" not in resolver.suggest("filesystem__read_fil")


UNAVAILABLE = {"postgres": "failed to start: command not found", "my db": "disabled in the config"}


@pytest.mark.parametrize(
    ("called", "server"),
    [
        ("postgres__query", "postgres"),
        ("Postgres__list_tables", "postgres"),
        ("postgres", "postgres"),
        ("mcp__patchbay__postgres__query", "postgres"),
        ("my_db__query", "my db"),
        ("MyDb__query", "my db"),
    ],
)
def test_unavailable_servers(called: str, server: str) -> None:
    resolver = make_resolver(unavailable=UNAVAILABLE)
    assert resolver.resolve(called) == Resolution(
        "server_unavailable", called, server=server, reason=UNAVAILABLE[server]
    )


def test_an_available_server_part_is_not_an_unavailable_one() -> None:
    resolver = make_resolver(unavailable=UNAVAILABLE)
    assert resolver.resolve("github__postgres").kind == "unknown"


def test_a_name_that_resolves_beats_an_unavailable_server() -> None:
    resolver = make_resolver(unavailable={"time": "restarting"})
    resolution = resolver.resolve("time__getCurrentTime")
    assert resolution.kind == "resolved"


# --- suggestions -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("called", "intended"),
    [
        # typo in the server part
        ("filesytem__read_file", "filesystem__read_file"),
        ("githb__create_pull_request", "github__create_pull_request"),
        ("memroy__read_graph", "memory__read_graph"),
        # typo in the tool part
        ("filesystem__raed_file", "filesystem__read_file"),
        ("github__list_issue", "github__list_issues"),
        ("memory__create_entity", "memory__create_entities"),
        ("everything__get_tiny_img", "everything__get-tiny-image"),
        ("time__get_curent_time", "time__get_current_time"),
        # typos in both
        ("filesytem__raed_file", "filesystem__read_file"),
        ("githib__create_isue", "github__create_issue"),
        ("memroy__serch_nodes", "memory__search_nodes"),
        # the server part missing, with a typo
        ("reed_file", "filesystem__read_file"),
        ("get_curent_time", "time__get_current_time"),
        ("create_pull_requests", "github__create_pull_request"),
        ("trigger_long_runing_operation", "everything__trigger-long-running-operation"),
        # the server alone, with a typo
        ("sequential-thinkng", "sequential-thinking__sequentialthinking"),
        ("sequentialthinkin", "sequential-thinking__sequentialthinking"),
        # behind a client prefix, and with other punctuation
        ("mcp__patchbay__filesytem__read_file", "filesystem__read_file"),
        ("filesystem.raed_file", "filesystem__read_file"),
        # a wrong server: the tool that exists elsewhere
        ("github__read_file", "filesystem__read_file"),
        # shortened names
        ("enterprise-knowledge-base__search_documents_by_semantic_similarity", EXPOSED[LONG]),
    ],
)
def test_the_intended_tool_is_suggested_first(called: str, intended: str) -> None:
    suggestions = RESOLVER.suggest(called)
    assert suggestions, called
    assert suggestions[0] == intended, suggestions
    assert RESOLVER.resolve(called) == Resolution("unknown", called, candidates=suggestions)


def test_a_server_name_with_a_typo_suggests_its_tools() -> None:
    suggestions = RESOLVER.suggest("filesytem")
    assert len(suggestions) == 5
    assert all(name.startswith("filesystem__") for name in suggestions)


@pytest.mark.parametrize("called", ["xyzzy", "qwertyuiop", "hello world", "zzzz__zzzz", "", "__", "launch_rocket"])
def test_nonsense_gets_no_suggestions(called: str) -> None:
    assert RESOLVER.suggest(called) == ()


def test_suggestions_are_limited_and_never_the_whole_catalog() -> None:
    for called in ("get", "file", "create", "list", "e", "filesystem__"):
        assert len(RESOLVER.suggest(called)) <= 5
    assert len(RESOLVER.suggest("filesystem__file", limit=3)) <= 3
    assert RESOLVER.suggest("filesystem__read_fil", limit=0) == ()


def test_an_empty_catalog_resolves_nothing() -> None:
    resolver = Resolver([], separator="__")
    assert resolver.resolve("anything") == Resolution("unknown", "anything")
    assert resolver.servers() == ()


def test_suggestions_at_scale_still_find_the_intended_tool() -> None:
    pairs = [(f"server{s:03d}", f"{verb}_{noun}") for s in range(200) for verb in VERBS[:5] for noun in NOUNS[:10]]
    pairs.append(("filesystem", "read_file"))
    resolver = make_resolver(pairs)
    assert resolver.suggest("filesytem__raed_file")[0] == "filesystem__read_file"
    assert resolver.suggest("server042__creat_user")[0] == "server042__create_user"


VERBS = ["create", "get", "list", "update", "delete", "search", "read", "write"]
NOUNS = ["user", "issue", "file", "page", "record", "channel", "message", "ticket", "event", "document"]


# --- properties -----------------------------------------------------------------------

SERVERS = ["filesystem", "github", "git-hub", "memory", "my server", "a", "ab", "time", "seq-think", "x_y"]
WORDS = ["read", "file", "get", "issue", "b", "bc", "c", "list", "time", "x"]
SEPARATORS = {"_": "{}_{}", "-": "{}-{}", "camel": "{}{}", "dot": "{}.{}"}


@st.composite
def item_names(draw: st.DrawFn) -> str:
    words = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3))
    style = draw(st.sampled_from(list(SEPARATORS)))
    name = words[0]
    for word in words[1:]:
        name = SEPARATORS[style].format(name, word.capitalize() if style == "camel" else word)
    return name


catalogs = st.lists(st.tuples(st.sampled_from(SERVERS), item_names()), min_size=1, max_size=12, unique=True)


@st.composite
def called_names(draw: st.DrawFn, pairs: list[tuple[str, str]]) -> str:
    server, item = draw(st.sampled_from(pairs))
    form = draw(
        st.sampled_from(["exposed", "raw", "dotted", "upper", "bare", "server", "prefixed", "mangled", "other"])
    )
    if form == "raw":
        return f"{server}__{item}"
    if form == "dotted":
        return f"{server}.{item}"
    if form == "upper":
        return f"{server}__{item}".upper()
    if form == "bare":
        return item
    if form == "server":
        return server
    if form == "prefixed":
        return draw(st.sampled_from(["mcp__patchbay__", "claude__", f"{draw(st.sampled_from(SERVERS))}__"])) + item
    if form == "mangled":
        text = f"{server}__{item}"
        cut = draw(st.integers(0, len(text) - 1))
        return text[:cut] + text[cut + 1 :]
    if form == "other":
        return draw(st.text(st.sampled_from("abcfilesrdtg_-.:/ XY"), max_size=25))
    return build_names([(server, item)], separator="__", max_length=48)[server, item]


def rule_names(entries: list[NameEntry], called: str, separator: str = "__") -> set[str]:
    """The exposed names the rules name, found by scanning every entry (the oracle)."""

    def keys(e: NameEntry) -> set[str]:
        full = [e.server + separator + e.item, sanitize(e.server) + separator + sanitize(e.item), e.exposed]
        split = [normalize(e.server) + normalize(e.item), normalize(sanitize(e.server)) + normalize(sanitize(e.item))]
        return {normalize(f) for f in full} | set(split)

    def server_keys(server: str) -> set[str]:
        return {normalize(server), normalize(sanitize(server))}

    named: set[str] = set()
    key = normalize(called)
    delimiters = {separator, "__"}
    positions = sorted((i, len(d)) for d in delimiters for i in range(len(called)) if called.startswith(d, i))
    owners: set[str] = set()
    if positions:
        first = normalize(called[: positions[0][0]])
        owners = {e.server for e in entries if first and first in server_keys(e.server)}
    exact_bare = [e for e in entries if e.item == called]
    if len(exact_bare) == 1:  # one tool's own name wins over every other reading
        return {exact_bare[0].exposed}
    for e in entries:
        if key and key in keys(e):
            named.add(e.exposed)
        for start, length in positions:
            rest = normalize(called[start + length :])
            if rest and rest in keys(e) and (not owners or e.server in owners):
                named.add(e.exposed)
        if exact_bare:
            if e.item == called:
                named.add(e.exposed)
        elif separator not in called and key and key in {normalize(e.item), normalize(sanitize(e.item))}:
            named.add(e.exposed)
        if key and key in server_keys(e.server) and sum(x.server == e.server for x in entries) == 1:
            named.add(e.exposed)
        full = {e.server + separator + e.item, sanitize(e.server) + separator + sanitize(e.item)}
        if called in full - {e.exposed}:
            named.add(e.exposed)
    return named


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), pairs=catalogs)
def test_resolution_is_what_the_rules_say(data: st.DataObject, pairs: list[tuple[str, str]]) -> None:
    names = build_names(pairs, separator="__", max_length=48)
    entries = [NameEntry(exposed, server, item) for (server, item), exposed in names.items()]
    resolver = Resolver(entries, separator="__")
    called = data.draw(called_names(pairs))
    resolution = resolver.resolve(called)

    assert resolution == resolver.resolve(called)  # deterministic
    assert resolution == Resolver(entries[::-1], separator="__").resolve(called)  # whatever the order
    if called in names.values():
        assert resolution.kind == "exact"
        return
    named = rule_names(entries, called)
    if resolution.kind == "resolved":
        assert resolution.entry is not None
        assert named == {resolution.entry.exposed}, (called, named)
    elif resolution.kind == "ambiguous":
        assert set(resolution.candidates) == named
        assert len(named) >= 2
    else:
        assert resolution.kind == "unknown"
        assert not named, (called, named)
        assert set(resolution.candidates) <= set(names.values())
        assert len(resolution.candidates) <= 5


@settings(max_examples=300, deadline=None)
@given(pairs=catalogs, called=st.text(max_size=40), hidden=st.lists(st.tuples(st.sampled_from(SERVERS), item_names())))
def test_resolution_never_raises(pairs: list[tuple[str, str]], called: str, hidden: list[tuple[str, str]]) -> None:
    resolver = make_resolver(pairs, hidden=hidden, unavailable={"time": "disabled", "x_y": "failed"})
    resolution = resolver.resolve(called)
    assert resolution.kind in ("exact", "resolved", "ambiguous", "hidden", "server_unavailable", "unknown")
    assert resolution == resolver.resolve(called)
    names = build_names(pairs, separator="__", max_length=48)
    visible = {name for pair, name in names.items() if pair not in hidden}
    assert set(resolver.suggest(called)) <= visible
    assert set(resolution.candidates) <= visible
    if resolution.entry is not None:
        assert (resolution.entry.server, resolution.entry.item) not in hidden


@settings(max_examples=200, deadline=None)
@given(pairs=catalogs)
def test_every_raw_full_name_names_its_own_tool(pairs: list[tuple[str, str]]) -> None:
    names = build_names(pairs, separator="__", max_length=48)
    resolver = make_resolver(pairs)
    for (server, item), exposed in names.items():
        resolution = resolver.resolve(f"{server}__{item}")
        if resolution.kind in ("exact", "resolved"):
            assert resolution.entry is not None
            assert resolution.entry.exposed == exposed
        else:
            assert resolution.kind == "ambiguous"
            assert exposed in resolution.candidates
