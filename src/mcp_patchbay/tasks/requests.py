"""``tasks/*``: ``tasks/get``, ``tasks/result``, ``tasks/list``, ``tasks/cancel`` (2026-07-28:
``tasks/get``, ``tasks/update``, ``tasks/cancel``), answered with the proxy's ids.

A task is found only for who started it (``records.Table``); another's, an expired or an unknown
one is not found alike. A task another replica of the gateway started on a remote upstream is
followed here (``ids``: the id names it). A task an upstream runs is asked its status there
(``tasks/get``) and cancelled there. The tasks themselves are ``serving.Tasks``'.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, cast

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from mcp_patchbay.config import RemoteSpec
from mcp_patchbay.errors.tree import PatchbayError
from mcp_patchbay.tasks.ids import TaskRef, opened
from mcp_patchbay.tasks.records import Record
from mcp_patchbay.tasks.waiting import RELATED_TASK

if TYPE_CHECKING:
    from mcp_patchbay.tasks.serving import Tasks

logger = logging.getLogger(__name__)

Request = ServerRequestContext[Any, Any]
EXTENSION = "io.modelcontextprotocol/tasks"
"""The 2026-07-28 tasks extension's identifier."""
MISSING_CAPABILITY = -32021


class UpdateTaskParams(types.RequestParams):
    """``tasks/update`` (2026-07-28): input responses for a task waiting on the client."""

    task_id: str
    input_responses: dict[str, Any] | None = None


