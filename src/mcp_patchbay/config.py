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
      "patchbay": {"timeout": 50}          // proxy-wide settings (see Settings)
    }

(The comments above are for this docstring only: the file is plain JSON.)

An entry with ``command`` is launched over stdio (``args``, ``env``, ``cwd``); an entry
with ``url`` is a remote server, streamable HTTP unless ``"type": "sse"``, with
``headers``. Both kinds take patchbay's own keys ``timeout``, ``tool_timeouts``,
``disabled``, ``tools`` (``allow``/``deny`` glob lists) and ``max_concurrency``. Keys
that clients keep in entries for themselves (:data:`IGNORED_ENTRY_KEYS`) are ignored.

``${VAR}``, ``${VAR:-default}`` and VS Code's ``${env:VAR}`` are expanded from the
environment in ``command``, ``args``, ``env`` values, ``cwd``, ``url`` and header values.
A relative ``cwd`` is taken relative to the config file's directory (``~/`` is the home directory).

Mistakes are reported with the file and the key path. A mistake in the file as a whole
(not JSON, an unknown top-level or ``patchbay`` key, ...) raises :class:`ConfigError`;
a mistake inside one server entry only disables that entry: it is still returned, with
``spec=None`` and a ``problem`` saying why.

This module is pure apart from reading the one file (and resolving paths to detect an
entry that would launch patchbay itself with this same file).
"""

from __future__ import annotations

import difflib
import fnmatch
import json
import os
import re
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Final, Literal, Self, cast

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails

__all__ = [
    "IGNORED_ENTRY_KEYS",
    "Config",
    "ConfigError",
    "ConfigProblem",
    "RemoteSpec",
    "ServerEntry",
    "Settings",
    "StdioSpec",
    "ToolFilter",
    "load_config",
    "parse_config",
]

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

_TOP_LEVEL_KEYS: Final = ("mcpServers", "servers", "patchbay", "$schema", "inputs")
_SHAPES: Final = ("mcpServers", "servers")

# Spellings of ``type`` (compared lower-cased), to the transport they mean.
_TYPE_SPELLINGS: Final[Mapping[str, Literal["stdio", "http", "sse"]]] = {
    "stdio": "stdio",
    "http": "http",
    "streamable-http": "http",
    "streamablehttp": "http",
    "streamable_http": "http",
    "sse": "sse",
}

# Keys other programs use that mean one of ours, for "did you mean" hints.
_KEY_HINTS: Final[Mapping[str, str]] = {"serverUrl": "url", "transport": "type", "environment": "env"}


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigProblem:
    """One mistake in the config file."""

    key: str
    """Dotted key path (``mcpServers.github.env.TOKEN``), or ``""`` for the file as a whole."""

    message: str
    """What is wrong or what was expected. Never contains an environment variable's value."""

    def __str__(self) -> str:
        return f"{self.key}: {self.message}" if self.key else self.message


class ConfigError(Exception):
    """The config file cannot be used at all (mistakes in single entries do not raise this).

    ``path``, ``key`` and ``message`` describe the first problem; ``problems`` holds every
    problem found, and ``str()`` gives one ``"<path>: <key>: <message>"`` line for each.
    """

    path: Path
    key: str
    message: str
    problems: tuple[ConfigProblem, ...]

    def __init__(self, path: str | Path, key: str, message: str, *more: ConfigProblem) -> None:
        super().__init__(path, key, message, *more)
        self.path = Path(path)
        self.key = key
        self.message = message
        self.problems = (ConfigProblem(key, message), *more)

    @classmethod
    def from_problems(cls, path: str | Path, problems: Sequence[ConfigProblem]) -> ConfigError:
        """One error carrying several problems (at least one)."""
        first, *rest = problems
        return cls(path, first.key, first.message, *rest)

    def __str__(self) -> str:
        return "\n".join(f"{self.path}: {problem}" for problem in self.problems)


# ---------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------


def _as_tuple(value: object) -> object:
    """Accept a JSON array for a tuple field (strict mode accepts only tuples)."""
    return tuple(cast("list[object]", value)) if isinstance(value, list) else value


