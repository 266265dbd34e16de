"""The answer to ``initialize`` before the MCP SDK is imported: a start no client races past.

Importing the SDK and building the proxy take most of a second (the SDK's pydantic models
alone are half of it). Claude Code sends its first model request 1.5 to 2 s after it spawns
its servers, and leaves out the tools of any server that has not answered by then; other
clients give up sooner. So on stdio the proxy's very first act, before it even reads its
config, is to start ``EarlyHandshake``: a thread that reads stdin and answers a well-formed
``initialize`` itself, within milliseconds of the spawn. The answer does not depend on the
config or the upstreams: the proxy's capabilities are the same for every config (tools,
resources with subscriptions, prompts, all with ``listChanged``; completions; logging; tasks), it
has no instructions, and the protocol version is negotiated as the SDK does (the version
asked for when it is one of ``HANDSHAKE_VERSIONS``, else the latest).

In search mode (``"expose": "search"`` in the file, read with ``json`` alone, or ``"auto"``
when the last start of the file found more tools than its threshold: ``upstreams.start_memory``) the listing
does not depend on the upstreams either, so a ``tools/list`` that follows is answered here
too (``session.own_tools.early_search_listing``), and so are ``prompts/list`` and ``resources/list``
(and templates), empty until the upstreams bring theirs: a client that lists early (Claude
Code waits for all three before it counts a server as connected) gets ``find_tools`` and
the call routes within milliseconds.

Nothing read is lost or reordered: every byte goes into a buffer that the SDK-backed reader
(``wire.stdio.stdio_streams``) takes over (``handover``) before it reads the pipe itself.
The requests answered here still reach the SDK's session, which needs them (the client's
capabilities, its protocol version, what it listed); its own answers to them are not sent
(``Handover.take_answer``) but compared with the ones given. A different ``initialize``
answer is logged as a WARNING with both (a test holds them equal for every version, so an
SDK upgrade that changes them fails the suite first); a different listing (an upstream
already answered, or the validated config says otherwise) is followed by
the list's ``list_changed`` notification in its place, so the client lists again.

Only a plain ``initialize`` as the first message, then plain list requests of those kinds
(notifications in between pass), each a JSON object on one line smaller than
``MAX_EARLY_LINE`` and nested no deeper than a few levels, are answered here; anything else
(a ``ping`` first, a 2026-07-28 request, a malformed line) stops the early answering and
waits, unread beyond the buffer, for the SDK's path, which answers it as always. POSIX
only, and only when stdin is a pipe or a socket (a client's spawn), never a terminal or a
file, and stdout is one the event loop can write (``wire.stdio``'s own condition);
``PATCHBAY_EARLY_HANDSHAKE=0`` turns it off. Imports only the standard library (search
mode's listing imports ``session.own_tools`` when a list is asked for).
"""

from __future__ import annotations

import json
import logging
import os
import select
import stat
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from mcp_patchbay import __version__
from mcp_patchbay.bounded_read import read_config

__all__ = ["HANDSHAKE_VERSIONS", "MAX_EARLY_LINE", "EarlyHandshake", "Handover", "initialize_answer"]

Listing = Callable[[], "list[dict[str, Any]] | None"]
"""The tools a first ``tools/list`` gets before the SDK is loaded, when they are certain (else None)."""

logger = logging.getLogger(__name__)

HANDSHAKE_VERSIONS: tuple[str, ...] = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""The SDK's ``mcp_types.version.HANDSHAKE_PROTOCOL_VERSIONS`` (importing it costs a fifth of a
second); a test keeps the two equal."""

CAPABILITIES: dict[str, Any] = {
    "completions": {},
    "logging": {},
    "prompts": {"listChanged": True},
    "resources": {"listChanged": True, "subscribe": True},
    "tasks": {"cancel": {}, "list": {}, "requests": {"tools": {"call": {}}}},
    "tools": {"listChanged": True},
}
"""What ``server.Proxy``'s SDK server declares, for every config (``tasks``: any tool may be called
as a task, run by its upstream or by the proxy: ``tasks.capabilities``)."""

MAX_EARLY_LINE = 65_536
"""An ``initialize`` line longer than this is left to the SDK's path (with its own bounds)."""

