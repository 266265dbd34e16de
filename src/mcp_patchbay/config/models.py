"""The config's data model: what a loaded config file is.

``ToolFilter`` (which tools of a server are served), the two kinds of server entry,
``StdioSpec`` and ``RemoteSpec`` (on ``SpecBase``, the keys both take), ``ServerEntry``
(one named entry, valid or not), ``Profile`` (one of the file's ``"profiles"``: some servers
and tools, chosen with ``--profile``) and ``Config`` (the whole file). The ``"patchbay"``
object is ``settings.Settings``, the ``"gateway"`` object ``gateway.GatewaySettings``.
The pydantic models are frozen, strict and reject unknown keys (``STRICT_MODEL``); they
check single values (a NUL in an argument, a URL without a host, ...). How the file's JSON
becomes these is ``loading`` and ``entries``.
"""

from __future__ import annotations

import fnmatch
import re
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal, Self, cast

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    field_validator,
    model_validator,
)

from mcp_patchbay.config.overrides import PromptOptions, ToolOverride
from mcp_patchbay.config.problems import quote
from mcp_patchbay.config.withheld import OWN_NAMES

if TYPE_CHECKING:
    from mcp_patchbay.config.gateway import GatewaySettings
    from mcp_patchbay.config.settings import Settings
__all__ = [
    "STRICT_MODEL",
    "Config",
    "Names",
    "Profile",
    "RemoteSpec",
    "Seconds",
    "ServerEntry",
    "SpecBase",
    "StdioSpec",
    "ToolFilter",
    "as_tuple",
]


def as_tuple(value: object) -> object:
    """Accept a JSON array for a tuple field (strict mode accepts only tuples)."""
    return tuple(cast("list[object]", value)) if isinstance(value, list) else value


def _compile_patterns(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    """One regex matching any of the names or fnmatch-style globs, case-sensitively."""
    if not patterns:
        return None
    parts = [fnmatch.translate(p) if any(c in p for c in "*?[") else re.escape(p) + r"\Z" for p in patterns]
    return re.compile("|".join(f"(?:{part})" for part in parts))


Names = Annotated[tuple[str, ...], BeforeValidator(as_tuple)]
"""A list of strings in the file, held as a tuple (the models are frozen and compare by value)."""
Seconds = Annotated[float, Field(gt=0)]
"""A duration in the file: seconds, more than 0."""

STRICT_MODEL: Final = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)
"""Every model of the file: frozen, strict, unknown keys refused. Each key's docstring documents it for the
reader of the source; pydantic does not read them (its attribute-docstring option parses the module's source
at import: 20 to 40 ms of the start's CPU for descriptions nothing reads)."""


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

    model_config = STRICT_MODEL

    allow: Annotated[tuple[str, ...] | None, BeforeValidator(as_tuple)] = None
    """Only tools matching one of these are served; ``None`` (absent) allows every tool."""

    deny: Names = ()
    """Tools matching one of these are never served."""

    always_list: Names = ()
    """In search mode (``patchbay.expose``), tools matching one of these are listed to the
    client beside ``find_tools`` and ``call_tool``; ``["*"]`` lists the whole server."""

    overrides: dict[str, ToolOverride] = Field(default_factory=dict[str, ToolOverride])
    """Per upstream tool name, what the model sees instead of the upstream's definition (its
    name, description, arguments, annotations: ``config.overrides``). Only an entry's filter
    takes them (a profile's refuses them)."""

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
        mine = (self.allow, self.deny, self.always_list, self.overrides)
        return mine == (other.allow, other.deny, other.always_list, other.overrides)

    def __hash__(self) -> int:
        return hash((ToolFilter, self.allow, self.deny, self.always_list, frozenset(self.overrides.items())))


def _freeze(value: object) -> object:
    if isinstance(value, dict):
        return frozenset(cast("dict[object, object]", value).items())
    return value


