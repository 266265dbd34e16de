"""An in-memory upstream of the 2025-11-25 era that runs tools as tasks, as server-everything does.

``TaskUpstream`` declares ``tasks`` (list, cancel, tools/call), lists its tools with the
``execution.taskSupport`` they are given, and numbers its tasks ``task-1``, ``task-2``... from 1
(so two of them collide). A task waits for the test: ``finish`` ends it with a result, ``fail``
with a JSON-RPC error, ``say`` moves its status message (a ``notifications/tasks/status``) and
``progress`` sends progress on the token its call carried. Nothing sleeps.

For the client's side: ``ask`` sends a request as JSON values, ``Heard`` keeps the task status
notices a client is sent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.extension import ClientExtension, NotificationBinding
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError

from mcp_patchbay.session.sdk import connection_of, send_raw
from mcp_patchbay.tasks.records import iso

RELATED = "io.modelcontextprotocol/related-task"


class Heard(ClientExtension):
    """A client that keeps the ``notifications/tasks/status`` it is sent."""

    identifier = "test.patchbay/heard"

    def __init__(self) -> None:
        self.notices: list[types.TaskStatusNotificationParams] = []

    def notifications(self) -> list[NotificationBinding[Any]]:
        async def keep(params: types.TaskStatusNotificationParams) -> None:
            self.notices.append(params)

        return [
            NotificationBinding(
                method="notifications/tasks/status", params_type=types.TaskStatusNotificationParams, handler=keep
            )
        ]


async def ask(client: Client, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """A request as JSON values (the SDK's client models no ``CreateTaskResult`` for ``tools/call``)."""
    return await send_raw(client.session, method, params)


@dataclass(eq=False)
class Job:
    task_id: str
    tool: str
    arguments: dict[str, Any]
    session: ServerSession
    token: Any
    ttl: int | None
    status: str = "working"
    message: str | None = "started"
    result: dict[str, Any] | None = None
    error: types.ErrorData | None = None
    ended: anyio.Event = field(default_factory=anyio.Event)

    def task(self) -> dict[str, Any]:
        values: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": iso(0),
            "lastUpdatedAt": iso(1),
            "ttl": self.ttl,
            "pollInterval": 250,
        }
        if self.message is not None:
            values["statusMessage"] = self.message
        return values


class _TaskServer(Server[Any]):
    def get_capabilities(self, *args: Any, **kwargs: Any) -> types.ServerCapabilities:
        capabilities = super().get_capabilities(*args, **kwargs)
        capabilities.tasks = types.ServerTasksCapability(
            list=types.TasksListCapability(),
            cancel=types.TasksCancelCapability(),
            requests=types.ServerTasksRequestsCapability(
                tools=types.TasksToolsCapability(call=types.TasksCallCapability())
            ),
        )
        return capabilities


