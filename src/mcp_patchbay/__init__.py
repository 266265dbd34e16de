"""mcp-patchbay: one MCP server in front of many.

An MCP client launches the proxy over stdio (or many clients reach one over HTTP,
``serve --http``); the proxy connects to the upstream servers named in its config and
serves their tools, resources and prompts as one.

The path of a tool call, both lanes (``docs/ARCHITECTURE.md`` draws it)::

    client ─stdio─> client_wire ─> lane (handshake-era tools/call, JSON values)  ─┐
                               └─> the SDK's Server (everything else) ─> server ─┤
    clients ─HTTP─> gateway.app ─> the SDK's session manager ─> its Server ─────┤
                                                                                 v
      server.Proxy.run_tool: catalog lookup ─> naming (mistaken names) ─> arguments
        ─> upstream.chain = policies (breaker ─> deadline ─> bulkhead ─> retry)
        ─> upstream.send_call ─> rawcalls (stdio: request line on the pipe, answer by id)
                                 or sdk.send_raw (HTTP/SSE: the SDK's session, JSON values)
        ─> results (size limit) ─> back the way it came; every failure an isError result

Modules, by what they own:

- Entry and wiring: ``cli`` (arguments, logging, ``serve``, ``check``, ``login`` and
  ``logout``), ``gateway/`` (``serve --http``: the ASGI app and its life, the listener's limits,
  sign-in, who is calling, access rules, metrics, resumable SSE events), ``server``
  (``Proxy``: the SDK's server, change notifications, the tool path and the one edge
  where errors become results), ``supervisor`` (all upstreams: start, startup wait,
  catalog rebuilds, reload), ``watch`` (config file changes, SIGHUP).
- The client's side: ``client_wire`` (our stdin/stdout as JSON-RPC lines),
  ``lane`` (handshake-era ``tools/call`` past the SDK's server), ``client_channel``
  (requests and notifications upstreams send back to the client, routed to the session
  whose call caused them), ``outbox`` (on the gateway, each session's notices queued and
  written by a task of its own; a session that does not read is ended), ``rounds`` (a
  2026-07-28 client's ``tools/call`` suspended while its 2025-era upstream's sampling,
  elicitation or roots request is put to the client as ``input_required``;
  ``requestState`` sealed by the SDK's boundary), ``passthrough``
  (resources, prompts, completion, logging level, roots), ``exposure`` (what the client
  lists: every tool, or search mode's ``find_tools`` and ``call_tool``).
- Pure cores, values in and out: ``config/`` (the file: models, loading, ``${VAR}``,
  problem wording, self-reference), ``naming`` (exposed names and resolution),
  ``catalog`` (the merged lists), ``arguments`` (inputSchema checks), ``messages`` (what
  the model is told of a name it got wrong), ``search/`` (the tool index and
  ``find_tools``' answers), ``results`` (the size limit), ``errors`` (the error tree,
  the one code table, the one translation of foreign exceptions), ``deadlines`` (a
  call's deadline: bound, extended, paused), ``policies`` (breaker, deadline, bulkhead
  and retry around a call), ``jsonrpc`` (framing and ids both lanes share, and the bounds
  on a message before it is parsed: size, depth, its id read unparsed), ``status``
  (counts per server and tool), ``redaction`` (credentials cut from every log line),
  ``throttle`` (log lines a peer can cause, at most so many a minute).
- The upstreams' side: ``upstream`` (one server: connection life, restarts, the call),
  ``listing`` (reading what a server offers), ``transports/`` (``link``: what a
  transport yields; ``stdio``: processes and their pipes; ``http``: streamable HTTP and
  SSE), ``rawcalls`` (the upstream lane), ``sdk`` (the one adapter over the SDK's private
  attributes), ``spawn`` (processes started before the SDK import, their one owner, and
  the watchdog that stops them if the proxy is killed), ``oauth/`` (signing in to remote
  servers: ``store`` the tokens' file, ``provider`` the SDK's OAuth client made to serve,
  ``loopback`` the redirect listener, ``signin`` one sign-in, ``gate`` an upstream's
  sign-in while serving, ``commands`` ``login`` and ``logout``).

I/O happens only in ``cli``, ``gateway/``, ``rounds``, ``watch``, ``client_wire``, ``lane``, ``server``,
``client_channel``, ``outbox``, ``passthrough``, ``supervisor``, ``upstream``, ``listing``,
``transports/``, ``rawcalls``, ``sdk``, ``spawn`` and ``oauth/`` (the browser, the
loopback listener, the tokens' files); ``config.loading`` reads the one file.

The event loop: the proxy runs on asyncio, through anyio's asyncio backend. Most code
is written against anyio (task groups, cancel scopes, memory streams), but the hot
paths use asyncio directly where anyio has no equivalent or costs a thread hop:
``client_wire`` and ``transports.stdio`` read and write event-loop pipes
(``asyncio.StreamReader``), and ``rawcalls`` answers with ``asyncio.Future``\\s. The
tests run on asyncio for the same reason.
"""

__version__ = "0.1.0"
