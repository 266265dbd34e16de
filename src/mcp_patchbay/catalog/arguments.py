"""Tool arguments checked against the tool's ``inputSchema``, in words a model can act on.

Pure: values in, values out. No I/O (a remote ``$ref`` is never fetched), no logging.

- One ``ArgumentChecker`` per tool, built once, at its first use: ``jsonschema`` is only
  imported then, so that it costs nothing while the proxy starts. The JSON Schema draft comes from the
  schema's ``$schema`` (draft 3 to 2020-12); without one, or with one we don't know,
  draft 2020-12, the draft MCP specifies.
- A schema that is itself invalid (or that breaks while validating, such as an
  unresolvable ``$ref``) checks nothing: the upstream server stays the judge of its own
  arguments. ``schema_error`` says what was wrong with it.
- ``problems`` returns ``[]`` for valid arguments, else one short sentence per problem,
  naming the parameter by its path (``options.depth``, ``items[2]``) and what was
  expected: ``Missing required parameter 'path'``, ``Parameter 'days' must be at most 14``,
  ``Unexpected parameter 'foo' (allowed: a, b)``. Problems come in path order, at most
  ``MAX_PROBLEMS`` of them, then ``and N more problems``. Schema internals (schema paths,
  ``$ref`` targets, whole sub-schemas) are never shown.
"""

from __future__ import annotations

import functools
import json
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import jsonschema_rs

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError
    from jsonschema.protocols import Validator

__all__ = ["MAX_PROBLEMS", "ArgumentChecker", "preload", "problems_once"]

MAX_PROBLEMS = 5
_MAX_LISTED = 10  # enum values or allowed parameter names shown before "..."
_MAX_SHOWN_CHARS = 60  # a value or pattern quoted in a message

_TYPE_WORDS = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "object": "an object",
    "array": "an array",
    "null": "null",
    "any": "any value",
}
_Path = tuple[str | int, ...]
_REPR_STRINGS = re.compile(r"'((?:[^'\\]|\\.)*)'" + r'|"((?:[^"\\]|\\.)*)"')  # names quoted in jsonschema's messages


def _uri_key(uri: str) -> str:
    return re.sub(r"^https?://", "", uri.strip()).rstrip("#")


_IMPORTING = threading.Lock()
"""Held while ``jsonschema`` is imported: by the preload (a worker thread) or a first check (the event
loop), never both at once. Both at once, Python's import locks once saw a cycle between the package
and a submodule (``_DeadlockError`` in the preload's thread, which ended the proxy)."""


@functools.cache
def _validators_by_uri() -> dict[str, type[Validator]]:
    with _IMPORTING:
        import jsonschema  # (a tenth of a second: imported at the first check, not at start)

    drafts: tuple[type[Validator], ...] = (
        jsonschema.Draft3Validator,
        jsonschema.Draft4Validator,
        jsonschema.Draft6Validator,
        jsonschema.Draft7Validator,
        jsonschema.Draft201909Validator,
        jsonschema.Draft202012Validator,
    )
    return {_uri_key(str(cls.META_SCHEMA["$schema"])): cls for cls in drafts if "$schema" in cls.META_SCHEMA}


def preload() -> None:
    """Import ``jsonschema`` now (the supervisor does, in a worker thread, once startup is over),
    so that the first call to check does not pay for it."""
    _validators_by_uri()


def _validator_class(schema: Mapping[str, Any]) -> type[Validator]:
    uri = schema.get("$schema")
    by_uri = _validators_by_uri()
    found = by_uri.get(_uri_key(uri)) if isinstance(uri, str) else None
    return found or by_uri[_uri_key("https://json-schema.org/draft/2020-12/schema")]


