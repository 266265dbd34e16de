"""Presence: each running proxy says, in a file of its own, what it is doing, for ``mcp-patchbay ui``.

The page (``ui``) runs in a process of its own, and every MCP client launches a stdio proxy of
its own, so the page cannot ask them: each proxy publishes a snapshot instead, a JSON file in
the data folder's ``running/`` (0600, in a 0700 folder), written at start, after a change of its
servers (debounced: at most one write a second) and removed when it stops. A file whose
process is gone (a proxy killed) is ignored by readers and removed by the next one.

- ``folder``: the files: writing one, reading them all, cleaning stale ones (I/O, stdlib only).
- ``publish``: what a proxy says of itself (``snapshot``, values from the running ``Proxy``) and the
  task that keeps its file current (``publish``), started by ``cli.serve`` once serving.

A snapshot (``VERSION`` 1)::

    {"version": 1, "pid": 4242, "started_at": 1764000000.0, "updated_at": ..., "transport": "stdio",
     "client": {"name": "claude-code", "version": "2.1.0"} | null, "parent": {"pid": 4200, "name": "claude"},
     "config": "/home/me/patchbay.json", "profile": null,
     "servers": [{"name": "time", "state": "ready", "transport": "stdio", "tools": 2, "problem": null,
                  "restarts": 0, "remote": false, "held": ["..."], "tools_off": ["..."]}],
     "tools": [{"name": "time__get_current_time", "server": "time", "tool": "get_current_time",
                "title": null, "description": "...", "input_schema": {...}}]}

Nothing here is imported before the proxy serves; the UI's own packages never are by a proxy.
"""