class TaskRequests:
    """The ``tasks/*`` requests about the tasks clients started through the proxy (``Tasks``)."""

    def __init__(self, tasks: Tasks) -> None:
        self.tasks = tasks

    async def get(self, ctx: Request, params: types.GetTaskRequestParams) -> dict[str, Any]:
        modern = self._era(ctx, "tasks/get")
        record = self._find(ctx, params.task_id)
        if not record.done.is_set() and record.upstream_id is not None:
            await self._refresh(record)
        return record.values(modern=modern)

    async def result(self, ctx: Request, params: types.GetTaskPayloadRequestParams) -> dict[str, Any]:
        if self._era(ctx, "tasks/result", legacy_only=True):
            raise MCPError(types.METHOD_NOT_FOUND, "Method not found", data="tasks/result")
        record = self._find(ctx, params.task_id)
        await record.done.wait()
        if record.result is not None:
            meta = cast("dict[str, Any]", record.result.get("_meta") or {})
            return {**record.result, "_meta": {**meta, RELATED_TASK: {"taskId": record.id}}}
        if record.error is not None:
            raise MCPError.from_error_data(types.ErrorData.model_validate(record.error))
        raise MCPError(types.INVALID_PARAMS, f"Task was cancelled: it has no result ({record.message or 'cancelled'}).")

    async def list(self, ctx: Request, params: types.PaginatedRequestParams | None) -> dict[str, Any]:
        if self._era(ctx, "tasks/list", legacy_only=True):
            raise MCPError(types.METHOD_NOT_FOUND, "Method not found", data="tasks/list")
        try:
            page, cursor = self.tasks.table.page(self.tasks.owner(ctx), params.cursor if params is not None else None)
        except ValueError:
            raise MCPError(types.INVALID_PARAMS, "Invalid cursor for tasks/list.") from None
        answer: dict[str, Any] = {"tasks": [record.values(modern=False) for record in page]}
        if cursor is not None:
            answer["nextCursor"] = cursor
        return answer

    async def cancel(self, ctx: Request, params: types.CancelTaskRequestParams) -> dict[str, Any]:
        modern = self._era(ctx, "tasks/cancel")
        record = self._find(ctx, params.task_id)
        if record.terminal or record.done.is_set():
            raise MCPError(types.INVALID_PARAMS, f"Cannot cancel task: already in terminal status '{record.status}'.")
        upstream = self.tasks.supervisor.upstreams.get(record.server) if record.server is not None else None
        if record.upstream_id is not None and upstream is not None:
            try:
                with anyio.fail_after(self.tasks.settings.timeout):
                    await upstream.request_raw("tasks/cancel", {"taskId": record.upstream_id})
            except PatchbayError as error:
                cause = error.__cause__
                if isinstance(cause, MCPError) and cause.code == types.INVALID_PARAMS:  # it ended meanwhile
                    await self._refresh(record)
                    raise MCPError(types.INVALID_PARAMS, f"Cannot cancel task: {cause.message}") from None
                logger.info("tasks/cancel of %s's task failed (%s); cancelled here", record.server, error.message)
            except TimeoutError:
                logger.info("tasks/cancel of %s's task had no answer; cancelled here", record.server)
        record.update("cancelled", "The task was cancelled by request.", self.tasks.table.clock())
        if record.scope is not None:
            record.scope.cancel()
        await self.tasks.finished(record)
        return {} if modern else record.values(modern=False)

    async def update(self, ctx: Request, params: UpdateTaskParams) -> dict[str, Any]:
        """``tasks/update`` (2026-07-28): the proxy puts no input requests in its tasks, so an
        answer is for no outstanding request and is ignored, as the extension asks."""
        if not self._era(ctx, "tasks/update"):
            raise MCPError(types.METHOD_NOT_FOUND, "Method not found", data="tasks/update")
        self._find(ctx, params.task_id)
        return {}

    # --- helpers ---------------------------------------------------------------------------------

    def _era(self, ctx: Request, method: str, *, legacy_only: bool = False) -> bool:
        """Whether ``ctx`` speaks 2026-07-28 (whose client must have declared the extension)."""
        modern = ctx.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS
        if modern and not legacy_only and not declares_extension(ctx):
            raise MCPError(
                MISSING_CAPABILITY,
                "Missing required client capability",
                data={"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
            )
        return modern

    def _find(self, ctx: Request, task_id: str) -> Record:
        """The caller's task ``task_id``; another's, an expired or an unknown one is not found alike."""
        owner = self.tasks.owner(ctx)
        record = self.tasks.table.get(task_id, owner)
        if record is not None:
            return record
        ref = opened(self.tasks.codec, task_id)
        if ref is None or ref.owner != owner or (ref.expires is not None and ref.expires <= self.tasks.table.clock()):
            raise MCPError(types.INVALID_PARAMS, "Failed to retrieve task: Task not found")
        adopted = self._adopt(ctx, task_id, ref)
        if adopted is None:
            raise MCPError(
                types.INVALID_PARAMS,
                "Failed to retrieve task: Task not found here. It runs where it was started: another replica of "
                "this gateway, or this proxy before it restarted.",
            )
        return adopted

    def _adopt(self, ctx: Request, task_id: str, ref: TaskRef) -> Record | None:
        """A task another replica started on a remote upstream (which every replica reaches): followed here."""
        upstream = self.tasks.supervisor.upstreams.get(ref.server) if ref.server is not None else None
        if upstream is None or ref.upstream_id is None or not isinstance(upstream.spec, RemoteSpec):
            return None
        now = self.tasks.table.clock()
        ttl = int((ref.expires - now) * 1000) if ref.expires is not None else self.tasks.max_ttl_ms
        record = Record(task_id, ref.owner, ref.server, ref.upstream_id, now, max(1, ttl))
        return self.tasks.follow(ctx, record, upstream, "", upstream.name)

    async def _refresh(self, record: Record) -> None:
        """An upstream task's status now (its ``tasks/get``); on failure the last one known stands."""
        upstream = self.tasks.supervisor.upstreams.get(record.server) if record.server is not None else None
        if upstream is None or record.upstream_id is None:
            return
        try:
            with anyio.fail_after(self.tasks.settings.timeout):
                task = await upstream.request_raw("tasks/get", {"taskId": record.upstream_id})
        except (PatchbayError, TimeoutError) as error:
            logger.debug("tasks/get of %s's task failed: %s", record.server, error)
            return
        status, message, poll = task.get("status"), task.get("statusMessage"), task.get("pollInterval")
        if isinstance(poll, int):
            record.poll_ms = poll
        if status in ("working", "input_required", "cancelled"):
            record.update(str(status), message if isinstance(message, str) else None, self.tasks.table.clock())


def declares_extension(ctx: Request) -> bool:
    caps = ctx.session.client_capabilities
    return caps is not None and caps.extensions is not None and EXTENSION in caps.extensions


__all__ = ["EXTENSION", "TaskRequests", "UpdateTaskParams", "declares_extension"]
