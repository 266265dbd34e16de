"""Tasks through the proxy: a task-augmented ``tools/call``, and ``tasks/*`` answered with the proxy's ids.

Who runs a task a client asks for (a 2025-11-25 call with a ``task`` field; a 2026-07-28
call of a client that declared the tasks extension, to a tool whose upstream requires one):

- an upstream that runs tasks, for a tool it lists with ``execution.taskSupport``
  ``"optional"`` or ``"required"``: the call goes to it with its ``task`` (``ToolPath.run``,
  so names, access rules and arguments are checked as for every call), and the proxy waits
  for the result in the background (the upstream's ``tasks/result``) to hold it for its ttl;
- the proxy itself for any other tool: the call runs in the background, so a long call is not
  lost to the client's own timeout (within ``patchbay.task_timeout``).

The client gets the proxy's own id (``ids``) and ``tasks/get``, ``tasks/result``, ``tasks/list``,
``tasks/cancel`` (2026-07-28: ``tasks/get``, ``tasks/update``, ``tasks/cancel``; ``requests``) find
the task only for who started it (``records.Table``). An upstream's ``notifications/tasks/status`` and
its progress for a task reach the client that started it under the proxy's id (a 2025-era
client: a 2026-07-28 one polls). A client that does not speak tasks, calling a tool whose
upstream requires one, gets the final result: ``run_and_wait`` runs the task for it within
``patchbay.task_timeout``, its status messages and progress going to the client as progress.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

import anyio
import anyio.abc
import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.request_state import RequestStateCodec
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import ValidationError

from mcp_patchbay.calls.deadlines import ProgressFn
from mcp_patchbay.calls.policies import RawResult, ToolCall
from mcp_patchbay.catalog.merge import CatalogTool
from mcp_patchbay.config import Settings
from mcp_patchbay.errors.connection import checked_result
from mcp_patchbay.errors.tree import PatchbayError
from mcp_patchbay.fastpath.messages import progress_sender, split_meta
from mcp_patchbay.session.notifications import IdentityOf
from mcp_patchbay.session.outbox import Outboxes
from mcp_patchbay.session.sdk import connection_of
from mcp_patchbay.tasks.ids import TaskRef, seal
from mcp_patchbay.tasks.records import Full, Record, Table, Tell
from mcp_patchbay.tasks.requests import TaskRequests, declares_extension
from mcp_patchbay.tasks.waiting import Routes, cancel_quietly, run_and_wait, without_related
from mcp_patchbay.upstreams.upstream import Upstream

if TYPE_CHECKING:
    from mcp_patchbay.calls.path import ToolPath
    from mcp_patchbay.upstreams.supervisor import Supervisor
logger = logging.getLogger(__name__)

Request = ServerRequestContext[Any, Any]
POLL_MS = 1000
"""The poll interval the proxy suggests for the tasks it runs itself."""


def capabilities() -> types.ServerTasksCapability:
    """What the proxy declares on a handshake-era connection: every tool may be called as a task."""
    return types.ServerTasksCapability(
        list=types.TasksListCapability(),
        cancel=types.TasksCancelCapability(),
        requests=types.ServerTasksRequestsCapability(
            tools=types.TasksToolsCapability(call=types.TasksCallCapability())
        ),
    )


def runs_tasks(upstream: Upstream, target: CatalogTool, *, required: bool = False) -> bool:
    """Whether ``upstream`` runs ``target`` as a task (it declared tasks for tool calls and the
    tool takes them; ``required``: the tool takes nothing else)."""
    tasks = upstream.capabilities.tasks if upstream.capabilities is not None else None
    if tasks is None or tasks.requests is None or tasks.requests.tools is None or tasks.requests.tools.call is None:
        return False
    support = target.definition.execution.task_support if target.definition.execution is not None else None
    return support == "required" if required else support in ("optional", "required")


class Tasks:
    """The tasks clients started through the proxy, and the ``tasks/*`` requests about them."""

    def __init__(
        self,
        settings: Settings,
        supervisor: Supervisor,
        tools: ToolPath,
        codec: RequestStateCodec,
        *,
        identity_of: IdentityOf | None,
        outboxes: Outboxes | None,
    ) -> None:
        self.settings = settings
        self.supervisor = supervisor
        self.tools = tools
        self.codec = codec
        self._identity_of = identity_of
        self._outboxes = outboxes
        self.table = Table(settings.max_tasks)
        self.server_info: Callable[[], dict[str, Any]] = dict
        """The 2026-07-28 ``serverInfo`` stamp (``Proxy`` sets it: a task result skips the SDK's own stamp)."""
        self.table.on_expire = self._forget
        self.routes = Routes()
        """Where the upstreams' progress and status notices for the proxy's tasks go."""
        self._tg: anyio.abc.TaskGroup | None = None
        self._added = anyio.Event()
        self.requests = TaskRequests(self)
        """The ``tasks/*`` requests about them."""

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """The background calls and waits, and the forgetting of expired tasks, until cancelled."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            task_status.started()
            while True:
                self.table.expire()
                expiry = self.table.next_expiry()
                self._added = anyio.Event()
                with anyio.move_on_after(60.0 if expiry is None else max(0.0, expiry - self.table.clock()) + 0.01):
                    await self._added.wait()

    # --- a task-augmented tools/call --------------------------------------------------------

    async def intercept(self, ctx: Request, call_next: CallNext) -> HandlerResult:
        """Server middleware: a ``tools/call`` asking for a task becomes one (answered here, past the
        SDK's check of a ``tools/call`` result, which knows no ``CreateTaskResult``)."""
        if ctx.method != "tools/call" or not isinstance(ctx.params, Mapping):
            return await call_next(ctx)
        values = ctx.params
        modern = ctx.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS
        if modern:
            if "requestState" in values or not declares_extension(ctx):
                return await call_next(ctx)
            target = self.tools.views.view().catalog.by_exposed.get(str(values.get("name")))
            upstream = self.supervisor.upstreams.get(target.server) if target is not None else None
            if target is None or upstream is None or not runs_tasks(upstream, target, required=True):
                return await call_next(ctx)
            ttl = None
        else:
            task = values.get("task")
            if not isinstance(task, dict):
                return await call_next(ctx)
            ttl = cast("dict[str, Any]", task).get("ttl")
        try:
            params = types.CallToolRequestParams.model_validate(dict(values), by_name=False)
        except ValidationError:
            return await call_next(ctx)  # the SDK answers it with its invalid-params error
        record = await self.create(ctx, params, ttl if isinstance(ttl, int) and ttl > 0 else None)
        if not modern:
            return {"task": record.values(modern=False)}
        stamp = {types.SERVER_INFO_META_KEY: self.server_info()}
        return {"resultType": "task", **record.values(modern=True), "_meta": stamp}

    async def create(self, ctx: Request, params: types.CallToolRequestParams, ttl: int | None) -> Record:
        """Start the task ``params`` asks for: on its upstream when it runs tasks, else here."""
        owner = self.owner(ctx)
        self._room(owner)
        ttl_ms = min(ttl or self.max_ttl_ms, self.max_ttl_ms)
        wire_meta = params.model_dump(by_alias=True, mode="json", include={"meta"}).get("_meta")
        token, meta = split_meta(wire_meta)
        progress = self._progress_to(ctx, token)
        view = self.tools.views.view()
        target = view.catalog.by_exposed.get(params.name)
        upstream = self.supervisor.upstreams.get(target.server) if target is not None else None
        now = self.table.clock()
        if target is not None and upstream is not None and runs_tasks(upstream, target):
            ours = self.routes.token()
            if progress is not None:
                self.routes.follow(upstream.name, ours, progress)
            try:
                raw = await self.tools.run(
                    params.name, params.arguments, None, {**(meta or {}), "progressToken": ours}, request=ctx,
                    task={"ttl": ttl_ms},
                )  # fmt: skip
            except BaseException:
                self.routes.unfollow(upstream.name, ours)
                raise
            task = raw.get("task")
            if isinstance(task, dict) and isinstance(cast("dict[str, Any]", task).get("taskId"), str):
                task_values = cast("dict[str, Any]", task)
                try:
                    return self._upstream_task(
                        ctx, upstream, task_values, owner=owner, ttl_ms=ttl_ms, now=now, token=ours, called=params.name
                    )
                except MCPError:  # no room after all (another task of its owner started meanwhile)
                    self.routes.unfollow(upstream.name, ours)
                    await cancel_quietly(upstream, str(task_values["taskId"]))
                    raise
            self.routes.unfollow(upstream.name, ours)
            record = Record(self._id(None, None, owner, now, ttl_ms), owner, upstream.name, None, now, ttl_ms)
            self._hold(ctx, record)
            record.finish(self.table.clock(), result=raw)  # answered at once (or refused): a finished task
            return record
        record = Record(self._id(None, None, owner, now, ttl_ms), owner, None, None, now, ttl_ms, POLL_MS)
        self._hold(ctx, record)
        assert self._tg is not None
        self._tg.start_soon(self._run_here, record, ctx, params, meta, progress)
        return record

    def _upstream_task(
        self,
        ctx: Request,
        upstream: Upstream,
        task: dict[str, Any],
        *,
        owner: str | None,
        ttl_ms: int,
        now: float,
        token: str,
        called: str,
    ) -> Record:
        theirs = cast("int | None", task.get("ttl")) if isinstance(task.get("ttl"), int) else None
        ttl = min(ttl_ms, theirs) if theirs is not None else ttl_ms
        poll = task.get("pollInterval")
        record = Record(
            self._id(upstream.name, task["taskId"], owner, now, ttl), owner, upstream.name, task["taskId"], now, ttl,
            poll if isinstance(poll, int) else None,
        )  # fmt: skip
        status, message = task.get("status"), task.get("statusMessage")
        record.update(str(status), message if isinstance(message, str) else None, now)
        return self.follow(ctx, record, upstream, token, called)

    def follow(self, ctx: Request, record: Record, upstream: Upstream, token: str, called: str) -> Record:
        """Hold ``record`` of a task ``upstream`` runs, its result collected in the background
        (``token``: the progress token the proxy gave it; ``called``: the name it was called by)."""
        self._hold(ctx, record)
        assert self._tg is not None
        self._tg.start_soon(self._collect, record, upstream, token, called)
        return record

    def _hold(self, ctx: Request, record: Record) -> Record:
        try:
            self.table.add(record)
        except Full as full:
            raise _too_many(full.args[0]) from None
        if ctx.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS:
            record.tell = self._teller(ctx)
        self._added.set()
        return record

    async def _run_here(
        self, record: Record, ctx: Request, params: types.CallToolRequestParams, meta: dict[str, Any] | None,
        progress: ProgressFn | None,
    ) -> None:  # fmt: skip
        """A task the proxy runs: the call itself, in the background."""
        with anyio.CancelScope() as scope:
            record.scope = scope
            try:
                raw = await self.tools.run(params.name, params.arguments, progress, meta, request=ctx, long=True)
            except MCPError as exc:  # the edge's JSON-RPC answer (unknown_tool "error", a URL elicitation)
                error = exc.error.model_dump(by_alias=True, mode="json", exclude_none=True)
                await self.finished(record, error=error)
            else:
                await self.finished(record, result=raw)

    async def _collect(self, record: Record, upstream: Upstream, token: str, called: str) -> None:
        """Wait for an upstream task's result (its ``tasks/result`` blocks until it ends), to hold it.
        A failure is answered as the same call's failure would be (``ToolPath.error_result``)."""
        assert record.upstream_id is not None
        started = time.monotonic()
        try:
            with anyio.CancelScope() as scope:
                record.scope = scope
                try:
                    raw = await upstream.request_raw("tasks/result", {"taskId": record.upstream_id})
                    result = checked_result(without_related(raw), upstream.name, called)
                except PatchbayError as error:
                    if record.status == "cancelled":
                        await self.finished(record)
                        return
                    try:
                        result = self.tools.error_result(
                            error, called, None, upstream.name, started=started, request=None
                        )
                    except MCPError as exc:
                        error_data = exc.error.model_dump(by_alias=True, mode="json", exclude_none=True)
                        await self.finished(record, error=error_data)
                        return
                await self.finished(record, result=result)
        finally:
            self.routes.unfollow(upstream.name, token)

    async def finished(
        self, record: Record, *, result: dict[str, Any] | None = None, error: dict[str, Any] | None = None
    ) -> None:
        if record.finish(self.table.clock(), result=result, error=error):
            await self._notice(record)

    # --- what upstreams send --------------------------------------------------------------------

    async def status(self, server: str, params: types.TaskStatusNotificationParams) -> None:
        """An upstream's ``notifications/tasks/status``: the task's record follows, its owner is told."""
        await self.routes.status(server, params)
        if params.status in ("completed", "failed"):
            return  # its outcome comes with its result (``_collect``), told then
        for record in self.table.by_upstream(server, params.task_id):
            if record.update(params.status, params.status_message, self.table.clock()):
                await self._notice(record)

    async def progress(self, server: str, params: types.ProgressNotificationParams) -> bool:
        """Progress an upstream sends on a token the proxy gave a task: whether it was one."""
        return await self.routes.progress(server, params)

    # --- a client that does not speak tasks -------------------------------------------------------

    def required(self, upstream: Upstream, target: CatalogTool) -> bool:
        """Whether a plain call of ``target`` must run as a task (``run_and_wait``)."""
        return runs_tasks(upstream, target, required=True)

    async def run_and_wait(self, upstream: Upstream, call: ToolCall) -> RawResult:
        """The call as a task on ``upstream`` and its final result (``waiting.run_and_wait``)."""
        return await run_and_wait(upstream, call, self.routes, self.max_ttl_ms)

    # --- helpers ------------------------------------------------------------------------------------

    @property
    def max_ttl_ms(self) -> int:
        return int(self.settings.task_ttl * 1000)

    def client_id(self, server: str, upstream_id: str) -> str | None:
        """The id the client holds of ``server``'s task ``upstream_id`` (``session.requests_back``'s
        ``related_task``), or None when no task of it is held here."""
        records = self.table.by_upstream(server, upstream_id)
        return records[0].id if len(records) == 1 else None

    def owner(self, ctx: Request) -> str | None:
        return self._identity_of(ctx) if self._identity_of is not None else None

    def _id(self, server: str | None, upstream_id: str | None, owner: str | None, now: float, ttl_ms: int) -> str:
        return seal(self.codec, TaskRef(server, upstream_id, owner, now + ttl_ms / 1000))

    def _room(self, owner: str | None) -> None:
        held = [r for r in self.table if r.owner == owner]
        if len(held) >= self.table.max_tasks and all(not r.done.is_set() for r in held):
            raise _too_many(len(held))

    def _forget(self, record: Record) -> None:
        """An expired task: what runs it stops, an upstream's is cancelled there, its result is dropped."""
        if record.done.is_set():
            return
        record.update("cancelled", "The task expired (its ttl passed).", self.table.clock())
        if record.scope is not None:
            record.scope.cancel()
        record.finish(self.table.clock())
        upstream = self.supervisor.upstreams.get(record.server) if record.server is not None else None
        if upstream is not None and record.upstream_id is not None and self._tg is not None:
            self._tg.start_soon(cancel_quietly, upstream, record.upstream_id)

    def _teller(self, ctx: Request) -> Tell:
        """How notices reach the session of ``ctx`` after its request was answered."""
        connection = connection_of(ctx.session)
        outboxes = self._outboxes
        if outboxes is not None:  # the gateway: posted, never awaited

            async def post(method: str, params: dict[str, Any]) -> None:
                outboxes.post(connection, method, params)

            return post

        async def send(method: str, params: dict[str, Any]) -> None:
            await connection.outbound.notify(method, params)

        return send

    async def _notice(self, record: Record) -> None:
        tell = record.tell
        if tell is None:
            return
        try:
            await tell("notifications/tasks/status", record.values(modern=False))
        except Exception:
            logger.debug("could not send a task's status notice: the client is gone", exc_info=True)

    def _progress_to(self, ctx: Request, token: Any) -> ProgressFn | None:
        """Progress of a task for the client's token, for the task's whole life (2025-era clients)."""
        if token is None or ctx.protocol_version not in HANDSHAKE_PROTOCOL_VERSIONS:
            return None
        tell = self._teller(ctx)

        async def send(notice: dict[str, Any]) -> None:
            await tell(notice["method"], notice["params"])

        return progress_sender(token, send)


def _too_many(held: int) -> MCPError:
    return MCPError(
        types.INTERNAL_ERROR,
        f"You have {held} tasks running, the most one caller may hold (patchbay.max_tasks). "
        "Wait for one to finish, or cancel one, before starting another.",
    )


__all__ = ["Tasks", "capabilities", "runs_tasks"]