def _check_text(value: str, what: str = "value") -> str:
    if "\x00" in value:
        raise ValueError(f"{what} must not contain a NUL character")
    return value


class SpecBase(BaseModel, frozen=True):
    """The keys every server entry takes, whatever its transport."""

    model_config = STRICT_MODEL

    timeout: Seconds | None = None
    """Seconds a tool call may take (overrides ``patchbay.timeout``)."""

    tool_timeouts: dict[str, Seconds] = Field(default_factory=dict[str, float])
    """Per-tool overrides of ``timeout``: ``{upstream tool name: seconds}``."""

    tools: ToolFilter = ToolFilter()
    """Which of the server's tools are served, and what the model sees of them (``overrides``)."""

    prompts: PromptOptions = PromptOptions()
    """What the model sees of the server's prompts (``{"overrides": {...}}``)."""

    disabled: bool = False
    """Keep the entry in the file but do not start or serve it."""

    max_concurrency: Annotated[int, Field(ge=1)] | None = None
    """Calls in flight at once to this server (overrides ``patchbay.max_concurrency``)."""

    origin: str | None = None
    """Where the entry came from, for people (``import`` writes the client and its file); ``check`` shows it."""

    start: Literal["eager", "lazy"] | None = None
    """``"eager"``: started with the proxy; ``"lazy"``: when a call or a search first needs it
    (overrides ``patchbay.start``)."""

    idle_stop: Seconds | None = None
    """Stopped after this many seconds with no call in flight and no subscription, started again
    when needed (overrides ``patchbay.idle_stop``)."""

    # Hashable by value although some fields are dicts (the models are frozen).
    def __hash__(self) -> int:
        return hash((type(self), *(_freeze(v) for v in self.__dict__.values())))


class StdioSpec(SpecBase, frozen=True):
    """A server launched as a subprocess, speaking MCP over its stdin/stdout."""

    command: str
    """The executable to run (looked up on PATH)."""

    args: Names = ()
    """Command line arguments."""

    env: dict[str, str] = Field(default_factory=dict[str, str])
    """Variables set for the server on top of the proxy's own environment (less ``withheld``)."""

    cwd: str | None = None
    """Working directory (absolute once loaded); ``None``: the proxy's working directory."""

    transport: Literal["stdio"] = "stdio"

    withheld: frozenset[str] = Field(default=OWN_NAMES, exclude=True)
    """Names of the proxy's environment this server does not inherit (``config.withheld``): what the
    proxy holds for its own use and the entry does not name. Set by loading, never in the file."""

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
                raise ValueError(f"invalid variable name {quote(name)} (must be non-empty, without '=')")
            _check_text(text, f"the value of {quote(name)}")
        return value

    @field_validator("cwd")
    @classmethod
    def _check_cwd(cls, value: str | None) -> str | None:
        if value is not None and not value:
            raise ValueError("must not be empty (leave it out for the proxy's working directory)")
        return value if value is None else _check_text(value)


_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")


def _oauth_form(value: object) -> str:
    """Which form an ``oauth`` value takes, so a mistake is reported against that form only."""
    return "false" if value is False else "object"


