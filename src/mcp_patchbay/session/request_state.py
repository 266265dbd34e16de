"""How a suspended call's ``requestState`` is sealed, and what a client whose state was refused hears.

The SDK's ``RequestStateBoundary`` seals the ``requestState`` of an ``input_required``
answer (``rounds``) on the way out and opens it on the way back in, before any handler
runs. This module gives it its keys (``state_security``: the gateway's
``request_state_keys``, else ``$PATCHBAY_STATE_KEY`` on stdio, else a key made at start)
and answers a call whose state it refused as every failed call is answered, with an
``isError`` result (``refused_state_as_result``, server middleware outside the boundary).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.request_state import RequestStateSecurity
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from mcp_patchbay.config.withheld import STATE_KEY_ENV  # withheld from every upstream, as the config's secrets are
from mcp_patchbay.errors.tree import result_values
from mcp_patchbay.session.rounds import expired

logger = logging.getLogger(__name__)

AUDIENCE = "mcp-patchbay"
"""The audience sealed into every ``requestState``: state minted by another service that
shares the key is refused."""


def state_security(keys: Sequence[str], *, environ: Mapping[str, str] | None = None) -> RequestStateSecurity:
    """How ``requestState`` is sealed: ``keys`` (the gateway's config), else ``$PATCHBAY_STATE_KEY``
    when ``environ`` is given (stdio), else a key made now, good for this process only."""
    where = "gateway.request_state_keys"
    if not keys and environ is not None and environ.get(STATE_KEY_ENV):
        keys, where = [environ[STATE_KEY_ENV]], STATE_KEY_ENV
    if keys:
        try:
            return RequestStateSecurity(keys=list(keys), audience=AUDIENCE)
        except (ValueError, TypeError) as exc:
            logger.error("%s cannot seal requestState (%s); using a key made at start instead", where, exc)
    else:
        logger.info(
            "requestState (2026-07-28 clients answering an upstream mid-call) is sealed with a key made at start; "
            "set %s to share one",
            where if environ is None else STATE_KEY_ENV,
        )
    return RequestStateSecurity(keys=[os.urandom(32)], audience=AUDIENCE)


async def refused_state_as_result(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Server middleware, outside the boundary: a ``tools/call`` whose ``requestState`` the
    boundary refused (forged, expired, another key) is answered as an ``isError`` result the
    model can act on, as every other failed call is; the boundary logs the reason."""
    if ctx.method != "tools/call":
        return await call_next(ctx)
    try:
        return await call_next(ctx)
    except MCPError as exc:
        if exc.code != types.INVALID_PARAMS or exc.data != {"reason": "invalid_request_state"}:
            raise
    result = result_values(expired())
    if ctx.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
        result["resultType"] = "complete"
    return result


__all__ = ["AUDIENCE", "STATE_KEY_ENV", "refused_state_as_result", "state_security"]
