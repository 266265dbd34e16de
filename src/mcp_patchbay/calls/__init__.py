"""One tool call's path, whatever way it came, and the policies around it.

- ``path``: ``ToolPath``: the name's resolution, argument checks, confirmation and suspended
  calls, the upstream's chain, and the one error edge (our errors become ``isError`` results
  there and nowhere else).
- ``policies``: the chain around a call (breaker, deadline, bulkhead, retry), built once per
  upstream; the breaker's state machine and the restart backoff are pure.
- ``deadlines``: a call's deadline (``patchbay.timeout``): bound, extended by progress, paused.
- ``results``: the size limit of a result.
- ``confirm``: ``patchbay.confirm``: the user asked before ``call_tool`` runs what may change things.
"""
