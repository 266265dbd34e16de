"""mcp-patchbay: one MCP server in front of many.

An MCP client launches the proxy over stdio (or many clients reach one over HTTP,
``serve --http``); the proxy connects to the upstream servers named in its config and
serves their tools, resources and prompts as one. Each folder is a layer, and its own
``__init__`` maps its modules:

- ``wire/``: bytes and messages on the wire, bounded before they are parsed.
- ``catalog/``: what the model sees of the upstreams' lists (names, the merge, overrides,
  arguments, MCP Apps). Pure.
- ``calls/``: one tool call's path and the policies around it.
- ``errors/``: the error tree, and where foreign exceptions become ours.
- ``session/``: the proxy's server, and what one session sees, is told and is asked.
- ``upstreams/``: the upstream servers: connections, supervisor, processes, transports.
- ``fastpath/``: every lane past the SDK, on both sides.
- ``tasks/``: tool calls answered later, under the proxy's own ids.
- ``config/``: the file (models, settings, loading, ``${VAR}``, its watch).
- ``gateway/``: ``serve --http``: the ASGI app, the listener's limits, sign-in, access rules.
- ``oauth/``: signing in to remote servers. ``trust/``: pinned definitions and the scan.
- ``search/``: the tool index and ``find_tools``' answers.
- ``activity/``: the activity log. ``presence/``: what each running proxy publishes.
  ``ui/``: the page (``mcp-patchbay ui``, the gateway's ``/ui``).
- ``cli/``: the commands. ``clients/``: other MCP clients' config files.
- ``places`` (the proxy's own files on each OS), ``bounded_read`` (every file read whole by
  path: regular files only, within a limit), ``redaction`` (credentials cut from every log
  line), ``throttle`` (log lines a peer can cause, at most so many a minute).

The path of a tool call, hop by hop (``docs/ARCHITECTURE.md`` draws it)::

    stdio:  wire.stdio ─> fastpath.stdio_calls (handshake-era tools/call, JSON values) ───────┐
            wire.stdio ─> the SDK's Server ─> session.proxy.Proxy._call_tool ─> calls.path ─┤
    HTTP:   gateway.edge ─> gateway.app ─> session.http_sessions ─> the SDK's Server ─────────┤
            gateway.edge ─> gateway.app ─> session.http_sessions ─> fastpath.gateway_calls ───┤
                                                                                              v
      calls.path.ToolPath.run (the edge), the name looked up in session.views (what the caller
        may see), then the path's steps, one type (calls.steps.Step), built once: a broken config
        ─> startup's wait ─> the proxy's own tools (calls.routes; a call route re-enters run)
        ─> the name resolved once (calls.resolve: catalog.resolution, held tools, a lazy server
        started) ─> what a route may run ─> catalog.arguments ─> observers ─> calls.results (size
        limit, on the way back) ─> the status ─> the call in flight ─> calls.confirm
        ─> upstreams.upstream.chain = calls.policies (breaker ─> deadline ─> bulkhead ─> retry)
        ─> Upstream.send_call ─> fastpath.pipe_calls (stdio upstreams) or fastpath.http_calls
        (streamable HTTP) or session.sdk.send_raw (SSE, or what a lane leaves) ─> back the way it came.

Where to look first:

- a stdio ``tools/call``'s timeout: ``calls.deadlines`` (``patchbay.timeout``, per server and tool);
- an upstream crash becoming an ``isError`` result: ``errors.foreign`` translates,
  ``calls.path.ToolPath.error_result`` is the one edge;
- the merged list: ``catalog.merge.build_catalog`` (``upstreams.supervisor`` rebuilds it);
- who sees a tool on the gateway: ``gateway.access`` (the rules) and ``session.views``;
- ``server__tool``, built and resolved: ``catalog.naming`` and ``catalog.resolution``.

I/O happens only in ``cli/``, ``gateway/``, ``session/`` (but ``capabilities``), ``calls/`` (the steps),
``wire/``, ``fastpath/``, ``upstreams/`` (but ``availability``), ``tasks/``, ``config.watch``,
``config.loading`` (the one file), ``oauth/``, ``trust/`` (``store``, ``locking``, ``guard``),
``activity/``, ``presence/``, ``ui/`` and ``clients/``; every file read whole by path goes
through ``bounded_read``.

Who is calling travels explicitly down the tool path (``ToolPath.run``'s request), with
two ambient values left: ``session.rounds.CURRENT`` (the suspended call a question belongs
to, set only in the task ``Rounds.start`` runs) and the SDK's access token (set by its sign-in
middleware; the gateway's access rules and ``session.requests_back`` read it).

Names kept, though a newcomer may not guess them: ``rounds`` is the 2026-07-28
specification's own word for a call that asks the client something and resumes; a "lane"
is one way past the SDK (``fastpath/``), "raw" meaning JSON values never made into pydantic
models. A file name met twice plays one role in each folder: ``session.views`` (what a caller may
see) and ``ui.views`` (what the page shows), ``tasks.serving`` and ``trust.serving`` (tasks, and
trust, while the proxy serves), ``wire.stdio`` (the client's side) and ``upstreams.transports.stdio``
(an upstream's), ``config.overrides`` (read) and ``catalog.overrides`` (applied).

The event loop: the proxy runs on asyncio, through anyio's asyncio backend. Most code
is written against anyio (task groups, cancel scopes, memory streams), but the hot
paths use asyncio directly where anyio has no equivalent or costs a thread hop:
``wire.stdio`` and ``upstreams.transports.stdio`` read and write event-loop pipes
(``asyncio.StreamReader``), ``fastpath.pipe_calls`` answers with ``asyncio.Future``\\s, and
``session.rounds`` runs each suspended call in an asyncio task of its own. Before the loop
starts, ``wire.early_handshake`` reads stdin in a thread of its own, until ``wire.stdio``
takes it over. The tests run on asyncio for the same reason.
"""

__version__ = "0.1.0"
