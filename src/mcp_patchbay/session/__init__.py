"""The proxy's server, and what one session sees, is told and is asked.

- ``proxy``: ``Proxy``: the SDK's server wired to everything else.
- ``views``: what one caller may see, cached per access (the gateway's rules).
- ``exposure``: the listing: every tool, or search mode's ``find_tools`` and its two call
  routes; ``own_tools`` owns their definitions as JSON values.
- ``passthrough``: resources, prompts, completion, logging level, roots.
- ``notifications``: ``list_changed`` audiences, ``subscriptions/listen`` streams and quotas.
- ``status``: the one owner of the status: counts, what a caller may see of it.
- ``requests_back``: requests and notices upstreams send back, routed to the session whose
  call caused them; ``capabilities``: what upstreams are offered of the client's.
- ``in_flight``: whose call in flight an upstream's request belongs to.
- ``rounds``: a 2026-07-28 call suspended while its upstream asks the client something;
  ``request_state``: the keys sealing ``requestState``.
- ``outbox``: on the gateway, each session's notices posted, never awaited.
- ``sdk``: the adapter over the SDK's private attributes (the raw send, what upstreams are offered).
- ``http_sessions``: the gateway's session manager (sessions per member, an event store each).
"""
