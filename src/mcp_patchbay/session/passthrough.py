"""The requests that pass through to the upstreams: resources, prompts, completion, logging, roots.

Tools take their own path (``calls.path.ToolPath``, with policies); these requests go to
the upstream that owns the name or URI, and an upstream's failure becomes a JSON-RPC error
(they have no ``isError`` form). Lists are merged from the catalog, and every list served
is recorded (``served``: ``notifications.ListChanges.serving``) so that ``list_changed`` is
sent only for what changed.

- resources: the catalog's resources and templates, plus the proxy's own status resource
  (``status``);
  a read goes to the owner of the URI, or tries every server offering resources. An exposed
  ``ui://`` URI (``apps``) is read, subscribed to and unsubscribed from at its server under the
  URI that server knows, and its updates reach the client under the exposed one
  (``UiChannel``); a read's contents name the URI the client asked for, their text,
  blob and ``_meta`` as the server sent them.
- prompts and completion: resolved by name as tools are (forgiving, with suggestions).
- ``logging/setLevel``: on stdio, passed to every upstream now and to each one that
  connects later. On the gateway it is the session's own level: kept on its connection
  (``session.requests_back`` delivers an upstream's log messages at or above it, from a server
  whose call of that session is in flight) and never passed upstream, where one member's
  choice would set the level for every other member and for servers it may not use.
- ``resources/subscribe``: to the server that owns the URI among those the caller may use,
  else to the first such server that takes subscriptions; a URI of a server the caller may
  not use is answered as one no server has.
- ``notifications/roots/list_changed``: on stdio, passed to each ready upstream that was
  offered roots; on the gateway, which offers its upstreams no roots, to none.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Container
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

from mcp_patchbay.catalog.merge import Catalog
from mcp_patchbay.catalog.resources import owner_of_uri, resource_target
from mcp_patchbay.errors.names import unknown_name
from mcp_patchbay.errors.tree import ClientError, Code, PatchbayError, clip, to_mcp_error
from mcp_patchbay.session.requests_back import LOG_LEVEL, SessionChannel
from mcp_patchbay.session.sdk import connection_of
from mcp_patchbay.session.status import STATUS_URI, as_text, status_resource
from mcp_patchbay.upstreams.supervisor import Supervisor
from mcp_patchbay.upstreams.upstream import State, Upstream

logger = logging.getLogger(__name__)

RESOURCE_NOT_FOUND = -32002


class Passthrough:
    """Handlers for the client's non-tool requests, over the supervisor's upstreams."""

    def __init__(
        self,
        supervisor: Supervisor,
        served: Callable[[ServerRequestContext[Any, Any], str, object], None],
        status: Callable[[ServerRequestContext[Any, Any]], dict[str, Any]],
        catalog: Callable[[], Catalog],
        permitted: Callable[[], Container[str]] | None = None,
        *,
        shared: bool = False,
    ) -> None:
        """``served``: a list was served to a request's client (``notifications``); ``status``:
        the status as a request's caller may see it; ``catalog``: what the current caller may
        see (``views.Views.view``); ``permitted``: the servers it may use (the gateway's access
        rules), all of them when None; ``shared``: the gateway (a logging level is each
        session's own)."""
        self.supervisor = supervisor
        self.shared = shared
        self.catalog = catalog
        self._permitted = permitted
        self._served = served
        self._status = status
        self._log_level: types.LoggingLevel | None = None
        self.tg: anyio.abc.TaskGroup | None = None
        """Where level changes for upstreams that connect later run (the proxy's background group)."""
        self.on_activity: Callable[[tuple[Any, ...]], None] | None = None
        """Told of every resource read and prompt get as one tuple (the activity log: ``activity.events``)."""

    # --- resources ------------------------------------------------------------------------

    async def list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        await self.supervisor.wait_startup()
        catalog = self.catalog()
        self._served(ctx, "resources", (list(catalog.resources), list(catalog.templates)))
        return types.ListResourcesResult(resources=[*catalog.resources, status_resource()])

    async def list_templates(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        await self.supervisor.wait_startup()
        catalog = self.catalog()
        self._served(ctx, "resources", (list(catalog.resources), list(catalog.templates)))
        return types.ListResourceTemplatesResult(resource_templates=catalog.templates)

    def _owner(self, uri: str, *, subscribing: bool = False) -> tuple[list[Upstream], str]:
        """The upstream for a URI, or when none claims it, every ready upstream offering
        resources (``subscribing``: subscriptions), in order; and the URI to send them (an
        exposed ``ui://`` URI's own). Only among the servers the caller may use: a URI of
        another is one no server has. A server's own ``ui://`` URI that several servers have
        is refused, naming each one's exposed URI (the first would answer for all)."""
        catalog = self.catalog()
        owners = catalog.ui_owners.get(uri, ())
        if len(owners) > 1 and uri not in catalog.ui_resources:
            choices = ", ".join(catalog.ui_exposed[server, uri] for server in owners)
            missing = ClientError(
                Code.RESOURCE_NOT_FOUND, clip(f"{uri} is a user interface of several servers: use one of {choices}.")
            )
            raise to_mcp_error(missing, RESOURCE_NOT_FOUND)
        owner, sent = resource_target(catalog, uri)
        upstreams = self.supervisor.upstreams
        if owner is not None and owner in upstreams:
            return [upstreams[owner]], sent
        permitted = self._permitted() if self._permitted is not None else None
        return [
            u
            for name, u in upstreams.items()
            if u.state is State.READY
            and u.capabilities is not None
            and u.capabilities.resources is not None
            and (not subscribing or bool(u.capabilities.resources.subscribe))
            and (permitted is None or name in permitted)
        ], uri

    async def read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        if uri == STATUS_URI:  # the proxy's own: logged with no server
            started = time.monotonic()
            text = as_text(self._status(ctx))
            status = types.ReadResourceResult(
                contents=[types.TextResourceContents(uri=STATUS_URI, mime_type="application/json", text=text)]
            )
            self._tell("resource_read", started, ctx, uri, None, None, None, None, status)
            return status
        await self.supervisor.wait_startup()
        started = time.monotonic()
        candidates, sent = self._owner(uri)
        last: PatchbayError | None = None
        for upstream in candidates:
            try:
                result = await upstream.request(
                    types.ReadResourceRequest(params=types.ReadResourceRequestParams(uri=sent)),
                    types.ReadResourceResult,
                    what="resources/read",
                )
                self._tell("resource_read", started, ctx, uri, upstream.name, sent, None, None, result)
                return result if sent == uri else _named(result, sent, uri)
            except PatchbayError as error:
                last = error
                if len(candidates) == 1:
                    logger.warning("resources/read %.200r on '%s' failed: %s", uri, upstream.name, error.detail)
                    self._tell("resource_read", started, ctx, uri, upstream.name, sent, error, None, None)
                    raise to_mcp_error(error, types.INTERNAL_ERROR) from error
        logger.warning("resources/read %.200r: no server has it (%s)", uri, last.detail if last else "no candidates")
        missing = ClientError(
            Code.RESOURCE_NOT_FOUND,
            clip(f"Resource not found: {uri}. List the resources and templates to see what exists."),
        )
        self._tell("resource_read", started, ctx, uri, None, None, missing, None, None)
        raise to_mcp_error(missing, RESOURCE_NOT_FOUND)

    async def subscribe(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        await self.subscribe_at(str(params.uri), types.SubscribeRequest(params=params))
        return types.EmptyResult()

    async def unsubscribe(
        self, ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        await self.subscribe_at(str(params.uri), types.UnsubscribeRequest(params=params))
        return types.EmptyResult()

    async def subscribe_at(self, uri: str, request: Any) -> str:
        """Pass a (un)subscription to the server that takes it; its name. Raises MCPError."""
        await self.supervisor.wait_startup()
        candidates, sent = self._owner(uri, subscribing=True)
        if sent != uri:
            request = request.model_copy(update={"params": request.params.model_copy(update={"uri": sent})})
        for upstream in candidates[:1]:
            try:
                await upstream.request(request, types.EmptyResult, what=request.method)
            except PatchbayError as error:
                raise to_mcp_error(error, types.INTERNAL_ERROR) from error
            return upstream.name
        raise to_mcp_error(
            ClientError(Code.RESOURCE_NOT_FOUND, clip(f"Resource not found: {uri}.")), RESOURCE_NOT_FOUND
        )

    # --- prompts and completion -----------------------------------------------------------

    async def list_prompts(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        await self.supervisor.wait_startup()
        prompts = list(self.catalog().prompts)
        self._served(ctx, "prompts", prompts)
        return types.ListPromptsResult(prompts=prompts)

    async def _resolve_prompt(self, called: str) -> tuple[Upstream, str]:
        await self.supervisor.wait_startup()
        catalog = self.catalog()
        target = catalog.prompts_by_exposed.get(called)
        if target is None:
            resolver = catalog.prompt_resolver
            assert resolver is not None
            resolution = resolver.resolve(called)
            if resolution.kind not in ("exact", "resolved") or resolution.entry is None:
                if resolution.kind == "server_unavailable" and resolution.server in self.supervisor.upstreams:
                    raise to_mcp_error(await self.supervisor.upstreams[resolution.server].unavailable())
                held = self._held_prompt(called, resolution.server if resolution.kind == "hidden" else None)
                if held is not None:
                    raise to_mcp_error(held)
                raise to_mcp_error(unknown_name(resolution, resolver, kind="prompt"))
            target = catalog.prompts_by_exposed[resolution.entry.exposed]
        upstream = self.supervisor.upstreams.get(target.server)
        if upstream is None:
            raise MCPError(types.INVALID_PARAMS, f"Server '{target.server}' was removed from the config.")
        return upstream, target.upstream_name

    def _held_prompt(self, called: str, server: str | None) -> PatchbayError | None:
        """``TOOL_CHANGED`` for a prompt held until the user approves it, when the caller may use its server."""
        held = self.supervisor.held_error(called, server=server, kind="prompt")
        if held is None or (self._permitted is not None and (held.server or "") not in self._permitted()):
            return None
        return held

    async def get_prompt(
        self, ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        started, called, arguments = time.monotonic(), params.name, params.arguments
        try:
            upstream, name = await self._resolve_prompt(called)
        except MCPError as error:
            self._tell("prompt_get", started, ctx, called, None, None, error, arguments, None)
            raise
        request = types.GetPromptRequest(params=types.GetPromptRequestParams(name=name, arguments=arguments))
        try:
            result = await upstream.request(request, types.GetPromptResult, what="prompts/get")
        except PatchbayError as error:
            self._tell("prompt_get", started, ctx, called, upstream.name, name, error, arguments, None)
            raise to_mcp_error(error, types.INTERNAL_ERROR) from error
        self._tell("prompt_get", started, ctx, called, upstream.name, name, None, arguments, result)
        return result

    def _tell(self, kind: str, started: float, ctx: object, *event: object) -> None:
        """The activity log hears of a read or a prompt: (name, server, upstream name, error, arguments, result)."""
        if self.on_activity is not None:
            self.on_activity((kind, started, time.monotonic(), ctx, *event))

    async def complete(
        self, ctx: ServerRequestContext[Any, Any], params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        ref = params.ref
        if isinstance(ref, types.PromptReference):
            upstream, name = await self._resolve_prompt(ref.name)
            params = params.model_copy(update={"ref": types.PromptReference(type="ref/prompt", name=name)})
        else:
            owner = self.catalog().template_owner.get(ref.uri) or owner_of_uri(self.catalog(), ref.uri)
            if owner is None or owner not in self.supervisor.upstreams:
                return types.CompleteResult(completion=types.Completion(values=[]))
            upstream = self.supervisor.upstreams[owner]
        if upstream.capabilities is None or upstream.capabilities.completions is None:
            return types.CompleteResult(completion=types.Completion(values=[]))
        try:
            return await upstream.request(
                types.CompleteRequest(params=params), types.CompleteResult, what="completion/complete"
            )
        except PatchbayError as error:
            raise to_mcp_error(error, types.INTERNAL_ERROR) from error

    # --- logging and roots ----------------------------------------------------------------

    async def set_level(
        self, ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        """On stdio, pass the level to every upstream now, and to each one that connects later;
        on the gateway, keep it as this session's own."""
        if self.shared:
            connection_of(ctx.session).state[LOG_LEVEL] = params.level
            return types.EmptyResult()
        self._log_level = params.level
        await self.supervisor.wait_startup()
        async with anyio.create_task_group() as tg:
            for upstream in self.supervisor.upstreams.values():
                if upstream.state is State.READY:
                    tg.start_soon(_set_upstream_level, upstream, params.level)
        return types.EmptyResult()

    def on_upstream_ready(self, upstream: Upstream) -> None:
        if self._log_level is not None and self.tg is not None:
            self.tg.start_soon(_set_upstream_level, upstream, self._log_level)

    async def roots_changed(self, ctx: ServerRequestContext[Any, Any], params: types.NotificationParams) -> None:
        """Pass the change on to the ready upstreams the caller may use, each of which was offered
        roots (the client declared them: ``session.requests_back.session_callbacks``), concurrently.
        The gateway offers its upstreams no roots (a team has no one client's folders), so there
        a member's notice goes nowhere: a shared upstream must not hear what one member did."""
        if self.shared:
            logger.debug("notifications/roots/list_changed from a gateway session: not passed on (no roots offered)")
            return
        permitted = self._permitted() if self._permitted is not None else None
        targets = [
            u
            for name, u in self.supervisor.upstreams.items()
            if u.state is State.READY and u.offered_roots and (permitted is None or name in permitted)
        ]
        logger.debug("notifications/roots/list_changed passed to %s", ", ".join(u.name for u in targets) or "no server")
        async with anyio.create_task_group() as tg:
            for upstream in targets:
                tg.start_soon(upstream.send_notification, types.RootsListChangedNotification())


def _named(result: types.ReadResourceResult, sent: str, asked: str) -> types.ReadResourceResult:
    """A read's result with the contents the server named ``sent`` named ``asked``, as the client
    knows the resource; nothing else changed."""
    contents = [c.model_copy(update={"uri": asked}) if c.uri == sent else c for c in result.contents]
    return result.model_copy(update={"contents": contents})


class UiChannel(SessionChannel):
    """The channel back to the client, sending a resource update of an exposed ``ui://`` URI
    under the URI the client knows (``catalog``: the whole catalog, set once there is one)."""

    catalog: Callable[[], Catalog] | None = None

    async def notify(self, server: str, notification: types.ServerNotification) -> None:
        if self.catalog is not None and isinstance(notification, types.ResourceUpdatedNotification):
            exposed = self.catalog().ui_exposed.get((server, notification.params.uri))
            if exposed is not None:
                params = notification.params.model_copy(update={"uri": exposed})
                notification = notification.model_copy(update={"params": params})
        await super().notify(server, notification)


async def _set_upstream_level(upstream: Upstream, level: types.LoggingLevel) -> None:
    caps = upstream.capabilities
    if caps is None or caps.logging is None:
        return
    request = types.SetLevelRequest(params=types.SetLevelRequestParams(level=level))
    try:
        await upstream.request(request, types.EmptyResult, what="logging/setLevel")
    except PatchbayError as error:
        logger.debug("logging/setLevel on '%s' failed: %s", upstream.name, error.detail)


__all__ = ["RESOURCE_NOT_FOUND", "Passthrough", "UiChannel"]