def _compile_patterns(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    """One regex matching any of the names or fnmatch-style globs, case-sensitively."""
    if not patterns:
        return None
    parts = [fnmatch.translate(p) if any(c in p for c in "*?[") else re.escape(p) + r"\Z" for p in patterns]
    return re.compile("|".join(f"(?:{part})" for part in parts))


_Names = Annotated[tuple[str, ...], BeforeValidator(_as_tuple)]
_Seconds = Annotated[float, Field(gt=0)]

_MODEL_CONFIG: Final = ConfigDict(
    frozen=True, extra="forbid", strict=True, allow_inf_nan=False, use_attribute_docstrings=True
)


class _CompiledFilter:
    """A ToolFilter's lists compiled to regexes, and the tuples they were compiled from."""

    __slots__ = ("_state",)

    def __init__(self) -> None:
        self._state: tuple[object, object, re.Pattern[str] | None, re.Pattern[str] | None] = ((), (), None, None)

    def compile(self, allow: tuple[str, ...] | None, deny: tuple[str, ...]) -> None:
        self._state = (allow, deny, _compile_patterns(allow or ()), _compile_patterns(deny))

    def patterns(
        self, allow: tuple[str, ...] | None, deny: tuple[str, ...]
    ) -> tuple[re.Pattern[str] | None, re.Pattern[str] | None]:
        # The identity check costs nothing and catches a filter built without validation
        # (model_copy(update=...) shares this cache with the original).
        if self._state[0] is not allow or self._state[1] is not deny:
            self.compile(allow, deny)
        return self._state[2], self._state[3]


class ToolFilter(BaseModel, frozen=True):
    """Which upstream tools are served: ``{"allow": [...], "deny": [...]}``.

    Entries are upstream tool names or fnmatch-style globs (``*``, ``?``, ``[abc]``),
    matched case-sensitively against the whole name. ``deny`` wins over ``allow``.
    """

    model_config = _MODEL_CONFIG

    allow: Annotated[tuple[str, ...] | None, BeforeValidator(_as_tuple)] = None
    """Only tools matching one of these are served; ``None`` (absent) allows every tool."""

    deny: _Names = ()
    """Tools matching one of these are never served."""

    always_list: _Names = ()
    """In search mode (``patchbay.expose``), tools matching one of these are listed to the
    client beside ``find_tools`` and ``call_tool``; ``["*"]`` lists the whole server."""

    _cache: _CompiledFilter = PrivateAttr(default_factory=_CompiledFilter)

    def model_post_init(self, context: Any, /) -> None:
        self._cache.compile(self.allow, self.deny)

    def always_listed(self, tool_name: str) -> bool:
        """Whether the upstream tool ``tool_name`` is listed in search mode too."""
        pattern = _compile_patterns(self.always_list)
        return pattern is not None and pattern.match(tool_name) is not None

    def permits(self, tool_name: str) -> bool:
        """Whether the upstream tool ``tool_name`` is served."""
        allow, deny = self._cache.patterns(self.allow, self.deny)
        if deny is not None and deny.match(tool_name):
            return False
        if self.allow is None:
            return True
        return allow is not None and allow.match(tool_name) is not None

    # Equality and hashing by the fields only (the compiled patterns are a cache).
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ToolFilter):
            return NotImplemented
        return (self.allow, self.deny, self.always_list) == (other.allow, other.deny, other.always_list)

    def __hash__(self) -> int:
        return hash((ToolFilter, self.allow, self.deny, self.always_list))


def _freeze(value: object) -> object:
    if isinstance(value, dict):
        return frozenset(cast("dict[object, object]", value).items())
    return value


def _check_text(value: str, what: str = "value") -> str:
    if "\x00" in value:
        raise ValueError(f"{what} must not contain a NUL character")
    return value


class _SpecBase(BaseModel, frozen=True):
    """The keys every server entry takes, whatever its transport."""

    model_config = _MODEL_CONFIG

    timeout: _Seconds | None = None
    """Seconds a tool call may take (overrides ``patchbay.timeout``)."""

    tool_timeouts: dict[str, _Seconds] = Field(default_factory=dict[str, float])
    """Per-tool overrides of ``timeout``: ``{upstream tool name: seconds}``."""

    tools: ToolFilter = ToolFilter()
    """Which of the server's tools are served."""

    disabled: bool = False
    """Keep the entry in the file but do not start or serve it."""

    max_concurrency: Annotated[int, Field(ge=1)] | None = None
    """Calls in flight at once to this server (overrides ``patchbay.max_concurrency``)."""

    # Hashable by value although some fields are dicts (the models are frozen).
    def __hash__(self) -> int:
        return hash((type(self), *(_freeze(v) for v in self.__dict__.values())))


