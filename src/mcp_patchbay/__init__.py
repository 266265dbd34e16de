"""mcp-patchbay: one MCP server in front of many.

An MCP client launches the proxy over stdio (or many clients reach one over HTTP,
``serve --http``); the proxy connects to the upstream servers named in its config and
serves their tools, resources and prompts as one.

The path of a tool call, hop by hop (``docs/ARCHITECTURE.md`` draws it)::

    stdio:  client_wire ─> lane.CallLane (handshake-era tools/call, JSON values) ─────────┐
            client_wire ─> the SDK's Server ─> server.Proxy._call_tool ─> call_path ─────┤
    HTTP:   gateway.edge ─> gateway.app ─> sdk.SessionManager ─> the SDK's Server ─> ... ┤
            gateway.edge ─> gateway.app ─> sdk.SessionManager ─> gateway.fastpath ────────┤
                                                                                          v
      call_path.ToolPath.run: views (what the caller may see) ─> naming (mistaken names)
        ─> arguments ─> upstream.chain = policies (breaker ─> deadline ─> bulkhead ─> retry)
        ─> upstream.send_call ─> rawcalls (stdio: the request line on the pipe, answer by id)
                                 or transports.http_lane (streamable HTTP: a POST of its own)
                                 or sdk.send_raw (SSE, or what the lane leaves: the SDK's session)
        ─> results (size limit) ─> back the way it came.
      Errors: foreign exceptions become ours in ``foreign_errors.translate``/``foreign_errors.translated`` only;
      ours become what the client sees in ``call_path.ToolPath.error_result`` only.

Modules, by what they own:

- Entry and wiring: ``cli/`` (``options`` the command line, ``logs`` where lines go and the
  terminal's status line, ``serving`` stdio serving and signals, ``check`` the report,
  ``importing`` and ``install`` the commands over ``clients/``, ``tools`` and ``calling`` the
  tools and one call from the terminal, ``trust`` what is held and approving it;
  ``login``/``logout`` are ``oauth.commands``),
  ``early_handshake`` (``initialize``, and search mode's first lists, answered before the SDK
  is loaded), ``places`` (the proxy's own files on each OS: the default config, the data
  folder), ``bounded_read`` (every file read by path, whole: regular files only, within a
  limit; the config's is ``$PATCHBAY_MAX_CONFIG_BYTES``), ``start_memory`` (the most tools a
  config's last start found, for an early listing in ``auto`` mode), ``diagnosis`` (a
  server's state in a person's words: ``check``, ``tools``, ``call``, ``login``), ``gateway/``
  (``serve --http``: the ASGI app and its life, ``edge`` the listener's limits,
  ``fastpath``/``fast_answer`` a tool call answered past the SDK's server, sign-in,
  ``identity`` who is calling, access rules, metrics, resumable SSE events), ``server``
  (``Proxy``: the SDK's server wired to the modules below),
  ``supervisor`` (all upstreams: start, startup wait, catalog rebuilds, reload), ``watch``
  (config file changes, SIGHUP).
- The client's side: ``client_wire`` (our stdin/stdout as JSON-RPC lines, bounded before
  they are parsed), ``lane`` (handshake-era ``tools/call`` taken off the wire past the SDK's
  server), ``call_path`` (one ``tools/call`` whatever way it came, and the one error edge),
  ``confirm`` (``patchbay.confirm``: the user asked before ``call_tool`` runs what may change things),
  ``views`` (what one caller may see, cached per access), ``notifications`` (``list_changed``
  audiences, ``subscriptions/listen`` streams and their quotas), ``client_channel`` (requests
  and notices upstreams send back, routed to the session whose call caused them), ``outbox``
  (on the gateway, each session's notices and each call's progress posted, never awaited; a
  session that does not read is ended), ``rounds`` (a 2026-07-28 client's call suspended
  while its 2025-era upstream asks something: ``Exchange`` is one such call, ``_Ask`` one
  question put to the client as ``input_required``), ``request_state`` (the keys sealing
  ``requestState``, and the answer to a refused one), ``passthrough`` (resources, prompts,
  completion, logging level, roots), ``exposure`` (what the client lists: every tool, or
  search mode's ``find_tools`` and its two call routes, ``call_read`` and ``call_tool``;
  ``own_tools`` owns their definitions as JSON values), ``status`` (the one owner of the
  status: counts, what a caller may see of it, its resource and tool), ``tasks/`` (a tool call
  answered later: run by its upstream or by the proxy, ``tasks/*`` under the proxy's own sealed
  ids, each task its caller's, bounded; a plain call of a tool whose upstream requires a task,
  run as one and waited for).
- Pure cores, values in and out: ``config/`` (the file: models, settings, gateway settings,
  profiles, loading, ``${VAR}``, what the proxy holds for its own use and no upstream inherits,
  problem wording, self-reference), ``naming`` (exposed names and resolution),
  ``catalog`` (the merged lists), ``overrides`` (an entry's overrides applied to what its server
  lists: the definitions the model sees, the arguments the upstream gets), ``arguments``
  (inputSchema checks), ``name_errors`` (what
  the model is told of a name it got wrong), ``client_limits`` (what clients make of an
  exposed name, and its limit), ``availability`` (an upstream's state and what it says while
  it cannot serve), ``search/`` (the tool index and ``find_tools``' answers), ``apps`` (MCP
  Apps: a tool's user interface and who calls the tool, ``ui://`` URIs exposed per server), ``results``
  (the size limit), ``errors`` (the error tree, the one code table), ``foreign_errors`` (the one
  translation of foreign exceptions into that tree), ``capabilities`` (what upstreams are offered of
  the client's capabilities, and what a client declared of one request), ``deadlines`` (a call's
  deadline: bound, extended, paused),
  ``policies`` (the breaker's state machine and the restart backoff are pure; the chain
  around a call is not), ``jsonrpc`` (framing and ids both lanes share, and the bounds on a
  message before it is parsed: size, depth, its id read unparsed; a listing's untyped tool
  schemas read as objects'), ``redaction``
  (credentials cut from every log line), ``throttle`` (log lines a peer can cause, at most
  so many a minute).
- The upstreams' side: ``upstream`` (one server: connection life, restarts, the call),
  ``connection_errors`` (what a failing connection says: a start too slow, a process that
  exited, a connection lost, a malformed answer), ``on_demand`` (when a server runs: started
  with the proxy or when first needed, stopped when idle), ``listing`` (reading what a server
  offers), ``listing_cache`` (the lazy servers' last listings, kept in the data folder),
  ``transports/`` (``link``: what a transport yields; ``stdio``: processes and their pipes;
  ``http``: streamable HTTP and SSE; ``http_lane`` on ``http1``: tool calls POSTed past the SDK's client),
  ``rawcalls`` (the upstream lane: requests as JSON values, "raw" meaning without
  pydantic), ``sdk`` (the one adapter over the SDK's private attributes, and the gateway's
  session manager), ``spawn`` (processes started before the SDK import, their one owner, their
  environment, and the watchdog that stops them if the proxy is killed), ``command_lookup`` (the program a
  ``command`` names, on every OS: PATH, PATHEXT, beside our interpreter), ``oauth/`` (signing in to remote
  servers: ``store`` the tokens' file, ``provider`` the SDK's OAuth client made to serve,
  ``loopback`` the redirect listener, ``signin`` one sign-in, ``gate`` an upstream's
  sign-in while serving, ``commands`` ``login`` and ``logout``).
- Trust: ``trust/`` (pinned tool and prompt definitions and the scan of what the model reads:
  ``fingerprint``, ``scan`` and its ``patterns.toml``, ``decide`` what to serve of a listing,
  ``store`` the pins file, ``guard`` what the serving path asks; its own map says each module).
- Other clients' files: ``clients/`` (where each MCP client keeps its config on Linux, macOS
  and Windows; reading their servers for ``import``; writing the proxy's entry for
  ``install``, with backups and the record ``uninstall`` undoes; its own map says each module).
- The person's page: ``ui/`` (``mcp-patchbay ui`` and the gateway's ``/ui``: proxies, servers, tools,
  the activity log, held definitions; approving, signing in, turning servers and tools off and on;
  its own map says each module), fed by ``presence/`` (each stdio proxy's snapshot file in the
  data folder, for the page; the one thing of it a proxy loads, once serving).
- The activity log: ``activity/`` (every call, read and prompt through every proxy of the user, and
  upstreams' starts, crashes, restarts, sign-ins, held definitions and approvals, in one SQLite file
  of the data folder; the hooks' tuples written by a thread of its own, never waited for;
  ``mcp-patchbay log``; loaded by a stdio proxy once its start is over; its own map says each module).

I/O happens only in ``cli/``, ``gateway/``, ``server``, ``call_path``, ``notifications``,
``rounds``, ``watch``, ``client_wire``, ``early_handshake``, ``lane``, ``client_channel``,
``outbox``, ``passthrough``, ``supervisor``, ``upstream``, ``connection_errors`` (a dying
process's exit), ``listing``, ``transports/``, ``rawcalls``, ``sdk``, ``spawn``,
``start_memory`` and ``listing_cache`` (their files), ``oauth/`` (the browser, the
loopback listener, the tokens' files), ``trust/`` (``store``, ``locking`` and ``guard``: the pins
file), ``clients/`` (``reading``, ``files``, ``records``,
``running``: other clients' files and processes), ``presence/`` and ``ui/`` (the page's
files, listener and browser), ``activity/`` (``store``, ``writer``: the log's file, and its
thread); ``config.loading`` reads the one file. Every
file read whole by path goes through ``bounded_read``.

Who is calling travels explicitly down the tool path (``ToolPath.run``'s request), with
two ambient values left: ``rounds.CURRENT`` (the suspended call a question belongs to, set
only in the task ``Rounds.start`` runs) and the SDK's access token (set by its sign-in
middleware; the gateway's access rules and ``client_channel`` read it).

Names kept, though a newcomer may not guess them: ``rounds`` is the 2026-07-28
specification's own word for a call that asks the client something and resumes (its
multi-round-trip requests); ``lane`` (the client's side) and ``rawcalls`` (the upstream's
side) are the two halves of the fast path, named so in ``docs/PERFORMANCE.md`` and the
benchmarks' variants, "raw" meaning JSON values never made into pydantic models;
``client_wire`` is the bytes on our stdin and stdout, ``client_channel`` the requests
upstreams send back to a client. Each module's first docstring line says the same.

The event loop: the proxy runs on asyncio, through anyio's asyncio backend. Most code
is written against anyio (task groups, cancel scopes, memory streams), but the hot
paths use asyncio directly where anyio has no equivalent or costs a thread hop:
``client_wire`` and ``transports.stdio`` read and write event-loop pipes
(``asyncio.StreamReader``), ``rawcalls`` answers with ``asyncio.Future``\\s, and ``rounds``
runs each suspended call in an asyncio task of its own. Before the loop starts,
``early_handshake`` reads stdin in a thread of its own, until ``client_wire`` takes it over.
The tests run on asyncio for the same reason.
"""

__version__ = "0.1.0"
