"""The gateway's HTTP edge against a hostile or careless client (issue 20): sessions per
member, a session bound to the member that opened it, header size, slow headers and
bodies, connections at once, metrics on a listener of their own, clients that go away
mid-body. A real uvicorn on a loopback port (``tests.test_gateway.running``), raw sockets
where the bug lives below HTTP."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import tracemalloc
from collections.abc import AsyncGenerator

import anyio
import anyio.abc
import httpx2
import pytest

from mcp_patchbay.config import ConfigError
from mcp_patchbay.config.gateway import listen_address
from mcp_patchbay.gateway import app as app_module
from mcp_patchbay.gateway import edge
from mcp_patchbay.gateway.auth import build_auth
from tests.harness import sessions_of, until
from tests.jwt_util import FakeIssuer
from tests.test_gateway import ALICE, BOB, client, gateway_config, result_text, running, upstreams

pytestmark = pytest.mark.anyio

MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
}


async def open_session(http: httpx2.AsyncClient, token: str) -> httpx2.Response:
    """An ``initialize`` POST (its SSE answer read whole)."""
    return await http.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "authorization": f"Bearer {token}"})


# --- sessions per member ------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def busy(http: httpx2.AsyncClient, token: str, session_id: str) -> AsyncGenerator[None]:
    """The session's GET stream held open: a request in flight, so the session is busy."""
    headers = {
        "authorization": f"Bearer {token}",
        "accept": "text/event-stream",
        "mcp-session-id": session_id,
        "mcp-protocol-version": "2025-11-25",
    }
    async with http.stream("GET", "/mcp", headers=headers) as stream:
        assert stream.status_code == 200
        yield


async def test_one_token_cannot_take_every_session_and_others_still_connect() -> None:
    """One token could open 10,000 sessions (the SDK's cap) and every other member then got
    503 for the idle timeout. A member holds max_sessions_per_identity at most: its least
    recently used idle session makes room for a new one; when all are busy it gets 429."""
    config = gateway_config({"tokens": {"alice": ALICE, "bob": BOB}, "max_sessions_per_identity": 2})
    async with running(config, upstreams()) as (gateway, base):
        async with httpx2.AsyncClient(base_url=base, timeout=10) as http:
            first, second = [(await open_session(http, ALICE)).headers["mcp-session-id"] for _ in range(2)]
            await ping(http, ALICE, first)  # used lately: the second is now the least recently used

            third = await open_session(http, ALICE)  # room is made: the idle, least recently used one ends
            assert third.status_code == 200
            assert sessions_of(gateway.manager, "alice (token)") == 2
            assert (await ping(http, ALICE, second)).status_code == 404
            assert (await ping(http, ALICE, first)).status_code == 200
            third_id = third.headers["mcp-session-id"]

            async with busy(http, ALICE, first), busy(http, ALICE, third_id):  # both busy: nothing to end
                refused = await open_session(http, ALICE)
                assert refused.status_code == 429
                assert int(refused.headers["retry-after"]) > 0
                error = refused.json()["error"]
                assert "Too many open sessions" in error["message"] and "busy" in error["message"]
                assert len(error["message"]) < 500
                async with client(base, token=BOB) as bob:  # another member still connects and calls
                    assert result_text(await bob.call_tool("time__now", {})) == "12:00"

            # The server sees the streams end a moment after the client closed them.
            async def opens() -> bool:
                return (await open_session(http, ALICE)).status_code != 429

            await until(opens)
            # A 10,000-session loop of one token costs it its own old sessions, never more than its share.
            for _ in range(50):
                assert (await open_session(http, ALICE)).status_code == 200
            assert sessions_of(gateway.manager, "alice (token)") == 2
            assert gateway.manager.sessions == 2

            # DELETE and the proxy's end_session count down too.
            latest = await open_session(http, ALICE)
            session_id = latest.headers["mcp-session-id"]
            ended = await http.delete(
                "/mcp",
                headers={
                    "authorization": f"Bearer {ALICE}",
                    "mcp-session-id": session_id,
                    "mcp-protocol-version": "2025-11-25",
                },
            )
            assert ended.status_code == 200
            assert sessions_of(gateway.manager, "alice (token)") == 1
            other = await open_session(http, ALICE)
            await gateway.manager.end_session(other.headers["mcp-session-id"])
            assert sessions_of(gateway.manager, "alice (token)") == 1


