"""Tasks (2025-11-25; the tasks extension of 2026-07-28): tool calls answered later, through the proxy.

- ``serving``: ``Tasks``, the task-augmented ``tools/call`` (run by its upstream, or by the proxy
  when the upstream cannot); ``requests``: ``tasks/*``, answered for who started each task.
- ``waiting``: the upstreams' side: where their status notices and progress go, and a plain call
  of a tool whose upstream requires a task, run as one and waited for.
- ``records``: the tasks held, each bound to its owner, bounded per owner and by its ttl, and
  their wire form in each era (pure).
- ``ids``: the ids clients hold, sealed with the ``requestState`` keys (pure).
"""

from mcp_patchbay.tasks.requests import EXTENSION, UpdateTaskParams
from mcp_patchbay.tasks.serving import Tasks, capabilities

__all__ = ["EXTENSION", "Tasks", "UpdateTaskParams", "capabilities"]
