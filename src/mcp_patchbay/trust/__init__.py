"""Trust: nothing a server tells the model changes behind the user's back, and no tool text
gives the model orders unseen.

Modules (pure unless said):

- ``fingerprint``: what is pinned of a tool or prompt, and its SHA-256.
- ``text``: hidden characters, direction controls and look-alike letters; the text as patterns read it.
- ``scan``: ``Scanner`` (the patterns of ``patterns.toml``, data shipped in the package, and
  the checks in code) and ``ScanContext`` (the other servers, the catalog's lengths).
"""