async def test_a_crowd_of_openings_at_the_member_cap_gets_200_or_429_never_a_dropped_session(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 32: a member at max_sessions_per_identity with its sessions busy opened many more at
    once: some initialize requests got 404, some connections were dropped, and the log held
    ClosedResourceError tracebacks: making room ended a session whose opening request had not
    been answered yet (the SDK counts it in flight only once its server task has started). A
    session is busy until its opening request is answered: every answer is 200 or 429."""
    caplog.set_level(logging.INFO, "mcp")
    config = gateway_config({"tokens": {"alice": ALICE}, "max_sessions_per_identity": 4})
    async with running(config, upstreams()) as (gateway, base):
        async with httpx2.AsyncClient(base_url=base, timeout=10) as http:
            held = [(await open_session(http, ALICE)).headers["mcp-session-id"] for _ in range(2)]
            async with busy(http, ALICE, held[0]), busy(http, ALICE, held[1]):
                answers: list[httpx2.Response] = []

                async def opening() -> None:
                    answers.append(await open_session(http, ALICE))

                with anyio.fail_after(30):
                    async with anyio.create_task_group() as tg:
                        for _ in range(24):
                            tg.start_soon(opening)
            assert sorted({a.status_code for a in answers}) == [200, 429], [a.status_code for a in answers]
            assert all(int(a.headers["retry-after"]) > 0 for a in answers if a.status_code == 429)
            assert all("protocolVersion" in a.text for a in answers if a.status_code == 200)
            assert sessions_of(gateway.manager, "alice (token)") <= 4
    troubles = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not troubles, [r.getMessage() for r in troubles]


async def test_the_gateway_s_last_session_refused_says_when_to_try_again() -> None:
    """At gateway.max_sessions the SDK answered a bare 503 with no Retry-After: a client had no
    word of when to come back. Every refusal at a limit carries one."""
    config = gateway_config({"tokens": {"alice": ALICE, "bob": BOB}, "max_sessions": 2})
    async with running(config, upstreams()) as (_, base):
        async with httpx2.AsyncClient(base_url=base, timeout=10) as http:
            held = [(await open_session(http, token)).headers["mcp-session-id"] for token in (ALICE, BOB)]
            async with busy(http, ALICE, held[0]), busy(http, BOB, held[1]):
                refused = await open_session(http, BOB)
            assert refused.status_code == 503
            assert int(refused.headers["retry-after"]) > 0
            assert "gateway.max_sessions" in refused.json()["error"]["message"]


async def ping(http: httpx2.AsyncClient, token: str, session_id: str) -> httpx2.Response:
    headers = {
        **MCP_HEADERS,
        "authorization": f"Bearer {token}",
        "mcp-session-id": session_id,
        "mcp-protocol-version": "2025-11-25",
    }
    return await http.post("/mcp", json={"jsonrpc": "2.0", "id": 9, "method": "ping"}, headers=headers)


async def test_a_member_refused_session_after_session_cannot_flood_the_log(caplog: pytest.LogCaptureFixture) -> None:
    """Each refused session was a WARNING (250 lines for 250 tries, measured): at most 10 a
    minute now, the rest at DEBUG, and the member is named readably (the redaction cut
    ``token:alice`` to ``token:***``)."""
    caplog.set_level(logging.DEBUG, "mcp_patchbay")
    config = gateway_config({"tokens": {"alice": ALICE, "bob": BOB}, "max_sessions_per_identity": 1})
    async with running(config, upstreams()) as (_, base):
        async with httpx2.AsyncClient(base_url=base, timeout=10) as http:
            opened = await open_session(http, ALICE)
            async with busy(http, ALICE, opened.headers["mcp-session-id"]):
                for _ in range(30):
                    assert (await open_session(http, ALICE)).status_code == 429
    refusals = [r for r in caplog.records if "Refusing a new session" in r.getMessage()]
    assert len(refusals) == 30
    warnings = [r for r in refusals if r.levelno == logging.WARNING]
    assert len(warnings) == 10
    assert "Refusing a new session to alice (token)" in warnings[0].getMessage()


async def test_a_client_that_never_ends_its_sessions_does_not_lock_its_user_out() -> None:
    """Claude Code's health check (`claude mcp list`) opens a session and never ends it: the
    third run against a limit of 2 was refused for the idle timeout (seen with Claude Code
    2.1). The oldest idle session makes room instead."""
    config = gateway_config({"tokens": {"alice": ALICE}, "max_sessions_per_identity": 2})
    async with running(config, upstreams()) as (gateway, base):
        for _ in range(5):  # five runs of a client that connects, lists, and exits without a DELETE
            async with client(base, token=ALICE) as alice:
                assert "time__now" in {t.name for t in (await alice.list_tools()).tools}
        assert sessions_of(gateway.manager, "alice (token)") <= 2


async def test_sessions_that_go_idle_are_counted_down() -> None:
    config = gateway_config({"tokens": {"alice": ALICE}, "max_sessions_per_identity": 1, "session_idle_timeout": 0.2})
    async with running(config, upstreams()) as (gateway, base):
        async with httpx2.AsyncClient(base_url=base, timeout=10) as http:
            assert (await open_session(http, ALICE)).status_code == 200
            await until(lambda: not sessions_of(gateway.manager, "alice (token)"))  # the idle timeout ends it
            assert (await open_session(http, ALICE)).status_code == 200


# --- a session belongs to the member that opened it -----------------------------------------------


async def test_a_jwt_session_is_bound_to_the_identity_claim_not_only_client_and_subject(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    issuer = FakeIssuer()
    issuer.add_key("rsa-1", "rsa")
    monkeypatch.setattr(app_module, "build_auth", functools.partial(build_auth, transport=issuer.transport))
    oauth = {
        "issuer": issuer.issuer,
        "jwks_url": issuer.jwks_url,
        "audience": issuer.audience,
        "identity_claim": "email",
    }
    config = gateway_config({"oauth": oauth})
    # Same client (azp), same issuer, no sub: only the identity claim tells them apart.
    carol = issuer.mint(sub=None, azp="shared-app", email="carol@example.com")
    dave = issuer.mint(sub=None, azp="shared-app", email="dave@example.com")
    async with running(config, upstreams()) as (_, base):
        async with httpx2.AsyncClient(base_url=base, timeout=10) as http:
            opened = await open_session(http, carol)
            assert opened.status_code == 200
            session = {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
            ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
            stolen = await http.post(
                "/mcp", json=ping, headers={**MCP_HEADERS, **session, "authorization": f"Bearer {dave}"}
            )
            unknown = await http.post(
                "/mcp",
                json=ping,
                headers={**MCP_HEADERS, **session, "mcp-session-id": "0" * 32, "authorization": f"Bearer {dave}"},
            )
            assert stolen.status_code == 404
            assert (stolen.status_code, stolen.json()) == (unknown.status_code, unknown.json())
            own = await http.post(
                "/mcp", json=ping, headers={**MCP_HEADERS, **session, "authorization": f"Bearer {carol}"}
            )
            assert own.status_code == 200


# --- a client that goes away mid-body --------------------------------------------------------------


async def test_clients_that_abort_their_bodies_log_no_error_and_no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    body = json.dumps(INITIALIZE).encode()
    async with running(gateway_config(), upstreams()) as (_, base):
        host, port = base.removeprefix("http://").rsplit(":", 1)
        for _ in range(20):
            stream = await anyio.connect_tcp(host, int(port))
            head = (
                f"POST /mcp HTTP/1.1\r\nhost: {host}:{port}\r\naccept: application/json, text/event-stream\r\n"
                f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
            )
            await stream.send(head.encode() + body[:20])
            await stream.aclose()

        def told() -> list[logging.LogRecord]:
            return [r for r in caplog.records if "went away mid-request" in r.getMessage() or _is_error(r)]

        await until(lambda: len(told()) >= 20, within=10)  # each aborted request, logged one way or the other
        async with client(base) as c:
            assert result_text(await c.call_tool("time__now", {})) == "12:00"
    errors = [r for r in caplog.records if _is_error(r)]
    assert errors == [], [r.getMessage() for r in errors]
    assert sum("went away mid-request" in r.getMessage() for r in caplog.records) == 20


def _is_error(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.ERROR or record.exc_info is not None


# --- the HTTP edge: header size, slow headers and bodies, connections at once --------------------


def _address(base: str) -> tuple[str, int]:
    host, port = base.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


async def _until_closed(stream: anyio.abc.SocketStream) -> bytes:
    """What the server sends until it closes the connection."""
    received = b""
    while True:
        try:
            received += await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            return received


async def _status(base: str, request: bytes) -> bytes:
    """The status line a fresh connection gets for ``request``."""
    async with await anyio.connect_tcp(*_address(base)) as stream:
        await stream.send(request)
        return (await _until_closed(stream)).split(b"\r\n", 1)[0]


HEALTHZ = b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n"


async def test_a_huge_header_gets_431_before_any_token_and_costs_no_memory() -> None:
    config = gateway_config({"tokens": {"alice": ALICE}, "max_header_bytes": 8192})
    chunk = b"a" * 65_536
    async with running(config, upstreams()) as (_, base):
        tracemalloc.start()
        try:
            before, _ = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            async with await anyio.connect_tcp(*_address(base)) as stream:
                answer = b""

                async def read() -> None:
                    nonlocal answer
                    answer = await _until_closed(stream)

                with anyio.fail_after(10):
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(read)
                        await stream.send(b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\nx-huge: ")
                        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                            for _ in range(256):  # 16 MiB of one header, as long as the server listens
                                await stream.send(chunk)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:100]
    assert peak - before < 2 * 1024 * 1024, f"{(peak - before) / 2**20:.1f} MiB held for one huge header"


async def test_slow_headers_and_bodies_are_closed_after_their_timeouts_while_real_calls_go_on() -> None:
    config = gateway_config({"header_timeout": 0.3, "body_timeout": 0.3})
    async with running(config, upstreams()) as (gateway, base):
        results: dict[str, bytes] = {}

        async def slow(name: str, opening: bytes) -> None:
            async with await anyio.connect_tcp(*_address(base)) as stream:
                if opening:
                    await stream.send(opening)
                results[name] = await _until_closed(stream)

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(slow, "silent", b"")
                tg.start_soon(slow, "header", b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\nx-slow: a")
                body = json.dumps(INITIALIZE).encode()
                head = (
                    "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\naccept: application/json, text/event-stream\r\n"
                    f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
                )
                tg.start_soon(slow, "body", head.encode() + body[:10])
                async with client(base) as c:  # meanwhile, a real client's calls succeed
                    for _ in range(3):
                        assert result_text(await c.call_tool("time__now", {})) == "12:00"
        for name in ("silent", "header", "body"):
            assert results[name].startswith(b"HTTP/1.1 408 "), (name, results[name][:100])
        assert gateway.refusals.counts == {"header_timeout": 2, "body_timeout": 1}


SLOW_HEAD = b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\nx-slow: a"
"""A request whose headers never end: its connection waits for them."""


async def test_at_max_connections_a_newcomer_takes_the_place_of_a_slow_header() -> None:
    """Issue 32: at the cap a crowd sending its headers a byte at a time held every
    connection, and newcomers got 503 (with the cap above ``ulimit -n``, a reset) until the
    crowd's header timeout. The connection longest waiting for its headers makes room."""
    async with running(gateway_config({"max_connections": 4}), upstreams()) as (gateway, base):
        crowd: list[anyio.abc.SocketStream] = []
        try:
            with anyio.fail_after(10):
                for _ in range(12):  # three times the cap, each sending headers that never end
                    stream = await anyio.connect_tcp(*_address(base))
                    crowd.append(stream)
                    await stream.send(SLOW_HEAD)
                for _ in range(5):
                    assert (await _status(base, HEALTHZ)).startswith(b"HTTP/1.1 200 ")
                oldest = await _until_closed(crowd[0])
                assert oldest.startswith(b"HTTP/1.1 408 ") and b"max_connections" in oldest, oldest[:200]
                assert gateway.refusals.counts["too_many_connections"] == 0
                assert gateway.refusals.counts["made_room"] >= 8 + 1  # the crowd past the cap, then the first newcomer
        finally:
            for stream in crowd:
                await stream.aclose()


async def test_at_max_connections_with_every_connection_busy_a_newcomer_gets_503() -> None:
    async with running(gateway_config({"max_connections": 4}), upstreams()) as (gateway, base):
        busy_ones: list[anyio.abc.SocketStream] = []
        body = json.dumps(INITIALIZE).encode()
        head = (
            "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\naccept: application/json, text/event-stream\r\n"
            f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
        )
        try:
            with anyio.fail_after(10):
                for _ in range(4):  # headers in, body still coming: a request in progress
                    stream = await anyio.connect_tcp(*_address(base))
                    busy_ones.append(stream)
                    await stream.send(head.encode() + body[:10])

                async def refused() -> bool:
                    return (await _status(base, HEALTHZ)).startswith(b"HTTP/1.1 503 ")

                await until(refused, within=5)  # once the server has read their headers
                assert gateway.refusals.counts["made_room"] == 0
        finally:
            for stream in busy_ones:
                await stream.aclose()

        async def room() -> bool:  # room again once the server has seen them go
            return (await _status(base, HEALTHZ)).startswith(b"HTTP/1.1 200 ")

        await until(room, within=10)


def test_max_connections_is_lowered_to_fit_the_open_files_limit(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """With ``ulimit -n`` 1,024 and the default cap of 2,000 the kernel, not the gateway, refused
    newcomers (accept failed; their connections were reset): the cap fits under the limit."""
    monkeypatch.setattr(edge, "raise_open_files_limit", lambda: 1024)
    with caplog.at_level(logging.WARNING, "mcp_patchbay.gateway"):
        assert edge.connection_cap(2000, 256) == 768
    assert "ulimit -n" in caplog.text and "gateway.reserved_files" in caplog.text
    assert edge.connection_cap(500, 256) == 500
    assert edge.connection_cap(2000, 4096) == edge.MIN_CONNECTIONS
    monkeypatch.setattr(edge, "raise_open_files_limit", lambda: None)
    assert edge.connection_cap(2000, 256) == 2000


# --- /metrics on a listener of its own ------------------------------------------------------------


async def test_metrics_are_never_on_the_clients_listener_and_their_own_checks_host_and_origin() -> None:
    config = gateway_config({"tokens": {"alice": ALICE}})
    async with running(config, upstreams()) as (gateway, base):  # no gateway.metrics: no metrics at all
        assert gateway.metrics_bound is None
        async with httpx2.AsyncClient(base_url=base) as http:
            assert (await http.get("/metrics")).status_code in (401, 404)
            assert (await http.get("/metrics", headers={"authorization": f"Bearer {ALICE}"})).status_code == 404
    config = gateway_config({"tokens": {"alice": ALICE}, "metrics": "127.0.0.1:0"})
    async with running(config, upstreams()) as (gateway, base):
        assert gateway.metrics_bound is not None
        async with httpx2.AsyncClient(base_url=f"http://127.0.0.1:{gateway.metrics_bound[1]}") as scrape:
            assert "patchbay_upstream_state" in (await scrape.get("/metrics")).text
            rebound = await scrape.get("/metrics", headers={"host": "evil.example:9464"})  # DNS rebinding
            assert rebound.status_code == 421 and "patchbay" not in rebound.text
            from_page = await scrape.get("/metrics", headers={"origin": "http://127.0.0.1:8000"})
            assert from_page.status_code == 403
            assert (await scrape.get("/mcp")).status_code == 404  # and nothing else there


def test_the_metrics_address_is_host_and_port() -> None:
    assert listen_address("9464") == ("127.0.0.1", 9464)
    assert listen_address("0.0.0.0:9464") == ("0.0.0.0", 9464)
    assert listen_address("[::1]:9464") == ("::1", 9464)
    for bad in ("::1:9464", "host:99999", ":9464", "host:port"):
        with pytest.raises(ValueError, match=r"\[HOST:\]PORT"):
            listen_address(bad)
    with pytest.raises(ConfigError, match=r"gateway\.metrics: expected \[HOST:\]PORT"):
        gateway_config({"metrics": "nine"})


async def test_a_body_nested_past_max_json_depth_is_refused_by_its_id_and_the_session_goes_on() -> None:
    """stdio refused a message nested past patchbay.max_json_depth; the gateway took one up
    to the SDK parser's own limit (about 200), which the proxy's recursive code then met."""
    config = gateway_config({"tokens": {"alice": ALICE}}, {"max_json_depth": 20})
    async with running(config, upstreams()) as (_, base):
        async with httpx2.AsyncClient(base_url=base, timeout=10) as http:
            session_id = (await open_session(http, ALICE)).headers["mcp-session-id"]
            nested = "1"
            for _ in range(30):
                nested = '{"a":' + nested + "}"
            body = (
                '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"time__now","arguments":{"x":'
                + nested
                + "}}}"
            )
            for era, extra in (("2025-11-25", {"mcp-session-id": session_id}), ("2026-07-28", {})):
                headers = {**MCP_HEADERS, "authorization": f"Bearer {ALICE}", "mcp-protocol-version": era, **extra}
                refused = await http.post("/mcp", content=body, headers=headers)
                assert refused.status_code == 400, (era, refused.text)
                error = refused.json()
                assert error["id"] == 7 and error["error"]["code"] == -32600
                assert "patchbay.max_json_depth" in error["error"]["message"]
            assert (await ping(http, ALICE, session_id)).status_code == 200


# --- CORS for web hosts ------------------------------------------------------------------------------


async def test_a_web_host_on_an_allowed_origin_gets_cors_and_others_get_none() -> None:
    """Issue 33: a web page (an MCP Apps host) could reach the gateway only with the browser's
    checks turned off. ``gateway.cors_origins`` is answered, preflight included, with the
    session's headers exposed; no origin is by default."""
    page = "http://apps.example:8000"
    config = gateway_config({"tokens": {"alice": ALICE}, "cors_origins": [page]})
    preflight = {
        "origin": page,
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization, content-type, mcp-session-id, mcp-protocol-version",
    }
    async with running(config, upstreams()) as (_, base):
        async with httpx2.AsyncClient(base_url=base, timeout=10) as http:
            allowed = await http.options("/mcp", headers=preflight)
            assert allowed.status_code == 200
            assert allowed.headers["access-control-allow-origin"] == page
            assert "mcp-session-id" in allowed.headers["access-control-allow-headers"].lower()
            opened = await http.post(
                "/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "authorization": f"Bearer {ALICE}", "origin": page}
            )
            assert opened.status_code == 200
            assert opened.headers["access-control-allow-origin"] == page
            assert "mcp-session-id" in opened.headers["access-control-expose-headers"].lower()
            elsewhere = await http.options("/mcp", headers={**preflight, "origin": "http://evil.example"})
            assert "access-control-allow-origin" not in elsewhere.headers
            refused = await http.post(
                "/mcp",
                json=INITIALIZE,
                headers={**MCP_HEADERS, "authorization": f"Bearer {ALICE}", "origin": "http://evil.example"},
            )
            assert refused.status_code == 403 and "access-control-allow-origin" not in refused.headers
    async with running(gateway_config({"tokens": {"alice": ALICE}}), upstreams()) as (_, base):
        async with httpx2.AsyncClient(base_url=base, timeout=10) as http:
            assert "access-control-allow-origin" not in (await http.options("/mcp", headers=preflight)).headers


def test_a_cors_origin_must_be_an_origin() -> None:
    for wrong in ("*", "http://*.example.com", "https://app.example.com/path", "ftp://x"):
        with pytest.raises(ConfigError) as refused:
            gateway_config({"cors_origins": [wrong]})
        assert "gateway.cors_origins" in str(refused.value), str(refused.value)
