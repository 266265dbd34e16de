"""Values in the clients' entries that look like secrets, and the ``${secret:NAME}`` left in their place.

``import`` offers to move them into the OS keyring (``cli.importing``). What looks like a secret:

- an ``env`` value whose key names one (a word ``TOKEN``, ``KEY``, ``SECRET``, ``PASSWORD``,
  ``PASSWD``, ``PAT``, ``CREDENTIAL(S)``, ``APIKEY``, or a word ending in ``TOKEN``, ``KEY`` or
  ``SECRET``; not when another word says it is a file, path, folder, address or id), unless the
  value is short, a path, an address or a number;
- a header's value when the header names one (``Authorization``, ``Proxy-Authorization``,
  ``X-Api-Key``, anything with ``token``, ``key``, ``secret`` or ``auth`` in its name): the part
  after ``Bearer ``/``Basic ``/``token `` if it has one;
- an ``oauth.client_secret`` (Claude Code's and Gemini CLI's ``clientSecret``);
- anywhere in ``env`` values, header values and ``args``: a known token's shape (GitHub's
  ``ghp_``/``github_pat_``, OpenAI's and Anthropic's ``sk-``, Slack's ``xoxb-``, GitLab's
  ``glpat-``, AWS access key ids, Google API keys, npm, PyPI, Hugging Face, Stripe, Linear and
  Shopify tokens, JWTs): the token itself is moved, the rest of the text stays.

A value that already holds a ``${...}`` reference is left alone. Each secret is named
``SERVER.KEY`` (``github.GITHUB_TOKEN``, ``docs.Authorization``, ``search.arg2``); the same value
found twice gets one name. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final, cast

__all__ = ["Candidate", "find", "put_references"]

_KEY_WORDS: Final = frozenset({"TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "PAT", "CREDENTIAL", "CREDENTIALS"})
_KEY_ENDINGS: Final = ("TOKEN", "KEY", "SECRET", "PASSWORD")
_NOT_SECRET_WORDS: Final = frozenset({"FILE", "PATH", "DIR", "URL", "URI", "ID", "NAME", "HOST", "PORT", "TYPE"})
_HEADER_WORDS: Final = ("authorization", "token", "key", "secret", "auth")
_SCHEME: Final = re.compile(r"(?i)^(bearer|basic|token|apikey)\s+")
_TOKEN_SHAPES: Final = re.compile(
    r"(?<![A-Za-z0-9_-])(?:"
    r"gh[pousr]_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}"
    r"|sk-[A-Za-z0-9_-]{20,}"
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"
    r"|xapp-[A-Za-z0-9-]{10,}"
    r"|glpat-[A-Za-z0-9_-]{20,}"
    r"|AKIA[0-9A-Z]{16}"
    r"|AIza[0-9A-Za-z_-]{35}"
    r"|npm_[A-Za-z0-9]{36}"
    r"|pypi-[A-Za-z0-9_-]{50,}"
    r"|hf_[A-Za-z0-9]{30,}"
    r"|[sr]k_(?:live|test)_[A-Za-z0-9]{20,}"
    r"|lin_api_[A-Za-z0-9]{30,}"
    r"|shp(?:at|ss|ca)_[a-fA-F0-9]{32}"
    r"|eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*"
    r")"
)
_MIN_SECRET = 6
"""A value shorter than this under a secret-sounding key is a setting ("true", "0"), not a secret."""
_NAME_CHARACTERS: Final = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class Candidate:
    """One value that looks like a secret, where it is, and the secret it would become."""

    server: str
    place: tuple[str, str | int]
    """``("env", KEY)``, ``("headers", NAME)``, ``("oauth", "client_secret")`` or ``("args", INDEX)``."""
    value: str
    """The secret itself: the part of the text that is moved."""
    name: str
    """The secret's name: the config will say ``${secret:NAME}``."""
    why: str
    """Why it looks like one, for people."""

    @property
    def where(self) -> str:
        """``github env GITHUB_TOKEN``, for people."""
        kind, key = self.place
        return f"{self.server} {kind} {key}" if kind != "args" else f"{self.server} args[{key}]"

    @property
    def reference(self) -> str:
        return f"${{secret:{self.name}}}"