MAX_BUFFER = 1 << 20
"""Bytes read early beyond this stop the early reading: the rest waits in the pipe."""

EARLY_LISTS: dict[str, str] = {
    "tools/list": "tools",
    "prompts/list": "prompts",
    "resources/list": "resources",
    "resources/templates/list": "resourceTemplates",
}
"""The lists answered early (in search mode), to the key of their answer's items."""

LIST_CHANGED: dict[str, str] = {
    "tools": "notifications/tools/list_changed",
    "prompts": "notifications/prompts/list_changed",
    "resources": "notifications/resources/list_changed",
    "resourceTemplates": "notifications/resources/list_changed",
}

_MAX_BRACKETS = 64
"""An early line with more brackets than this is left to the SDK's path (``json`` recursion)."""


def initialize_answer(request_id: str | int, params: dict[str, Any]) -> dict[str, Any] | None:
    """The answer to ``initialize`` with these params, as the SDK would give it; None when the
    params are not a plain, valid ``initialize`` (the SDK's path answers those)."""
    version = params.get("protocolVersion")
    client = params.get("clientInfo")
    if not isinstance(version, str) or not isinstance(params.get("capabilities"), dict):
        return None
    if not isinstance(client, dict):
        return None
    info = cast("dict[str, Any]", client)
    if not isinstance(info.get("name"), str) or not isinstance(info.get("version"), str):
        return None
    negotiated = version if version in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
    result = {
        "capabilities": CAPABILITIES,
        "protocolVersion": negotiated,
        "serverInfo": {"name": "mcp-patchbay", "version": __version__},
    }
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


@dataclass
class Handover:
    """What the early reader leaves to the SDK-backed one: the bytes read (in order, a partial
    last line included), whether stdin already ended, and the answers already given."""

    buffered: bytes = b""
    eof: bool = False
    answered: dict[str | int, dict[str, Any]] = field(default_factory=dict[str | int, dict[str, Any]])
    """Request id -> the answer written early; the SDK's own answer to it is not sent."""

    def take_answer(self, message: dict[str, Any]) -> list[dict[str, Any]] | None:
        """What to send in place of ``message`` (going out to the client): None when it answers
        no request answered early (send it as it is); else nothing, or a ``list_changed``
        when the early listing differs from the SDK's."""
        if not self.answered or "method" in message:
            return None
        request_id = message.get("id")
        if not isinstance(request_id, str | int) or request_id not in self.answered:
            return None
        given = self.answered.pop(request_id)
        if message == given:
            return []
        listed = next((key for key in LIST_CHANGED if key in given.get("result", {})), None)
        if listed is not None:
            logger.info("the %s listed before the SDK was loaded changed since: telling the client", listed)
            return [{"jsonrpc": "2.0", "method": LIST_CHANGED[listed]}]
        logger.warning(
            "the initialize answer given before the SDK was loaded differs from the SDK's: given %s, "
            "SDK's %s; the client keeps the first",
            json.dumps(given),
            json.dumps(message),
        )
        return []


