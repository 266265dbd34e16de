"""Credentials cut out of text meant for a log: ``redact``.

Every log line goes through it (``cli``'s formatter), as do the upstreams' stderr lines and
the details of failed sign-ins. Values known to be secret wherever they appear (those a
config's ``${secret:NAME}`` resolved to) are registered with ``remember`` and cut from every
line after that. Standard library only: the formatter may run before anything else is imported.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_SECRET_PATTERNS = re.compile(
    r"(?i)(bearer\s+|token[=:]\s*|api[_-]?key[=:]\s*|password[=:]\s*|secret[=:]\s*|authorization[=:]\s*)(\S+)"
)


_QUOTED_SECRETS = re.compile(
    r"""(?i)(["']?(?:access_token|refresh_token|id_token|client_secret|code_verifier|code|password|api_key)"""
    r"""["']?\s*[:=]\s*["'])([^"']+)"""
)
"""The same in JSON, Python reprs and form bodies (an OAuth server's answer quoted in an error)."""

MIN_LENGTH = 4
"""Shorter values are not cut out: they would mangle ordinary words."""

_REMEMBERED: list[str] = []
"""Secret values this process holds (the keyring's, through ``${secret:NAME}``), longest first."""


def remember(secret: str) -> None:
    """Cut ``secret`` from every line ``redact`` sees from now on (for the life of the process)."""
    if len(secret) >= MIN_LENGTH and secret not in _REMEMBERED:
        _REMEMBERED.append(secret)
        _REMEMBERED.sort(key=len, reverse=True)  # a secret containing another is cut whole


def redact(text: str, secrets: Sequence[str] = ()) -> str:
    """Remove credentials from text meant for a log: known values and obvious key=value forms."""
    for secret in (*secrets, *_REMEMBERED) if _REMEMBERED else secrets:
        if len(secret) >= MIN_LENGTH:
            text = text.replace(secret, "***")
    return _QUOTED_SECRETS.sub(r"\1***", _SECRET_PATTERNS.sub(r"\1***", text))


__all__ = ["redact", "remember"]
