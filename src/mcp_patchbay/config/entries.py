"""One server entry: from its JSON object in the file to a :class:`ServerEntry`.

:func:`build_entry` settles the transport (``type``, Cline's ``transportType``, else
``command`` or ``url``), drops the keys clients keep for themselves, rejects keys that
belong to the other kind of server or to none, expands ``${VAR}``, makes ``cwd``
absolute and validates the rest with the models. A mistake never raises: the entry comes
back with ``spec=None`` and a ``problem`` naming every mistake found, so one bad entry
disables only itself. An entry that would launch patchbay with this same file is
returned the same way, marked ``self_reference``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import ValidationError

from mcp_patchbay.config.jsontext import JsonObject, duplicate_keys
from mcp_patchbay.config.keys import (
    COMMON_ENTRY_KEYS,
    ENTRY_KEYS,
    IGNORED_ENTRY_KEYS,
    REMOTE_ENTRY_KEYS,
    STDIO_ENTRY_KEYS,
)
from mcp_patchbay.config.models import OAuthSettings, RemoteSpec, ServerEntry, SpecBase, StdioSpec, ToolFilter
from mcp_patchbay.config.problems import ConfigProblem, key_path, quote, unknown_key, validation_problems
from mcp_patchbay.config.selfref import launches_same_config
from mcp_patchbay.config.variables import expand_entry

__all__ = ["TYPE_SPELLINGS", "build_entry"]

# Spellings of ``type`` (compared lower-cased), to the transport they mean.
TYPE_SPELLINGS: Final[Mapping[str, Literal["stdio", "http", "sse"]]] = {
    "stdio": "stdio",
    "http": "http",
    "streamable-http": "http",
    "streamablehttp": "http",
    "streamable_http": "http",
    "sse": "sse",
}

_NESTED_KEYS: Final[Mapping[str, Iterable[str]]] = {
    "tools": tuple(ToolFilter.model_fields),
    "oauth": tuple(OAuthSettings.model_fields),
}


def _absolute_cwd(cwd: str, config_path: Path, environ: Mapping[str, str]) -> str:
    """``~`` is the home directory (from ``environ``); other relative paths are relative to the config file."""
    home = environ.get("HOME") or environ.get("USERPROFILE")
    if home and (cwd == "~" or cwd.startswith(("~/", "~\\"))):
        return str(Path(home) / cwd[2:])
    return cwd if Path(cwd).is_absolute() else str(config_path.parent / cwd)


# Long on purpose: an entry's checks in the order the file is read, each naming its key.
def build_entry(shape: str, name: str, raw: object, config_path: Path, environ: Mapping[str, str]) -> ServerEntry:  # noqa: PLR0912, PLR0915
    """The entry ``name`` of ``shape`` (``mcpServers`` or ``servers``); never raises (see the module doc)."""
    prefix = (shape, name)
    here = key_path(*prefix)
    problems: list[ConfigProblem] = []
    if not name:
        problems.append(ConfigProblem(here, "server name must not be empty"))
    if not isinstance(raw, JsonObject):
        problems.append(ConfigProblem(here, "expected an object with 'command' or 'url'"))
        return ServerEntry(name, None, "; ".join(map(str, problems)))
    problems.extend(duplicate_keys(raw, prefix))
    data: dict[str, Any] = {k: v for k, v in raw.items() if k not in IGNORED_ENTRY_KEYS}

    if "envFile" in data:
        del data["envFile"]
        problems.append(
            ConfigProblem(key_path(*prefix, "envFile"), "'envFile' is not supported; put the variables in 'env'")
        )

    # The transport: from "type" (or Cline's "transportType"), else from command / url.
    type_key = "type" if "type" in data else "transportType"
    raw_type = data.pop("type", None) if type_key == "type" else data.get("transportType")
    data.pop("transportType", None)
    declared: Literal["stdio", "http", "sse"] | None = None
    if raw_type is not None:
        if isinstance(raw_type, str) and raw_type.lower() in TYPE_SPELLINGS:
            declared = TYPE_SPELLINGS[raw_type.lower()]
        else:
            problems.append(
                ConfigProblem(
                    key_path(*prefix, type_key),
                    "expected 'stdio', 'http' (also 'streamable-http') or 'sse'",
                )
            )

    kind: Literal["stdio", "remote"] | None = None
    has_command, has_url = "command" in data, "url" in data
    if has_command and has_url:
        problems.append(
            ConfigProblem(here, "has both 'command' and 'url'; an entry either launches a program or names a URL")
        )
    elif has_command:
        kind = "stdio"
        if declared in ("http", "sse"):
            problems.append(ConfigProblem(key_path(*prefix, type_key), f"type '{declared}' needs 'url', not 'command'"))
    elif has_url:
        kind = "remote"
        if declared == "stdio":
            problems.append(ConfigProblem(key_path(*prefix, type_key), "type 'stdio' needs 'command', not 'url'"))
    elif declared == "stdio":
        problems.append(ConfigProblem(here, "missing 'command' (the program to launch)"))
    elif declared is not None:
        problems.append(ConfigProblem(here, "missing 'url' (the remote server's address)"))
    else:
        problems.append(
            ConfigProblem(here, "needs 'command' (a program to launch over stdio) or 'url' (a remote server)")
        )

    allowed = {"stdio": STDIO_ENTRY_KEYS, "remote": REMOTE_ENTRY_KEYS, None: STDIO_ENTRY_KEYS | REMOTE_ENTRY_KEYS}[kind]
    for key in [k for k in data if k not in allowed]:
        del data[key]
        if key in STDIO_ENTRY_KEYS:
            message = f"{quote(key)} applies only to servers launched with 'command'"
        elif key in REMOTE_ENTRY_KEYS:
            message = f"{quote(key)} applies only to remote servers (with 'url')"
        else:
            message = unknown_key(key, sorted(ENTRY_KEYS))
        problems.append(ConfigProblem(here, message))

    expand_entry(data, environ, prefix, problems)
    cwd = data.get("cwd")
    if isinstance(cwd, str) and cwd:
        data["cwd"] = _absolute_cwd(cwd, config_path, environ)

    spec: StdioSpec | RemoteSpec | None = None
    try:
        if kind == "stdio":
            spec = StdioSpec.model_validate(data)
        elif kind == "remote":
            transport = declared if declared in ("http", "sse") else "http"  # a bad type is reported above
            spec = RemoteSpec.model_validate({**data, "transport": transport})
        else:  # still check the keys every entry shares
            SpecBase.model_validate({k: v for k, v in data.items() if k in COMMON_ENTRY_KEYS})
    except ValidationError as exc:
        problems.extend(validation_problems(exc, prefix, _NESTED_KEYS, ENTRY_KEYS))
        spec = None

    if problems:
        return ServerEntry(name, None, "; ".join(map(str, dict.fromkeys(problems))))
    if isinstance(spec, StdioSpec) and launches_same_config(spec, config_path, environ):
        return ServerEntry(
            name, None, "launches mcp-patchbay with this same config; skipped to avoid a loop", self_reference=True
        )
    return ServerEntry(name, spec)
