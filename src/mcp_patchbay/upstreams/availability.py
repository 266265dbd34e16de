"""An upstream's state, and what it says while it cannot serve: the reason the status shows,
the error a call meets (``unavailable_error``), and the ``sign_in`` tool listed in place of
the tools of a server that waits for a sign-in. Pure: values in, values out; the connection's
life that moves the state is ``upstream``'s."""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

import mcp_types as types

from mcp_patchbay.errors.tree import Code, NotDelivered, PatchbayError, UpstreamError

if TYPE_CHECKING:
    from mcp_patchbay.upstreams.upstream import Upstream


class State(enum.StrEnum):
    STARTING = "starting"
    READY = "ready"
    RESTARTING = "restarting"
    FAILED = "failed"
    SIGN_IN = "needs_sign_in"
    """A remote server that asked for a sign-in the user has not given (``oauth.gate``)."""
    DISABLED = "disabled"
    INVALID = "invalid"
    STOPPED = "stopped"
    NOT_STARTED = "not_started"
    """A lazy server not started yet (``upstreams.on_demand``): listed from its cached listing; a need starts it."""
    IDLE = "stopped_idle"
    """Stopped after ``idle_stop`` seconds idle: listed as it last listed; a need starts it again."""


PARKED = frozenset({State.NOT_STARTED, State.IDLE})
"""Not running, and healthy: started when a call, a read or a prompt needs it."""


GIVE_UP = frozenset({Code.SPAWN_FAILED, Code.AUTH_FAILED})
"""Startup failures not retried in the background: only the user can fix them (a config reload retries)."""
SIGN_IN_TOOL = "sign_in"
"""The tool listed for a server that waits for a sign-in, in place of the tools it cannot list yet."""


def sign_in_tool(server: str) -> types.Tool:
    """What the model sees of a server that needs a sign-in: one tool that starts it."""
    return types.Tool(
        name=SIGN_IN_TOOL,
        description=(
            f"Server '{server}' needs the user to sign in before its tools can be used. Call this (no arguments) "
            "when the user wants to use it: it opens the sign-in page in the user's browser; once the user has "
            "signed in, the server's own tools are listed."
        ),
        input_schema={"type": "object", "properties": {}},
    )


def reason(upstream: Upstream) -> str:
    """Why ``upstream`` cannot serve now, in plain words (empty when ready)."""
    if upstream.state is State.READY:
        return ""
    if upstream.state is State.DISABLED:
        return "disabled in the config"
    if upstream.state is State.NOT_STARTED:
        return "not started yet: it starts when a call needs it"
    if upstream.state is State.IDLE:
        return "stopped while idle: it starts again when a call needs it"
    if upstream.state is State.INVALID:
        return f"config error: {upstream.entry.problem}"
    if upstream.state is State.SIGN_IN and upstream.gate is not None:  # the status resource is the model's to read
        return f"needs sign-in: run {upstream.gate.login_hint}"
    if upstream.error is not None:
        return upstream.error.message
    return "still starting"


def unavailable_error(upstream: Upstream) -> PatchbayError:
    """The error a call to ``upstream`` meets while it cannot serve: ``SERVER_STARTING`` (sent
    nowhere, so safe to send again) while it starts or restarts, else why it is unavailable."""
    where = f"'{upstream.name}'"
    if upstream.state is State.SIGN_IN and upstream.gate is not None:
        return upstream.gate.required()
    if upstream.state is State.DISABLED:
        return UpstreamError(
            Code.SERVER_UNAVAILABLE,
            f"Server {where} is disabled in the proxy's config, so its tools cannot be used. Use another tool "
            "or tell the user.",
            server=upstream.name,
        )
    if upstream.state is State.INVALID:
        return UpstreamError(
            Code.SERVER_UNAVAILABLE,
            f"Server {where} is unavailable: its entry in the proxy's config has a mistake. Tell the user to "
            "run 'mcp-patchbay check'.",
            detail=upstream.entry.problem,
            server=upstream.name,
        )
    if upstream.state is State.FAILED or (upstream.first_ready_after is None and upstream.error is not None):
        # Never served: say why it fails rather than "restarting"; it is retried in the background.
        why = upstream.error.message if upstream.error is not None else f"Server {where} failed to start."
        # FAILED also marks a first failure waiting for its retry; see GIVE_UP for what is given up on.
        gave_up = upstream.state is State.FAILED and (upstream.error is None or upstream.error.code in GIVE_UP)
        retrying = not gave_up
        return UpstreamError(
            Code.SERVER_UNAVAILABLE,
            why + (" The proxy keeps retrying; try again later or use another tool." if retrying else ""),
            detail=upstream.error.detail if upstream.error is not None else None,
            retryable=retrying,
            server=upstream.name,
        )
    if upstream.state is State.STOPPED:
        return UpstreamError(Code.SERVER_UNAVAILABLE, f"Server {where} was removed or stopped.", server=upstream.name)
    verb = "is restarting" if upstream.state is State.RESTARTING else "is still starting"  # parked: being woken
    return NotDelivered(
        Code.SERVER_STARTING,
        f"Server {where} {verb}. Retry in a few seconds.",
        detail=upstream.error.detail if upstream.error is not None else None,
        retry_after_ms=2000,
        server=upstream.name,
    )
