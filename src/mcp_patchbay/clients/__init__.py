"""Other MCP clients' config files: where they are, the servers in them, the proxy's entry written into them.

``import`` reads the servers every client has (``reading``, ``merging``) into one patchbay config;
``install`` writes the proxy's entry into one client's file and ``uninstall`` takes it out
(``installing``, ``files``, ``installs``). The clients: Claude Desktop, Claude Code, Cursor, VS Code,
Windsurf, Gemini CLI and Codex. Modules, each owning one thing (one imports only those above it):

- ``locations``: every client's files on Linux, macOS and Windows, from an injected
  environment (the one table of OS-specific paths), and the clients' names. Pure.
- ``formats``: the files' formats as text: JSON (with comments, to read), TOML; edits that keep
  each file's style (indent, key order, TOML comments through ``tomlkit``). Pure.
- ``entries``: one client's entry as an entry of patchbay's config (each client's spellings),
  and the proxy's entry in each client's spelling. Pure.
- ``reading``: the servers in the clients' files, what was skipped, what could not be read.
- ``merging``: every server once (identical entries merged, the same name with other content
  renamed), each with its ``origin``. Pure.
- ``secret_values``: values in the entries that look like secrets (tokens, keys in ``env``,
  ``headers``, ``args``) and the ``${secret:NAME}`` that ``import`` leaves in their place. Pure.
- ``installing``: the edit ``install`` / ``uninstall`` make to a file's text. Pure.
- ``files``: a timestamped backup, an atomic write, a file's digest.
- ``installs``: what each install did (``installs.json``), for ``uninstall``.
- ``launch``: the absolute command that starts this installation of the proxy.
- ``running``: whether a client is running (to say "restart it"); best effort.

The commands themselves, and every word a person reads, are ``cli.importing`` and ``cli.install``.
"""