class StdioSpec(_SpecBase, frozen=True):
    """A server launched as a subprocess, speaking MCP over its stdin/stdout."""

    command: str
    """The executable to run (looked up on PATH)."""

    args: _Names = ()
    """Command line arguments."""

    env: dict[str, str] = Field(default_factory=dict[str, str])
    """Variables set for the server on top of the proxy's own environment."""

    cwd: str | None = None
    """Working directory (absolute once loaded); ``None``: the proxy's working directory."""

    transport: Literal["stdio"] = "stdio"

    @field_validator("command")
    @classmethod
    def _check_command(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return _check_text(value)

    @field_validator("args")
    @classmethod
    def _check_args(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for i, arg in enumerate(value):
            _check_text(arg, f"item {i}")
        return value

    @field_validator("env")
    @classmethod
    def _check_env(cls, value: dict[str, str]) -> dict[str, str]:
        for name, text in value.items():
            if not name or "=" in name or "\x00" in name:
                raise ValueError(f"invalid variable name {_q(name)} (must be non-empty, without '=')")
            _check_text(text, f"the value of {_q(name)}")
        return value

    @field_validator("cwd")
    @classmethod
    def _check_cwd(cls, value: str | None) -> str | None:
        if value is not None and not value:
            raise ValueError("must not be empty (leave it out for the proxy's working directory)")
        return value if value is None else _check_text(value)


_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")


class RemoteSpec(_SpecBase, frozen=True):
    """A server reached over the network."""

    url: str
    """The server's endpoint, ``http://`` or ``https://``."""

    transport: Literal["http", "sse"] = "http"
    """``"http"``: streamable HTTP; ``"sse"``: the older HTTP+SSE transport."""

    headers: dict[str, str] = Field(default_factory=dict[str, str])
    """HTTP headers sent with every request (e.g. ``Authorization``)."""

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        # The URL is not quoted back: its query may carry a token.
        try:
            parts = urllib.parse.urlsplit(value)
            ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        except ValueError:
            ok = False
        if not ok or any(c in value for c in "\x00\r\n "):
            raise ValueError("expected an http:// or https:// URL with a host name")
        return value

    @field_validator("headers")
    @classmethod
    def _check_headers(cls, value: dict[str, str]) -> dict[str, str]:
        for name, text in value.items():
            if not _HEADER_NAME.match(name):
                raise ValueError(f"invalid header name {_q(name)}")
            if any(c in text for c in "\x00\r\n"):
                raise ValueError(f"the value of header {_q(name)} must not contain line breaks or NUL")
        return value


class Settings(BaseModel, frozen=True):
    """Proxy-wide settings: the optional ``"patchbay"`` object of the config file."""

    model_config = _MODEL_CONFIG

    timeout: _Seconds = 50.0
    """Default seconds a tool call may take, below the 60 s after which common clients give up."""

    max_call_time: _Seconds = 300.0
    """Progress notifications from the server may extend a call up to this many seconds."""

    connect_timeout: _Seconds = 30.0
    """Seconds to launch or connect to a server and complete ``initialize``."""

    startup_wait: Annotated[float, Field(ge=0)] = 10.0
    """Seconds the proxy waits for servers at start before answering with those that are up."""

    separator: str = "__"
    """Between server and tool name in exposed names (``github__create_issue``): letters, digits, ``_``, ``-``."""

    max_name_length: Annotated[int, Field(ge=16, le=64)] = 48
    """Longest exposed tool name.

    Claude and OpenAI reject tool names over 64 characters, and Claude Code exposes a
    tool as ``mcp__<its name for patchbay>__<tool>``: 64 - len("mcp__") - len("__") -
    len("patchbay") = 49, so 48 leaves room for a client-side name of up to 9
    characters. Cursor caps server name + tool name at 60.
    """

    registered_as: Annotated[str, Field(min_length=1, max_length=64)] | None = None
    """The name the client knows the proxy by (``claude mcp add NAME``). Clients prefix tool
    names with it (Claude Code sends ``mcp__NAME__tool``, limit 64), so when it is set the
    exposed names are shortened to fit every known client; ``check`` warns of any that do not."""

    expose: Literal["all", "search", "auto"] = "auto"
    """How the upstreams' tools reach the client. ``"all"``: every tool is listed.
    ``"search"``: the client lists ``patchbay__find_tools`` and ``patchbay__call_tool`` (plus
    tools kept listed with ``tools.always_list``), finds tools by searching and calls them
    by name as data. ``"auto"``: search once the catalog has more than ``search_threshold``
    tools."""

    search_threshold: Annotated[int, Field(ge=0)] = 40
    """With ``expose: "auto"``, the number of tools above which search mode is used. 40: Cursor
    long capped the tools it sends at 40, Copilot CLI switches to tool search at about 30,
    and Claude Code when tools pass 10% of the context (about 20,000 tokens of a 200k
    context, some 40 to 80 typical tool definitions)."""

    call_tool: bool = False
    """In ``expose: "all"`` mode, also list ``patchbay__call_tool``, for clients that refuse a
    tool name they did not list (the name then travels as data and gets the proxy's forgiving
    resolution)."""

    unknown_tool: Literal["result", "error"] = "result"
    """A call to a tool that cannot be resolved: an ``isError`` result with suggestions, or a JSON-RPC error."""

    validate_arguments: bool = True
    """Check call arguments against the tool's ``inputSchema`` before forwarding."""

    max_result_bytes: Annotated[int, Field(ge=1)] = 1_048_576
    """Results larger than this are truncated."""

    status_tool: bool = False
    """Serve a ``patchbay__status`` tool reporting the state of every server."""

    max_concurrency: Annotated[int, Field(ge=1)] = 16
    """Calls in flight at once to one server."""

    queue_timeout: Annotated[float, Field(ge=0)] = 10.0
    """Seconds a call may wait for a concurrency slot before failing."""

    breaker_threshold: Annotated[int, Field(ge=1)] = 5
    """Consecutive failures after which a server's circuit breaker opens."""

    breaker_cooldown: _Seconds = 30.0
    """Seconds an open breaker waits before letting a trial call through."""

    retry_attempts: Annotated[int, Field(ge=0)] = 2
    """Extra attempts for calls that are safe to retry (never delivered, or read-only)."""

    retry_backoff: Annotated[float, Field(ge=0)] = 0.2
    """Base delay in seconds between retries (doubled each attempt)."""

    restart_initial_delay: _Seconds = 1.0
    """Seconds before the first restart of a server that exited or disconnected."""

    restart_max_delay: _Seconds = 60.0
    """Upper bound of the growing delay between restarts."""

    watch: bool = True
    """Reload the config when the file changes."""

    @field_validator("registered_as")
    @classmethod
    def _check_registered_as(cls, value: str | None) -> str | None:
        if value is not None and (value != value.strip() or any(c.isspace() or not c.isprintable() for c in value)):
            raise ValueError("expected the name the client registered the proxy under, without spaces")
        return value

    @field_validator("separator")
    @classmethod
    def _check_separator(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,8}", value):
            raise ValueError("expected 1 to 8 letters, digits, '_' or '-'")
        return value

    @model_validator(mode="after")
    def _check_ranges(self) -> Self:
        if self.max_call_time < self.timeout:
            raise ValueError(f"max_call_time ({self.max_call_time:g}) must be at least timeout ({self.timeout:g})")
        if self.restart_max_delay < self.restart_initial_delay:
            raise ValueError(
                f"restart_max_delay ({self.restart_max_delay:g}) must be at least "
                f"restart_initial_delay ({self.restart_initial_delay:g})"
            )
        return self


@dataclass(frozen=True)
class ServerEntry:
    """One named entry of ``mcpServers`` or ``servers``."""

    name: str
    spec: StdioSpec | RemoteSpec | None
    """``None`` when the entry is invalid or skipped (see ``problem``)."""

    problem: str | None = None
    """Why the entry cannot be served: ``"<key path>: <message>"`` items joined with ``"; "``."""

    self_reference: bool = False
    """The entry would launch patchbay itself with this same config file."""

    @property
    def disabled(self) -> bool:
        """The entry is valid and marked ``"disabled": true``."""
        return self.spec is not None and self.spec.disabled


@dataclass(frozen=True)
class Config:
    """A loaded config file. Compares by value, so a reload can be diffed entry by entry."""

    path: Path
    """The file, absolute."""

    settings: Settings
    servers: tuple[ServerEntry, ...]
    """In file order, ``mcpServers`` first then ``servers``; names are unique."""


# ---------------------------------------------------------------------------
# Messages
# ---------------------------------------------------------------------------

_SIMPLE_KEY = re.compile(r"[A-Za-z0-9_$-]+\Z")


def _key_path(*parts: str | int) -> str:
    """``("mcpServers", "my server", "args", 2)`` -> ``mcpServers["my server"].args[2]``."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _SIMPLE_KEY.match(part):
            out += f".{part}" if out else part
        else:
            out += f"[{_json_string(part)}]"
    return out


def _json_string(text: str) -> str:
    """``text`` as a JSON string literal, escaping only what is not printable."""
    return json.dumps(text, ensure_ascii=not text.isprintable())


def _q(text: str) -> str:
    """Quote a key or word for a message, escaping anything unprintable."""
    if text.isprintable() and "'" not in text:
        return f"'{text}'"
    return _json_string(text)


def _did_you_mean(key: str, candidates: Iterable[str]) -> str:
    choices = list(candidates)
    if key in _KEY_HINTS and _KEY_HINTS[key] in choices:
        return f" (did you mean {_q(_KEY_HINTS[key])}?)"
    lowered = {c.lower(): c for c in choices}
    match = [lowered[key.lower()]] if key.lower() in lowered else difflib.get_close_matches(key, choices, n=1)
    return f" (did you mean {_q(match[0])}?)" if match else ""


def _unknown_key(key: str, candidates: Iterable[str]) -> str:
    return f"unknown key {_q(key)}{_did_you_mean(key, candidates)}"


_TYPE_MESSAGES: Final[Mapping[str, str]] = {
    "string_type": "expected a string",
    "float_type": "expected a number",
    "float_parsing": "expected a number",
    "int_type": "expected a whole number",
    "int_parsing": "expected a whole number",
    "int_from_float": "expected a whole number",
    "bool_type": "expected true or false",
    "bool_parsing": "expected true or false",
    "tuple_type": "expected a list of strings",
    "list_type": "expected a list",
    "dict_type": "expected an object",
    "model_type": "expected an object",
    "model_attributes_type": "expected an object",
    "finite_number": "expected a finite number",
    "missing": "required key is missing",
}


def _error_message(error: ErrorDetails, candidates: Iterable[str]) -> str:
    """A pydantic error as a short message (never quoting the input value)."""
    kind = error["type"]
    ctx: dict[str, Any] = error.get("ctx") or {}
    if kind == "extra_forbidden":
        return _unknown_key(str(error["loc"][-1]), candidates)
    if kind in _TYPE_MESSAGES:
        return _TYPE_MESSAGES[kind]
    bounds = {
        "greater_than": ("must be greater than", "gt"),
        "greater_than_equal": ("must be at least", "ge"),
        "less_than": ("must be less than", "lt"),
        "less_than_equal": ("must be at most", "le"),
    }
    if kind in bounds:
        text, name = bounds[kind]
        bound = ctx.get(name)
        return f"{text} {bound:g}" if isinstance(bound, float) else f"{text} {bound}"
    if kind == "literal_error":
        return f"expected {ctx.get('expected')}"
    if kind == "value_error":
        return str(ctx.get("error", error["msg"]))
    return error["msg"]


def _validation_problems(
    exc: ValidationError,
    prefix: tuple[str | int, ...],
    keys_for: Mapping[str, Iterable[str]],
    default_keys: Iterable[str],
) -> list[ConfigProblem]:
    """Turn a ValidationError into problems; ``keys_for`` maps a parent key to its valid keys."""
    problems: list[ConfigProblem] = []
    for error in exc.errors(include_url=False, include_input=False):
        loc = tuple(error["loc"])
        if error["type"] == "extra_forbidden":
            parent = loc[-2] if len(loc) >= 2 else None
            candidates = keys_for.get(str(parent), ()) if parent is not None else default_keys
            problems.append(ConfigProblem(_key_path(*prefix, *loc[:-1]), _error_message(error, candidates)))
        else:
            problems.append(ConfigProblem(_key_path(*prefix, *loc), _error_message(error, ())))
    return problems


# ---------------------------------------------------------------------------
# JSON
# ---------------------------------------------------------------------------


class _JsonObject(dict[str, Any]):
    """A JSON object that remembers keys given more than once (the last value wins)."""

    duplicates: tuple[str, ...] = ()


def _object_hook(pairs: list[tuple[str, Any]]) -> _JsonObject:
    obj = _JsonObject(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        duplicates: dict[str, None] = {}
        for key, _ in pairs:
            if key in seen:
                duplicates[key] = None
            seen.add(key)
        obj.duplicates = tuple(duplicates)
    return obj


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not valid JSON")


def _parse_json(text: str, path: Path) -> object:
    try:
        return json.loads(text, object_pairs_hook=_object_hook, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        hint = ""
        rest = exc.doc[exc.pos : exc.pos + 2]
        before = exc.doc[: exc.pos].rstrip()
        if rest.startswith(("//", "/*")):
            hint = " (comments are not allowed in JSON)"
        elif before.endswith(",") and rest[:1] in ("}", "]"):
            hint = " (trailing comma?)"
        raise ConfigError(
            path, "", f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}{hint}"
        ) from None
    except RecursionError:
        raise ConfigError(path, "", "not valid JSON: nested too deeply") from None
    except ValueError as exc:  # NaN/Infinity, integers too long to convert
        raise ConfigError(path, "", f"not valid JSON: {exc}") from None


def _duplicate_keys(value: object, prefix: tuple[str | int, ...]) -> list[ConfigProblem]:
    """Keys given twice in any object inside ``value`` (iterative: the JSON may be deep)."""
    problems: list[ConfigProblem] = []
    stack: list[tuple[object, tuple[str | int, ...]]] = [(value, prefix)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, _JsonObject):
            problems.extend(ConfigProblem(_key_path(*where, k), "key given more than once") for k in item.duplicates)
            stack.extend((v, (*where, k)) for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((v, (*where, i)) for i, v in enumerate(cast("list[object]", item)))
    problems.reverse()
    return problems


# ---------------------------------------------------------------------------
# Environment expansion
# ---------------------------------------------------------------------------

_VARIABLE = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_VSCODE_INPUT = re.compile(r"\$\{(?:input|command|config):[^}]*\}")
_VSCODE_VARIABLES: Final = frozenset(
    {"workspaceFolder", "workspaceFolderBasename", "workspaceRoot", "userHome", "pathSeparator", "cwd", "file"}
)


def _expand(text: str, environ: Mapping[str, str], key: str, problems: list[ConfigProblem]) -> str:
    """Expand ``${VAR}``, ``${VAR:-default}`` (default when unset or empty) and ``${env:VAR}``."""
    if "${" not in text:
        return text
    for match in _VSCODE_INPUT.finditer(text):
        problems.append(
            ConfigProblem(
                key,
                f"{_q(match.group(0))} is a VS Code input, which patchbay cannot ask for; "
                "use ${VAR} with an environment variable instead",
            )
        )

    def replace(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        value = environ.get(name)
        if default is not None and not value:
            return default
        if value is None:
            if name in _VSCODE_VARIABLES:
                message = (
                    f"'${{{name}}}' is a VS Code variable, which patchbay does not expand; "
                    "use a literal path or an environment variable"
                )
            else:
                message = f"environment variable {_q(name)} is not set (use ${{{name}:-default}} for a fallback)"
            problems.append(ConfigProblem(key, message))
            return ""
        return value

    return _VARIABLE.sub(replace, text)


# ---------------------------------------------------------------------------
# Self-reference
# ---------------------------------------------------------------------------

_PYTHON = re.compile(r"(?:pythonw?[0-9.]*|py)\Z")
_MODULES: Final = frozenset({"mcp_patchbay", "mcp_patchbay.__main__"})
_PACKAGE = "mcp-patchbay"
# Options of uvx / uv run / pipx run that take a value as the next argument.
_RUNNER_VALUE_OPTIONS: Final = frozenset(
    {
        "--from",
        "--with",
        "-w",
        "--with-editable",
        "--with-requirements",
        "--python",
        "-p",
        "--index",
        "--default-index",
        "--index-url",
        "-i",
        "--extra-index-url",
        "--find-links",
        "-f",
        "--spec",
        "--pip-args",
        "--constraints",
        "-c",
        "--overrides",
        "--directory",
        "--project",
        "--package",
        "--cache-dir",
        "--config-file",
        "--env-file",
        "--python-platform",
    }
)


def _program(command: str) -> str:
    base = command.replace("\\", "/").rsplit("/", 1)[-1].lower()
    for ext in (".exe", ".cmd", ".bat"):
        if base.endswith(ext):
            return base[: -len(ext)]
    return base


def _after_module(args: Sequence[str]) -> Sequence[str] | None:
    """The arguments after ``-m mcp_patchbay`` in a python command line, or None."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "-m":
            return args[i + 2 :] if i + 1 < len(args) and args[i + 1] in _MODULES else None
        if arg.startswith("-m"):
            return args[i + 1 :] if arg[2:] in _MODULES else None
        if arg in ("-c", "-") or not arg.startswith("-"):
            return None  # a script or -c code, not a module
        i += 2 if arg in ("-W", "-X") else 1
    return None


def _after_runner(args: Sequence[str]) -> Sequence[str] | None:
    """The arguments given to patchbay by ``uvx ... mcp-patchbay ARGS`` and the like, or None."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in _RUNNER_VALUE_OPTIONS:
            i += 2
        elif arg.startswith("-"):
            i += 1
        else:
            name = re.split(r"[@=<>!~\[; ]", arg, maxsplit=1)[0].lower().replace("_", "-")
            if name == _PACKAGE:
                return args[i + 1 :]
            return _patchbay_args(arg, args[i + 1 :])
    return None


def _patchbay_args(command: str, args: Sequence[str]) -> Sequence[str] | None:
    """The arguments patchbay would get if this command line launches patchbay, else None."""
    program = _program(command)
    args = list(args)
    if program == _PACKAGE:
        return args
    if _PYTHON.match(program):
        return _after_module(args)
    if program == "uvx":
        return _after_runner(args)
    if program in ("pipx", "uv") and args[:1] == ["run"]:
        return _after_runner(args[1:])
    if program == "uv" and args[:2] == ["tool", "run"]:
        return _after_runner(args[2:])
    return None


def _launches_same_config(spec: StdioSpec, config_path: Path, environ: Mapping[str, str]) -> bool:
    argv = _patchbay_args(spec.command, spec.args)
    if argv is None:
        return False
    target: str | None = None
    for i, arg in enumerate(argv):  # as the cli's argparse reads them; the last one wins
        option, equals, value = arg.partition("=")
        if arg == "--":
            break
        if len(option) >= 3 and "--config".startswith(option):  # argparse accepts unique prefixes
            target = value if equals else (argv[i + 1] if i + 1 < len(argv) else None)
        elif arg == "-c":
            target = argv[i + 1] if i + 1 < len(argv) else None
        elif arg.startswith("-c"):
            target = arg[2:]
    target = target or spec.env.get("PATCHBAY_CONFIG") or environ.get("PATCHBAY_CONFIG")
    if not target:
        return False
    try:
        base = Path(spec.cwd) if spec.cwd else Path.cwd()
        return (base / target).resolve() == config_path.resolve()
    except (OSError, RuntimeError, ValueError):
        return False


# ---------------------------------------------------------------------------
# Entries
# ---------------------------------------------------------------------------

_COMMON_KEYS: Final = frozenset(_SpecBase.model_fields)
_STDIO_KEYS: Final = frozenset(StdioSpec.model_fields) - {"transport"}
_REMOTE_KEYS: Final = frozenset(RemoteSpec.model_fields) - {"transport"}
_ENTRY_KEYS: Final = _STDIO_KEYS | _REMOTE_KEYS | {"type", "transportType", "envFile"} | IGNORED_ENTRY_KEYS
_NESTED_KEYS: Final[Mapping[str, Iterable[str]]] = {"tools": tuple(ToolFilter.model_fields)}


def _expand_entry(
    data: dict[str, Any], environ: Mapping[str, str], prefix: tuple[str, str], problems: list[ConfigProblem]
) -> None:
    """Expand variables in place where the values have the right types (pydantic reports the rest)."""
    for key in ("command", "cwd", "url"):
        if isinstance(data.get(key), str):
            data[key] = _expand(data[key], environ, _key_path(*prefix, key), problems)
    args = data.get("args")
    if isinstance(args, list):
        data["args"] = [
            _expand(a, environ, _key_path(*prefix, "args", i), problems) if isinstance(a, str) else a
            for i, a in enumerate(cast("list[object]", args))
        ]
    for key in ("env", "headers"):
        mapping = data.get(key)
        if isinstance(mapping, dict):
            data[key] = {
                k: _expand(v, environ, _key_path(*prefix, key, k), problems) if isinstance(v, str) else v
                for k, v in cast("dict[str, object]", mapping).items()
            }


def _absolute_cwd(cwd: str, config_path: Path, environ: Mapping[str, str]) -> str:
    """``~`` is the home directory (from ``environ``); other relative paths are relative to the config file."""
    home = environ.get("HOME") or environ.get("USERPROFILE")
    if home and (cwd == "~" or cwd.startswith(("~/", "~\\"))):
        return str(Path(home) / cwd[2:])
    return cwd if Path(cwd).is_absolute() else str(config_path.parent / cwd)


def _build_entry(shape: str, name: str, raw: object, config_path: Path, environ: Mapping[str, str]) -> ServerEntry:
    prefix = (shape, name)
    here = _key_path(*prefix)
    problems: list[ConfigProblem] = []
    if not name:
        problems.append(ConfigProblem(here, "server name must not be empty"))
    if not isinstance(raw, _JsonObject):
        problems.append(ConfigProblem(here, "expected an object with 'command' or 'url'"))
        return ServerEntry(name, None, "; ".join(map(str, problems)))
    problems.extend(_duplicate_keys(raw, prefix))
    data: dict[str, Any] = {k: v for k, v in raw.items() if k not in IGNORED_ENTRY_KEYS}

    if "envFile" in data:
        del data["envFile"]
        problems.append(
            ConfigProblem(_key_path(*prefix, "envFile"), "'envFile' is not supported; put the variables in 'env'")
        )

    # The transport: from "type" (or Cline's "transportType"), else from command / url.
    type_key = "type" if "type" in data else "transportType"
    raw_type = data.pop("type", None) if type_key == "type" else data.get("transportType")
    data.pop("transportType", None)
    declared: Literal["stdio", "http", "sse"] | None = None
    if raw_type is not None:
        if isinstance(raw_type, str) and raw_type.lower() in _TYPE_SPELLINGS:
            declared = _TYPE_SPELLINGS[raw_type.lower()]
        else:
            problems.append(
                ConfigProblem(
                    _key_path(*prefix, type_key),
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
            problems.append(
                ConfigProblem(_key_path(*prefix, type_key), f"type '{declared}' needs 'url', not 'command'")
            )
    elif has_url:
        kind = "remote"
        if declared == "stdio":
            problems.append(ConfigProblem(_key_path(*prefix, type_key), "type 'stdio' needs 'command', not 'url'"))
    elif declared == "stdio":
        problems.append(ConfigProblem(here, "missing 'command' (the program to launch)"))
    elif declared is not None:
        problems.append(ConfigProblem(here, "missing 'url' (the remote server's address)"))
    else:
        problems.append(
            ConfigProblem(here, "needs 'command' (a program to launch over stdio) or 'url' (a remote server)")
        )

    allowed = {"stdio": _STDIO_KEYS, "remote": _REMOTE_KEYS, None: _STDIO_KEYS | _REMOTE_KEYS}[kind]
    for key in [k for k in data if k not in allowed]:
        del data[key]
        if key in _STDIO_KEYS:
            message = f"{_q(key)} applies only to servers launched with 'command'"
        elif key in _REMOTE_KEYS:
            message = f"{_q(key)} applies only to remote servers (with 'url')"
        else:
            message = _unknown_key(key, sorted(_ENTRY_KEYS))
        problems.append(ConfigProblem(here, message))

    _expand_entry(data, environ, prefix, problems)
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
            _SpecBase.model_validate({k: v for k, v in data.items() if k in _COMMON_KEYS})
    except ValidationError as exc:
        problems.extend(_validation_problems(exc, prefix, _NESTED_KEYS, _ENTRY_KEYS))
        spec = None

    if problems:
        return ServerEntry(name, None, "; ".join(map(str, dict.fromkeys(problems))))
    if isinstance(spec, StdioSpec) and _launches_same_config(spec, config_path, environ):
        return ServerEntry(
            name, None, "launches mcp-patchbay with this same config; skipped to avoid a loop", self_reference=True
        )
    return ServerEntry(name, spec)


# ---------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------


def _top_level_problem(key: str, value: object) -> ConfigProblem:
    if key == "mcp" and isinstance(value, dict):
        message = "unknown top-level key 'mcp' (VS Code's settings.json shape): move its 'servers' to the top level"
    elif isinstance(value, dict) and ("command" in value or "url" in value):
        message = f"unknown top-level key {_q(key)}: server entries go inside 'mcpServers'"
    else:
        message = f"unknown top-level key {_q(key)}{_did_you_mean(key, _TOP_LEVEL_KEYS)}"
    return ConfigProblem("", message)


def parse_config(text: str, path: Path, environ: Mapping[str, str] | None = None) -> Config:
    """Parse config file contents; ``path`` names the file in messages and in ``Config.path``.

    ``environ`` (default ``os.environ``) supplies ``${VAR}`` values. Raises ConfigError.
    """
    path = Path(path).absolute()
    env: Mapping[str, str] = os.environ if environ is None else environ
    data = _parse_json(text, path)
    if not isinstance(data, _JsonObject):
        raise ConfigError(path, "", 'expected a JSON object at the top level, like {"mcpServers": {...}}')

    fatal: list[ConfigProblem] = [
        ConfigProblem(_key_path(key), "key given more than once") for key in data.duplicates if key in _TOP_LEVEL_KEYS
    ]
    fatal.extend(_top_level_problem(key, value) for key, value in data.items() if key not in _TOP_LEVEL_KEYS)

    settings = Settings()
    raw_settings = data.get("patchbay")
    if "patchbay" in data and not isinstance(raw_settings, _JsonObject):
        fatal.append(ConfigProblem("patchbay", "expected an object"))
    elif isinstance(raw_settings, _JsonObject):
        fatal.extend(_duplicate_keys(raw_settings, ("patchbay",)))
        try:
            settings = Settings.model_validate(raw_settings)
        except ValidationError as exc:
            fatal.extend(_validation_problems(exc, ("patchbay",), {}, Settings.model_fields))

    entries: list[ServerEntry] = []
    first_shape: dict[str, str] = {}
    for shape in _SHAPES:
        if shape not in data:
            continue
        servers = data[shape]
        if not isinstance(servers, _JsonObject):
            fatal.append(ConfigProblem(shape, "expected an object mapping server names to entries"))
            continue
        fatal.extend(
            ConfigProblem(_key_path(shape, name), f"server name {_q(name)} given more than once")
            for name in servers.duplicates
        )
        for name, raw in servers.items():
            if name in first_shape:
                fatal.append(
                    ConfigProblem(
                        _key_path(shape, name), f"server name {_q(name)} is already used in {first_shape[name]}"
                    )
                )
                continue
            first_shape[name] = shape
            entries.append(_build_entry(shape, name, raw, path, env))

    if fatal:
        raise ConfigError.from_problems(path, fatal)
    return Config(path=path, settings=settings, servers=tuple(entries))


def load_config(path: str | Path, environ: Mapping[str, str] | None = None) -> Config:
    """Read and parse the config file at ``path``. Raises ConfigError."""
    path = Path(path).absolute()
    try:
        text = path.read_text(encoding="utf-8-sig")  # tolerate a byte-order mark
    except FileNotFoundError:
        raise ConfigError(path, "", "file not found") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(path, "", f"not UTF-8 text (invalid byte at offset {exc.start})") from None
    except OSError as exc:
        raise ConfigError(path, "", f"cannot read the file: {exc.strerror or exc}") from None
    return parse_config(text, path, environ)
