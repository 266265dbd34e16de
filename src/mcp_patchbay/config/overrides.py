"""Overrides in a server's entry: what the user changes of its tools' and prompts' definitions.

The models of the file's ``tools.overrides`` and ``prompts.overrides``, keyed by the
upstream's own name::

    "tools": {"overrides": {"create_issue": {
      "name": "new_issue",                          // exposed as github__new_issue
      "description_append": "Always set labels.",   // or "description": replaces it
      "arguments": {
        "owner": {"value": "acme"},                 // hidden from the model, always sent
        "labels": {"default": ["triage"]},          // optional for the model
        "body": {"name": "text", "description": "Markdown."}
      },
      "annotations": {"readOnlyHint": false}        // merged; "replace_annotations" replaces
    }}},
    "prompts": {"overrides": {"summarize": {"name": "summary", "description": "..."}}}

(Comments for this docstring only.) Read as strictly as the rest of the file: an unknown key
is refused with a "did you mean" (at the object that holds it: an override's keys are named
by the user, so the parent-key lookup ``problems.validation_problems`` does for the entry's
own objects cannot find them), and combinations that contradict each other (``value`` with
anything else, ``description`` with ``description_append``, ``annotations`` with
``replace_annotations``, two arguments renamed alike) are mistakes. What only the upstream's
listing can tell (a tool it does not have, an argument its schema does not take, a value it
refuses) is checked once it has listed (``mcp_patchbay.catalog.overrides``). Pure.

Imported by ``models`` (``ToolFilter.overrides``, ``SpecBase.prompts``), so it cannot import
it back: its strict config is ``models.STRICT_MODEL``'s twin (a test keeps them equal).
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar, Final, Self, cast

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from mcp_patchbay.config.problems import quote, unknown_key

__all__ = [
    "ARGUMENT_NAME",
    "NAME",
    "AnnotationsOverride",
    "ArgumentOverride",
    "PromptOptions",
    "PromptOverride",
    "ToolOverride",
]

NAME: Final = re.compile(r"[A-Za-z0-9_-]+\Z")
"""A new tool or prompt name: what an exposed name is made of (``naming.NAME_CHARS``), so it is
never silently changed; the server's name and the separator go in front of it."""

ARGUMENT_NAME: Final = re.compile(r"[A-Za-z0-9_.-]{1,64}\Z")
"""A new argument name: what every model provider accepts as a property name."""

_STRICT: Final = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)


class _Strict(BaseModel, frozen=True):
    """Unknown keys refused with a "did you mean"; equal and hashed by what the file said (a
    fixed ``null`` is not an absent key, and values may be any JSON, lists included)."""

    model_config = _STRICT

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        keys = _keys(data)
        known = [field.alias or name for name, field in cls.model_fields.items()]
        unknown = [str(key) for key in keys if key not in known]
        if unknown:
            raise ValueError("; ".join(unknown_key(key, known) for key in unknown))
        return data

    _ALWAYS_SAID: ClassVar[frozenset[str]] = frozenset()
    """Keys whose mere presence means something (a fixed ``null``), kept at their default value."""

    def plain(self) -> dict[str, Any]:
        """What the file says, as JSON values: a key left at its default is dropped (an empty
        ``"arguments": {}`` says what no key says), unless its presence means something."""
        said: dict[str, Any] = {}
        for name, field in type(self).model_fields.items():
            value = getattr(self, name)
            if (name in self._ALWAYS_SAID and name in self.model_fields_set) or value != field.get_default(
                call_default_factory=True
            ):
                said[field.alias or name] = _plain(value)
        return said

    def _said(self) -> str:
        return json.dumps(self.plain(), sort_keys=True)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _Strict):
            return NotImplemented
        return type(self) is type(other) and self._said() == other._said()

    def __hash__(self) -> int:
        return hash((type(self), self._said()))


def _plain(value: object) -> object:
    if isinstance(value, _Strict):
        return value.plain()
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in cast("dict[str, object]", value).items()}
    return value


def _keys(data: object) -> list[object]:
    return list(cast("dict[object, object]", data)) if isinstance(data, dict) else []


def _check_name(value: str | None, pattern: re.Pattern[str], what: str, use: str) -> str | None:
    if value is not None and not pattern.match(value):
        raise ValueError(f"{quote(value)} is not a valid {what}: use {use}")
    return value


_NAME_USE: Final = "letters, digits, '_' and '-'"


