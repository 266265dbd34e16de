"""The upstream servers.

- ``upstream``: one server as callers see it: what they ask, the calls sent to it;
  ``lifecycle``: its base: its state, its connection's life, restarts, parking, stop;
  ``notices``: what a server sends unasked (list changes, its tasks' notices).
- ``supervisor``: all of them: start, the startup wait, catalog rebuilds, reload.
- ``on_demand``: when a server runs (with the proxy, or when first needed; stopped when idle).
- ``listing``: reading what a server offers; ``listing_cache``: lazy servers' last listings.
- ``spawn``: processes started before the SDK import, their environment, the watchdog;
  ``early_start``: the plain stdio entries started before the config is validated, settled after;
  ``command_lookup``: the program a ``command`` names, on every OS.
- ``start_memory``: the most tools a config's last start found (an early listing in ``auto``).
- ``availability``: an upstream's state and what it says while it cannot serve;
  ``diagnosis``: that state in a person's words (``check``, ``tools``, ``call``, ``login``).
- ``transports``: the links: stdio processes, streamable HTTP, SSE.
"""
