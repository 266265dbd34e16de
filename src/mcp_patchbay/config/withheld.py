"""What the proxy holds in its environment for its own use, which no stdio upstream inherits.

A stdio upstream gets the proxy's environment less these (``spawn.child_environment``):

- every variable a ``${VAR}`` of the ``"gateway"`` object reads (its tokens, its
  ``request_state_keys``): with them any upstream could call the gateway as any member;
- every variable read by an entry's ``oauth.client_secret``, and by a remote entry's ``url``
  and ``headers``: that server's credentials, not the other servers';
- :data:`OWN_NAMES`, which the proxy reads by name (``$PATCHBAY_STATE_KEY``);
- under any other name, a variable whose value is one of those secrets (at least
  :data:`MIN_SECRET_LENGTH` characters): a copy of a token is the token.

An entry that names a variable gets it all the same: a key of its ``env``, or a ``${VAR}`` in
its ``command``, ``args``, ``env`` or ``cwd`` (``asked``). Everything else the proxy was given
still reaches every stdio upstream (``PATH``, proxies, a server's own token set for the proxy).

Computed from the file's JSON as read, before validation, so the config check (``loading``)
and the start before it (``early_start.early``) withhold the same names. The standard library only:
``early_start.early`` runs before pydantic is imported.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Final, cast

from mcp_patchbay.config.keys import SHAPES

__all__ = ["MIN_SECRET_LENGTH", "OWN_NAMES", "STATE_KEY_ENV", "VARIABLE", "Held", "asked", "held", "withheld"]

VARIABLE: Final = re.compile(
    r"\$\{(?:secret:(?P<secret>[^}]*)|(?:env:)?(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?)\}"
)
"""``${VAR}``, ``${VAR:-default}``, ``${env:VAR}`` and ``${secret:NAME}`` (``variables`` expands them)."""

STATE_KEY_ENV: Final = "PATCHBAY_STATE_KEY"
"""The environment variable holding the stdio proxy's request-state key (``session.request_state``)."""

OWN_NAMES: Final = frozenset({STATE_KEY_ENV})
"""Secrets the proxy reads from its environment by name, whatever the config says."""

MIN_SECRET_LENGTH: Final = 8
"""A shorter value is not compared with the environment's: it would match ordinary values."""


@dataclass(frozen=True)
class Held:
    """The names the proxy reads for its own use, and the secret values they and the file hold."""

    names: frozenset[str]
    values: frozenset[str]
    complete: bool = True
    """False when a ``${secret:NAME}`` is among them: its value is known only once the keyring is read."""

    def with_values(self, values: set[str]) -> Held:
        """The same, knowing these values too (the config check's, keyring secrets included)."""
        known = {value for value in values if len(value) >= MIN_SECRET_LENGTH}
        return Held(self.names, self.values | known, complete=True)


def _object(value: object) -> dict[str, object]:
    return cast("dict[str, object]", value) if isinstance(value, dict) else {}


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in cast("dict[str, object]", value).values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in cast("list[object]", value):
            yield from _strings(item)


def _entries(data: Mapping[str, object]) -> Iterator[dict[str, object]]:
    for shape in SHAPES:
        for entry in _object(data.get(shape)).values():
            if isinstance(entry, dict):
                yield cast("dict[str, object]", entry)


def _places(data: Mapping[str, object]) -> Iterator[tuple[object, bool]]:
    """Every value the proxy reads for itself, and whether it is a secret (its values are looked for
    under other names too)."""
    gateway = _object(data.get("gateway"))
    yield gateway, False
    yield list(_object(gateway.get("tokens")).values()), True
    yield gateway.get("request_state_keys"), True
    for entry in _entries(data):
        yield entry.get("url"), False
        yield list(_object(entry.get("headers")).values()), True
        yield _object(entry.get("oauth")).get("client_secret"), True


def _expand(text: str, environ: Mapping[str, str]) -> tuple[str | None, list[str], set[str]]:
    """``text`` expanded as ``variables.expand`` would (None when a keyring secret is in it: unknown
    here), the values put in, and the variables' names."""
    parts: list[str] = []
    names: set[str] = set()
    whole: list[str] = []
    end = 0
    for match in VARIABLE.finditer(text):
        whole.append(text[end : match.start()])
        end = match.end()
        name, default = match.group("name"), match.group("default")
        if name is None:  # ${secret:NAME}
            whole.append(match.group(0))
            continue
        names.add(name)
        got = environ.get(name)
        got = default if default is not None and not got else (got or "")
        parts.append(got)
        whole.append(got)
    whole.append(text[end:])
    return (None if "${secret:" in text else "".join(whole)), parts, names


def held(data: Mapping[str, object], environ: Mapping[str, str]) -> Held:
    """What the config file ``data`` (its JSON, not validated) has the proxy hold, with ``environ``'s values."""
    names: set[str] = set(OWN_NAMES)
    values: set[str] = {environ[name] for name in OWN_NAMES if name in environ}
    complete = True
    for value, secret in _places(data):
        for text in _strings(value):
            whole, parts, read = _expand(text, environ)
            names.update(read)
            if secret:  # the gateway's url or a server's host are no secrets to look for elsewhere
                values.update(parts)
                if whole is None:
                    complete = False
                else:
                    values.add(whole)
    long_enough = frozenset(value for value in values if len(value) >= MIN_SECRET_LENGTH)
    return Held(frozenset(names), long_enough, complete)


def asked(entry: object) -> frozenset[str]:
    """The variables a stdio entry names: the keys of its ``env``, and each ``${VAR}`` in its
    ``command``, ``args``, ``env`` values or ``cwd``."""
    fields = _object(entry)
    env = _object(fields.get("env"))
    texts = [fields.get("command"), fields.get("args"), fields.get("cwd"), list(env.values())]
    named = {match.group("name") for text in _strings(texts) for match in VARIABLE.finditer(text)}
    return frozenset(env) | {name for name in named if name is not None}


def withheld(environ: Mapping[str, str], holding: Held, named: frozenset[str]) -> frozenset[str]:
    """The names a stdio entry naming ``named`` (``asked``) does not inherit: those the proxy holds,
    and those of ``environ`` holding one of its secrets' values."""
    copies = {name for name, value in environ.items() if value in holding.values}
    return frozenset((holding.names | copies) - named)
