"""Trust (issue 25): nothing a server tells the model changes behind the user's back, and no
tool text gives the model orders unseen. ``docs/TRUST.md`` is the user's account.

The path of a server's fresh listing (``supervisor`` reviews every listing through ``serving``
before the catalog is built; ``calls.path`` asks it of a name it cannot run)::

    listing ─> serving.ServingTrust.review ─> guard.Guard.answer (from memory: a stat) ─> served / held
                                        └─> waits: ServingTrust.settle, in a worker thread, every listing
                                            waiting at once ─> Guard.decide_all ─> decide.decide: fingerprint
                                            each definition, compare with its pin, scan the new or changed
                                            ones ─> store.PinStore.update_many (lock, read if changed, one write)
                                            ─> Guard.settle on the loop ─> the supervisor rebuilds: served / held
    a call to a held tool ─> Guard.held_call ─> errors.tool_changed (TOOL_CHANGED)
    mcp-patchbay trust ─> cli.trust ─> PinStore.update (approve) ─> the serving proxies see
                          Guard.changed() and review again ─> list_changed

Modules (pure unless said):

- ``fingerprint``: what is pinned of a tool or prompt, and its SHA-256.
- ``text``: hidden characters, direction controls and look-alike letters; the text as patterns read it.
- ``strings``: the strings a model reads of a definition, each with where it is.
- ``scan``: ``Scanner`` (the patterns of ``patterns.toml``, data shipped in the package, the
  checks in code and the learned reading, read once per process by the worker thread that scans first) and
  ``ScanContext`` (the other servers, the catalog's lengths); its parts:
  - ``findings``: ``Finding`` (what was found, where: the field and the character) and its sentence.
  - ``context``: ``ScanContext``, which names are another server's or this server's own.
  - ``rules``: ``patterns.toml`` read (words, signals, patterns, checks), each branch compiled when a
    text first passes its gates; ``patterns.gates.json`` ships every expression's branches and gates
    (``python -m mcp_patchbay.trust.rules`` writes it).
  - ``gates``: each expression split into branches, each gated by strings every match holds.
  - ``reader``: one scope of a definition as the patterns read it, matches and sentences.
  - ``code_rules``: what cannot be a pattern, each saying why (hidden characters, base64, another
    server's tools, what a tool says it is for, a parameter's default an outside address).
  - ``languages``: each sentence's language and the tool's own: a sentence in another language
    is read by the patterns of scope ``switched``.
  - ``learned``: the learned reading (a linear model over words and letter groups, its weights and
    thresholds shipped as ``learned_model.bin``, trained by ``benchmarks/scan_train.py``): holds a
    text that reads as poisoned as a whole, clears a pattern's finding in one that reads as honest.
- ``decide``: ``decide`` (what to serve of a listing, given its pins and ``Policy``),
  ``approve``, and the records (``ServerPins``, ``Pin``, ``Pending``, ``Held``).
- ``diff``: a held definition against the approved one, for a person.
- ``wording``: the ``trust`` command a person is told to run (quoted, naming the held
  definition's fingerprint), and a server's strings escaped for a terminal or a log.
- ``store`` (I/O: ``pins.json`` in the data folder): ``PinStore``, ``entry_key``.
- ``locking`` (I/O): the exclusive lock processes and replicas take around a change.
- ``guard`` (I/O through ``store``): ``Guard``, what the serving path calls.
- ``serving`` (I/O through ``guard``): ``ServingTrust``, the supervisor's: each rebuild's reviews,
  the scans and writes they take run in a worker thread, held tools denied by their source's
  filter, held prompts left out, ``TOOL_CHANGED`` for a name that stands for a held one.
"""
