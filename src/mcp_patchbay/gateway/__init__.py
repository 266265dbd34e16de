"""The HTTP gateway: ``mcp-patchbay serve --http``, one proxy for a team's clients.

- ``app``: the ASGI application (``/mcp`` on the SDK's streamable HTTP transport, both
  protocol eras; ``/healthz``, ``/readyz``; Host and Origin checks), ``/metrics`` on a
  listener of its own, and their life under uvicorn: startup, SIGTERM drain, shutdown.
- ``listeners``: the uvicorn servers under both listeners; ``host_checks``: Host and Origin
  checks (DNS rebinding) and CORS.
- ``fastpath``: a known session's ``tools/call`` answered past the SDK's server, on the
  parsed JSON, through the same ``Proxy.run_tool`` (everything else: the SDK's path);
  ``fast_answer`` its answer: one JSON body, or SSE once the call's progress comes first.
- ``edge``: the listener below HTTP (uvicorn's httptools protocol with the header size,
  header and body timeouts and connection count bounded; a way to drop a connection).
- ``auth``: who may connect (static bearer tokens, JWTs checked against an issuer's
  JWKS, Protected Resource Metadata and the ``WWW-Authenticate`` challenge).
- ``tokens``: who a bearer token is (``PatchbayToken``), and the static tokens' check;
  ``jwts``: JWTs checked against an issuer's JWKS, its keys fetched and cached.
- ``access``: who sees what (servers and tools per token or claim).
- ``identity``: who is calling, as one string per member: what quotas count by.
- ``metrics``: what ``/metrics`` reports.
- ``event_store``: resumable SSE, the events each 2025-era session's streams sent.
- ``bind``: where the gateway may listen (loopback, or sign-in required), checked before
  anything heavy is imported.

Everything behind ``/mcp`` is the same proxy as on stdio (``server.Proxy``): a call
takes the same path whichever transport brought it.
"""
