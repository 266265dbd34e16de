"""The gateway's listener below HTTP: header size, header and body timeouts, connections at once.

uvicorn serves the gateway with httptools, and neither bounds what a client may hold:
httptools (llhttp) has no header limit and gathers a header's value as it arrives (four
64 MB headers cost 368 MiB and 11 s of CPU, before any token is looked at), and uvicorn
times only the keep-alive pause between requests, not a request's headers or body (800
connections sending a byte every 2 s stayed open; 1,100 made every real call fail).
``guarded_protocol`` is uvicorn's ``HttpToolsProtocol`` with the four limits of
``GatewaySettings`` added where the bytes arrive:

- ``max_header_bytes``: the bytes of a request's line and headers are counted as they
  come, before the parser sees them, and the parser is never fed past the limit: beyond
  it the client gets 431 and the connection closes. (With several requests in one TCP
  read, pipelining, the count of the next one starts at the following read, so a head
  may pass the limit by at most one read's worth, never more.)
- ``header_timeout``: from a connection's opening, and from the first byte of each
  request after that, to the end of the request's headers; then 408 and close. A
  connection that opens and sends nothing is closed the same way; an idle keep-alive
  connection between requests is uvicorn's own ``timeout_keep_alive``.
- ``body_timeout``: from the end of the headers to the end of the body; then 408 (or a
  plain close when an answer has begun) and the application sees the client go.
- ``max_connections``: a connection beyond it takes the place of the oldest connection
  still waiting for its request's headers (sending them, or idle between requests), which
  gets 408 and is closed: a slow-header crowd at the cap costs a newcomer nothing. Only when
  every connection is busy with a request is the newcomer refused, 503 before any byte is
  read. (uvicorn's ``limit_concurrency`` counts connections and running requests too, but
  only once a request's headers are in: a crowd that never finishes its headers would hold
  file descriptors until its timeout.)

Each refusal is one DEBUG line with the client's address and counted for metrics
(``Refusals``); a full house is also a WARNING, at most once a minute (``throttle``).
``connection_cap`` lifts the process's soft descriptor limit to its hard one and lowers
``max_connections`` to fit under it with ``reserved_files`` to spare: at the kernel's limit
``accept`` fails and the newcomer's connection is reset, with no word from the gateway.
"""

from __future__ import annotations

import asyncio
import http
import logging
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle
from uvicorn.server import ServerState

from mcp_patchbay.session.http_sessions import ABORT_EXTENSION
from mcp_patchbay.throttle import LogThrottle

__all__ = ["EdgeLimits", "Refusals", "connection_cap", "guarded_protocol"]

logger = logging.getLogger(__name__)


@dataclass
class Refusals:
    """Connections the edge closed, by reason (``header_too_large``, ``header_timeout``,
    ``body_timeout``, ``made_room``, ``too_many_connections``)."""

    counts: Counter[str] = field(default_factory=Counter[str])
    full_house: LogThrottle = field(default_factory=lambda: LogThrottle(logger, per_minute=1))
    """A full house is a WARNING at most once a minute (each refusal is counted and a DEBUG line)."""

    def count(self, reason: str) -> None:
        self.counts[reason] += 1


@dataclass(frozen=True)
class EdgeLimits:
    """What one listener allows a client (``GatewaySettings``' four keys)."""

    max_header_bytes: int
    header_timeout: float
    body_timeout: float
    max_connections: int | None
    refusals: Refusals = field(default_factory=Refusals)


