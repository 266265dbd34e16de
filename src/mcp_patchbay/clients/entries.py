"""Each client's server entry as an entry of patchbay's config, and the proxy's entry in each client.

:func:`normalize` maps one client's spellings to the config's entry shape (``command``, ``args``,
``env``, ``cwd``, or ``type``, ``url``, ``headers``; with ``timeout``, ``tools``, ``disabled`` where
the client has their like) and says what it dropped and why:

- every client: ``type`` ``stdio`` / ``http`` (also ``streamable-http``) / ``sse``; ``disabled``.
- Gemini CLI: ``httpUrl`` is streamable HTTP, a plain ``url`` is SSE; ``timeout`` is in
  milliseconds; ``includeTools`` / ``excludeTools`` are ``tools.allow`` / ``tools.deny``; ``$VAR``
  becomes ``${VAR}``.
- Codex: ``url`` (streamable HTTP); ``bearer_token_env_var`` becomes the header
  ``Authorization: Bearer ${VAR}``, ``http_headers`` and ``env_http_headers`` headers;
  ``tool_timeout_sec`` is ``timeout``; ``enabled = false`` is ``disabled``; ``enabled_tools`` /
  ``disabled_tools`` are the tool filter.
- Windsurf: ``serverUrl`` is ``url``.
- VS Code: ``${workspaceFolder}`` (in a project's file) and ``${userHome}`` are filled in;
  ``${input:...}`` cannot be carried (patchbay cannot ask for it): reported, and the config
  leaves the entry off until it is replaced.
- Claude Code, Gemini CLI: ``oauth``'s client id (and secret, scopes, callback port).

:func:`proxy_entry` is the entry ``install`` writes into each client. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, cast

from mcp_patchbay.clients.locations import CLIENTS
from mcp_patchbay.config.entries import TYPE_SPELLINGS

__all__ = [
    "INPUT_VARIABLE",
    "Normalized",
    "content",
    "normalize",
    "proxy_entry",
]

Transport = Literal["stdio", "http", "sse"]

INPUT_VARIABLE: Final = re.compile(r"\$\{input:[^}]*\}")
_BARE_VARIABLE: Final = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
ORDER: Final = ("command", "args", "env", "cwd", "type", "url", "headers", "oauth", "timeout", "tools", "disabled")
"""The keys of an entry ``import`` writes, in the order it writes them (``origin`` comes last)."""

_REASONS: Final[Mapping[str, str]] = {
    "description": "a note for people only",
    "icon": "display only",
    "autoApprove": "the client's approvals, not the proxy's",
    "alwaysAllow": "the client's approvals, not the proxy's",
    "trust": "Gemini CLI's own: it skips Gemini's confirmations; each client keeps asking on its own",
    "envFile": "patchbay reads no env file: put its variables in 'env'",
    "dev": "VS Code's server-development mode",
    "gallery": "VS Code's gallery record",
    "version": "VS Code's gallery record",
    "headersHelper": "patchbay runs no command for headers: put them in 'headers'",
    "authProviderType": "Gemini CLI's sign-in with Google credentials; patchbay signs in with OAuth when asked",
    "env_vars": "patchbay passes its own environment to every server it starts",
    "startup_timeout_sec": "patchbay waits for all servers as one ('startup_wait' in its settings)",
    "required": "Codex's own: its entry for patchbay says it",
    "timeout": "not in a unit patchbay knows for this client",
    "oauth": "patchbay finds the authorization server itself; only a client id, secret and scopes carry",
}


@dataclass(frozen=True)
class Normalized:
    """One client entry as a config entry, or why it cannot be one."""

    entry: dict[str, Any] | None
    """None when the entry is skipped (``skipped`` says why)."""
    transport: Transport | None = None
    dropped: dict[str, str] = field(default_factory=dict[str, str])
    """Each key left out, with why."""
    notes: tuple[str, ...] = ()
    """Anything else a person should know (a VS Code input left in place)."""
    skipped: str | None = None


def _text(value: object) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return None


def _strings(value: object) -> dict[str, str] | None:
    if not isinstance(value, dict):
        return None
    out: dict[str, str] = {}
    for key, item in cast("dict[object, object]", value).items():
        text = _text(item)
        if not isinstance(key, str) or text is None:
            return None
        out[key] = text
    return out


def _names(value: object) -> list[str] | None:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in cast("list[object]", value)):
        return None
    return list(cast("list[str]", value))


def _oauth(value: object, dropped: dict[str, str]) -> dict[str, Any] | None:
    """Claude Code's and Gemini CLI's ``oauth`` object, as far as patchbay's takes it."""
    if not isinstance(value, dict):
        dropped["oauth"] = "not an object"
        return None
    raw = cast("dict[str, object]", value)
    if raw.get("enabled") is False:
        return None
    out: dict[str, Any] = {}
    for theirs, ours in (("clientId", "client_id"), ("clientSecret", "client_secret")):
        if isinstance(raw.get(theirs), str) and raw[theirs]:
            out[ours] = raw[theirs]
    scopes = raw.get("scopes")
    if isinstance(scopes, list) and scopes:
        out["scope"] = " ".join(str(s) for s in cast("list[object]", scopes))
    if isinstance(raw.get("callbackPort"), int):
        out["callback_port"] = raw["callbackPort"]
    if set(raw) - {"clientId", "clientSecret", "scopes", "callbackPort", "enabled"}:
        dropped["oauth"] = _REASONS["oauth"]
    return out or None


