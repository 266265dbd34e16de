"""mcp-patchbay: one MCP server in front of many.

An MCP client launches the proxy over stdio; the proxy connects to the upstream
servers named in its config and serves their tools, resources and prompts as one.

Which module owns what, in the order a tool call travels through them:

- ``cli``: argument parsing, logging setup (stderr only), ``serve`` and ``check``.
- ``config``: the JSON config file (``mcpServers`` / ``servers`` shapes), pydantic
  validation, ``${VAR}`` expansion; a broken entry disables that entry only.
- ``server``: the downstream edge. Handlers for the client's requests; the only place
  where an exception becomes an ``isError`` result (or a JSON-RPC error).
- ``naming``: exposed names (``server__tool``) and resolution of mistaken names,
  with rapidfuzz suggestions. Pure: values in, values out.
- ``catalog``: the merged view of every upstream's tools, resources and prompts. Pure.
- ``arguments``: tool arguments checked against the tool's inputSchema. Pure.
- ``policies``: the per-upstream chain around a call (deadline, circuit breaker,
  concurrency limit, safe retries), each a ``Handler`` wrapping a ``Handler``.
- ``upstream``: one upstream server: its transport, session, restarts and state.
- ``supervisor``: all upstreams together: concurrent start, startup wait, change
  notifications, config reload.
- ``errors``: the proxy's exception tree and the one place foreign exceptions are
  translated into it. ``status``: counts and recent errors per server and tool.

Only ``upstream``, ``stdio``, ``supervisor``, ``server`` and ``cli`` do I/O.
"""

__version__ = "0.1.0"
