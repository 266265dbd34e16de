"""The error tree and where foreign errors become ours.

- ``tree``: the tree, split by whose fault (the client's, an upstream's), and the one code table.
- ``foreign``: the one translation of foreign exceptions (anyio, OSError, httpx, the SDK's, its
  OAuth flow's) into the tree, a sign-in's failures among them; with two parts beside it:
  ``exception_groups`` (which leaf of a group says what happened) and ``http_status`` (what an
  upstream's HTTP status means).
- ``connection``: what a failing connection says (a start too slow, a process that exited, a
  connection lost, a malformed answer).
- ``names``: what the model is told of a name it got wrong.

``calls.path`` turns them into what the client sees.
"""