class OAuthSettings(BaseModel, frozen=True):
    """The ``oauth`` object of a remote server's entry."""

    model_config = STRICT_MODEL

    client_id: Annotated[str, Field(min_length=1)] | None = None
    """A client registered with the authorization server beforehand (no dynamic registration)."""

    client_secret: Annotated[str, Field(min_length=1)] | None = None
    """That client's secret, for a confidential client; use ``${VAR}`` rather than the secret itself."""

    client_metadata_url: str | None = None
    """An HTTPS URL whose document describes this client (a client ID metadata document): used as
    the client ID where the authorization server accepts one, instead of registering."""

    scope: Annotated[str, Field(min_length=1)] | None = None
    """Scopes to ask for, space-separated; by default those the server's challenge or metadata name."""

    callback_port: Annotated[int, Field(ge=1, le=65535)] | None = None
    """The loopback port the browser is sent back to (``http://127.0.0.1:PORT/callback``); by
    default one free at the time. Set it when the client's registration names a fixed port."""

    @field_validator("client_metadata_url")
    @classmethod
    def _check_metadata_url(cls, value: str | None) -> str | None:
        if value is None:
            return value
        parts = urllib.parse.urlsplit(value)
        if parts.scheme != "https" or not parts.hostname or parts.path in ("", "/"):
            raise ValueError("expected an https:// URL with a path (the client ID metadata document)")
        return value

    @model_validator(mode="after")
    def _secret_needs_id(self) -> Self:
        if self.client_secret is not None and self.client_id is None:
            raise ValueError("'client_secret' needs 'client_id' (the pre-registered client it belongs to)")
        return self


class RemoteSpec(SpecBase, frozen=True):
    """A server reached over the network."""

    url: str
    """The server's endpoint, ``http://`` or ``https://``."""

    transport: Literal["http", "sse"] = "http"
    """``"http"``: streamable HTTP; ``"sse"``: the older HTTP+SSE transport."""

    headers: dict[str, str] = Field(default_factory=dict[str, str])
    """HTTP headers sent with every request (e.g. ``Authorization``)."""

    oauth: (
        Annotated[
            Annotated[OAuthSettings, Tag("object")] | Annotated[Literal[False], Tag("false")],
            Discriminator(_oauth_form),
        ]
        | None
    ) = None
    """Sign-in with OAuth 2.1. Absent: a server that answers 401 with a Bearer challenge is
    signed in to with dynamic registration (or a client ID metadata document, where the
    authorization server takes one); an object names a pre-registered client, a scope or a
    callback port; ``false``: never sign in (static ``headers`` only)."""

    @property
    def signs_in(self) -> bool:
        """Whether the proxy signs in to this server when it asks (``oauth`` not ``false``, and no
        static ``Authorization`` header unless ``oauth`` is given explicitly)."""
        if self.oauth is False:
            return False
        return not (self.oauth is None and any(name.lower() == "authorization" for name in self.headers))

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
                raise ValueError(f"invalid header name {quote(name)}")
            if any(c in text for c in "\x00\r\n"):
                raise ValueError(f"the value of header {quote(name)} must not contain line breaks or NUL")
        return value


class Profile(BaseModel, frozen=True):
    """One of the file's ``"profiles"``: the servers a client registered with ``--profile NAME``
    is served, and per server which of their tools (on top of each entry's own ``tools``)."""

    model_config = STRICT_MODEL

    servers: Names = ("*",)
    """Server names or fnmatch-style globs (``*`` for every one); the others are not started."""

    tools: dict[str, ToolFilter] = Field(default_factory=dict[str, ToolFilter])
    """Per server, which of its tools (``allow`` / ``deny`` globs, ``always_list``); a tool must
    pass both this filter and the entry's own."""

    def __hash__(self) -> int:
        return hash((Profile, self.servers, frozenset(self.tools.items())))


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

    gateway: GatewaySettings | None = None
    """The ``"gateway"`` object (HTTP serving), when the file has one."""

    ignored_keys: tuple[str, ...] = ()
    """Top-level keys that are not patchbay's, ignored: a client's own (Claude Desktop's ``globalShortcut``)."""

    profiles: tuple[tuple[str, Profile], ...] = ()
    """The ``"profiles"`` object, ``(name, profile)`` in file order (a tuple: the Config stays hashable)."""

    profile: str | None = None
    """The profile this Config was narrowed to (``config.profiles.apply_profile``), else None: every
    server of the file. A reload narrows the new file to the same profile."""

    def profile_named(self, name: str) -> Profile | None:
        """The profile called ``name``, if the file has one."""
        return next((profile for key, profile in self.profiles if key == name), None)
