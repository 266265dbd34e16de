"""``mcp-patchbay ui`` and the gateway's ``/ui``: a page for the person running the proxies (issue 35).

It shows each proxy running for this user on this machine (``presence`` files), its servers'
states, problems, restarts, and calls, errors and times from the activity log; the tools each
proxy exposes, searched with ``find_tools``' ranking; the activity log, live; held definitions
with their diff and the scan's findings. It approves exactly the fingerprint shown, signs in
(``login``'s flow), and turns servers and tools off and on in the config file. Every action it
takes goes into the activity log. ``docs/UI.md`` is the person's account.

Starlette (the gateway's) with Jinja2 templates and htmx (vendored in ``static/``, 2.0.11, BSD
Zero-Clause: its ``htmx.LICENSE``): the page is plain HTML that works with scripts off, and htmx
makes its forms and the log's rows arrive without a reload. Nothing here is imported by a proxy.

- ``command``: ``mcp-patchbay ui``: the listener on 127.0.0.1, the printed address, the browser.
- ``app``: ``Ui``, the Starlette app behind its guard; ``guard``: the token, Host, Origin and
  form-token checks (pure).
- ``pages`` (GET) and ``actions`` (POST); ``views``: their values for the templates (pure).
- ``sources``: the proxies, configs and log the page reads, locally or on a gateway replica.
- ``held`` (the pins file), ``config_edit`` (the config file), ``signin`` (a sign-in in the
  background), ``tools_search`` (the index), ``log`` (the activity log's store).
- ``gateway``: the ``/ui`` of ``serve --http``, for identities an access rule makes admins.
"""