class EarlyHandshake:
    """Reads stdin in a thread until ``handover``, answering the first ``initialize`` at once."""

    def __init__(self, fd_in: int = 0, fd_out: int = 1, listing: Listing | None = None) -> None:
        self._in = fd_in
        self._out = fd_out
        self._listing = listing
        self._tools: list[dict[str, Any]] | None = None
        """Search mode's listing, once asked for (empty: none is certain)."""
        self._initialized = False
        """``initialize`` was answered here: a ``tools/list`` may follow."""
        self._wake_read, self._wake_write = os.pipe()
        self._result = Handover()
        self._answering = True
        self._examined = 0
        """Bytes of the buffer already looked at for complete lines."""
        self._thread = threading.Thread(target=self._read, name="patchbay-early-handshake", daemon=True)

    @classmethod
    def start_if_possible(cls, config_path: str | None = None) -> EarlyHandshake | None:
        """Started on POSIX when stdin is a pipe or a socket (a client's spawn) and stdout one the
        event loop can write (``wire.stdio`` then takes both over); else None."""
        if sys.platform == "win32" or os.environ.get("PATCHBAY_EARLY_HANDSHAKE", "1") == "0":
            return None
        try:
            mode_in, mode_out = os.fstat(0).st_mode, os.fstat(1).st_mode
        except OSError:
            return None
        if not (stat.S_ISFIFO(mode_in) or stat.S_ISSOCK(mode_in)):
            return None
        if not (stat.S_ISFIFO(mode_out) or stat.S_ISSOCK(mode_out) or stat.S_ISCHR(mode_out)):
            return None
        early = cls(listing=(lambda: _search_listing(config_path)) if config_path else None)
        early._thread.start()
        return early

    def handover(self) -> Handover:
        """Stop reading (at once: the thread waits in ``select`` on a wake-up pipe too) and give
        back what was read. Called once, just before the SDK-backed reader takes stdin."""
        os.write(self._wake_write, b"x")
        self._thread.join()
        for fd in (self._wake_read, self._wake_write):
            os.close(fd)
        return self._result

    def _read(self) -> None:
        result = self._result
        try:
            while len(result.buffered) < MAX_BUFFER:
                ready, _, _ = select.select([self._in, self._wake_read], [], [])
                if self._wake_read in ready:
                    return
                chunk = os.read(self._in, 65_536)
                if not chunk:
                    result.eof = True
                    return
                result.buffered += chunk
                if self._answering:
                    self._answer_lines()
        except OSError as exc:  # stdin or stdout gone: the SDK-backed reader meets it again and says so
            logger.debug("early handshake stopped: %r", exc)

    def _answer_lines(self) -> None:
        buffered = self._result.buffered
        while self._answering:
            end = buffered.find(b"\n", self._examined)
            if end < 0:
                if len(buffered) - self._examined > MAX_EARLY_LINE:
                    self._answering = False
                return
            line = buffered[self._examined : end]
            self._examined = end + 1
            if line.strip():
                self._answering = self._answer(line)

    def _answer(self, line: bytes) -> bool:
        """Answer ``line`` if it is the next request answerable here; whether to go on looking."""
        if len(line) > MAX_EARLY_LINE or line.count(b"{") + line.count(b"[") > _MAX_BRACKETS:
            return False
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            return False
        if not isinstance(message, dict):
            return False
        request = cast("dict[str, Any]", message)
        method, request_id, params = request.get("method"), request.get("id"), request.get("params", {})
        if request.get("jsonrpc") != "2.0" or not isinstance(params, dict):
            return False
        if self._initialized and "id" not in request and isinstance(method, str):
            return method.startswith("notifications/")  # notifications/initialized and the like pass
        if not isinstance(request_id, str | int) or isinstance(request_id, bool):
            return False
        answer: dict[str, Any] | None = None
        if method == "initialize" and not self._initialized:
            answer = initialize_answer(request_id, cast("dict[str, Any]", params))
        elif method in EARLY_LISTS and self._initialized and "cursor" not in params:
            result = self._early_list(method)
            answer = None if result is None else {"jsonrpc": "2.0", "id": request_id, "result": result}
        if answer is None:
            return False
        data = (json.dumps(answer, separators=(",", ":")) + "\n").encode()
        while data:
            data = data[os.write(self._out, data) :]
        self._result.answered[request_id] = answer
        self._initialized = True
        return True

    def _early_list(self, method: str) -> dict[str, Any] | None:
        """A list's answer before the SDK is loaded: search mode's tools, and (in search mode)
        no prompts or resources yet: they come from upstreams, with ``list_changed``."""
        if self._tools is None and self._listing is not None:
            self._tools = self._listing() or []
            self._listing = None
        if not self._tools:
            return None
        key = EARLY_LISTS[method]
        return {key: self._tools if key == "tools" else []}


def _search_listing(config_path: str) -> list[dict[str, Any]] | None:
    """Search mode's listing from the config file, read with ``json`` alone; None when unsure."""
    try:
        document = json.loads(read_config(config_path))  # bounded: never waits on a FIFO nor reads /dev/zero
        from mcp_patchbay.session.own_tools import early_search_listing
        from mcp_patchbay.upstreams.start_memory import recall

        return early_search_listing(document, recall(config_path))
    except Exception:  # anything odd: the SDK's path answers, as always
        logger.debug("no early listing", exc_info=True)
        return None
