"""Signing in to remote upstreams with OAuth 2.1, on the SDK's OAuth client.

- ``store``: ``TokenStore``, the sign-in of one server URL in a file of the user's data
  directory (mode 0600): tokens, their expiry, the client registration, discovered metadata.
- ``provider``: ``UpstreamAuth``, the SDK's ``OAuthClientProvider`` made to serve: a served
  connection never waits on a browser, it reports what the server asked for (``Challenge``).
- ``urls``: the addresses a sign-in takes from a server, checked before use (https, or http on
  loopback; well formed; nothing a shell acts on): refused with ``AUTH_FAILED``, no browser opened.
- ``loopback``: the redirect URI, a listener on 127.0.0.1 while a sign-in waits.
- ``signin``: one sign-in with a person at a browser (``sign_in``): used by ``mcp-patchbay
  login`` and by the gate. What its failures mean for the model is ``errors.foreign``'s to say.
- ``gate``: ``SignInGate``, an upstream's sign-in while serving: judges refusals, starts
  at most one sign-in at a time when a call needs it, notices sign-ins made elsewhere.
- ``commands``: ``mcp-patchbay login`` and ``logout``, for a person at a terminal.

Imported only for remote servers that may sign in; the SDK's OAuth code loads with
``provider``, when the first such connection is made.
"""