class TaskUpstream:
    """One upstream server running its tools as tasks; ``server`` is what ``MemoryUpstreams`` takes."""

    def __init__(self, name: str, support: dict[str, str | None], *, declares_tasks: bool = True) -> None:
        self.name = name
        self.support = support
        """Tool name -> its ``execution.taskSupport`` (None: no ``execution``; the tool answers at once)."""
        self.jobs: dict[str, Job] = {}
        self.calls: list[dict[str, Any]] = []
        """Every ``tools/call``'s params as they arrived."""
        self.cancelled: list[str] = []
        self.created = anyio.Event()
        kind = _TaskServer if declares_tasks else Server
        self.server: Server[Any] = kind(name, on_list_tools=self._list_tools, on_call_tool=self._call_tool)
        self.server.middleware = [self._task_call]
        self.server.add_request_handler("tasks/get", types.GetTaskRequestParams, self._get)
        self.server.add_request_handler("tasks/result", types.GetTaskPayloadRequestParams, self._result)
        self.server.add_request_handler("tasks/list", types.PaginatedRequestParams, self._list)
        self.server.add_request_handler("tasks/cancel", types.CancelTaskRequestParams, self._cancel)

    def options(self) -> Any:
        return self.server.create_initialization_options(NotificationOptions())

    # --- the test's hand on its tasks -------------------------------------------------------------

    async def finish(self, task_id: str, text: str, *, is_error: bool = False) -> None:
        job = self.jobs[task_id]
        job.result = {"content": [{"type": "text", "text": text}], "isError": is_error}
        job.status, job.message = ("failed" if is_error else "completed"), "done"
        job.ended.set()
        await self._notify(job)

    async def fail(self, task_id: str, code: int, message: str) -> None:
        job = self.jobs[task_id]
        job.error = types.ErrorData(code=code, message=message)
        job.status, job.message = "failed", message
        job.ended.set()
        await self._notify(job)

    async def say(self, task_id: str, message: str) -> None:
        job = self.jobs[task_id]
        job.message = message
        await self._notify(job)

    async def ask_input(self, task_id: str, message: str) -> types.ElicitResult:
        """Ask the client for input while the task runs, naming the task by this server's own id
        (``task_id`` may be one it never gave: the request goes on the first task's session)."""
        job = self.jobs.get(task_id) or next(iter(self.jobs.values()))
        params = types.ElicitRequestFormParams(
            message=message,
            requested_schema={"type": "object", "properties": {}},
            _meta={RELATED: {"taskId": task_id}},  # pyright: ignore[reportCallIssue]
        )
        return await job.session.send_request(types.ElicitRequest(params=params), types.ElicitResult)

    async def progress(self, task_id: str, progress: float, message: str) -> None:
        job = self.jobs[task_id]
        await job.session.send_progress_notification(job.token, progress, None, message)

    # --- the server ---------------------------------------------------------------------------------

    async def _notify(self, job: Job) -> None:
        await connection_of(job.session).outbound.notify("notifications/tasks/status", job.task())

    async def _list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        tools = [
            types.Tool(
                name=name,
                description=f"{name} on {self.name}",
                input_schema={"type": "object"},
                execution=types.ToolExecution(task_support=support) if support is not None else None,  # pyright: ignore[reportArgumentType]
            )
            for name, support in self.support.items()
        ]
        return types.ListToolsResult(tools=tools)

    async def _call_tool(self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> Any:
        self.calls.append(dict(ctx.params or {}))
        if self.support.get(params.name) == "required":
            raise MCPError(types.METHOD_NOT_FOUND, f"Tool {params.name} requires task augmentation")
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"{params.name} answered at once")])

    async def _task_call(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """A ``tools/call`` with ``task``: its ``CreateTaskResult`` (past the SDK's result check)."""
        params = dict(ctx.params or {})
        if ctx.method != "tools/call" or not isinstance(params.get("task"), dict):
            return await call_next(ctx)
        self.calls.append(params)
        if self.support.get(str(params.get("name"))) in (None, "forbidden"):
            raise MCPError(types.METHOD_NOT_FOUND, "this tool does not run as a task")
        task_id = f"task-{len(self.jobs) + 1}"
        meta = params.get("_meta") or {}
        job = Job(
            task_id,
            str(params["name"]),
            params.get("arguments") or {},
            ctx.session,
            meta.get("progressToken"),
            params["task"].get("ttl"),
        )
        self.jobs[task_id] = job
        self.created.set()
        self.created = anyio.Event()
        return {"task": job.task()}

    def _job(self, task_id: str) -> Job:
        job = self.jobs.get(task_id)
        if job is None:
            raise MCPError(types.INVALID_PARAMS, "Failed to retrieve task: Task not found")
        return job

    async def _get(self, ctx: Any, params: types.GetTaskRequestParams) -> dict[str, Any]:
        return self._job(params.task_id).task()

    async def _result(self, ctx: Any, params: types.GetTaskPayloadRequestParams) -> dict[str, Any]:
        job = self._job(params.task_id)
        await job.ended.wait()
        if job.error is not None:
            raise MCPError.from_error_data(job.error)
        if job.result is None:
            raise MCPError(types.INTERNAL_ERROR, f"Task {job.task_id} has no result stored")
        return {**job.result, "_meta": {RELATED: {"taskId": job.task_id}}}

    async def _list(self, ctx: Any, params: Any) -> dict[str, Any]:
        return {"tasks": [job.task() for job in self.jobs.values()]}

    async def _cancel(self, ctx: Any, params: types.CancelTaskRequestParams) -> dict[str, Any]:
        job = self._job(params.task_id)
        if job.ended.is_set():
            raise MCPError(types.INVALID_PARAMS, f"Cannot cancel task in terminal status: {job.status}")
        job.status, job.message = "cancelled", "cancelled by the client"
        self.cancelled.append(job.task_id)
        job.ended.set()
        return job.task()
