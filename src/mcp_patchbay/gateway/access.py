"""Who sees what behind the gateway: ``AccessPolicy`` turns a caller's token into an ``Access``.

The config's ``access`` list (``config.gateway.AccessRule``) names, per rule, whom it is
for (static ``tokens`` by name, or a JWT ``claim`` with some ``values``) and what they may
use (``servers``, names or globs; per server, a ``tools`` filter; or a ``profile``, whose
servers and tools loading has already put in the rule, ``config.profiles``). A caller gets the union
of every rule that matches it: a tool is usable if any matching rule permits it. With an
``access`` list, a caller no rule matches sees nothing; without one, every admitted
caller sees everything (``EVERYTHING``).

A static token is an ``AccessToken`` without ``claims`` (its ``client_id`` is the token's
name, ``tokens.PatchbayToken``); a JWT carries its claims. ``Access`` is a value (frozen,
hashable, equal when it grants the same things), so a catalog view can be cached by
``Access.key`` and shared by every caller with the same grants.

Pure: values in and out, no I/O.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, cast

from mcp.server.auth.provider import AccessToken

from mcp_patchbay.config.gateway import AccessRule, GatewaySettings
from mcp_patchbay.config.models import ToolFilter

__all__ = ["EVERYTHING", "NOTHING", "Access", "AccessPolicy", "Grant"]

CACHE_SIZE = 4096
"""Distinct callers (token names, or combinations of the claim values rules look at) remembered."""


def _server_pattern(names: tuple[str, ...]) -> re.Pattern[str] | None:
    if not names:
        return None
    return re.compile("|".join(f"(?:{fnmatch.translate(name)})" for name in names))


@dataclass(frozen=True, slots=True)
class Grant:
    """What one rule permits: ``servers`` (names or globs) and, per server, a tool filter."""

    servers: tuple[str, ...]
    tools: tuple[tuple[str, ToolFilter], ...] = ()
    _pattern: re.Pattern[str] | None = field(default=None, init=False, compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_pattern", _server_pattern(self.servers))

    @classmethod
    def of(cls, rule: AccessRule) -> Grant:
        return cls(servers=rule.servers, tools=tuple(sorted(rule.tools.items())))

    def permits_server(self, server: str) -> bool:
        return self._pattern is not None and self._pattern.fullmatch(server) is not None

    def permits(self, server: str, tool: str) -> bool:
        if not self.permits_server(server):
            return False
        # A server granted without a ``tools`` entry is granted whole; a ``tools`` entry for a
        # server the rule does not grant grants nothing (it only ever narrows).
        return all(tool_filter.permits(tool) for name, tool_filter in self.tools if name == server)


@dataclass(frozen=True, slots=True)
class Access:
    """What one caller may use: the union of ``grants``, or ``everything``."""

    grants: frozenset[Grant] = frozenset()
    everything: bool = False

    @property
    def key(self) -> Hashable:
        """Equal for two accesses that permit the same things by the same rules: a cache key."""
        return (self.everything, self.grants)

    def permits_server(self, server: str) -> bool:
        """Whether the caller may use ``server`` at all (its resources, prompts, some tool)."""
        return self.everything or any(grant.permits_server(server) for grant in self.grants)

    def permits(self, server: str, upstream_tool: str) -> bool:
        """Whether the caller may list and call ``server``'s tool ``upstream_tool``."""
        return self.everything or any(grant.permits(server, upstream_tool) for grant in self.grants)


EVERYTHING = Access(everything=True)
"""No ``access`` list: every admitted caller uses every server and tool."""

NOTHING = Access()
"""An ``access`` list no rule of which matches the caller."""


def _claim(claims: Mapping[str, Any], name: str) -> object:
    """A claim by name; a dotted name (``realm_access.roles``) walks nested objects when no
    claim has the whole name."""
    if name in claims:
        return claims[name]
    value: object = claims
    for part in name.split("."):
        if not isinstance(value, Mapping):
            return None
        value = cast("Mapping[str, object]", value).get(part)
    return value


def _claim_values(claims: Mapping[str, Any], name: str) -> frozenset[str]:
    """A claim's strings: a string (split on spaces for ``scope``), or a list's strings."""
    value = _claim(claims, name)
    if isinstance(value, str):
        return frozenset(value.split()) if name == "scope" else frozenset((value,))
    if isinstance(value, list | tuple):
        return frozenset(item for item in value if isinstance(item, str))  # pyright: ignore[reportUnknownVariableType]
    return frozenset()


class AccessPolicy:
    """The ``access`` rules of a ``gateway`` object, applied to callers' tokens."""

    def __init__(self, settings: GatewaySettings | None) -> None:
        self.rules: tuple[AccessRule, ...] | None = settings.access if settings is not None else None
        self._grants = tuple(Grant.of(rule) for rule in self.rules or ())
        self._claim_names = tuple(dict.fromkeys(rule.claim for rule in self.rules or () if rule.claim is not None))
        self._lookup = lru_cache(maxsize=CACHE_SIZE)(self._resolve)

    def for_token(self, token: AccessToken | None) -> Access:
        """What the caller holding ``token`` may use (``None``: no sign-in, loopback only)."""
        if self.rules is None:
            return EVERYTHING
        if token is None:
            return NOTHING
        if token.claims is None:
            return self._lookup(token.client_id, ())
        # Only the claims rules look at make two callers differ, so they are the key.
        return self._lookup(None, tuple(_claim_values(token.claims, name) for name in self._claim_names))

    def is_admin(self, token: AccessToken | None) -> bool:
        """Whether a rule with ``"admin": true`` matches the caller holding ``token`` (the ``/ui`` page's)."""
        if token is None or not self.rules:
            return False
        values = {name: _claim_values(token.claims, name) for name in self._claim_names} if token.claims else {}
        return any(
            rule.admin
            and (
                (token.claims is None and token.client_id in rule.tokens)
                or (rule.claim is not None and not values.get(rule.claim, frozenset()).isdisjoint(rule.values))
            )
            for rule in self.rules
        )

    def _resolve(self, token_name: str | None, claim_values: tuple[frozenset[str], ...]) -> Access:
        values = dict(zip(self._claim_names, claim_values, strict=False))  # empty for a static token
        matched = [
            grant
            for rule, grant in zip(self.rules or (), self._grants, strict=True)
            if (token_name is not None and token_name in rule.tokens)
            or (rule.claim is not None and not values.get(rule.claim, frozenset()).isdisjoint(rule.values))
        ]
        return Access(grants=frozenset(matched)) if matched else NOTHING
