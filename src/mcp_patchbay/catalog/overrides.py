"""Overrides applied: an upstream's definitions in, what the model sees out. Pure.

No I/O, no awaits, no logging: the catalog calls this for each server that has listed and
whose entry has ``tools.overrides`` or ``prompts.overrides`` (``config.overrides`` holds
their models and the mistakes the file alone shows).

A tool's override gives a changed definition and, when its arguments change, the one
function that turns what the model sends into what the upstream expects
(``CatalogTool.to_upstream``, which ``calls.steps`` applies after checking the model's
arguments against the changed schema):

- ``name``: the definition's name (the catalog puts the server and separator in front and
  applies the length budget); the upstream's own name resolves to it as a mistaken name
  would (``resolution.NameEntry.aliases``).
- ``description`` replaces, ``description_append`` adds after a blank line.
- ``arguments``: ``value`` removes the argument from ``properties`` and ``required`` and is
  always sent; ``default`` takes it out of ``required``, puts ``"default"`` in its schema and
  is sent when the model leaves it out; ``description`` replaces the argument's; ``name``
  renames it in ``properties`` and ``required`` (the upstream receives its own name). The
  schema stays valid JSON Schema; keywords elsewhere in it that name an argument
  (``dependentRequired``, ``if``/``then``) are left as they are.
- ``annotations`` are merged into the upstream's, ``replace_annotations`` replace them.

What only the listing can show is a ``Remark`` (the server, the key path from the server's
name, a sentence), and only the override it concerns is skipped (for an argument, only that
argument's): a tool the server does not list, an argument its schema does not take, a
fixed value or default its schema refuses, a new name another of its tools (or a renamed
one) already has.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import mcp_types as types

from mcp_patchbay.catalog.arguments import problems_once
from mcp_patchbay.config.overrides import ArgumentOverride, PromptOverride, ToolOverride
from mcp_patchbay.config.problems import did_you_mean, key_path, quote

__all__ = ["ChangedTool", "Mapper", "Remark", "change_prompts", "change_tools"]

Mapper = Callable[[dict[str, Any] | None], dict[str, Any] | None]
"""The model's arguments to the upstream's (``CatalogTool.to_upstream``)."""


@dataclass(frozen=True, slots=True)
class Remark:
    """An override that does not fit what the server listed, and was skipped."""

    server: str
    key: str
    """The key path from the server's entry name: ``github.tools.overrides.create_issue.arguments.owner``."""
    sentence: str
    """What is wrong and what was skipped, for a person."""

    def __str__(self) -> str:
        return f"{self.key}: {self.sentence}"


@dataclass(frozen=True, slots=True)
class ChangedTool:
    """One tool as its override makes it."""

    definition: types.Tool
    """Named by the override's ``name`` (or the upstream's), without the server in front."""
    to_upstream: Mapper | None
    """None when the upstream receives the model's arguments as they are."""


def change_tools(
    server: str, tools: Sequence[types.Tool], overrides: Mapping[str, ToolOverride]
) -> tuple[dict[str, ChangedTool], list[Remark]]:
    """Each overridden tool of ``tools`` (one per name) by its upstream name, and the remarks."""
    remarks: list[Remark] = []
    by_name = {tool.name: tool for tool in tools}
    names = _new_names(server, "tools", by_name, {k: v.name for k, v in overrides.items()}, remarks)
    changed: dict[str, ChangedTool] = {}
    for upstream_name, override in sorted(overrides.items()):
        tool = by_name.get(upstream_name)
        if tool is None:
            continue
        where = (server, "tools", "overrides", upstream_name)
        schema, mapper = _arguments(server, tool.input_schema, override.arguments, where, remarks)
        update: dict[str, Any] = {"name": names.get(upstream_name, upstream_name), "input_schema": schema}
        if override.description is not None:
            update["description"] = override.description
        elif override.description_append is not None:
            head = (tool.description or "").rstrip()
            update["description"] = f"{head}\n\n{override.description_append}" if head else override.description_append
        annotations = _annotations(tool.annotations, override)
        if annotations is not tool.annotations:
            update["annotations"] = annotations
        changed[upstream_name] = ChangedTool(tool.model_copy(update=update), mapper)
    return changed, remarks


def change_prompts(
    server: str, prompts: Sequence[types.Prompt], overrides: Mapping[str, PromptOverride]
) -> tuple[dict[str, types.Prompt], list[Remark]]:
    """Each overridden prompt of ``prompts`` (one per name), changed, by its upstream name; the remarks."""
    remarks: list[Remark] = []
    by_name = {prompt.name: prompt for prompt in prompts}
    names = _new_names(server, "prompts", by_name, {k: v.name for k, v in overrides.items()}, remarks)
    changed: dict[str, types.Prompt] = {}
    for upstream_name, override in sorted(overrides.items()):
        prompt = by_name.get(upstream_name)
        if prompt is not None:
            update: dict[str, Any] = {"name": names.get(upstream_name, upstream_name)}
            if override.description is not None:
                update["description"] = override.description
            changed[upstream_name] = prompt.model_copy(update=update)
    return changed, remarks