def _fill(entry: dict[str, Any], replace: Callable[[str], str]) -> None:
    """Apply ``replace(text) -> text`` to every string value the config expands."""
    for key in ("command", "cwd", "url"):
        if isinstance(entry.get(key), str):
            entry[key] = replace(entry[key])
    if "args" in entry:
        entry["args"] = [replace(a) for a in entry["args"]]
    for key in ("env", "headers"):
        if key in entry:
            entry[key] = {k: replace(v) for k, v in entry[key].items()}


# Long on purpose: one branch per client's entry shape, kept side by side to compare.
def normalize(client: str, raw: object, *, project: str | None = None, home: str | None = None) -> Normalized:  # noqa: PLR0912, PLR0915
    """``raw``, an entry of ``client``'s file, as an entry of patchbay's config (see the module doc).

    ``project``: the project folder when the entry comes from the project's own file (VS Code's
    ``${workspaceFolder}``); ``home``: the user's home (``${userHome}``)."""
    if not isinstance(raw, dict):
        return Normalized(None, skipped="not an object")
    data = dict(cast("dict[str, object]", raw))
    dropped: dict[str, str] = {}
    entry: dict[str, Any] = {}
    declared: Transport | None = None

    if client == "windsurf" and "serverUrl" in data and "url" not in data:
        data["url"] = data.pop("serverUrl")
    if client == "gemini" and "httpUrl" in data:
        data["url"] = data.pop("httpUrl")
        declared = "http"
    if client == "codex":
        _codex(data, entry)

    raw_type = data.pop("type", data.pop("transportType", None))
    if raw_type is not None:
        spelt = str(raw_type).lower()
        if spelt in ("ws", "websocket"):
            return Normalized(None, skipped="a WebSocket server; patchbay speaks stdio, streamable HTTP and SSE")
        if spelt not in TYPE_SPELLINGS:
            return Normalized(None, skipped=f"unknown type {raw_type!r}")
        declared = TYPE_SPELLINGS[spelt]
    if "command" in data and "url" in data:
        return Normalized(None, skipped="has both 'command' and 'url'")
    if "command" in data:
        command = data.pop("command")
        if not isinstance(command, str) or not command.strip():
            return Normalized(None, skipped="its 'command' is not a program name")
        entry["command"] = command
        transport: Transport = "stdio"
    elif "url" in data:
        url = data.pop("url")
        if not isinstance(url, str):
            return Normalized(None, skipped="its 'url' is not text")
        if declared is None:
            declared = "sse" if client == "gemini" else "http"  # Gemini's plain 'url' is SSE
        transport = "http" if declared == "stdio" else declared
        entry["type"], entry["url"] = transport, url
    else:
        return Normalized(None, skipped="has neither 'command' nor 'url'")

    if "args" in data:
        value = data.pop("args")
        args = [_text(v) for v in cast("list[object]", value)] if isinstance(value, list) else None
        if args is None or any(a is None for a in args):
            return Normalized(None, skipped="its 'args' is not a list of words")
        if args:
            entry["args"] = args
    for key in ("env", "headers"):
        if key in data:
            mapping = _strings(data.pop(key))
            if mapping is None:
                return Normalized(None, skipped=f"its {key!r} is not an object of texts")
            if mapping:
                entry[key] = mapping
    if isinstance(data.get("cwd"), str) and data["cwd"]:
        entry["cwd"] = data.pop("cwd")
    if client == "gemini":
        _gemini(data, entry, dropped)
    if "oauth" in data and client in ("claude-code", "gemini") and transport != "stdio":
        oauth = _oauth(data.pop("oauth"), dropped)
        if oauth:
            entry["oauth"] = oauth
    if isinstance(data.get("disabled"), bool) and data.pop("disabled"):
        entry["disabled"] = True
    for key in data:
        dropped[key] = _REASONS.get(key, f"{_title(client)}'s own key, not one of patchbay's")
    notes = _variables(client, entry, project, home)
    ordered = {key: entry[key] for key in ORDER if key in entry}
    return Normalized(ordered, transport, dropped, notes)


