"""Whose tool call in flight a request from an upstream belongs to.

An upstream's request (sampling, elicitation, roots) names no call, so it goes to the call to
that server in flight (``caller_among``): on the gateway one session's, or one member's
calls with all but one suspended on a question already out; otherwise it is refused, and the
refusal excuses the calls' failures from the server's circuit breaker. On stdio every call is
the one client's. ``session.requests_back`` keeps the calls in flight and asks ``caller_among``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext

from mcp_patchbay.session.rounds import Exchange
from mcp_patchbay.session.sdk import connection_of

logger = logging.getLogger(__name__)


@dataclass(eq=False, slots=True)
class InFlight:
    """A client request with a tool call to some server in flight."""

    ctx: ServerRequestContext[Any, Any]
    exchange: Exchange | None
    """Its exchange when its client speaks 2026-07-28 and can answer (``rounds``)."""
    member: str | None = None
    """Who signed in to the gateway for it (the token's name or the JWT's identity), if anyone."""
    refused: bool = False
    """The proxy refused a request the server made meanwhile that may be this call's: a failure of
    the call is then not the server's own (its circuit breaker does not count it)."""

    @property
    def caller(self) -> object:
        """Who a question would be put to: the 2025 session, or the 2026 call itself."""
        return self.exchange if self.exchange is not None else connection_of(self.ctx.session)

    @property
    def connection(self) -> Connection:
        """The client session of its request."""
        return connection_of(self.ctx.session)

    @property
    def waiting(self) -> bool:
        return self.exchange is not None and self.exchange.waiting


def caller_among(calls: list[InFlight], server: str, what: str, *, shared: bool) -> InFlight | types.ErrorData:
    """Which of ``calls`` (those in flight to ``server``, oldest first) a request from ``server``
    (``what``) belongs to, or the error that refuses it. ``shared``: the gateway's many clients."""
    if not calls:
        logger.info("'%s' sent %s outside of any tool call: refused (no client to ask)", server, what)
        return types.ErrorData(code=types.INVALID_REQUEST, message=f"{what} is only answered during a tool call.")
    latest = {call.caller: call for call in calls}
    if len(latest) == 1:
        return calls[-1]
    # A call whose question is out waits for its answer: the new question is likely another
    # call's. Likely, not surely (one call may ask two questions at once), so on the gateway
    # only among one member's calls: a question never goes to another member on a guess.
    free = [call for call in latest.values() if not call.waiting]
    one_member = len({call.member for call in latest.values()}) == 1
    if len(free) == 1 and (one_member or not shared):
        return free[0]
    if not shared:  # on stdio every call is the one client's: any of them may carry it
        return (free or calls)[-1]
    for call in calls:
        call.refused = True
    logger.warning(
        "'%s' sent %s while calls from %d clients were in flight to it: refused, it cannot be told whose",
        server,
        what,
        len(latest),
    )
    return types.ErrorData(
        code=types.INVALID_REQUEST,
        message=f"{what} cannot be routed: several clients have calls in flight to this server.",
    )


__all__ = ["InFlight", "caller_among"]
