"""Every lane past the SDK, on both sides: why it exists, what each keeps, how each falls back.

Why: a tool call crosses the proxy unchanged, so the SDK's pydantic models, dispatcher tasks and
memory-stream hand-offs around it are pure cost, most of the proxy's CPU per call
(docs/PERFORMANCE.md). A lane takes the calls it can serve as JSON values and leaves everything
else to the SDK's path untouched.

What each keeps: what the SDK's path gives a call. On the client's side the same tool path
(``calls.path``: access, names, arguments, policies, the error edge), cancellation, progress, the
bounds on a message and requests mid-call; on the upstream's side the same errors, progress,
cancellation and bounds as the SDK's session.

- ``stdio_calls``: a ``tools/call`` read off our stdin once the ``initialize`` handshake is done;
  falls back on anything else: other methods, a call before the handshake or asking for a task, a
  malformed one.
- ``messages``: what every client-side lane does alike, once: ``split_meta`` (the progress token
  out of ``_meta``), ``progress_sender`` (progress as ``notifications/progress``) and
  ``without_later_fields`` (the 2026-07-28 result fields dropped).
- ``gateway_calls``: a ``tools/call`` POST of a known 2025-era session, or a stateless 2026-07-28
  one, answered by ``gateway_answer`` (one JSON body, or SSE once progress comes first). Falls
  back on a session it does not know, a task, ``requestState``, a client that may be asked for
  input, progress when the gateway answers JSON only.
- ``pipe_calls``: the request line on a stdio upstream's pipe, its answer and progress taken by
  id before the SDK's session sees them (``RawCalls``, whose ``begin``/``end`` the HTTP lane
  shares). Everything else the upstream sends goes on to the SDK's session.
- ``http_calls``: a POST of its own to a streamable HTTP upstream, on ``http1`` (keep-alive
  HTTP/1.1 on asyncio streams with httptools' parser). Falls back to the SDK's client before the
  session's headers are known, on a 401, 404, 307/308 or a challenging 403; an upstream behind an
  HTTP proxy, and SSE upstreams, get no lane.

One switch: ``patchbay.fast_path`` (on by default), which ``$PATCHBAY_FAST_PATH`` (``0`` or ``1``)
overrides, decided once at config load (``config.settings.fast_path_switch``) and given to every
lane through the settings: off, every call takes the SDK's path on both sides.
"""
