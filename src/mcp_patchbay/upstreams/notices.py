"""What an upstream sends the proxy unasked: its lists' changes, its tasks' notices, the rest.

A list's change is re-read (``Lifecycle.refresh_soon``: a burst coalesced); a task's status
notice and its progress go to the proxy's tasks (``TaskNotices``: the SDK's session dispatches
neither, the tasks methods being outside its tables); anything else goes on to the client
(``session.requests_back``). A transport's error is one WARNING, redacted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import mcp_types as types
from mcp.client.extension import NotificationBinding
from mcp.client.session import IncomingMessage

from mcp_patchbay.redaction import redact

if TYPE_CHECKING:
    from mcp_patchbay.upstreams.lifecycle import Lifecycle

__all__ = ["TaskNotices", "on_message", "task_bindings"]


class TaskNotices(Protocol):
    """Where an upstream's notices about its tasks go (``tasks.Tasks``)."""

    async def status(self, server: str, params: types.TaskStatusNotificationParams) -> None: ...

    async def progress(self, server: str, params: types.ProgressNotificationParams) -> bool:
        """Whether the progress was on a token the proxy gave one of its tasks (and so is taken)."""
        ...


def task_bindings(server: str, notices: TaskNotices | None) -> list[NotificationBinding[Any]]:
    """The session's binding of ``notifications/tasks/status`` to ``notices`` (none without them)."""
    if notices is None:
        return []

    async def status(params: types.TaskStatusNotificationParams) -> None:
        await notices.status(server, params)

    binding = NotificationBinding(
        method="notifications/tasks/status", params_type=types.TaskStatusNotificationParams, handler=status
    )
    return [binding]


async def on_message(upstream: Lifecycle, message: IncomingMessage) -> None:
    """The session's message handler: what ``upstream`` sent that is not an answer."""
    if isinstance(message, Exception):
        upstream.log.warning("transport error from '%s': %s", upstream.name, redact(repr(message)))
        return
    if (
        isinstance(message, types.ProgressNotification)
        and upstream.task_notices is not None
        and await upstream.task_notices.progress(upstream.name, message.params)
    ):
        return
    match message:
        case types.ToolListChangedNotification():
            await upstream.refresh_soon("tools")
        case types.PromptListChangedNotification():
            await upstream.refresh_soon("prompts")
        case types.ResourceListChangedNotification():
            await upstream.refresh_soon("resources")
        case _:
            if upstream.client is not None:
                await upstream.client.notify(upstream.name, message)
