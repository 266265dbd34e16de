"""The ``"gateway"`` object: how ``mcp-patchbay serve --http`` admits and serves its clients.

Read only when the proxy serves over HTTP (stdio ignores it)::

    "gateway": {
      "url": "https://mcp.example.com/mcp",       // the address clients use (audience, metadata)
      "tokens": {"alice": "${ALICE_TOKEN}", "ci": "${CI_TOKEN}"},
      "oauth": {"issuer": "https://id.example.com", "audience": "https://mcp.example.com/mcp"},
      "access": [
        {"tokens": ["ci"], "servers": ["time"]},
        {"claim": "groups", "values": ["eng"], "servers": ["*"], "tools": {"github": {"deny": ["delete_*"]}}},
        {"tokens": ["alice"], "profile": "writing"}   // a profile's servers and tools (``config.profiles``)
      ],
      "allowed_hosts": ["mcp.example.com"],
      "request_state_keys": ["${PATCHBAY_STATE_KEY}"]
    }

``${VAR}`` is expanded in every string of the object, so secrets stay in the environment; those
variables are withheld from stdio upstreams (``config.withheld``) unless an entry names one.
"""

from __future__ import annotations

import urllib.parse
from typing import Annotated, Self

from pydantic import BaseModel, BeforeValidator, Field, field_validator, model_validator

from mcp_patchbay.config.models import STRICT_MODEL, Names, ToolFilter, as_tuple

__all__ = ["AccessRule", "GatewayOAuth", "GatewaySettings", "listen_address"]

_Text = Annotated[str, Field(min_length=1)]


def _check_http_url(value: str) -> str:
    parsed = urllib.parse.urlsplit(value)
    if parsed.scheme not in ("http", "https") or not parsed.hostname or any(c in value for c in "\x00\r\n "):
        raise ValueError("expected an http:// or https:// URL with a host name")
    return value


def listen_address(value: str, default_host: str = "127.0.0.1") -> tuple[str, int]:
    """``[HOST:]PORT`` (``[::1]:PORT`` for IPv6) as ``(host, port)``; raises ValueError."""
    host, sep, port = value.strip().rpartition(":")
    if not sep:
        host = default_host
    elif host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host or not host:
        raise ValueError(f"expected [HOST:]PORT (IPv6 in brackets: [::1]:9464), not {value!r}")
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"expected [HOST:]PORT with a port from 0 to 65535, not {value!r}")
    return host, int(port)


