#!/usr/bin/env python3
"""What signing in costs a call: the served auth flow (``oauth.UpstreamAuth`` with a stored,
valid token) against the same request with a static ``Authorization`` header, side by side.

Both send POSTs through httpx2 to an in-process transport that answers at once, so the
difference is the auth flow's own work per request (the SDK's lock, the token checks, the
look at the stored file). Prints medians of several rounds and their ratio.

    .venv/bin/python -m benchmarks.oauth [--requests 2000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx2
from mcp.shared.auth import OAuthToken

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from mcp_patchbay.oauth.provider import UpstreamAuth
from mcp_patchbay.oauth.store import TokenStore, file_for

URL = "https://mcp.example/mcp"
BODY = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {}}}


def answer(request: httpx2.Request) -> httpx2.Response:
    return httpx2.Response(200, json={"jsonrpc": "2.0", "id": 1, "result": {"content": []}})


async def round_trip(client: httpx2.AsyncClient, requests: int) -> float:
    started = time.perf_counter()
    for _ in range(requests):
        await client.post(URL, json=BODY)
    return (time.perf_counter() - started) / requests * 1e6


async def main(requests: int, rounds: int) -> None:
    folder = Path(tempfile.mkdtemp())
    store = TokenStore(URL, file_for(URL, folder))
    await store.set_tokens(OAuthToken(access_token="t" * 40, expires_in=3600, refresh_token="r"))
    auth = UpstreamAuth(URL, store, None, "http://127.0.0.1/callback", interactive=False)
    signed = httpx2.AsyncClient(auth=auth, transport=httpx2.MockTransport(answer))
    static = httpx2.AsyncClient(headers={"authorization": "Bearer " + "t" * 40}, transport=httpx2.MockTransport(answer))
    with_auth: list[float] = []
    without: list[float] = []
    async with signed, static:
        await round_trip(signed, 50)
        await round_trip(static, 50)
        for _ in range(rounds):  # interleaved, so a noisy moment hits both
            with_auth.append(await round_trip(signed, requests))
            without.append(await round_trip(static, requests))
    a, b = statistics.median(with_auth), statistics.median(without)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"requests per round: {requests}, rounds: {rounds}, load average: {load:.2f}")
    print(f"static Authorization header: median {b:8.1f} us per request")
    print(f"served OAuth flow:           median {a:8.1f} us per request")
    print(f"ratio: {a / b:.2f}x, added: {a - b:.1f} us per request")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    anyio.run(main, args.requests, args.rounds)