def _new_names(
    server: str, kind: str, listed: Mapping[str, object], wanted: Mapping[str, str | None], remarks: list[Remark]
) -> dict[str, str]:
    """The renames that can be made: of items the server lists, to a name none of its other
    items has (by upstream name or by another rename). The others are remarked."""
    singular = kind[:-1]
    names: dict[str, str] = {}
    taken = set(listed)
    for upstream_name in sorted(wanted):
        where = key_path(server, kind, "overrides", upstream_name)
        if upstream_name not in listed:
            hint = did_you_mean(upstream_name, listed)
            sentence = (
                f"server {quote(server)} lists no {singular} {quote(upstream_name)}{hint}; this override is skipped"
            )
            remarks.append(Remark(server, where, sentence))
            continue
        new = wanted[upstream_name]
        if new is None or new == upstream_name:
            continue
        if new in taken:
            sentence = f"another {singular} of this server is called {quote(new)} already; the name is not changed"
            remarks.append(Remark(server, f"{where}.name", sentence))
            continue
        taken.add(new)
        names[upstream_name] = new
    return names


def _annotations(upstream: types.ToolAnnotations | None, override: ToolOverride) -> types.ToolAnnotations | None:
    if override.replace_annotations is not None:
        return types.ToolAnnotations.model_validate(override.replace_annotations.said())
    if override.annotations is not None:
        merged = upstream.model_dump(by_alias=True, exclude_none=True) if upstream is not None else {}
        merged.update(override.annotations.said())
        return types.ToolAnnotations.model_validate(merged)
    return upstream


def _arguments(
    server: str,
    schema: Mapping[str, Any],
    changes: Mapping[str, ArgumentOverride],
    where: tuple[str, ...],
    remarks: list[Remark],
) -> tuple[dict[str, Any], Mapper | None]:
    """The changed input schema (a copy: the upstream's stays as listed) and the mapper."""
    changed: dict[str, Any] = copy.deepcopy(dict(schema))
    if not changes:
        return changed, None
    raw_properties = changed.get("properties")
    properties = cast("dict[str, Any]", raw_properties) if isinstance(raw_properties, dict) else {}
    raw_required = changed.get("required")
    required = (
        [r for r in cast("list[object]", raw_required) if isinstance(r, str)] if isinstance(raw_required, list) else []
    )
    fixed: dict[str, Any] = {}
    defaults: dict[str, Any] = {}
    renames: dict[str, str] = {}  # the model's name -> the upstream's
    shown: dict[str, str] = {}  # the upstream's name -> the model's, for the properties' new order
    for argument, change in sorted(changes.items()):
        here = (*where, "arguments", argument)
        problem = _misfit(schema, properties, argument, change)
        if problem is not None:
            remarks.append(Remark(server, key_path(*here, *problem[0]), problem[1]))
            continue
        if change.fixed:
            fixed[argument] = change.value
            continue
        prop = properties[argument]
        prop = dict(cast("dict[str, Any]", prop)) if isinstance(prop, dict) else {}
        if change.defaulted:
            prop["default"] = change.default
            defaults[argument] = change.default
        if change.description is not None:
            prop["description"] = change.description
        properties[argument] = prop
        if change.name is not None and change.name != argument:
            renames[change.name] = argument
            shown[argument] = change.name
    if not (fixed or defaults or renames):
        return changed, None
    hidden_or_optional = set(fixed) | set(defaults)
    if isinstance(raw_properties, dict):
        changed["properties"] = {shown.get(k, k): v for k, v in properties.items() if k not in fixed}
    if isinstance(raw_required, list):
        # An empty list is left out: draft 4 (which a schema may still name) wants at least one name.
        still = list(dict.fromkeys(shown.get(r, r) for r in required if r not in hidden_or_optional))
        if still:
            changed["required"] = still
        else:
            del changed["required"]
    return changed, _mapper(renames, defaults, fixed)


def _misfit(
    schema: Mapping[str, Any], properties: Mapping[str, Any], argument: str, change: ArgumentOverride
) -> tuple[tuple[str, ...], str] | None:
    """Why this argument's override does not fit the tool's schema: (the key under the
    argument, a sentence), else None."""
    if argument not in properties:
        takes = ", ".join(sorted(properties)[:10]) or "none"
        hint = did_you_mean(argument, properties)
        return (), f"the tool takes no argument {quote(argument)}{hint} (its arguments: {takes}); skipped"
    if change.name is not None and change.name != argument and change.name in properties:
        return ("name",), f"the tool has an argument called {quote(change.name)} already; this argument is not changed"
    for key, given, value in (("value", change.fixed, change.value), ("default", change.defaulted, change.default)):
        if given:
            refused = _refused(schema, argument, properties[argument], value)
            if refused is not None:
                return (key,), f"the tool's schema refuses it: {refused}; this argument is not changed"
    return None


def _refused(schema: Mapping[str, Any], argument: str, prop: object, value: object) -> str | None:
    """What the argument's own schema says against ``value`` (definitions kept for ``$ref``)."""
    alone: dict[str, Any] = {key: schema[key] for key in ("$schema", "$defs", "definitions", "$id") if key in schema}
    alone.update({"type": "object", "properties": {argument: prop}})
    problems = problems_once(alone, {argument: value})
    return "; ".join(problems) if problems else None


def _mapper(renames: Mapping[str, str], defaults: Mapping[str, Any], fixed: Mapping[str, Any]) -> Mapper:
    renamed = tuple(renames.items())
    absent = tuple(defaults.items())
    always = tuple(fixed.items())

    def to_upstream(arguments: dict[str, Any] | None) -> dict[str, Any] | None:
        sent = dict(arguments) if arguments else {}
        for model_name, upstream_name in renamed:
            if model_name in sent:
                sent[upstream_name] = sent.pop(model_name)
        for name, value in absent:
            if name not in sent:
                sent[name] = _fresh(value)
        for name, value in always:
            sent[name] = _fresh(value)
        return sent

    return to_upstream


def _fresh(value: Any) -> Any:
    """A copy of a JSON value that the call may keep (a list or object is never shared)."""
    return copy.deepcopy(value) if type(value) in (dict, list) else value
