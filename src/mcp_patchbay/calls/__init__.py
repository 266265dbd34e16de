"""One tool call's path, whatever way it came, and the policies around it.

- ``path``: ``ToolPath``: the path built once as a chain of steps (its docstring draws their
  order), and the one error edge (our errors become ``isError`` results there and nowhere else).
- ``steps``: the one state a call carries (``CallState``), the one step type (``Step``), and the
  checks and the send: a broken config, what a call route may run, arguments, the status, the
  call in flight, the upstream's chain.
- ``resolve``: where the name becomes its tool, once: startup's wait, mistaken names, held tools,
  a lazy server started.
- ``routes``: the proxy's own tools on the path: the status tool, ``find_tools``, the call routes.
- ``confirm``: ``patchbay.confirm``: the user asked before ``call_tool`` runs what may change things.
- ``policies``: the chain around a call (breaker, deadline, bulkhead, retry), built once per
  upstream; the breaker's state machine and the restart backoff are pure.
- ``deadlines``: a call's deadline (``patchbay.timeout``): bound, extended by progress, paused.
- ``results``: the size limit of a result.
"""
