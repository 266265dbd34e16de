"""The benchmarks: how fast and how big the proxy is, measured against the same upstreams served directly.

Benchmarks, not tests: nothing here is run or asserted by the test suite (CI type-checks and lints
it); the tests only borrow ``processes``, the one helper for processes, ports and ``/proc``.
Each module runs on its own as ``.venv/bin/python -m benchmarks.NAME --help``; ``scripts/bench``
runs ``benchmarks.report``, which writes docs/PERFORMANCE.md.

stdio proxy (``scripts/bench``):
- ``report``: runs the parts below and writes docs/PERFORMANCE.md through ``report_render``
  (tables, ``report_template.md``), ``report_findings`` (the sentences, each shown only when its
  figures were measured) and ``doc_sections`` (the sections other benchmarks wrote, carried over).
- ``calls``: per-call latency and throughput, direct and through the proxy (and FastMCP).
- ``startup``: time to a complete ``tools/list``, 1 and 10 upstreams; the timelines from spawn to
  ``initialize`` and the first ``tools/list`` answered, in all and in search mode; ``--pins``: the
  start with 10 upstreams under each pin setting, first sight and second start (its own section).
- ``memory``: the proxy's RSS over 100,000 calls.
- ``stdio_profile``: CPU per call from /proc, a py-spy profile, import cost.
- ``naming``: the name resolver's cost per call (run by path, also on an older commit's snapshot).
- ``server``: the upstream they call (the SDK's low-level ``Server`` over stdio; run by path).
- ``common``: paths, configs, the sides' commands, clients and statistics they share.

HTTP gateway:
- ``gateway``: the gateway against its upstream served directly, both eras, CPU and memory
  per session; ``gateway_load`` its load generator (a process per run), ``gateway_profile`` a
  py-spy profile of it. The upstream is ``tests/servers/gateway_upstream.py``, shared with the
  conformance tests. ``gateway_peer``: mcp-hub beside them (``gateway --peer``).
- ``replicas`` (``scripts/replicas``): three gateways behind HAProxy, one killed mid-run;
  ``replicas_clients`` the clients, ``replicas_report`` the verdicts, ``replicas_upstream`` each
  replica's upstream.
- ``stuck_stream``: clients that never read their streams, against one that does.

Others: ``search`` and ``search_stdio`` (search mode's ranking, answer size and latency, on
``search_data/``), ``listing`` (the cost of a listing), ``oauth`` (a signed-in call's overhead),
``lazy`` (30 servers started when needed against the same 30 eager: processes, first listing,
memory, a first call's added latency; its own section of docs/PERFORMANCE.md).

- ``processes``: free ports and /proc readings (CPU, RSS, children, environment), one copy.

The benchmarks use the tests' fixtures (run by path), never the other way round: the test suite
needs nothing from here.
"""
