"""The gateway with one change, for ``bench_gateway.py --variant NAME``: experiments, not fixes.

    .venv/bin/python scripts/bench_gateway_variant.py --variant fast -- serve --http 127.0.0.1:PORT CONFIG

Applies the change in this process, then runs ``mcp_patchbay.cli.main`` with the arguments after
``--``. The source under ``src/`` is not touched: each variant shows what a change there would buy.

- ``raw-upstream``: tools/call to a streamable HTTP upstream takes a raw lane, as stdio upstreams
  do (``rawcalls``, through ``Upstream._raw``): the JSON-RPC request is POSTed with the session's
  headers on a keep-alive httpx2 client of the lane's own, the whole answer read (JSON, or SSE
  whose ``data:`` lines are searched for the answer) and its result returned as JSON values. No
  SDK transport, task or pydantic model on the way. (Experiment: progress notifications on the
  way are dropped, and requests the upstream sends back mid-call are not served.)
- ``fast-lane``: a POST whose body is a ``tools/call`` (2025-era, with the id of a session the
  manager knows; or 2026-07-28 by its header) is answered in front of the SDK's session manager:
  ``Proxy.run_tool``, then one ``application/json`` answer. Everything else goes to the SDK as
  before. (Experiment: no Host/Origin check, access rules or sign-in on that path; no progress,
  no requests back to the client.)
- ``fast``: both ``raw-upstream`` and ``fast-lane``.

Two earlier variants are built in now: ``drain`` (an HTTP upstream's SSE answer read to its end, so
its connection is kept: ``transports.http``) and ``input-schema`` (``Proxy._input_schema``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import types
from typing import Any

import httpx2

# --- raw-upstream ---------------------------------------------------------------------------------

SESSIONS: dict[str, dict[str, str]] = {}
"""Per upstream URL, the session headers the SDK's client last used (``mcp-session-id``,
``mcp-protocol-version``), seen by a response hook on its httpx2 client."""


async def _note_session(response: httpx2.Response) -> None:
    request = response.request
    url = str(request.url)
    seen = SESSIONS.setdefault(url, {})
    session_id = response.headers.get("mcp-session-id") or request.headers.get("mcp-session-id")
    if session_id:
        seen["mcp-session-id"] = session_id
    version = request.headers.get("mcp-protocol-version")
    if version:
        seen["mcp-protocol-version"] = version


class RawHttp:
    """``rawcalls.RawCalls``' ``request`` over streamable HTTP: one POST, the whole answer read."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self.url = url
        limits = httpx2.Limits(max_connections=256, max_keepalive_connections=256)
        self.client = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300), limits=limits)
        self.ids = itertools.count(1)
        self.pending = 0

    async def request(self, method: str, params: dict[str, Any], on_progress: Any = None) -> dict[str, Any]:
        from mcp.shared.exceptions import MCPError

        request_id = f"raw-{next(self.ids)}"
        body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode()
        headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        headers.update(SESSIONS.get(self.url, {}))
        response = await self.client.post(self.url, content=body, headers=headers)
        if response.status_code >= 400:
            raise MCPError(-32000, f"HTTP {response.status_code}")
        answer: dict[str, Any] | None = None
        if response.headers.get("content-type", "").startswith("application/json"):
            answer = response.json()
        else:
            for line in response.text.splitlines():
                if line.startswith("data:") and request_id in line:
                    candidate = json.loads(line[5:])
                    if candidate.get("id") == request_id:
                        answer = candidate
                        break
        if answer is None:
            raise MCPError(-32000, "no answer in the response")
        if "error" in answer:
            raise MCPError(answer["error"].get("code", -32000), answer["error"].get("message", ""))
        return answer["result"]


def apply_raw_upstream() -> None:
    from mcp_patchbay import upstream
    from mcp_patchbay.config import RemoteSpec
    from mcp_patchbay.transports import http

    real = http.httpx2.AsyncClient

    def async_client(*args: Any, **kwargs: Any) -> httpx2.AsyncClient:
        hooks = kwargs.setdefault("event_hooks", {})
        hooks.setdefault("response", [])
        hooks["response"] = [*hooks["response"], _note_session]
        return real(*args, **kwargs)

    shim = types.ModuleType("httpx2_noting_sessions")
    shim.__dict__.update(vars(http.httpx2))
    shim.AsyncClient = async_client  # type: ignore[attr-defined]
    http.httpx2 = shim  # type: ignore[attr-defined]
    set_session = upstream.Upstream._set_session  # pyright: ignore[reportPrivateUsage]
    lanes: dict[str, RawHttp] = {}

    def with_raw_lane(self: Any, session: Any, raw: Any = None) -> None:
        spec = self.entry.spec
        if session is not None and raw is None and isinstance(spec, RemoteSpec) and spec.transport == "http":
            raw = lanes.get(spec.url) or lanes.setdefault(spec.url, RawHttp(spec.url, dict(spec.headers)))
        set_session(self, session, raw)

    upstream.Upstream._set_session = with_raw_lane  # type: ignore[method-assign]


# --- fast-lane -------------------------------------------------------------------------------------


def apply_fast_lane() -> None:
    from mcp_patchbay.gateway import app

    handle = app.Gateway._mcp  # pyright: ignore[reportPrivateUsage]

    async def fast(self: Any, scope: Any, receive: Any, send: Any) -> None:
        if scope["method"] != "POST":
            await handle(self, scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        headers = dict(scope["headers"])
        session_id = headers.get(b"mcp-session-id")
        modern = headers.get(b"mcp-protocol-version") == b"2026-07-28"
        known = session_id is not None and session_id.decode() in self.manager._server_instances  # pyright: ignore
        request: Any = None
        if (known or modern) and b'"tools/call"' in body:
            try:
                request = json.loads(body)
            except ValueError:
                request = None
        if not isinstance(request, dict) or request.get("method") != "tools/call" or "id" not in request:
            replayed = False

            async def replay() -> Any:
                nonlocal replayed
                if not replayed:
                    replayed = True
                    return {"type": "http.request", "body": body, "more_body": False}
                return await receive()

            await handle(self, scope, replay, send)
            return
        params = request.get("params") or {}
        meta = {k: v for k, v in (params.get("_meta") or {}).items() if not k.startswith("io.modelcontextprotocol/")}
        meta.pop("progressToken", None)
        result = await self.proxy.run_tool(params.get("name"), params.get("arguments"), None, meta or None)
        if modern:
            result = {**result, "resultType": "complete"}
        answer = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}, separators=(",", ":")).encode()
        out = [(b"content-type", b"application/json"), (b"content-length", str(len(answer)).encode())]
        if known:
            out.append((b"mcp-session-id", session_id))
        await send({"type": "http.response.start", "status": 200, "headers": out})
        await send({"type": "http.response.body", "body": answer})

    app.Gateway._mcp = fast  # type: ignore[method-assign]


def apply_fast() -> None:
    apply_raw_upstream()
    apply_fast_lane()


VARIANTS = {
    "raw-upstream": apply_raw_upstream,
    "fast-lane": apply_fast_lane,
    "fast": apply_fast,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variant", choices=sorted(VARIANTS), required=True)
    parser.add_argument("rest", nargs=argparse.REMAINDER, help="-- and the arguments of mcp-patchbay")
    args = parser.parse_args()
    VARIANTS[args.variant]()
    from mcp_patchbay.cli import main as patchbay_main

    rest = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
    raise SystemExit(patchbay_main(rest))


if __name__ == "__main__":
    main()