def _title(client: str) -> str:
    return next((c.title for c in CLIENTS if c.id == client), client)


def _codex(data: dict[str, object], entry: dict[str, Any]) -> None:
    """Codex's ``[mcp_servers.NAME]`` keys that have no like elsewhere, taken out of ``data``."""
    headers: dict[str, str] = {}
    token = data.pop("bearer_token_env_var", None)
    if isinstance(token, str) and token:
        headers["Authorization"] = f"Bearer ${{{token}}}"
    static = _strings(data.pop("http_headers", None))
    headers.update(static or {})
    from_env = _strings(data.pop("env_http_headers", None))
    headers.update({name: f"${{{variable}}}" for name, variable in (from_env or {}).items()})
    if headers:
        data["headers"] = {**(_strings(data.get("headers")) or {}), **headers}
    seconds = data.pop("tool_timeout_sec", None)
    if isinstance(seconds, int | float) and not isinstance(seconds, bool) and seconds > 0:
        entry["timeout"] = seconds
    if data.pop("enabled", True) is False:
        data["disabled"] = True
    allow, deny = _names(data.pop("enabled_tools", None)), _names(data.pop("disabled_tools", None))
    if allow is not None or deny:
        entry["tools"] = {**({"allow": allow} if allow is not None else {}), **({"deny": deny} if deny else {})}


def _gemini(data: dict[str, object], entry: dict[str, Any], dropped: dict[str, str]) -> None:
    """Gemini CLI's keys with a like in patchbay's: ``timeout`` (ms) and the tool lists."""
    milliseconds = data.pop("timeout", None)
    if isinstance(milliseconds, int | float) and not isinstance(milliseconds, bool) and milliseconds > 0:
        entry["timeout"] = milliseconds / 1000
    elif milliseconds is not None:
        dropped["timeout"] = "not a number of milliseconds"
    allow, deny = _names(data.pop("includeTools", None)), _names(data.pop("excludeTools", None))
    if allow is not None or deny:
        entry["tools"] = {**({"allow": allow} if allow is not None else {}), **({"deny": deny} if deny else {})}


def _variables(client: str, entry: dict[str, Any], project: str | None, home: str | None) -> tuple[str, ...]:
    """Rewrite each client's own variable forms into the config's; what cannot be carried, said."""
    if client == "gemini":
        _fill(entry, lambda text: _BARE_VARIABLE.sub(r"${\1}", text))
    if client == "vscode":

        def fill(text: str) -> str:
            if project is not None:
                text = text.replace("${workspaceFolder}", project)
            return text.replace("${userHome}", home) if home is not None else text

        _fill(entry, fill)
    inputs = sorted({m.group(0) for text in _texts(entry) for m in INPUT_VARIABLE.finditer(text)})
    if not inputs:
        return ()
    return (
        f"uses {', '.join(inputs)}: VS Code asks for it, patchbay cannot; the entry stays off until you "
        "replace it with ${VAR} and set that variable",
    )


def _texts(value: object) -> list[str]:
    """Every string inside ``value``."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for v in cast("dict[str, object]", value).values() for t in _texts(v)]
    if isinstance(value, list):
        return [t for v in cast("list[object]", value) for t in _texts(v)]
    return []


def content(entry: Mapping[str, Any]) -> dict[str, Any]:
    """What an entry does, without where it came from: two entries are the same server when equal."""
    same = {key: value for key, value in entry.items() if key != "origin" and value not in ({}, [], None)}
    if same.get("type") == "http" and "url" in same:
        del same["type"]  # 'http' is the default for a url
    return same


def proxy_entry(client: str, command: str, args: list[str], startup_timeout: int) -> dict[str, Any]:
    """The entry ``install`` writes into ``client``'s file, in that client's spelling."""
    if client == "codex":
        # required: Codex waits for the proxy before its first model request (otherwise ~60 ms).
        return {"command": command, "args": args, "required": True, "startup_timeout_sec": startup_timeout}
    if client == "claude-code":
        return {"type": "stdio", "command": command, "args": args, "env": {}}  # as 'claude mcp add' writes it
    if client == "vscode":
        return {"type": "stdio", "command": command, "args": args}
    return {"command": command, "args": args}
