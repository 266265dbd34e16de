"""The names of the config file's keys: top-level keys and the keys a server entry takes.

Plain data, and importing it imports nothing else (no pydantic), so code that reads the
file before it is validated (``early_start.early``) can share the names instead of copying
them. ``models`` defines the same entry keys as pydantic fields; a test keeps the two
in step.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "COMMON_ENTRY_KEYS",
    "ENTRY_KEYS",
    "IGNORED_ENTRY_KEYS",
    "REMOTE_ENTRY_KEYS",
    "SHAPES",
    "STDIO_ENTRY_KEYS",
    "TOP_LEVEL_KEYS",
]

TOP_LEVEL_KEYS: Final = ("mcpServers", "servers", "patchbay", "gateway", "profiles", "$schema", "inputs")
"""The keys the file may have at the top level."""

SHAPES: Final = ("mcpServers", "servers")
"""The top-level keys holding server entries, in the order their entries are read."""

IGNORED_ENTRY_KEYS: Final[frozenset[str]] = frozenset(
    {
        "description",  # free text, several clients
        "autoApprove",  # Cline: tools to run without asking (the client's decision, not ours)
        "alwaysAllow",  # Roo Code: same as autoApprove
        "icon",  # display only
    }
)
"""Keys that MCP clients keep in server entries for their own use; accepted and ignored.

``transportType`` (Cline's older spelling of ``type``) is not ignored: it is read as
``type`` when ``type`` is absent. ``envFile`` (VS Code) is rejected, since ignoring it
would start the server without its variables: put them in ``env`` instead.
"""

COMMON_ENTRY_KEYS: Final[frozenset[str]] = frozenset(
    {"timeout", "tool_timeouts", "tools", "prompts", "disabled", "max_concurrency", "origin", "start", "idle_stop"}
)
"""patchbay's own keys, which every server entry takes whatever its transport."""

STDIO_ENTRY_KEYS: Final[frozenset[str]] = COMMON_ENTRY_KEYS | {"command", "args", "env", "cwd"}
"""The keys of a server launched with ``command`` (the fields of ``StdioSpec``).

Not included: ``type`` / ``transportType``, which say the transport, and the
:data:`IGNORED_ENTRY_KEYS`.
"""

REMOTE_ENTRY_KEYS: Final[frozenset[str]] = COMMON_ENTRY_KEYS | {"url", "headers", "oauth"}
"""The keys of a remote server, with ``url`` (the fields of ``RemoteSpec``); same exclusions."""

ENTRY_KEYS: Final[frozenset[str]] = (
    STDIO_ENTRY_KEYS | REMOTE_ENTRY_KEYS | {"type", "transportType", "envFile"} | IGNORED_ENTRY_KEYS
)
"""Every key a server entry may be written with (``envFile`` only to be told it is not supported)."""
