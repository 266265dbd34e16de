"""Tool arguments checked against inputSchema, in words a model can act on (mcp_patchbay.catalog.arguments)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_patchbay.catalog.arguments import MAX_PROBLEMS, ArgumentChecker

DRAFT_07 = "http://json-schema.org/draft-07/schema#"
DRAFT_2020 = "https://json-schema.org/draft/2020-12/schema"

READ_FILE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "minLength": 1},
        "mode": {"enum": ["r", "w"]},
        "count": {"type": "integer", "minimum": 1},
        "days": {"type": "integer", "maximum": 14},
        "ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1, "multipleOf": 0.25},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2, "uniqueItems": True},
        "options": {
            "type": "object",
            "properties": {"depth": {"type": "integer", "minimum": 0}, "follow": {"type": "boolean"}},
            "required": ["depth"],
            "additionalProperties": False,
        },
        "encoding": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "since": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"},
        "limit": {"oneOf": [{"type": "integer", "minimum": 0}, {"type": "string", "const": "all"}]},
    },
    "required": ["path"],
    "additionalProperties": False,
}
ALLOWED = "path, mode, count, days, ratio, tags, options, encoding, since, limit"


@pytest.mark.parametrize("schema_uri", [None, DRAFT_07, DRAFT_2020, DRAFT_2020 + "#", "http://json-schema.org/schema#"])
@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"path": "/tmp/a"}, []),
        ({"path": "/tmp/a", "options": {"depth": 2}, "encoding": None, "limit": "all"}, []),
        ({}, ["Missing required parameter 'path'"]),
        (None, ["Missing required parameter 'path'"]),
        ({"path": "a", "days": 20}, ["Parameter 'days' must be at most 14"]),
        ({"path": "a", "count": "3"}, ["Parameter 'count' must be an integer, got string"]),
        ({"path": "a", "count": 2.5}, ["Parameter 'count' must be an integer, got number"]),
        ({"path": "a", "count": True}, ["Parameter 'count' must be an integer, got boolean"]),
        ({"path": "a", "count": 0}, ["Parameter 'count' must be at least 1"]),
        ({"path": "a", "foo": 1}, [f"Unexpected parameter 'foo' (allowed: {ALLOWED})"]),
        ({"path": "a", "foo": 1, "bar": 2}, [f"Unexpected parameters 'foo', 'bar' (allowed: {ALLOWED})"]),
        ({"path": "a", "mode": "x"}, ["Parameter 'mode' must be one of: 'r', 'w'"]),
        ({"path": ""}, ["Parameter 'path' must be at least 1 character long"]),
        ({"path": "a", "options": {"depth": -1}}, ["Parameter 'options.depth' must be at least 0"]),
        ({"path": "a", "options": {}}, ["Missing required parameter 'options.depth'"]),
        (
            {"path": "a", "options": {"depth": 1, "recursive": True}},
            ["Unexpected parameter 'options.recursive' (allowed: depth, follow)"],
        ),
        (
            {"path": "a", "options": {"depth": 1, "follow": "yes"}},
            ["Parameter 'options.follow' must be a boolean, got string"],
        ),
        ({"path": "a", "tags": ["x", 3]}, ["Parameter 'tags[1]' must be a string, got integer"]),
        ({"path": "a", "tags": ["x", "y", "z"]}, ["Parameter 'tags' must have at most 2 items"]),
        ({"path": "a", "tags": ["x", "x"]}, ["Parameter 'tags' must not contain duplicate items"]),
        ({"path": "a", "ratio": 1}, ["Parameter 'ratio' must be less than 1"]),
        ({"path": "a", "ratio": 0}, ["Parameter 'ratio' must be greater than 0"]),
        ({"path": "a", "ratio": 0.3}, ["Parameter 'ratio' must be a multiple of 0.25"]),
        ({"path": "a", "encoding": 8}, ["Parameter 'encoding' must be a string or null, got integer"]),
        (
            {"path": "a", "since": "yesterday"},
            ["Parameter 'since' must match the pattern '^[0-9]{4}-[0-9]{2}-[0-9]{2}$'"],
        ),
        ({"path": "a", "limit": -1}, ["Parameter 'limit' must be at least 0"]),
        ({"path": "a", "limit": "some"}, ["Parameter 'limit' must be 'all'"]),
        ({"path": "a", "limit": [1]}, ["Parameter 'limit' must be an integer or a string, got array"]),
    ],
)
def test_messages(schema_uri: str | None, arguments: dict[str, Any] | None, expected: list[str]) -> None:
    schema = READ_FILE if schema_uri is None else {"$schema": schema_uri, **READ_FILE}
    checker = ArgumentChecker(schema)
    assert checker.schema_error is None
    assert checker.problems(arguments) == expected


def test_problems_come_in_path_order_and_are_capped() -> None:
    arguments = {"path": 1, "days": "a", "count": "b", "mode": 1, "zzz": 1, "tags": [1, 2, 3]}
    problems = ArgumentChecker(READ_FILE).problems(arguments)
    assert problems == [
        "Parameter 'count' must be an integer, got string",
        "Parameter 'days' must be an integer, got string",
        "Parameter 'mode' must be one of: 'r', 'w'",
        "Parameter 'path' must be a string, got integer",
        "Parameter 'tags' must have at most 2 items",
        "and 4 more problems",
    ]
    assert len(problems) == MAX_PROBLEMS + 1


def test_a_tool_without_parameters() -> None:
    checker = ArgumentChecker({"type": "object", "properties": {}, "additionalProperties": False})
    assert checker.problems({}) == []
    assert checker.problems({"query": "x"}) == ["Unexpected parameter 'query' (this tool takes no parameters)"]


def test_an_empty_schema_accepts_everything() -> None:
    assert ArgumentChecker({}).problems({"anything": [1, {"at": "all"}]}) == []
    assert ArgumentChecker({"type": "object"}).problems(None) == []


def test_draft_07_specifics() -> None:
    schema = {
        "$schema": DRAFT_07,
        "type": "object",
        "properties": {
            "a": {"type": "string"},
            "b": {"type": "string"},
            "n": {"type": "number", "exclusiveMaximum": 5},
        },
        "dependencies": {"a": ["b"]},
    }
    checker = ArgumentChecker(schema)
    assert checker.problems({"a": "x"}) == ["Missing parameter 'b', required when 'a' is given"]
    assert checker.problems({"n": 5}) == ["Parameter 'n' must be less than 5"]


def test_draft_04_boolean_exclusive_maximum() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "object",
        "properties": {"n": {"type": "number", "maximum": 5, "exclusiveMaximum": True}},
    }
    assert ArgumentChecker(schema).problems({"n": 5}) == ["Parameter 'n' must be less than 5"]
    assert ArgumentChecker(schema).problems({"n": 4}) == []


def test_draft_2020_specifics() -> None:
    schema = {
        "$schema": DRAFT_2020,
        "type": "object",
        "$defs": {"depth": {"type": "integer", "maximum": 3}},
        "properties": {"depth": {"$ref": "#/$defs/depth"}, "first": {"type": "string"}, "last": {"type": "string"}},
        "dependentRequired": {"first": ["last"]},
        "unevaluatedProperties": False,
        "allOf": [{"properties": {"extra": {"type": "boolean"}}}],
    }
    checker = ArgumentChecker(schema)
    assert checker.problems({"depth": 2, "extra": True}) == []
    assert checker.problems({"depth": 9}) == ["Parameter 'depth' must be at most 3"]
    assert checker.problems({"first": "a"}) == ["Missing parameter 'last', required when 'first' is given"]
    assert checker.problems({"nope": 1}) == ["Unexpected parameter 'nope' (allowed: depth, first, last)"]


def test_the_schema_picks_the_draft() -> None:
    # Draft 7 ignores "prefixItems"; draft 2020-12 checks it.
    schema = {"type": "object", "properties": {"pair": {"type": "array", "prefixItems": [{"type": "integer"}]}}}
    assert ArgumentChecker({"$schema": DRAFT_07, **schema}).problems({"pair": ["x"]}) == []
    assert ArgumentChecker(schema).problems({"pair": ["x"]}) == ["Parameter 'pair[0]' must be an integer, got string"]


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "objekt"},
        {"type": "object", "properties": {"a": {"minimum": "three"}}},
        {"type": "object", "properties": {"a": {"type": "string", "pattern": "([unclosed"}}},
        {"type": "object", "required": "path"},
    ],
)
def test_an_invalid_schema_accepts_everything(schema: dict[str, Any]) -> None:
    checker = ArgumentChecker(schema)
    assert checker.schema_error
    assert len(checker.schema_error) < 250
    assert checker.problems({"a": "whatever", "b": [1, 2]}) == []


def test_a_schema_that_is_not_an_object_accepts_everything() -> None:
    checker = ArgumentChecker(["not", "a", "schema"])  # type: ignore[arg-type]  # pyright: ignore[reportArgumentType]
    assert checker.schema_error == "inputSchema must be an object, got array"
    assert checker.problems({"a": 1}) == []


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}},
        {"type": "object", "properties": {"a": {"$ref": "https://example.invalid/schema.json"}}},
    ],
)
def test_a_reference_that_cannot_be_resolved_accepts_everything(schema: dict[str, Any]) -> None:
    assert ArgumentChecker(schema).problems({"a": 1}) == []


def test_no_schema_internals_in_messages() -> None:
    schema = {
        "type": "object",
        "properties": {
            "q": {"not": {"type": "string", "maxLength": 0}},
            "r": {"type": "array", "contains": {"type": "integer"}},
            "s": False,
            "t": {"type": "object", "minProperties": 2},
        },
    }
    problems = ArgumentChecker(schema).problems({"q": "", "r": ["x"], "s": 1, "t": {"a": 1}})
    assert problems == [
        "Parameter 'q' has a value that is not allowed",
        "Parameter 'r' must contain at least one matching item",
        "Parameter 's' is not allowed",
        "Parameter 't' must have at least 2 properties",
    ]
    for problem in problems:
        assert "$" not in problem and "schema" not in problem


def test_long_values_are_clipped() -> None:
    schema = {"type": "object", "properties": {"a": {"const": "x" * 500}}}
    (problem,) = ArgumentChecker(schema).problems({"a": "y"})
    assert len(problem) < 100
    assert problem.endswith("...'")


def test_a_checker_used_once() -> None:
    assert ArgumentChecker(READ_FILE).problems({"path": "a"}) == []
    assert ArgumentChecker(READ_FILE).problems({}) == ["Missing required parameter 'path'"]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None)
@given(arguments=st.dictionaries(st.sampled_from(["path", "mode", "options", "tags", "x", "limit"]), json_values))
def test_problems_never_raise_and_stay_short(arguments: dict[str, Any]) -> None:
    problems = ArgumentChecker(READ_FILE).problems(arguments)
    assert len(problems) <= MAX_PROBLEMS + 1
    for problem in problems:
        assert len(problem) <= 200


_FIRST_IMPORT = """
import sys, threading
from mcp_patchbay.catalog import arguments

unguarded = []

class Watch:  # every jsonschema module found: was the module's import lock held?
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "jsonschema":
            lock = getattr(arguments, "_IMPORTING", None)
            if lock is None or not lock.locked():
                unguarded.append(name)
        return None

sys.meta_path.insert(0, Watch())
print(arguments.ArgumentChecker({"type": "object", "required": ["a"]}).problems({}))
print(unguarded or "guarded")
"""


def test_jsonschema_is_imported_under_one_lock_so_the_preload_and_a_first_check_cannot_deadlock() -> None:
    """The supervisor's preload (a worker thread) and a first call's check (the event loop) imported
    jsonschema at once, and Python's import locks saw a cycle between the package and one of its
    submodules: _DeadlockError in the preload's thread ended the proxy (seen in benchmarks.activity,
    calls made as startup ended). A first check imports it only under the module's lock, as the
    preload does, so one waits for the other."""
    done = subprocess.run([sys.executable, "-c", _FIRST_IMPORT], capture_output=True, text=True, check=False)
    assert done.stdout.splitlines() == ["[\"Missing required parameter 'a'\"]", "guarded"], done.stdout + done.stderr
