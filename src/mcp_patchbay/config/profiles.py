"""Profiles: one config file serving several client registrations, each its own share of it.

The file's top-level ``"profiles"`` names some servers (names or fnmatch-style globs) and,
per server, which of their tools, in the shape of an entry's ``tools`` filter::

    "profiles": {
      "coding":  {"servers": ["github", "git*"], "tools": {"github": {"deny": ["delete_*"]}}},
      "writing": {"servers": ["docs", "notion"]}
    }

``mcp-patchbay --profile coding`` (or ``$PATCHBAY_PROFILE``) serves only that profile:
:func:`apply_profile` returns the ``Config`` with only the profile's server entries, each
entry's ``ToolFilter`` narrowed by the profile's (a tool must pass both), and remembers the
profile's name. Everything after the loading (the supervisor, views, search, ``check``) sees
only what the profile exposes, so the other servers are never started; a reload narrows the
new file to the same profile. On the gateway an access rule may name a profile instead of
``servers`` and ``tools`` (:func:`resolve_access_profiles`).

:func:`parse_profiles` reads the object as strictly as the rest of the file: unknown keys
with a "did you mean", a server name the file has no entry for (a glob may match none). Pure:
values in and out.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from collections.abc import Sequence
from typing import Self

from pydantic import ValidationError

from mcp_patchbay.config.gateway import AccessRule, GatewaySettings
from mcp_patchbay.config.jsontext import JsonObject, duplicate_keys
from mcp_patchbay.config.models import Config, Profile, ServerEntry, ToolFilter
from mcp_patchbay.config.problems import ConfigError, ConfigProblem, did_you_mean, key_path, quote, validation_problems

__all__ = [
    "NarrowedFilter",
    "apply_profile",
    "narrow_filter",
    "parse_profiles",
    "resolve_access_profiles",
    "selects",
    "unknown_profile",
]


def _is_glob(name: str) -> bool:
    return any(c in name for c in "*?[")


def selects(profile: Profile, server: str) -> bool:
    """Whether ``profile`` serves the server called ``server`` (case-sensitively, as tool filters match)."""
    return any(fnmatch.fnmatchcase(server, pattern) for pattern in profile.servers)


class NarrowedFilter(ToolFilter, frozen=True):
    """An entry's filter and a profile's that both have an ``allow`` list: a tool must match
    both, which one list of globs cannot say. Never read from the file (no entry takes
    ``within``): only :func:`narrow_filter` makes one."""

    within: ToolFilter = ToolFilter()
    """The second filter a tool must pass too."""

    def permits(self, tool_name: str) -> bool:
        return super().permits(tool_name) and self.within.permits(tool_name)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ToolFilter):
            return NotImplemented
        return super().__eq__(other) and self.within == (other.within if isinstance(other, NarrowedFilter) else None)

    def __hash__(self) -> int:
        return hash((super().__hash__(), self.within))

    @classmethod
    def of(cls, entry: ToolFilter, profile: ToolFilter, deny: tuple[str, ...], always_list: tuple[str, ...]) -> Self:
        within = ToolFilter(allow=profile.allow)
        return cls(allow=entry.allow, deny=deny, always_list=always_list, overrides=entry.overrides, within=within)


def narrow_filter(entry: ToolFilter, profile: ToolFilter | None) -> ToolFilter:
    """The filter a tool must pass to be served: ``entry``'s and ``profile``'s both. Denied by
    either is denied; listed whole in search mode (``always_list``) by either is listed. The
    entry's ``overrides`` are kept (a profile has none: ``parse_profiles`` refuses them)."""
    if profile is None or profile == ToolFilter():
        return entry
    deny = tuple(dict.fromkeys((*entry.deny, *profile.deny)))
    always_list = tuple(dict.fromkeys((*entry.always_list, *profile.always_list)))
    if entry.allow is not None and profile.allow is not None:
        return NarrowedFilter.of(entry, profile, deny, always_list)
    allow = entry.allow if profile.allow is None else profile.allow
    return ToolFilter(allow=allow, deny=deny, always_list=always_list, overrides=entry.overrides)


def unknown_profile(name: str, names: Sequence[str]) -> str:
    """What the user is told of a profile the file does not have."""
    if not names:
        return f"unknown profile {quote(name)}: the file has no 'profiles'"
    return f"unknown profile {quote(name)}{did_you_mean(name, names)}; the file's profiles: {', '.join(names)}"


def _narrowed(entry: ServerEntry, profile: Profile) -> ServerEntry:
    spec = entry.spec
    if spec is None:
        return entry
    tools = narrow_filter(spec.tools, profile.tools.get(entry.name))
    return entry if tools is spec.tools else dataclasses.replace(entry, spec=spec.model_copy(update={"tools": tools}))


