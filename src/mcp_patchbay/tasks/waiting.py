"""The upstreams' side of tasks: what their notices reach, and a task run for a client that asked for none.

A server that requires a task for a tool refuses a plain call of it. A client that does not speak
tasks (or a 2026-07-28 one without the extension) gets the final result all the same:
``run_and_wait`` sends the call as a task, waits for its ``tasks/result`` within the call's
deadline (``patchbay.task_timeout``), and cancels the task at its server when the call is given
up (the deadline, the client's cancellation). Its status messages and the server's progress reach
the client as progress, when the call carried a token.

``Routes`` is where an upstream's notices go: progress on the tokens the proxy gives its tasks
(``pbt-<n>``: a server's progress for a task comes long after the call that started it, so the
call's own id cannot be the token), and the status notices of the tasks ``run_and_wait`` follows.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, cast

import anyio
import mcp_types as types

from mcp_patchbay.calls.deadlines import ProgressFn
from mcp_patchbay.calls.policies import RawResult, ToolCall
from mcp_patchbay.errors.connection import checked_result
from mcp_patchbay.errors.tree import Code, UpstreamError
from mcp_patchbay.session.requests_back import RELATED_TASK
from mcp_patchbay.upstreams.upstream import Upstream

logger = logging.getLogger(__name__)

Watcher = Callable[[types.TaskStatusNotificationParams], Awaitable[None]]


class Routes:
    """Where the upstreams' notices about the proxy's tasks go."""

    def __init__(self) -> None:
        self._tokens = itertools.count(1)
        self._progress: dict[tuple[str, str], ProgressFn] = {}
        self._watchers: dict[tuple[str, str], Watcher] = {}

    def token(self) -> str:
        """A progress token for one task, unique in this process."""
        return f"pbt-{next(self._tokens)}"

    def follow(self, server: str, token: str, forward: ProgressFn) -> None:
        self._progress[(server, token)] = forward

    def unfollow(self, server: str, token: str) -> None:
        self._progress.pop((server, token), None)

    def watch(self, server: str, task_id: str, watcher: Watcher) -> None:
        self._watchers[(server, task_id)] = watcher

    def unwatch(self, server: str, task_id: str) -> None:
        self._watchers.pop((server, task_id), None)

    async def progress(self, server: str, params: types.ProgressNotificationParams) -> bool:
        """Progress an upstream sends on a token the proxy gave a task: whether it was one."""
        forward = self._progress.get((server, str(params.progress_token)))
        if forward is None:
            return False
        try:
            await forward(params.progress, params.total, params.message)
        except Exception:
            logger.debug("could not forward progress of a task of %s", server, exc_info=True)
        return True

    async def status(self, server: str, params: types.TaskStatusNotificationParams) -> None:
        watcher = self._watchers.get((server, params.task_id))
        if watcher is not None:
            await watcher(params)


async def run_and_wait(upstream: Upstream, call: ToolCall, routes: Routes, ttl_ms: int) -> RawResult:
    """``call`` as a task on ``upstream``, and its final result, within ``call.deadline``."""
    token = routes.token()
    forward = _Forward(call.on_progress)
    routes.follow(upstream.name, token, forward.progress)
    params: dict[str, Any] = {"name": call.tool, "task": {"ttl": ttl_ms}}
    params["_meta"] = {**(call.meta or {}), "progressToken": token}
    if call.arguments is not None:
        params["arguments"] = call.arguments
    running: str | None = None
    deadline = call.deadline
    try:
        with anyio.CancelScope() as scope:
            deadline.bind(scope)
            created = await upstream.request_raw("tools/call", params)
            task = created.get("task")
            if not isinstance(task, dict) or not isinstance(cast("dict[str, Any]", task).get("taskId"), str):
                return checked_result(created, upstream.name, call.tool)  # it answered at once
            values = cast("dict[str, Any]", task)
            running = str(values["taskId"])
            routes.watch(upstream.name, running, forward.status)
            await forward.said(values.get("statusMessage"))
            raw = await upstream.request_raw("tasks/result", {"taskId": running})
            running = None
            return checked_result(without_related(raw), upstream.name, call.tool)
        raise UpstreamError(
            Code.TIMEOUT,
            f"Tool '{call.tool}' on server '{call.server}' runs as a task and did not finish within "
            f"{deadline.limit():g}s, so it was cancelled. Retry later, or tell the user the server is slow.",
            detail=f"patchbay.task_timeout passed after {deadline.elapsed():.3f}s",
            server=call.server,
            tool=call.tool,
        )
    finally:
        routes.unfollow(upstream.name, token)
        if running is not None:
            routes.unwatch(upstream.name, running)
            with anyio.move_on_after(5.0, shield=True):
                await cancel_quietly(upstream, running)


class _Forward:
    """What a client waiting on a task it did not ask for hears of it: its status messages, then,
    once the server sends progress of its own, that progress alone (one counter, never backwards)."""

    def __init__(self, forward: ProgressFn | None) -> None:
        self._forward = forward
        self._count = 0.0
        self._said: str | None = None
        self._own_progress = False

    async def said(self, message: Any) -> None:
        if self._forward is None or self._own_progress or not isinstance(message, str) or message == self._said:
            return
        self._said = message
        self._count += 1
        await self._forward(self._count, None, message)

    async def status(self, params: types.TaskStatusNotificationParams) -> None:
        await self.said(params.status_message)

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        self._own_progress = True
        if self._forward is not None:
            await self._forward(progress, total, message)


def without_related(result: dict[str, Any]) -> dict[str, Any]:
    """A ``tasks/result`` answer less its related-task key (it names the upstream's id)."""
    meta = result.get("_meta")
    if not isinstance(meta, dict) or RELATED_TASK not in meta:
        return result
    rest = {k: v for k, v in cast("dict[str, Any]", meta).items() if k != RELATED_TASK}
    trimmed = {k: v for k, v in result.items() if k != "_meta"}
    return {**trimmed, "_meta": rest} if rest else trimmed


async def cancel_quietly(upstream: Upstream, task_id: str) -> None:
    """Cancel a task at its server, as a courtesy: a failure is logged at DEBUG."""
    try:
        await upstream.request_raw("tasks/cancel", {"taskId": task_id})
    except Exception as exc:
        logger.debug("tasks/cancel of %s's task %s: %s", upstream.name, task_id, exc)


__all__ = ["RELATED_TASK", "Routes", "cancel_quietly", "run_and_wait", "without_related"]
