"""The ``trust`` command a person is told to run, and a server's strings made safe to print (pure).

    approve_command("notes", "tool", "fact", "3f2a9c1e...")
    # "mcp-patchbay trust notes --tool fact --fingerprint 3f2a9c1e"

The command names the definition's fingerprint (``FINGERPRINT_CHARS`` hex characters of it), so
approving approves the definition the person read: one the server changed since is refused
(``cli.trust``). Names come from the server: each is shell-quoted and cut at ``MAX_NAME_CHARS``
(a name that long is no real tool's; the cut name approves nothing, and says so).

``printable``: a server's string as a terminal or a log line may show it: controls (ANSI
escapes, line breaks that would forge log lines, the direction and hidden characters of
``text``) written as escapes, ``repr``-style.
"""

from __future__ import annotations

import shlex
import unicodedata

__all__ = ["FINGERPRINT_CHARS", "MAX_NAME_CHARS", "approve_command", "list_command", "printable"]

FINGERPRINT_CHARS = 8
"""Hex characters of a fingerprint a command carries: 32 bits, enough to tell one change from the next."""
MAX_NAME_CHARS = 128
"""The longest server or tool name put in a command as it is."""


def approve_command(server: str, kind: str, name: str, fingerprint: str = "") -> str:
    """``mcp-patchbay trust SERVER --tool NAME --fingerprint FP8``, quoted for a POSIX shell."""
    option = "--tool" if kind == "tool" else "--prompt"
    words = ["mcp-patchbay", "trust", _quoted(server), option, _quoted(name)]
    if fingerprint:
        words += ["--fingerprint", fingerprint[:FINGERPRINT_CHARS]]
    return " ".join(words)


def list_command(server: str) -> str:
    """``mcp-patchbay trust --list SERVER``, quoted."""
    return f"mcp-patchbay trust --list {_quoted(server)}"


def printable(text: str, limit: int = 200) -> str:
    """``text`` with every control or format character escaped, cut at ``limit`` characters."""
    cut = text if len(text) <= limit else text[:limit] + "…"
    if cut.isprintable():
        return cut
    return "".join(char if char.isprintable() else _escape(char) for char in cut)


def _escape(char: str) -> str:
    if unicodedata.category(char) == "Zs":  # spaces other than ' ' are printable already
        return char
    return repr(char)[1:-1] if char != "'" else char


def _quoted(name: str) -> str:
    """One shell word; a name with control characters as bash's and zsh's ``$'...'``, so the
    command printed shows them escaped (a terminal never reads them) and still names the tool."""
    cut = name if len(name) <= MAX_NAME_CHARS else name[:MAX_NAME_CHARS]
    if cut.isprintable():
        return shlex.quote(cut)
    escaped = "".join(_ansi_c(char) for char in cut)
    return f"$'{escaped}'"


def _ansi_c(char: str) -> str:
    if char in "\\'":
        return "\\" + char
    if char.isprintable():
        return char
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