def apply_profile(config: Config, name: str) -> Config:
    """``config`` narrowed to its profile ``name``: only that profile's server entries, in file
    order, each one's tool filter narrowed by the profile's. Raises ConfigError (key
    ``profiles``) for a profile the file does not have."""
    if config.profile is not None:
        raise ValueError(f"the config is narrowed to profile {config.profile!r} already")
    profile = config.profile_named(name)
    if profile is None:
        raise ConfigError(config.path, "profiles", unknown_profile(name, [key for key, _ in config.profiles]))
    servers = tuple(_narrowed(entry, profile) for entry in config.servers if selects(profile, entry.name))
    return dataclasses.replace(config, servers=servers, profile=name)


def parse_profiles(
    data: JsonObject, server_names: Sequence[str], fatal: list[ConfigProblem]
) -> tuple[tuple[str, Profile], ...]:
    """The file's ``"profiles"`` object (none when absent); its mistakes are added to ``fatal``."""
    if "profiles" not in data:
        return ()
    raw = data["profiles"]
    if not isinstance(raw, JsonObject):
        fatal.append(ConfigProblem("profiles", "expected an object mapping profile names to profiles"))
        return ()
    fatal.extend(
        ConfigProblem(key_path("profiles", name), f"profile {quote(name)} given more than once")
        for name in raw.duplicates
    )
    profiles: list[tuple[str, Profile]] = []
    for name, value in raw.items():
        profile = _profile(name, value, server_names, fatal)
        if profile is not None:
            profiles.append((name, profile))
    return tuple(profiles)


def _profile(name: str, value: object, server_names: Sequence[str], fatal: list[ConfigProblem]) -> Profile | None:
    prefix = ("profiles", name)
    if not name:
        fatal.append(ConfigProblem("profiles", "profile name must not be empty"))
        return None
    if not isinstance(value, JsonObject):
        fatal.append(ConfigProblem(key_path(*prefix), 'expected an object, like {"servers": ["github"]}'))
        return None
    fatal.extend(duplicate_keys(value, prefix))
    tools = value.get("tools")
    filter_keys = tuple(ToolFilter.model_fields)
    keys_for = {server: filter_keys for server in tools} if isinstance(tools, JsonObject) else {}
    try:
        profile = Profile.model_validate(dict(value))
    except ValidationError as exc:
        fatal.extend(validation_problems(exc, prefix, keys_for, tuple(Profile.model_fields)))
        return None
    problems: list[ConfigProblem] = []
    if not profile.servers:
        problems.append(ConfigProblem(key_path(*prefix, "servers"), "name at least one server (or '*')"))
    for index, server in enumerate(profile.servers):
        if not _is_glob(server) and server not in server_names:
            problems.append(ConfigProblem(key_path(*prefix, "servers", index), _no_server(server, server_names)))
    for server, tools in profile.tools.items():
        where = key_path(*prefix, "tools", server)
        if tools.overrides:
            problems.append(
                ConfigProblem(
                    key_path(*prefix, "tools", server, "overrides"),
                    "overrides belong to the server's entry (its 'tools': {\"overrides\": ...}), where every "
                    "profile gets them; a profile only chooses servers and tools",
                )
            )
        if server not in server_names:
            problems.append(ConfigProblem(where, _no_server(server, server_names)))
        elif not selects(profile, server):
            problems.append(
                ConfigProblem(where, f"server {quote(server)} is not among the profile's 'servers': add it there")
            )
    fatal.extend(problems)
    return None if problems else profile


def _no_server(server: str, server_names: Sequence[str]) -> str:
    return f"no server {quote(server)} in the file{did_you_mean(server, server_names)}"


def resolve_access_profiles(
    gateway: GatewaySettings | None, profiles: tuple[tuple[str, Profile], ...], fatal: list[ConfigProblem]
) -> GatewaySettings | None:
    """``gateway`` with each access rule that names a ``profile`` granting that profile's servers
    and tools (``gateway.access`` then reads like any rule); an unknown one is added to ``fatal``."""
    if gateway is None or not any(rule.profile is not None for rule in gateway.access or ()):
        return gateway
    by_name = dict(profiles)
    rules: list[AccessRule] = []
    for index, rule in enumerate(gateway.access or ()):
        if rule.profile is None:
            rules.append(rule)
        elif (profile := by_name.get(rule.profile)) is not None:
            rules.append(rule.model_copy(update={"servers": profile.servers, "tools": dict(profile.tools)}))
        else:
            where = key_path("gateway", "access", index, "profile")
            fatal.append(ConfigProblem(where, unknown_profile(rule.profile, list(by_name))))
    return gateway.model_copy(update={"access": tuple(rules)})
