"""The task ids a client sees: sealed, so they say nothing and cannot be made up.

Every upstream numbers its own tasks (two may both have a ``task-1``), and the proxy runs
some itself. The client is given neither an upstream's id nor a counter: it gets a token
sealed with the keys that seal ``requestState`` (``session.request_state.state_security``: the
gateway's ``request_state_keys``, shared by its replicas), holding which server runs the
task and under what id there, who started it, and when it expires. So an upstream's id
never reaches the client nor another upstream, two upstreams' equal ids are two tokens, a
task cannot be guessed, and a replica that did not start a task can still open its id and
check its owner without any state shared with the replica that did.

Pure: values in, values out.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, cast

from mcp.server.request_state import RequestStateCodec

KIND = "patchbay/task"
"""Sealed into every task id, so no other token sealed with the same keys (a ``requestState``) opens as one."""


@dataclass(frozen=True, slots=True)
class TaskRef:
    """What a task id holds."""

    server: str | None
    """The upstream running the task, or None: the proxy runs it."""
    upstream_id: str | None
    """The upstream's own id of the task (None when the proxy runs it)."""
    owner: str | None
    """Who started it: the gateway's member (``gateway.identity``); None on stdio."""
    expires: float | None
    """When it is forgotten (epoch seconds), None: with the proxy."""
    nonce: str = ""
    """Unique per task, so two tasks with equal fields still get two ids."""


def seal(codec: RequestStateCodec, ref: TaskRef) -> str:
    """The id the client is given for ``ref``."""
    nonce = ref.nonce or os.urandom(9).hex()
    values = {"k": KIND, "s": ref.server, "u": ref.upstream_id, "o": ref.owner, "e": ref.expires, "n": nonce}
    return codec.seal(json.dumps(values, separators=(",", ":")).encode())


def opened(codec: RequestStateCodec, token: str) -> TaskRef | None:
    """What the id ``token`` holds; None for anything this proxy's keys did not seal as a task id."""
    try:
        values = json.loads(codec.unseal(token))
    except Exception:
        return None
    if not isinstance(values, dict):
        return None
    fields = cast("dict[str, Any]", values)
    if fields.get("k") != KIND:
        return None
    server, upstream, owner, expires = fields.get("s"), fields.get("u"), fields.get("o"), fields.get("e")
    if not all(isinstance(v, str | None) for v in (server, upstream, owner)):
        return None
    if not (expires is None or isinstance(expires, int | float)):
        return None
    return TaskRef(
        cast("str | None", server),
        cast("str | None", upstream),
        cast("str | None", owner),
        float(expires) if expires is not None else None,
        str(fields.get("n") or ""),
    )


__all__ = ["KIND", "TaskRef", "opened", "seal"]
