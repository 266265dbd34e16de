"""The bytes and messages on the wire, bounded before they are parsed.

- ``jsonrpc``: framing and ids both sides share; the bounds on a message before it is parsed
  (size, depth, its id read unparsed); a listing's untyped tool schemas read as objects'.
- ``stdio``: our own stdin and stdout as JSON-RPC lines (the client's side of stdio).
- ``early_handshake``: ``initialize`` (and search mode's first lists) answered before the
  SDK is loaded.
"""
