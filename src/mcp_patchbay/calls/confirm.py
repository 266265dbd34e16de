"""``patchbay.confirm``: the user is asked before ``call_tool`` runs a tool that may change things.

The ``confirmed`` step asks (``confirm``) for a name that came as a call route's argument; a declined
or cancelled question is ``USER_DECLINED`` and nothing is sent.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable
from typing import Any

import mcp_types as types

from mcp_patchbay.calls.policies import RawResult
from mcp_patchbay.calls.steps import CallState, Step
from mcp_patchbay.catalog.merge import CatalogTool
from mcp_patchbay.config import Settings
from mcp_patchbay.errors.tree import ClientError, Code
from mcp_patchbay.session.requests_back import SessionChannel

logger = logging.getLogger(__name__)


async def confirm(channel: SessionChannel, target: CatalogTool, arguments: dict[str, Any] | None) -> None:
    """``patchbay.confirm``: a call through ``call_tool`` to a tool that does not say it only
    reads asks the user first, through the client (elicitation; where it cannot ask, the
    client's own approval of ``call_tool`` stands). Declined or cancelled: USER_DECLINED."""
    annotations = target.definition.annotations
    if annotations is not None and annotations.read_only_hint is True:
        return
    shown = json.dumps(arguments or {}, ensure_ascii=False)
    shown = shown if len(shown) <= 300 else shown[:299] + "…"
    params = types.ElicitRequestFormParams(
        message=f"Run {target.exposed} (server '{target.server}') with {shown}? It may change things.",
        requested_schema={"type": "object", "properties": {}},
    )
    answer = await channel.elicit(target.server, params)
    if isinstance(answer, types.ErrorData):
        logger.info("confirm: the client cannot ask its user (%s); %s runs", answer.message, target.exposed)
        return
    if answer.action != "accept":
        raise ClientError(
            Code.USER_DECLINED,
            f"The user did not approve running '{target.exposed}', so it was not run. Ask the user what to do "
            "instead; do not retry it unasked.",
            server=target.server,
            tool=target.upstream_name,
        )


def confirmed(inner: Step, channel: SessionChannel, settings: Settings) -> Step:
    """With ``patchbay.confirm``, a call route's call is run once the user approves it (``confirm``)."""

    async def asked(state: CallState) -> RawResult:
        assert state.target is not None
        await confirm(channel, state.target, state.arguments)
        return await inner(state)

    def step(state: CallState) -> Awaitable[RawResult]:
        if state.named_as_data and settings.confirm:
            return asked(state)
        return inner(state)

    return step


__all__ = ["confirm", "confirmed"]
