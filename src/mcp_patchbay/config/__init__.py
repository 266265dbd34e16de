"""The config file: which upstream servers to serve, and the proxy's own settings.

The file is JSON, in the shape MCP clients already use, so an existing client config
can be pointed at directly::

    {
      "mcpServers": {                      // Claude Desktop, Cursor, Claude Code
        "github": {
          "command": "npx",
          "args": ["-y", "@modelcontextprotocol/server-github"],
          "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}"},
          "timeout": 120,
          "tools": {"deny": ["delete_*"]}
        },
        "docs": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}}
      },
      "servers": {},                       // VS Code's shape; may appear beside mcpServers
      "patchbay": {"timeout": 50},         // proxy-wide settings (see Settings)
      "profiles": {"coding": {"servers": ["github"]}}  // chosen with --profile (see profiles)
    }

(The comments above are for this docstring only: the file is plain JSON.)

An entry with ``command`` is launched over stdio (``args``, ``env``, ``cwd``); an entry
with ``url`` is a remote server, streamable HTTP unless ``"type": "sse"``, with
``headers``. Both kinds take patchbay's own keys ``timeout``, ``tool_timeouts``,
``disabled``, ``tools`` (``allow``/``deny``/``always_list`` glob lists, and ``overrides``: what the
model sees of a tool instead of the upstream's definition), ``prompts`` (their ``overrides``) and
``max_concurrency``. Keys
that clients keep in entries for themselves (:data:`IGNORED_ENTRY_KEYS`) are ignored.

``${VAR}``, ``${VAR:-default}`` and VS Code's ``${env:VAR}`` are expanded from the
environment in ``command``, ``args``, ``env`` values, ``cwd``, ``url``, header values and
``oauth.client_secret``; ``${secret:NAME}`` in the same places, from the OS keyring.
A relative ``cwd`` is taken relative to the config file's directory (``~/`` is the home directory).

Mistakes are reported with the file and the key path. A mistake in the file as a whole
(not JSON, an unknown top-level or ``patchbay`` key, ...) raises :class:`ConfigError`;
a mistake inside one server entry only disables that entry: it is still returned, with
``spec=None`` and a ``problem`` saying why.

The package is pure apart from reading the one file (and resolving paths to detect an
entry that would launch patchbay itself with this same file, and reading the keyring for
``${secret:NAME}``). Its modules, each owning
one thing (a module imports only those listed above it):

- ``keys``: the names of the file's keys (top level, server entries). Imports nothing,
  not even pydantic, so code that runs before pydantic is loaded can use it.
- ``withheld``: what the proxy holds in its environment for its own use (the gateway's tokens,
  client secrets, remote servers' headers), withheld from stdio upstreams that do not name it.
  The standard library only, like ``keys``.
- ``problems``: :class:`ConfigProblem`, :class:`ConfigError`, and how mistakes are
  worded (key paths, quoting, "did you mean", pydantic errors as short messages).
- ``overrides``: the models of an entry's ``tools.overrides`` and ``prompts.overrides`` (a
  tool's or prompt's new name, description, arguments, annotations), checked as far as the file
  alone can tell (``mcp_patchbay.catalog.overrides`` applies them to what the server lists).
- ``models``: the pydantic models and dataclasses a loaded config is made of (server
  entries, tool filters, the whole file) and what the models share (``STRICT_MODEL``).
- ``settings``: ``Settings``, the ``"patchbay"`` object, each key with its default.
- ``gateway``: ``GatewaySettings``, the ``"gateway"`` object (listening, access rules,
  OAuth, the gateway's limits).
- ``jsontext``: the file's text as JSON, remembering keys given more than once.
- ``secretstore``: the OS keyring, where ``${secret:NAME}`` values live (``keyring`` is
  imported only when a secret is named).
- ``variables``: ``${VAR}`` and ``${secret:NAME}`` expansion.
- ``selfref``: whether an entry would launch patchbay itself with this same config.
- ``entries``: one server entry, from its JSON object to a :class:`ServerEntry`.
- ``profiles``: the ``"profiles"`` object, :func:`apply_profile` (a Config narrowed to one
  profile: ``--profile``) and the gateway's access rules that name a profile.
- ``loading``: :func:`load_config` and :func:`parse_config`: the file as a whole.
- ``watch``: the file's changes and SIGHUP, which reload it while the proxy serves (the one
  module here with I/O beyond the read).

This ``__init__`` only names the public API and imports each name's module when the
name is first used (PEP 562), so ``import mcp_patchbay.config.keys`` stays as light as
that module.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from mcp_patchbay.config.keys import IGNORED_ENTRY_KEYS

if TYPE_CHECKING:
    from mcp_patchbay.config.loading import load_config, parse_config
    from mcp_patchbay.config.models import (
        Config,
        OAuthSettings,
        Profile,
        RemoteSpec,
        ServerEntry,
        StdioSpec,
        ToolFilter,
    )
    from mcp_patchbay.config.overrides import (
        AnnotationsOverride,
        ArgumentOverride,
        PromptOptions,
        PromptOverride,
        ToolOverride,
    )
    from mcp_patchbay.config.problems import ConfigError, ConfigProblem
    from mcp_patchbay.config.profiles import apply_profile
    from mcp_patchbay.config.settings import Settings
__all__ = [
    "IGNORED_ENTRY_KEYS",
    "AnnotationsOverride",
    "ArgumentOverride",
    "Config",
    "ConfigError",
    "ConfigProblem",
    "OAuthSettings",
    "Profile",
    "PromptOptions",
    "PromptOverride",
    "RemoteSpec",
    "ServerEntry",
    "Settings",
    "StdioSpec",
    "ToolFilter",
    "ToolOverride",
    "apply_profile",
    "load_config",
    "parse_config",
]

# Each public name to the module defining it; keep in step with the imports above.
_MODULE_OF: Final[Mapping[str, str]] = {
    "Config": "models",
    "OAuthSettings": "models",
    "Profile": "models",
    "RemoteSpec": "models",
    "ServerEntry": "models",
    "Settings": "settings",
    "StdioSpec": "models",
    "ToolFilter": "models",
    "AnnotationsOverride": "overrides",
    "ArgumentOverride": "overrides",
    "PromptOptions": "overrides",
    "PromptOverride": "overrides",
    "ToolOverride": "overrides",
    "ConfigError": "problems",
    "ConfigProblem": "problems",
    "apply_profile": "profiles",
    "load_config": "loading",
    "parse_config": "loading",
}


def __getattr__(name: str) -> object:
    """Import a public name's module on first use (PEP 562); later uses find it directly."""
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
