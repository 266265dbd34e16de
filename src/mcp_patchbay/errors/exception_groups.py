"""The leaf of an exception group that says what happened: ``most_telling``, the one rule.

Transports and task groups raise groups; ``errors.foreign`` translates the leaf this picks, and a
sign-in's failure is worded from it. Pure.
"""

from __future__ import annotations

import asyncio
from typing import cast

import anyio
import httpx2
from mcp.client.auth.exceptions import OAuthFlowError
from mcp.shared.exceptions import MCPError

from mcp_patchbay.errors.tree import PatchbayError

__all__ = ["leaves", "most_telling"]


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions at the leaves of (nested) ExceptionGroups, in order; ``exc`` itself if not a group."""
    if not isinstance(exc, BaseExceptionGroup):
        return [exc]
    found: list[BaseException] = []
    for inner in cast("BaseExceptionGroup[BaseException]", exc).exceptions:
        found.extend(leaves(inner))
    return found


_TELLING: tuple[type[BaseException], ...] = (
    PatchbayError,
    OAuthFlowError,
    httpx2.HTTPStatusError,
    MCPError,
    httpx2.HTTPError,
    OSError,  # TimeoutError and ConnectionError among them
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
    anyio.EndOfStream,
)
"""The kinds of leaf that say what happened, most telling first (``most_telling``)."""


def most_telling(exc: BaseException) -> BaseException:
    """The one rule for the leaf of (nested) ExceptionGroups that says what happened: of the leaves
    not cancelled (asyncio's: the proxy runs on it), the first of the most telling kind, else the first."""
    if not isinstance(exc, BaseExceptionGroup):
        return exc
    group = cast("BaseExceptionGroup[BaseException]", exc)
    found = [leaf for leaf in leaves(group) if not isinstance(leaf, asyncio.CancelledError)]
    for kind in _TELLING:
        for leaf in found:
            if isinstance(leaf, kind):
                return leaf
    return found[0] if found else group
