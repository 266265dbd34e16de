"""The ``"patchbay"`` object of the config file: proxy-wide settings, each with its default.

Every key's docstring is its description (``docs/CONFIG.md``'s settings table says the same); a
value out of range is refused with the key's name by ``loading``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Annotated, Final, Literal, Self

from pydantic import BaseModel, Field, field_validator, model_validator

from mcp_patchbay.config.models import STRICT_MODEL, Seconds

__all__ = ["FAST_PATH_VARIABLE", "OLD_SWITCHES", "Settings", "fast_path_switch"]

logger = logging.getLogger(__name__)

FAST_PATH_VARIABLE: Final = "PATCHBAY_FAST_PATH"
"""``0`` or ``1``: overrides ``fast_path`` whatever the file says (the benchmarks compare both paths with it)."""

OLD_SWITCHES: Final = (("patchbay", "http_lane"), ("gateway", "fast_path"))
"""Keys that each switched one side's lanes before ``fast_path`` was the one switch: still read (a
``false`` turns ``fast_path`` off when the file does not set it), with a warning."""


class Settings(BaseModel, frozen=True):
    """Proxy-wide settings: the optional ``"patchbay"`` object of the config file."""

    model_config = STRICT_MODEL

    timeout: Seconds = 50.0
    """Default seconds a tool call may take, below the 60 s after which common clients give up."""

    max_call_time: Seconds = 300.0
    """Progress notifications from the server may extend a call up to this many seconds."""

    connect_timeout: Seconds = 30.0
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

    found_tools: Annotated[int, Field(ge=0, le=50)] = 8
    """In search mode, the tools searches found join the client's tool list (the ``found_tools``
    most recently found; a ``list_changed`` tells the client), so it approves and calls each by its
    own name and annotations; ``call_tool`` stays for names it has not listed. 0: only
    ``find_tools`` and ``call_tool`` are listed."""

    confirm: bool = False
    """In search mode, a call through ``call_tool`` to a tool that does not say it is read-only first
    asks the user (elicitation, where the client supports it): the client approved ``call_tool``
    once, not what it reaches. Declined, the call is not made (``USER_DECLINED``)."""

    unknown_tool: Literal["result", "error"] = "result"
    """A call to a tool that cannot be resolved: an ``isError`` result with suggestions, or a JSON-RPC error."""

    validate_arguments: bool = True
    """Check call arguments against the tool's ``inputSchema`` before forwarding."""

    max_result_bytes: Annotated[int, Field(ge=1)] = 1_048_576
    """Results larger than this are truncated."""

    max_message_bytes: Annotated[int, Field(ge=65_536)] = 33_554_432
    """Longest message (one line on stdio) taken from the client or an upstream: 32 MiB, room
    for a large file passed as an argument or a resource of some megabytes in base64. A longer
    one is skipped before it is parsed, costing no more memory than this; the request it
    carries, or the call it answers, gets an error that says so."""

    max_json_depth: Annotated[int, Field(ge=8, le=500)] = 100
    """Deepest nesting of arrays and objects taken in a message from the client or an upstream.
    Real tool arguments and schemas nest a few tens deep; past some hundreds, parsing and
    schema checks run out of Python's stack. A deeper message is refused like one too long."""

    status_tool: bool = False
    """Serve a ``patchbay__status`` tool reporting the state of every server."""

    max_concurrency: Annotated[int, Field(ge=1)] = 16
    """Calls in flight at once to one server."""

    queue_timeout: Annotated[float, Field(ge=0)] = 10.0
    """Seconds a call may wait for a concurrency slot before failing."""

    breaker_threshold: Annotated[int, Field(ge=1)] = 5
    """Consecutive failures after which a server's circuit breaker opens."""

    breaker_cooldown: Seconds = 30.0
    """Seconds an open breaker waits before letting a trial call through."""

    retry_attempts: Annotated[int, Field(ge=0)] = 2
    """Extra attempts for calls that are safe to retry (never delivered, or read-only)."""

    retry_backoff: Annotated[float, Field(ge=0)] = 0.2
    """Base delay in seconds between retries (doubled each attempt)."""

    restart_initial_delay: Seconds = 1.0
    """Seconds before the first restart of a server that exited or disconnected."""

    restart_max_delay: Seconds = 60.0
    """Upper bound of the growing delay between restarts."""

    watch: bool = True
    """Reload the config when the file changes."""

    open_browser: bool = True
    """When a call needs a server the user has not signed in to, open the sign-in page in the
    browser (the answer asks the model to have the user finish it); ``false``: the answer names
    the ``mcp-patchbay login`` command instead."""

    start: Literal["eager", "lazy"] = "eager"
    """When servers start unless their entry says (``start``): ``"eager"`` with the proxy;
    ``"lazy"`` when a call, a resource read, a prompt or a completion first needs them (a search
    does not start them), listed meanwhile from the cache of their last listing in the data folder."""

    idle_stop: Seconds | None = None
    """Stop a server after this many seconds with no call in flight and no subscription (started
    again when needed); ``None``: never. An entry's ``idle_stop`` overrides it."""

    pin: Literal["hold", "warn", "off"] = "hold"
    """Tool and prompt definitions are pinned when first seen; a changed one is ``"hold"``: held
    back (not listed, not callable) until ``mcp-patchbay trust`` approves it; ``"warn"``: served
    and logged; ``"off"``: not pinned."""

    new_tools: Literal["hold", "allow"] = "allow"
    """A tool that appears on a server whose tools are already pinned: ``"allow"`` serves it (and
    pins it) after the scan; ``"hold"`` holds it until trusted, as a changed one."""

    scan: Literal["hold", "warn", "off"] = "hold"
    """What the model will read is scanned for instructions aimed at it, shadowing and hidden
    characters, on first sight and on every change: ``"hold"`` holds a flagged tool until
    trusted, ``"warn"`` serves it and shows what the scan found (``check``, ``trust --list``, the
    status, the page, the log), ``"off"`` no scan. ``"hold"`` by default: on the two sets written
    blind to the scan and run once after its last change it held 3 of 120 honest look-alikes
    (2.5%), within the 5% a default hold allows (docs/TRUST.md)."""

    trust_poll: Annotated[float, Field(gt=0, le=60)] = 2.0
    """Seconds between a serving proxy's looks at the pins file (a ``stat``) for what
    ``mcp-patchbay trust`` approved: an approval is served, and the clients told
    (``list_changed``), within this."""

    fast_path: bool = True
    """Tool calls take the proxy's own lanes past the MCP SDK (``fastpath``), on both sides: the
    client's ``tools/call`` read off stdio or a gateway POST is answered from its JSON, and the
    upstream's is written to a stdio server's pipe or POSTed to a streamable HTTP server on
    keep-alive connections of the proxy's own, with the same checks, errors, sign-in, progress,
    cancellation and requests mid-call (what a lane cannot serve takes the SDK's path). On because
    every behaviour is proved on both paths; ``false`` costs most of the proxy's CPU a call back
    (the stdio proxy's 0.26 ms a call becomes 0.87, the gateway's 0.44-0.64 ms 2.2-3.5 ms), the way
    around a lane should a client or server misbehave with it. ``$PATCHBAY_FAST_PATH`` (``0`` or ``1``)
    overrides it (``fast_path_switch``); read when the proxy starts, and a link when it opens."""

    task_timeout: Seconds = 600.0
    """Seconds a tool call may run as a task: a task the proxy runs itself (the client asked for a
    task on a tool whose server cannot run one), and the task the proxy runs and waits for on behalf
    of a client that does not speak tasks (the tool's server requires one)."""

    task_ttl: Seconds = 3600.0
    """Longest a task and its result are kept, from its start: a client's ``ttl`` is capped to it, and
    a task asked for without one gets it. Past it the task is forgotten (cancelled if still running)."""

    max_tasks: Annotated[int, Field(ge=1)] = 64
    """Tasks one caller may hold at once (on the gateway, each member), running or finished within
    their ttl. A new one drops the caller's oldest finished task; when all are running it is refused."""

    activity: bool = True
    """Keep the activity log (``mcp-patchbay log``, the ``ui`` page): every tool call, resource read and
    prompt get (when, which client, the names, server, duration, outcome, sizes), upstreams' starts,
    crashes and restarts, sign-ins needed, held definitions and approvals, in ``activity.sqlite3`` in
    the data folder. Written by a thread of its own, off the call path: a call never waits for it. On
    because it answers "what did my agent just do?" for some microseconds of CPU a call: 5 to 7% of the
    stdio proxy's CPU per call to a trivial tool (docs/PERFORMANCE.md, "Activity log"); ``false`` writes
    nothing."""

    activity_keep_days: Annotated[float, Field(gt=0)] = 14.0
    """Rows older than this many days are deleted (at start, and every 2,000 rows written)."""

    activity_max_mb: Annotated[float, Field(ge=1)] = 64.0
    """The most the log file may hold, in MiB: past it the oldest rows are deleted."""

    activity_keep_arguments: bool = False
    """Keep each call's arguments and result in the log, cut to ``activity_argument_chars`` and with
    credentials redacted (values under keys such as ``password`` or ``token``, and what log lines are
    cleaned of). Off: the log keeps names, outcomes and sizes only."""

    activity_argument_chars: Annotated[int, Field(ge=0, le=1_000_000)] = 2000
    """With ``activity_keep_arguments``, the characters kept of each call's arguments and of its result."""

    activity_queue: Annotated[int, Field(ge=100)] = 10_000
    """Rows waiting to be written at most; when the file falls behind, the oldest waiting row is
    dropped (and counted, logged at most once a minute), never the call."""

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


def fast_path_switch(setting: bool | None, old: Mapping[str, bool], environ: Mapping[str, str]) -> bool:
    """Whether the lanes run: ``$PATCHBAY_FAST_PATH`` when it is ``0`` or ``1``; else ``fast_path``
    as the file gives it; else off when an old key (``OLD_SWITCHES``, ``old`` by its dotted path)
    says ``false``; else on. The one place the switch is decided, at config load."""
    value = environ.get(FAST_PATH_VARIABLE, "").strip()
    if value in ("0", "1"):
        return value == "1"
    if value:
        logger.warning("ignoring $%s=%r: expected 0 or 1", FAST_PATH_VARIABLE, value[:40])
    if setting is not None:
        return setting
    return all(old.values())
