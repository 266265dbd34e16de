"""Mistakes in the config file and how they are worded.

:class:`ConfigProblem` is one mistake at a key path; :class:`ConfigError` is raised when
the file as a whole cannot be used. The helpers word the messages the same way
everywhere: key paths (``mcpServers["my server"].args[2]``), quoting that never lets an
unprintable character through, "did you mean" hints, and pydantic's validation errors
turned into short messages that never quote the rejected value (it may be a secret).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from pydantic import ValidationError
    from pydantic_core import ErrorDetails

__all__ = [
    "ConfigError",
    "ConfigProblem",
    "did_you_mean",
    "key_path",
    "quote",
    "unknown_key",
    "validation_problems",
]

# Keys other programs use that mean one of ours, for "did you mean" hints.
_KEY_HINTS: Final[Mapping[str, str]] = {"serverUrl": "url", "transport": "type", "environment": "env"}


@dataclass(frozen=True)
class ConfigProblem:
    """One mistake in the config file."""

    key: str
    """Dotted key path (``mcpServers.github.env.TOKEN``), or ``""`` for the file as a whole."""

    message: str
    """What is wrong or what was expected. Never contains an environment variable's value."""

    def __str__(self) -> str:
        return f"{self.key}: {self.message}" if self.key else self.message


class ConfigError(Exception):
    """The config file cannot be used at all (mistakes in single entries do not raise this).

    ``path``, ``key`` and ``message`` describe the first problem; ``problems`` holds every
    problem found, and ``str()`` gives one ``"<path>: <key>: <message>"`` line for each.
    """

    path: Path
    key: str
    message: str
    problems: tuple[ConfigProblem, ...]

    def __init__(self, path: str | Path, key: str, message: str, *more: ConfigProblem) -> None:
        super().__init__(path, key, message, *more)
        self.path = Path(path)
        self.key = key
        self.message = message
        self.problems = (ConfigProblem(key, message), *more)

    @classmethod
    def from_problems(cls, path: str | Path, problems: Sequence[ConfigProblem]) -> ConfigError:
        """One error carrying several problems (at least one)."""
        first, *rest = problems
        return cls(path, first.key, first.message, *rest)

    def __str__(self) -> str:
        return "\n".join(f"{self.path}: {problem}" for problem in self.problems)

    def summary(self) -> str:
        """The first problem and how many more, without the file's path: for the model, which
        must learn why its tools are missing but is never shown the user's paths."""
        more = len(self.problems) - 1
        return str(self.problems[0]) + (f" (and {more} more)" if more else "")


# ---------------------------------------------------------------------------
# Wording
# ---------------------------------------------------------------------------

_SIMPLE_KEY = re.compile(r"[A-Za-z0-9_$-]+\Z")


def key_path(*parts: str | int) -> str:
    """``("mcpServers", "my server", "args", 2)`` -> ``mcpServers["my server"].args[2]``."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _SIMPLE_KEY.match(part):
            out += f".{part}" if out else part
        else:
            out += f"[{_json_string(part)}]"
    return out


def _json_string(text: str) -> str:
    """``text`` as a JSON string literal, escaping only what is not printable."""
    return json.dumps(text, ensure_ascii=not text.isprintable())


def quote(text: str) -> str:
    """Quote a key or word for a message, escaping anything unprintable."""
    if text.isprintable() and "'" not in text:
        return f"'{text}'"
    return _json_string(text)


def did_you_mean(key: str, candidates: Iterable[str]) -> str:
    """`` (did you mean 'url'?)`` for the candidate ``key`` was likely meant as, else ``""``."""
    choices = list(candidates)
    if key in _KEY_HINTS and _KEY_HINTS[key] in choices:
        return f" (did you mean {quote(_KEY_HINTS[key])}?)"
    lowered = {c.lower(): c for c in choices}
    match = [lowered[key.lower()]] if key.lower() in lowered else difflib.get_close_matches(key, choices, n=1)
    return f" (did you mean {quote(match[0])}?)" if match else ""


def unknown_key(key: str, candidates: Iterable[str]) -> str:
    """The message for a key that is not one of ``candidates``."""
    return f"unknown key {quote(key)}{did_you_mean(key, candidates)}"


# ---------------------------------------------------------------------------
# Validation errors
# ---------------------------------------------------------------------------

_TYPE_MESSAGES: Final[Mapping[str, str]] = {
    "string_type": "expected a string",
    "float_type": "expected a number",
    "float_parsing": "expected a number",
    "int_type": "expected a whole number",
    "int_parsing": "expected a whole number",
    "int_from_float": "expected a whole number",
    "bool_type": "expected true or false",
    "bool_parsing": "expected true or false",
    "tuple_type": "expected a list of strings",
    "list_type": "expected a list",
    "dict_type": "expected an object",
    "model_type": "expected an object",
    "model_attributes_type": "expected an object",
    "finite_number": "expected a finite number",
    "missing": "required key is missing",
}


def _error_message(error: ErrorDetails, candidates: Iterable[str]) -> str:
    """A pydantic error as a short message (never quoting the input value)."""
    kind = error["type"]
    ctx: dict[str, Any] = error.get("ctx") or {}
    if kind == "extra_forbidden":
        return unknown_key(str(error["loc"][-1]), candidates)
    if kind in _TYPE_MESSAGES:
        return _TYPE_MESSAGES[kind]
    bounds = {
        "greater_than": ("must be greater than", "gt"),
        "greater_than_equal": ("must be at least", "ge"),
        "less_than": ("must be less than", "lt"),
        "less_than_equal": ("must be at most", "le"),
    }
    if kind in bounds:
        text, name = bounds[kind]
        bound = ctx.get(name)
        return f"{text} {bound:g}" if isinstance(bound, float) else f"{text} {bound}"
    if kind == "literal_error":
        return f"expected {ctx.get('expected')}"
    if kind == "value_error":
        return str(ctx.get("error", error["msg"]))
    return error["msg"]


UNION_TAGS: Final = frozenset({"object", "false"})
"""Names of the forms a key may take (``"oauth": {...}`` or ``false``), which pydantic puts in
an error's location; a key path never shows them."""


def _untagged(loc: tuple[str | int, ...]) -> tuple[str | int, ...]:
    return tuple(part for i, part in enumerate(loc) if not (i and part in UNION_TAGS and loc[i - 1] == "oauth"))


def validation_problems(
    exc: ValidationError,
    prefix: tuple[str | int, ...],
    keys_for: Mapping[str, Iterable[str]],
    default_keys: Iterable[str],
) -> list[ConfigProblem]:
    """Turn a ValidationError into problems; ``keys_for`` maps a parent key to its valid keys."""
    problems: list[ConfigProblem] = []
    for error in exc.errors(include_url=False, include_input=False):
        loc = _untagged(tuple(error["loc"]))
        if error["type"] == "extra_forbidden":
            parent = loc[-2] if len(loc) >= 2 else None
            candidates = keys_for.get(str(parent), ()) if parent is not None else default_keys
            problems.append(ConfigProblem(key_path(*prefix, *loc[:-1]), _error_message(error, candidates)))
        else:
            problems.append(ConfigProblem(key_path(*prefix, *loc), _error_message(error, ())))
    return problems