class ArgumentChecker:
    """Checks one tool's arguments against its ``inputSchema``."""

    def __init__(self, input_schema: Mapping[str, Any]) -> None:
        self._schema = input_schema
        self._built = False
        self._schema_error: str | None = None
        self._validator: Validator | None = None
        self._fast: Any = None

    @property
    def schema_error(self) -> str | None:
        """What is wrong with the schema itself (it then checks nothing), else None."""
        self._build()
        return self._schema_error

    def _build(self) -> None:
        if self._built:
            return
        self._built = True
        if not isinstance(self._schema, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
            self._schema_error = f"inputSchema must be an object, got {_json_type(self._schema)}"
            return
        _validators_by_uri()  # jsonschema imported whole, under its lock, before any of its names
        from jsonschema.exceptions import SchemaError

        schema = dict(self._schema)
        cls = _validator_class(schema)
        try:
            cls.check_schema(schema)
            self._validator = cls(schema)
            self._fast = _fast_validator(schema)
        except SchemaError as exc:
            where = _render(tuple(exc.path))
            self._schema_error = _clip(exc.message, 160) + (f" (at {where})" if where else "")
        except Exception as exc:  # a schema can break the checker itself; it then checks nothing
            self._schema_error = f"{type(exc).__name__}: {_clip(str(exc), 160)}"

    def problems(self, arguments: Mapping[str, Any] | None) -> list[str]:
        """Short sentences, one per problem, or ``[]`` when the arguments are valid."""
        self._build()
        if self._validator is None:
            return []
        instance: Any = dict(arguments) if arguments is not None else {}
        if self._fast is not None:
            try:
                if self._fast.is_valid(instance):
                    return []
            except Exception:  # the fast path is an optimisation only; the full check decides
                pass
        found: list[tuple[_Path, str]] = []
        try:
            for error in self._validator.iter_errors(instance):
                if not isinstance(error.validator, str) and not error.absolute_path and error.instance is not instance:
                    found.extend(self._forbidden_parameters(instance))
                else:
                    found.extend(_describe(error))
        except Exception:  # e.g. an unresolvable $ref: let the upstream judge
            return []
        found.sort(key=lambda problem: _sort_key(problem[0]))
        messages = list(dict.fromkeys(message for _, message in found))
        if len(messages) > MAX_PROBLEMS:
            rest = len(messages) - MAX_PROBLEMS
            messages = [*messages[:MAX_PROBLEMS], f"and {rest} more problem{'s' if rest > 1 else ''}"]
        return messages

    def _forbidden_parameters(self, instance: dict[str, Any]) -> list[tuple[_Path, str]]:
        # jsonschema drops the path of an error from a `false` sub-schema; for the common
        # case, ``"properties": {"old_name": false}``, the parameter can be found again.
        assert self._validator is not None
        properties: Any = self._validator.schema.get("properties") if isinstance(self._validator.schema, dict) else None
        if not isinstance(properties, dict):
            return [((), "Arguments contain a value that is not allowed")]
        forbidden = [name for name in instance if cast(dict[str, Any], properties).get(name) is False]
        if not forbidden:
            return [((), "Arguments contain a value that is not allowed")]
        return [((name,), f"Parameter '{name}' is not allowed") for name in forbidden]


def problems_once(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> list[str]:
    """``ArgumentChecker(schema).problems(arguments)`` for a schema checked once (an override's
    fixed value): a valid instance costs only the fast validator, never the full checker's build."""
    fast = _fast_validator(dict(schema))
    if fast is not None:
        try:
            if fast.is_valid(dict(arguments)):
                return []
        except Exception:  # the full check decides
            pass
    return ArgumentChecker(schema).problems(arguments)


def _fast_validator(schema: dict[str, Any]) -> Any:
    """jsonschema-rs answers "valid?" in about a microsecond, so valid calls (nearly all) skip the
    pure-Python walk, which costs tens of microseconds per call; the words for an invalid call
    still come from ``jsonschema``. Schemas with non-local ``$ref`` stay on the slow path: the
    fast validator could try to fetch them."""
    if _has_remote_ref(schema):
        return None
    try:
        return jsonschema_rs.validator_for(schema)
    except Exception:
        return None


def _has_remote_ref(node: Any) -> bool:
    if isinstance(node, dict):
        items = cast(dict[str, Any], node)
        ref = items.get("$ref")
        if isinstance(ref, str) and not ref.startswith("#"):
            return True
        return any(_has_remote_ref(value) for value in items.values())
    if isinstance(node, list):
        return any(_has_remote_ref(value) for value in cast(list[Any], node))
    return False


# --- describing one validation error ------------------------------------------------


def _sort_key(path: _Path) -> tuple[tuple[int, int, str], ...]:
    return tuple((0, part, "") if isinstance(part, int) else (1, 0, part) for part in path)


def _render(path: _Path) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def _subject(path: _Path) -> str:
    return f"Parameter '{_render(path)}'" if path else "Arguments"


def _clip(text: str, limit: int = _MAX_SHOWN_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _quoted(name: str) -> str:
    return f"'{name}'"


def _show(value: Any) -> str:
    if isinstance(value, str):
        return "'" + _clip(value) + "'"
    try:
        return _clip(json.dumps(value, sort_keys=True))
    except (TypeError, ValueError):
        return _clip(repr(value))


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return type(value).__name__


def _words(items: Sequence[str], joiner: str = "or") -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + f" {joiner} " + items[-1]


def _listed(values: Iterable[Any], show: Callable[[Any], str] = _show) -> str:
    shown = [show(v) for v in values]
    if len(shown) > _MAX_LISTED:
        shown = [*shown[:_MAX_LISTED], "..."]
    return ", ".join(shown)


def _types(expected: Any) -> list[str]:
    names = [expected] if isinstance(expected, str) else list(cast(Iterable[Any], expected or []))
    return [_TYPE_WORDS.get(name, str(name)) for name in names if isinstance(name, str)]


def _plural(count: Any, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _describe(error: ValidationError) -> list[tuple[_Path, str]]:
    path: _Path = tuple(error.absolute_path)
    subject = _subject(path)
    keyword = error.validator if isinstance(error.validator, str) else None  # None: the `false` schema
    value: Any = error.validator_value
    instance: Any = error.instance
    schema: Mapping[str, Any] = error.schema if isinstance(error.schema, Mapping) else {}

    if keyword == "required" and isinstance(instance, dict):
        missing = [name for name in cast(list[Any], value) if isinstance(name, str) and name not in instance]
        return [((*path, name), f"Missing required parameter '{_render((*path, name))}'") for name in missing]
    if keyword in ("dependentRequired", "dependencies") and isinstance(instance, dict) and isinstance(value, dict):
        found: list[tuple[_Path, str]] = []
        for trigger, needed in cast(dict[str, Any], value).items():
            if trigger in instance and isinstance(needed, list):
                for name in cast(list[Any], needed):
                    if isinstance(name, str) and name not in instance:
                        where = _render((*path, name))
                        message = f"Missing parameter '{where}', required when '{_render((*path, trigger))}' is given"
                        found.append(((*path, name), message))
        if found:
            return found
    if keyword in ("additionalProperties", "unevaluatedProperties") and value is False:
        return [_unexpected(path, instance, schema, error)]

    message = _sentence(keyword, value, instance, schema, error)
    if message is None:
        message = f"{subject} is not valid ({_clip(error.message, 100)})"
        if keyword is None:  # the `false` schema: nothing is allowed here
            message = f"{subject} is not allowed"
    return [(path, message if message.startswith(subject) else f"{subject} {message}")]


# Long on purpose: one sentence per JSON Schema keyword a value broke, in the order a person reads them.
def _sentence(  # noqa: PLR0912
    keyword: str | None, value: Any, instance: Any, schema: Mapping[str, Any], error: ValidationError
) -> str | None:
    """The predicate for one keyword ("must be at most 14"), or None for the generic one."""
    got = _json_type(instance)
    match keyword:
        case "type":
            return f"must be {_words(_types(value))}, got {got}"
        case "enum":
            return f"must be one of: {_listed(cast(Iterable[Any], value))}"
        case "const":
            return f"must be {_show(value)}"
        case "minimum":
            return f"must be {'greater than' if schema.get('exclusiveMinimum') is True else 'at least'} {value}"
        case "maximum":
            return f"must be {'less than' if schema.get('exclusiveMaximum') is True else 'at most'} {value}"
        case "exclusiveMinimum":
            return f"must be greater than {value}"
        case "exclusiveMaximum":
            return f"must be less than {value}"
        case "multipleOf" | "divisibleBy":
            return f"must be a multiple of {value}"
        case "minLength":
            return f"must be at least {_plural(value, 'character')} long"
        case "maxLength":
            return f"must be at most {_plural(value, 'character')} long"
        case "pattern":
            return f"must match the pattern {_show(value)}"
        case "format":
            return f"must be a valid {value}"
        case "minItems":
            return f"must have at least {_plural(value, 'item')}"
        case "maxItems":
            return f"must have at most {_plural(value, 'item')}"
        case "uniqueItems":
            return "must not contain duplicate items"
        case "minProperties":
            return f"must have at least {_plural(value, 'property')}".replace("propertys", "properties")
        case "maxProperties":
            return f"must have at most {_plural(value, 'property')}".replace("propertys", "properties")
        case "contains" | "minContains":
            return "must contain at least one matching item"
        case "maxContains":
            return "contains too many matching items"
        case "not":
            return "has a value that is not allowed"
        case "anyOf" | "oneOf":
            return _alternatives(keyword, value, instance, error)
        case _:
            return None


def _best_match(errors: Iterable[ValidationError]) -> ValidationError | None:
    from jsonschema import exceptions  # (loaded by the checker already)

    # jsonschema's own annotation leaves the return type unknown.
    return cast("ValidationError | None", exceptions.best_match(errors))  # pyright: ignore[reportUnknownMemberType]


def _alternatives(keyword: str, value: Any, instance: Any, error: ValidationError) -> str:
    branches = len(cast(list[Any], value)) if isinstance(value, list) else 0
    context = list(error.context or ())
    if keyword == "oneOf" and not context:
        return "matches more than one of the allowed forms; it must match exactly one"
    # Every branch failed on its type: name all the types ("a string or null").
    type_failures = [e for e in context if e.validator == "type" and not e.relative_path]
    failed_branches = {e.relative_schema_path[0] for e in type_failures if e.relative_schema_path}
    if branches and len(failed_branches) == branches:
        expected: list[str] = []
        for e in type_failures:
            expected.extend(word for word in _types(e.validator_value) if word not in expected)
        return f"must be {_words(expected)}, got {_json_type(instance)}"
    # Prefer the branches whose type fits the value: "must be at least 0" beats "must be a string".
    fitting = [e for e in context if not e.relative_schema_path or e.relative_schema_path[0] not in failed_branches]
    closest = _best_match(fitting or context) if context else None
    if closest is not None:
        described = _describe(closest)
        if described:
            return described[0][1]
    return "does not match any of the allowed forms"


def _unexpected(path: _Path, instance: Any, schema: Mapping[str, Any], error: ValidationError) -> tuple[_Path, str]:
    properties = schema.get("properties")
    allowed = list(cast(Mapping[str, Any], properties)) if isinstance(properties, Mapping) else []
    if error.validator == "unevaluatedProperties":
        # Names evaluated by sub-schemas (allOf, $ref, ...) count as known: trust the message.
        inside = re.search(r"\((.*) (?:was|were) unexpected\)", error.message)
        quoted: list[tuple[str, str]] = _REPR_STRINGS.findall(inside.group(1)) if inside else []
        extras = [single or double for single, double in quoted]
        hint = f" (allowed: {_listed(allowed, str)})" if allowed else ""
    else:
        patterns = schema.get("patternProperties")
        pattern_list = list(cast(Mapping[str, Any], patterns)) if isinstance(patterns, Mapping) else []
        names = [str(name) for name in cast(dict[Any, Any], instance)] if isinstance(instance, dict) else []
        extras = [n for n in names if n not in allowed and not any(re.search(p, n) for p in pattern_list)]
        if allowed:
            hint = f" (allowed: {_listed(allowed, str)})"
        else:
            hint = " (this tool takes no parameters)" if not path and not pattern_list else ""
    if not extras:
        return path, f"{_subject(path)} has unexpected properties{hint}"
    shown = _listed((_render((*path, name)) for name in extras), _quoted)
    noun = "parameter" if len(extras) == 1 else "parameters"
    return (*path, extras[0]), f"Unexpected {noun} {shown}{hint}"