def guarded_protocol(limits: EdgeLimits) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol with ``limits`` (pass it as ``uvicorn.Config(http=...)``)."""
    waiting: dict[GuardedHttpTools, None] = {}
    """The listener's connections waiting for a request's headers, longest waiting first: at
    ``max_connections`` the first of them makes room for a newcomer."""

    class GuardedHttpTools(HttpToolsProtocol):
        def __init__(
            self,
            config: Config,
            server_state: ServerState,
            app_state: dict[str, object],
            _loop: asyncio.AbstractEventLoop | None = None,
        ) -> None:
            super().__init__(config, server_state, app_state, _loop)
            self._head_bytes: int | None = 0
            """Bytes of the request head being read, or None while a body is (no head limit)."""
            self._timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if (
                limits.max_connections is not None
                and len(self.connections) > limits.max_connections
                and not self._make_room()
            ):
                self._refuse(http.HTTPStatus.SERVICE_UNAVAILABLE, "too_many_connections", "too many connections")
                limits.refusals.full_house.log(
                    "refusing connections: %d open and every one busy with a request (gateway.max_connections); "
                    "%d refused so far",
                    limits.max_connections,
                    limits.refusals.counts["too_many_connections"],
                )
                return
            waiting[self] = None
            self._arm(limits.header_timeout, self._header_timed_out)

        def _make_room(self) -> bool:
            """Close the connection longest waiting for a request's headers; False when none is."""
            for other in waiting:
                other._refuse(
                    http.HTTPStatus.REQUEST_TIMEOUT,
                    "made_room",
                    "closed to make room for a new connection (gateway.max_connections)",
                )
                limits.refusals.full_house.log(
                    "at gateway.max_connections (%d): closing the connections longest waiting for their "
                    "request's headers to admit new ones; %d closed so far",
                    limits.max_connections,
                    limits.refusals.counts["made_room"],
                )
                return True
            return False

        def connection_lost(self, exc: Exception | None) -> None:
            waiting.pop(self, None)
            self._disarm()
            super().connection_lost(exc)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and self._head_bytes is not None:
                waiting[self] = None  # idle until its next request: the youngest of those waiting

        def data_received(self, data: bytes) -> None:
            if self._head_bytes is not None and self._timer is None:  # a request's first byte after the last one
                self._arm(limits.header_timeout, self._header_timed_out)
            while data:
                if self._head_bytes is None:  # a body: its size is the application's to bound
                    super().data_received(data)
                    return
                room = limits.max_header_bytes - self._head_bytes
                if room <= 0:
                    self._refuse(
                        http.HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
                        "header_too_large",
                        f"request line and headers over {limits.max_header_bytes} bytes",
                    )
                    return
                piece, data = data[:room], data[room:]
                self._head_bytes += len(piece)  # before feeding: the parser's callbacks reset it
                super().data_received(piece)
                if self.transport.is_closing():
                    return

        def on_headers_complete(self) -> None:
            waiting.pop(self, None)
            self._head_bytes = None
            self._arm(limits.body_timeout, self._body_timed_out)
            extensions = cast("dict[str, Any]", self.scope).setdefault("extensions", {})
            extensions[ABORT_EXTENSION] = self._abort
            super().on_headers_complete()

        def _abort(self) -> None:
            """Drop the connection now, whatever is still unsent (``http_sessions.ABORT_EXTENSION``)."""
            self._disarm()
            if not self.transport.is_closing() or self.transport.get_write_buffer_size():
                logger.debug("%s: connection dropped (its session was ended)", self._who())
            self.transport.abort()

        def on_message_complete(self) -> None:
            self._head_bytes = 0
            self._disarm()
            super().on_message_complete()

        def _arm(self, seconds: float, handler: Callable[[], None]) -> None:
            self._disarm()
            self._timer = self.loop.call_later(seconds, handler)

        def _disarm(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def _header_timed_out(self) -> None:
            self._timer = None
            self._refuse(http.HTTPStatus.REQUEST_TIMEOUT, "header_timeout", "headers not received in time")

        def _body_timed_out(self) -> None:
            self._timer = None
            cycle = self._cycle()
            if cycle is not None and cycle.response_started:
                limits.refusals.count("body_timeout")
                logger.debug("%s: closed: body not received in time", self._who())
                self.transport.close()
                return
            if cycle is not None:  # the application sees the client go, and answers nothing more
                cycle.disconnected = True
                cycle.message_event.set()
            self._refuse(http.HTTPStatus.REQUEST_TIMEOUT, "body_timeout", "body not received in time")

        def _refuse(self, status: http.HTTPStatus, reason: str, detail: str) -> None:
            waiting.pop(self, None)
            limits.refusals.count(reason)
            logger.debug("%s: %d %s: %s", self._who(), status.value, status.phrase, detail)
            self._disarm()
            if self.transport.is_closing():
                return
            cycle = self._cycle()
            if cycle is not None and not cycle.response_complete and not cycle.disconnected:
                self.transport.close()  # an answer to an earlier request is under way: no status to write
                return
            body = f"{status.phrase}: {detail}\n".encode()
            self.transport.write(
                b"HTTP/1.1 %d %s\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: %d\r\n"
                b"connection: close\r\n\r\n%s" % (status.value, status.phrase.encode(), len(body), body)
            )
            self.transport.close()

        def _cycle(self) -> RequestResponseCycle | None:
            return self.cycle  # None until a first request's headers are in (uvicorn types it otherwise)

        def _who(self) -> str:
            return f"{self.client[0]}:{self.client[1]}" if self.client else "a client"

    return GuardedHttpTools


MIN_CONNECTIONS = 16
"""``connection_cap`` never lowers ``max_connections`` below this."""


def connection_cap(max_connections: int, reserved_files: int) -> int:
    """``max_connections`` lowered, with a WARNING, to what this process may open (the soft
    limit, lifted to the hard one first) less ``reserved_files``: at the kernel's limit
    ``accept`` fails and a newcomer is reset, where under the cap the edge makes room or
    answers 503."""
    soft = raise_open_files_limit()
    if soft is None:
        return max_connections
    room = max(MIN_CONNECTIONS, soft - reserved_files)
    if max_connections <= room:
        return max_connections
    logger.warning(
        "gateway.max_connections is %d but this process may open only %d files (ulimit -n), %d of them kept for "
        "upstreams and files (gateway.reserved_files): serving at most %d connections at once; raise the limit "
        "(ulimit -n, LimitNOFILE=, the container's nofile) to serve more",
        max_connections,
        soft,
        reserved_files,
        room,
    )
    return room


def raise_open_files_limit() -> int | None:
    """Lift the soft limit on open files to the hard one: the limit now, or None where there
    is none to read (Windows) or no limit."""
    if sys.platform == "win32":
        return None
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1_048_576)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as exc:
            logger.debug("open files: the soft limit stays %d (raising it to %d failed: %s)", soft, target, exc)
        else:
            logger.debug("open files: soft limit raised from %d to %d", soft, target)
            soft = target
    return None if soft == resource.RLIM_INFINITY else soft
