"""The activity log (issue 35): what went through every proxy of this user, in one SQLite file.

Each tool call, resource read and prompt get (through any stdio proxy or the gateway), each
upstream start, crash, restart and sign-in needed, each definition held and approved becomes a
row of ``activity.sqlite3`` in the data folder, which ``mcp-patchbay log`` and the ``ui`` page read.
The serving path hands its hooks' raw tuples to a queue and never waits; a thread makes them
rows and writes them (``docs/PERFORMANCE.md``, "Activity log", says what it costs).

- ``rows``: ``ActivityRow``, ``ServerStats``, ``Limits`` (standard library only).
- ``store`` (I/O, ``sqlite3``): ``ActivityStore``, the file: WAL, several processes writing,
  0600, pruned by age and size; queries newest first, by id for following, per-server stats.
- ``events``: the hooks' tuples made rows (names, client, sizes, redaction).
- ``writer``: ``ActivityWriter``, the bounded queue and its thread.
- ``wiring``: ``keep_log``, a running proxy's hooks pointed at a writer; the ``trust`` command's approvals.
- ``command``: ``mcp-patchbay log``.

Nothing here is imported before a stdio proxy's start is over (``cli.serve`` loads ``wiring``
in a worker thread then, and ``sqlite3`` is imported by the writer's thread).
"""