class GatewayOAuth(BaseModel, frozen=True):
    """OAuth 2.1 as a resource server: access tokens are JWTs signed by ``issuer``."""

    model_config = STRICT_MODEL

    issuer: _Text
    """The authorization server (its ``iss``); also what Protected Resource Metadata names."""

    jwks_url: _Text | None = None
    """Where the signing keys are; found from the issuer's metadata when absent."""

    audience: _Text | None = None
    """The ``aud`` a token must carry; the gateway's ``url`` when absent (RFC 8707)."""

    scopes: Names = ()
    """Scopes every token must carry (and that metadata advertises)."""

    identity_claim: _Text = "sub"
    """The claim that names the person in logs and rules (``email``, ``preferred_username``)."""

    algorithms: Names = ("RS256", "ES256", "PS256", "EdDSA")
    """Signature algorithms accepted (never ``none``, never HMAC)."""

    @field_validator("issuer", "jwks_url", "audience")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        return None if value is None else _check_http_url(value)

    @field_validator("algorithms")
    @classmethod
    def _check_algorithms(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [a for a in value if a.lower() == "none" or a.upper().startswith("HS")]
        if bad:
            raise ValueError(f"{', '.join(bad)} cannot be used: only public-key signatures are accepted")
        if not value:
            raise ValueError("name at least one algorithm")
        return value


class AccessRule(BaseModel, frozen=True):
    """Who (some tokens, or a claim's values) may use which servers and tools.

    A caller gets the union of every rule that matches it; with an ``access`` list, a
    caller no rule matches sees nothing.
    """

    model_config = STRICT_MODEL

    tokens: Names = ()
    """Names of ``tokens`` entries this rule applies to."""

    claim: _Text | None = None
    """A JWT claim (a string or a list of strings, like ``groups``) ..."""

    values: Names = ()
    """... and the values of it this rule applies to."""

    servers: Names = ("*",)
    """Server names (``*`` for every one) the caller may use."""

    tools: dict[str, ToolFilter] = Field(default_factory=dict[str, ToolFilter])
    """Per server, which of its tools (``allow`` / ``deny`` globs); the rest of the server's tools are all usable."""

    profile: _Text | None = None
    """One of the file's ``profiles``, whose ``servers`` and ``tools`` this rule grants (instead of
    its own ``servers`` and ``tools``); loading puts them in (``config.profiles``)."""

    admin: bool = False
    """The callers this rule matches may open the gateway's ``/ui`` page (``ui.gateway``)."""

    @model_validator(mode="after")
    def _check_who(self) -> Self:
        if not self.tokens and self.claim is None:
            raise ValueError("say whom the rule is for: 'tokens', or 'claim' with 'values'")
        if (self.claim is None) != (not self.values):
            raise ValueError("'claim' and 'values' go together")
        if self.profile is not None and {"servers", "tools"} & self.model_fields_set:
            raise ValueError("a rule with 'profile' grants that profile's servers and tools: leave out its own")
        for server, tools in self.tools.items():
            if tools.overrides:
                raise ValueError(
                    f"tools.{server}.overrides: overrides belong to the server's entry (its 'tools': "
                    '{"overrides": ...}), where every caller sees them; a rule only allows or denies tools'
                )
        return self


class GatewaySettings(BaseModel, frozen=True):
    """The ``"gateway"`` object of the config file."""

    model_config = STRICT_MODEL

    url: _Text | None = None
    """The URL clients reach the gateway at, ``/mcp`` included (behind a load balancer, its
    public address). Token audience and Protected Resource Metadata use it; defaults to
    ``http://HOST:PORT/mcp`` of ``--http``."""

    tokens: dict[str, _Text] = Field(default_factory=dict[str, str])
    """Static bearer tokens by the name they stand for (use ``${VAR}``: never write a token here)."""

    oauth: GatewayOAuth | None = None

    access: Annotated[tuple[AccessRule, ...] | None, BeforeValidator(as_tuple)] = None
    """Who sees what; absent: every admitted caller sees everything."""

    allowed_hosts: Names = ()
    """``Host`` values accepted besides the bind address and ``url``'s (DNS-rebinding protection)."""

    allowed_origins: Names = ()
    """``Origin`` values accepted from browsers besides ``url``'s origin."""

    cors_origins: Names = ()
    """Origins of web pages (an MCP Apps host, a browser client) that may call the gateway
    across origins: answered CORS, preflight included, with ``Mcp-Session-Id``,
    ``Mcp-Protocol-Version``, ``WWW-Authenticate`` and ``Retry-After`` exposed; each is also
    an accepted ``Origin``. Exact origins (``https://app.example.com``,
    ``http://localhost:5173``); none by default, so a page elsewhere gets no answer it may read."""

    request_state_keys: Names = ()
    """Keys sealing 2026-07-28 ``requestState`` (the first seals, all open: rotation).
    Replicas must share them; absent, a key made at start (one replica only)."""

    session_idle_timeout: Annotated[float, Field(gt=0)] = 1800.0
    """Seconds after which an idle 2025-era session is closed."""

    drain_grace: Annotated[float, Field(ge=0)] = 25.0
    """On SIGTERM, seconds in-flight calls get to finish before the upstreams stop."""

    drain_notice: Annotated[float, Field(ge=0, le=300)] = 2.0
    """On SIGTERM, seconds the listener stays open even with nothing in flight, ``/readyz``
    answering 404, so that a load balancer's health checks (HAProxy's every second) take the
    replica out before its connections are refused: a replica that closed at once dropped a
    stateless call HAProxy had just sent it. Kubernetes' ``preStop`` sleep does the same there."""

    json_response: bool = False
    """Answer POSTs with plain JSON instead of an SSE stream (no progress or requests mid-call)."""

    metrics: _Text | None = None
    """``[HOST:]PORT`` of a listener of its own for ``/metrics`` (``"9464"`` is
    ``"127.0.0.1:9464"``; in a pod, ``"0.0.0.0:9464"`` for Prometheus to scrape, kept out of
    the Service; ``"[::1]:9464"`` for IPv6). Absent: no metrics. Never served on the
    clients' listener: it names every server, tool and outcome, and takes no token. Its
    Host check is the bind address (loopback names on loopback, none on ``0.0.0.0``);
    a request with an ``Origin`` (a browser page) is refused."""

    max_sessions: Annotated[int, Field(ge=1)] = 1000
    """2025-era sessions open at once on this replica (about 45 KiB each when idle)."""

    max_sessions_per_identity: Annotated[int, Field(ge=1)] = 50
    """Sessions one identity (a token's name, a JWT's identity, or for an open gateway a client
    address) may hold at once. At the limit its least recently used idle session is ended to
    make room (clients that never end their sessions must not lock their own user out); when
    all are busy, 429. One member cannot take every session."""

    max_listen_streams: Annotated[int, Field(ge=1)] = 1000
    """2026-07-28 ``subscriptions/listen`` streams open at once on this replica."""

    max_listen_streams_per_identity: Annotated[int, Field(ge=1)] = 20
    """``subscriptions/listen`` streams one identity may hold at once."""

    max_waiting_calls_per_identity: Annotated[int, Field(ge=1)] = 16
    """2026-07-28 calls of one identity suspended at once, waiting for its answer to an
    upstream's question (each holds an upstream concurrency slot while it waits)."""

    send_timeout: Annotated[float, Field(gt=0)] = 10.0
    """Seconds a message to a session may wait for its client to read. A session that reads
    nothing for this long (a stuck GET stream) is closed: it never delays another session."""

    max_queued_messages: Annotated[int, Field(ge=1)] = 256
    """Notices (list changes, resource updates, log messages) held for one slow session; past
    this the session is closed rather than grow without bound."""

    max_header_bytes: Annotated[int, Field(ge=4096)] = 65_536
    """Longest request line plus headers; more gets 431 before a token is checked. 64 KiB
    holds any JWT; nginx's default is 32 KiB, Node's 16 KiB."""

    header_timeout: Annotated[float, Field(gt=0)] = 10.0
    """Seconds a connection gets to send a request's line and headers: from its opening for
    the first request, from the request's first byte for later ones; then 408 and closed.
    Ten seconds is ample for any real client, short enough that a slow-header crowd
    cannot pile up."""

    body_timeout: Annotated[float, Field(gt=0)] = 30.0
    """Seconds a request's body may take to arrive, from the end of its headers (then 408
    and closed). Bodies are small JSON (a tool's arguments); 30 s covers a slow link."""

    max_connections: Annotated[int, Field(ge=1)] = 2000
    """Client connections open at once. At the limit a newcomer takes the place of the oldest
    connection still sending its request's headers (or idle between requests), which gets 408
    and is closed; only when every connection is busy with a request is the newcomer refused
    with 503. Lowered at start to what the process may open (``ulimit -n``) less
    ``reserved_files``, with a WARNING: refusing a connection stays the gateway's choice, never
    the kernel's."""

    reserved_files: Annotated[int, Field(ge=16)] = 256
    """File descriptors kept back from client connections for everything else the gateway
    opens: its upstreams' pipes and sockets, the metrics listener, log and data files."""

    @field_validator("cors_origins")
    @classmethod
    def _check_cors_origins(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        for value in values:
            parsed = urllib.parse.urlsplit(value)
            if (
                parsed.scheme not in ("http", "https")
                or not parsed.hostname
                or parsed.path not in ("", "/")
                or parsed.query
                or parsed.fragment
                or "*" in value
            ):
                raise ValueError(
                    f"expected an origin such as https://app.example.com or http://localhost:5173 (a scheme, a host "
                    f"and a port at most, no wildcard), not {value!r}"
                )
        return tuple(v.rstrip("/") for v in values)

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        return None if value is None else _check_http_url(value)

    @field_validator("metrics")
    @classmethod
    def _check_metrics(cls, value: str | None) -> str | None:
        if value is not None:
            listen_address(value)
        return value

    @property
    def metrics_address(self) -> tuple[str, int] | None:
        """Where ``/metrics`` is served, ``(host, port)``, or None."""
        return None if self.metrics is None else listen_address(self.metrics)

    @field_validator("tokens")
    @classmethod
    def _check_tokens(cls, value: dict[str, str]) -> dict[str, str]:
        for name, token in value.items():
            if len(token) < 16:
                raise ValueError(f"the token for {name!r} is shorter than 16 characters: use a long random value")
            if any(c.isspace() for c in token):
                raise ValueError(f"the token for {name!r} contains white space")
        if len(set(value.values())) != len(value):
            raise ValueError("two names share one token")
        return value

    @model_validator(mode="after")
    def _check_rules(self) -> Self:
        for index, rule in enumerate(self.access or ()):
            unknown = [t for t in rule.tokens if t not in self.tokens]
            if unknown:
                raise ValueError(f"access[{index}] names tokens not in 'tokens': {', '.join(unknown)}")
            if rule.claim is not None and self.oauth is None:
                raise ValueError(f"access[{index}] matches a claim, which needs 'oauth'")
        return self

    @property
    def signs_in(self) -> bool:
        """Whether callers must present credentials."""
        return bool(self.tokens) or self.oauth is not None