def _key_names_a_secret(key: str) -> bool:
    words = [w for w in re.split(r"[^A-Za-z0-9]+", key.upper()) if w]
    if any(w in _NOT_SECRET_WORDS for w in words):
        return False
    return any(w in _KEY_WORDS or w.endswith(_KEY_ENDINGS) for w in words)


def _plain_setting(value: str) -> bool:
    """A value that is not a secret whatever its key says: short, a path, an address, a number."""
    text = value.strip()
    return (
        len(text) < _MIN_SECRET
        or text.startswith(("/", "~", "./", "../", "\\\\"))
        or re.match(r"[A-Za-z]:[\\/]", text) is not None
        or "://" in text
        or text.replace(".", "", 1).isdigit()
        or text.lower() in ("true", "false", "none", "null")
    )


def _header_names_a_secret(header: str) -> bool:
    lowered = header.lower()
    return any(word in lowered for word in _HEADER_WORDS)


def _secret_name(server: str, key: str | int) -> str:
    base = _NAME_CHARACTERS.sub("-", f"{server}.{key if isinstance(key, str) else f'arg{key}'}").strip("-.")
    if not base or not (base[0].isalnum() or base[0] == "_"):
        base = f"s{base}"
    return base[:128]


# Long on purpose: one branch per place a client keeps a secret in an entry.
def _found(server: str, entry: dict[str, Any]) -> Iterable[tuple[tuple[str, str | int], str, str]]:  # noqa: PLR0912
    """(place, secret value, why) for each value of one entry that looks like a secret."""
    for kind in ("env", "headers"):
        mapping = entry.get(kind)
        if not isinstance(mapping, dict):
            continue
        for key, text in cast("dict[str, object]", mapping).items():
            if not isinstance(text, str) or "${" in text:
                continue
            if kind == "env" and _key_names_a_secret(key) and not _plain_setting(text):
                yield (kind, key), text, "its name says it holds a secret"
                continue
            if kind == "headers" and _header_names_a_secret(key):
                value = _SCHEME.sub("", text.strip())
                if len(value) >= _MIN_SECRET:
                    yield (kind, key), value, "the header carries a credential"
                    continue
            for match in _TOKEN_SHAPES.finditer(text):
                yield (kind, key), match.group(0), "it has a known token's shape"
    oauth = entry.get("oauth")
    if isinstance(oauth, dict):
        secret = cast("dict[str, object]", oauth).get("client_secret")
        if isinstance(secret, str) and secret and "${" not in secret:
            yield ("oauth", "client_secret"), secret, "an OAuth client's secret"
    args = entry.get("args")
    if isinstance(args, list):
        for index, text in enumerate(cast("list[object]", args)):
            if isinstance(text, str) and "${" not in text:
                for match in _TOKEN_SHAPES.finditer(text):
                    yield ("args", index), match.group(0), "it has a known token's shape"


def find(servers: Iterable[tuple[str, dict[str, Any]]]) -> list[Candidate]:
    """Every value of these (name, entry) pairs that looks like a secret, each with its secret's name."""
    found: list[Candidate] = []
    names_by_value: dict[str, str] = {}
    taken: set[str] = set()
    for server, entry in servers:
        for place, value, why in _found(server, entry):
            name = names_by_value.get(value)
            if name is None:
                name = base = _secret_name(server, place[1])
                n = 1
                while name in taken:
                    n += 1
                    name = f"{base}-{n}"
                taken.add(name)
                names_by_value[value] = name
            found.append(Candidate(server, place, value, name, why))
    return found


def put_references(entry: dict[str, Any], candidates: Iterable[Candidate], replacement: str | None = None) -> None:
    """Replace, in ``entry`` (in place), each candidate's value by its ``${secret:NAME}`` (or by
    ``replacement``: ``***`` where a value must not be shown)."""
    for candidate in candidates:
        kind, key = candidate.place
        holder = cast("dict[str | int, str]", entry[kind]) if kind != "args" else None
        if holder is None:
            items = cast("list[str]", entry[kind])
            items[cast("int", key)] = items[cast("int", key)].replace(
                candidate.value, replacement or candidate.reference
            )
        else:
            holder[key] = holder[key].replace(candidate.value, replacement or candidate.reference)
