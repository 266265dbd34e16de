"""Every lane past the SDK, on both sides: why it exists, what it keeps, how it falls back.

A tool call crosses the proxy unchanged, so the SDK's pydantic models, dispatcher tasks and
memory-stream hand-offs around it are pure cost: most of the proxy's CPU per call
(docs/PERFORMANCE.md). Each lane takes the calls it can serve as JSON values and hands
everything else to the SDK's path untouched; each keeps what that path gives a call: the same
``calls.path`` (access, names, arguments, policies, the error edge), cancellation, progress,
the bounds on a message, and requests mid-call.

- The client's side: ``stdio_calls`` (a handshake-era ``tools/call`` read off our stdin),
  ``gateway_calls`` (a ``tools/call`` POST of a known session, or a stateless one) answered by
  ``gateway_answer`` (one JSON body, or SSE once progress comes first).
- The upstream's side: ``pipe_calls`` (the request line on a stdio upstream's pipe, its answer
  by id), ``http_calls`` (a POST of its own to a streamable HTTP upstream) on ``http1``
  (keep-alive HTTP/1.1 on asyncio streams with httptools' parser).

Falls back: whatever a lane cannot serve (another method, a task, ``requestState``, a session
it does not know, SSE upstreams) takes the SDK's path. ``gateway.fast_path: false`` turns the
gateway's off; ``$PATCHBAY_FAST_PATH=0`` and ``$PATCHBAY_HTTP_LANE=0`` turn lanes off at start.
"""