class ArgumentOverride(_Strict, frozen=True):
    """One argument of a tool: ``{"value": X}``, or any of ``default``, ``description``, ``name``."""

    _ALWAYS_SAID: ClassVar[frozenset[str]] = frozenset({"value", "default"})

    value: Any = None
    """Hidden from the model and always sent as this (any JSON, ``null`` included)."""

    default: Any = None
    """Optional for the model; sent as this when the model leaves it out."""

    description: str | None = None
    """Replaces the argument's description."""

    name: str | None = None
    """The name the model sees; the upstream still receives the argument under its own."""

    @property
    def fixed(self) -> bool:
        """``value`` was given (even ``null``)."""
        return "value" in self.model_fields_set

    @property
    def defaulted(self) -> bool:
        """``default`` was given (even ``null``)."""
        return "default" in self.model_fields_set

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str | None) -> str | None:
        return _check_name(value, ARGUMENT_NAME, "argument name", "at most 64 letters, digits, '_', '-' and '.'")

    @model_validator(mode="after")
    def _one_meaning(self) -> Self:
        if not self.model_fields_set:
            raise ValueError("say what to change: 'value', 'default', 'description' or 'name'")
        if self.fixed and self.model_fields_set != {"value"}:
            raise ValueError(
                "'value' hides the argument and always sends it, so it cannot be combined with "
                "'default', 'description' or 'name'"
            )
        return self


class AnnotationsOverride(_Strict, frozen=True):
    """A tool's annotations (MCP's ``ToolAnnotations``, under their wire names)."""

    title: str | None = None
    """A human-readable title."""

    read_only_hint: bool | None = Field(default=None, alias="readOnlyHint")
    """The tool does not change its environment."""

    destructive_hint: bool | None = Field(default=None, alias="destructiveHint")
    """The tool may destroy or overwrite (meaningful when not read-only)."""

    idempotent_hint: bool | None = Field(default=None, alias="idempotentHint")
    """Calling it again with the same arguments has no further effect."""

    open_world_hint: bool | None = Field(default=None, alias="openWorldHint")
    """The tool reaches outside systems (the web, other people's data)."""

    def said(self) -> dict[str, Any]:
        """The keys given, under their wire names (a ``null`` one removes the upstream's)."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


class ToolOverride(_Strict, frozen=True):
    """What the model sees of one upstream tool instead of the upstream's definition."""

    name: str | None = None
    """The exposed name's tool part (``<server><sep><name>``); the name rules and length budget apply."""

    description: str | None = None
    """Replaces the upstream's description."""

    description_append: str | None = None
    """Added after the upstream's description (a hint the model keeps missing)."""

    arguments: dict[str, ArgumentOverride] = Field(default_factory=dict[str, ArgumentOverride])
    """Per argument (by the upstream's name): fixed, defaulted, described or renamed."""

    annotations: AnnotationsOverride | None = None
    """Merged into the upstream's annotations."""

    replace_annotations: AnnotationsOverride | None = None
    """Replaces the upstream's annotations."""

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str | None) -> str | None:
        return _check_name(value, NAME, "tool name", _NAME_USE)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.description is not None and self.description_append is not None:
            raise ValueError("give 'description' (replaces) or 'description_append' (adds), not both")
        if self.annotations is not None and self.replace_annotations is not None:
            raise ValueError("give 'annotations' (merged) or 'replace_annotations' (replaces), not both")
        seen: dict[str, str] = {}
        for argument, change in self.arguments.items():
            shown = change.name if change.name is not None else argument
            if change.fixed:
                continue
            if shown in seen:
                raise ValueError(f"arguments {quote(seen[shown])} and {quote(argument)} would both be {quote(shown)}")
            seen[shown] = argument
        return self


class PromptOverride(_Strict, frozen=True):
    """What the model sees of one upstream prompt."""

    name: str | None = None
    """The exposed name's prompt part (``<server><sep><name>``)."""

    description: str | None = None
    """Replaces the upstream's description."""

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str | None) -> str | None:
        return _check_name(value, NAME, "prompt name", _NAME_USE)


class PromptOptions(_Strict, frozen=True):
    """An entry's ``prompts``: ``{"overrides": {"<upstream prompt name>": {...}}}``."""

    overrides: dict[str, PromptOverride] = Field(default_factory=dict[str, PromptOverride])
    """Per upstream prompt name, its new name or description."""
