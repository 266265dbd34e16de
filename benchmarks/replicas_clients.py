"""The clients of scripts/replicas: SDK clients of both eras calling through the load balancer.

Each worker is one client after another, calling tools back to back until the run ends:

- ``2025-11-25`` workers: ``Client(..., mode="legacy")``, a session (``initialize``, an
  ``Mcp-Session-Id``) that makes ``session_calls`` calls and is closed, then a new one. After
  an error or a hang the session is dropped and a new one is opened, as real clients do after
  a 404 for their session.
- ``2026-07-28`` workers: ``Client(..., mode="auto")`` (``server/discover``, then stateless
  requests); one client for the whole run, opened again only when it breaks (two errors in a
  row, a hang, or its transport failing).

Every call and every client opening is bounded by ``call_timeout``; one that runs past it is a
hang. What each got is recorded (``Call``, ``Opening``) and judged by the caller. The upstream
answers ``REPLICA:text`` (benchmarks/replicas_upstream.py), so each ok call names its replica.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, cast

import anyio
import httpx2
import mcp_types as types
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

LEGACY = "2025-11-25"
MODERN = "2026-07-28"
SAMPLED = "sampled"
CLOSE_TIMEOUT = 5.0
"""Seconds a client gets to close (the session's DELETE) before it is abandoned."""


@dataclass
class Call:
    era: str
    tool: str
    worker: int
    client: int
    start: float
    end: float = math.nan
    outcome: str = ""  # ok | isError | error | hang | wrong
    detail: str = ""
    replica: str = ""
    progress: bool = False
    """Asked for progress (a ``sleep`` call answered as an SSE stream from its start)."""
    serial: str = ""
    """The call's text, unique in the run: the upstream's ledger names it (replicas_upstream.py)."""
    reached: list[str] = field(default_factory=list[str])
    """The replicas whose upstream received the call, once per receipt (filled after the run)."""

    def to_json(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(self).items()}


@dataclass
class Opening:
    """One client's connection: the 2025 ``initialize`` or the 2026 ``server/discover``."""

    era: str
    worker: int
    client: int
    start: float
    end: float = math.nan
    outcome: str = ""  # ok | error | hang | close-hang
    detail: str = ""
    protocol: str = ""
    calls: int = 0
    replicas: list[str] = field(default_factory=list[str])

    def to_json(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(self).items()}


@dataclass
class Plan:
    url: str
    tokens: list[str]
    """Bearer tokens, one per client worker (2025-era workers first); empty: none sent."""
    call_timeout: float
    end_at: float  # on the clock below
    clock: Callable[[], float]
    session_calls: int = 25
    sleep_share: float = 0.3
    sleep_ms: tuple[int, int] = (50, 400)
    progress_share: float = 0.5
    """Share of ``sleep`` calls that ask for progress: the upstream sends one notification at
    once, so the gateway answers them as an SSE stream from the start (others get plain JSON
    at the end)."""
    ask_share: float = 0.0
    tool_prefix: str = ""
    seed: int = 1

    legacy_workers: int = 0

    def headers(self, era: str, index: int) -> dict[str, str]:
        if not self.tokens:
            return {}
        slot = index if era == LEGACY else self.legacy_workers + index
        return {"Authorization": f"Bearer {self.tokens[slot % len(self.tokens)]}"}


@dataclass
class Record:
    calls: list[Call] = field(default_factory=list[Call])
    openings: list[Opening] = field(default_factory=list[Opening])


def describe(exc: BaseException) -> str:
    """One line for what the client saw: the innermost telling exception of a group."""
    while isinstance(exc, BaseExceptionGroup):
        members: list[BaseException] = list(cast("BaseExceptionGroup[BaseException]", exc).exceptions)
        leaves = [e for e in members if not isinstance(e, anyio.get_cancelled_exc_class())]
        exc = (leaves or members)[0]
    if isinstance(exc, MCPError):
        return f"MCPError {exc.error.code}: {exc.error.message}"[:160]
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:160] if text else type(exc).__name__


def judge(result: types.CallToolResult, tool: str, text: str) -> tuple[str, str, str]:
    """(outcome, detail, replica) of a result."""
    first = next((b.text for b in result.content if isinstance(b, types.TextContent)), "")
    if result.is_error:
        structured: dict[str, Any] = result.structured_content or {}
        error = structured.get("error")
        code = cast("dict[str, Any]", error).get("code") if isinstance(error, dict) else None
        return "isError", str(code) if code else first[:160], ""
    replica, _, rest = first.partition(":")
    expected = f"{text}:{SAMPLED}" if tool == "ask" else text
    if rest != expected:
        return "wrong", first[:160], replica
    return "ok", "", replica


async def _progress(progress: float, total: float | None, message: str | None) -> None:
    return None


async def _sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text=SAMPLED), model="m")


def _pick(rng: random.Random, plan: Plan, era: str, serial: str) -> tuple[str, dict[str, Any], str]:
    draw = rng.random()
    if era == MODERN and draw < plan.ask_share:
        return "ask", {"text": serial}, serial
    if draw < plan.ask_share + plan.sleep_share:
        return "sleep", {"ms": rng.randint(*plan.sleep_ms), "text": serial}, serial
    return "echo", {"text": serial}, serial


async def worker(era: str, index: int, plan: Plan, record: Record) -> None:
    rng = random.Random(plan.seed * 1000 + index * 2 + (era == MODERN))
    number = 0
    while plan.clock() < plan.end_at:
        number += 1
        opening = Opening(era=era, worker=index, client=number, start=plan.clock())
        record.openings.append(opening)
        healthy = await _one_client(era, index, number, plan=plan, record=record, opening=opening, rng=rng)
        if not healthy:
            await anyio.sleep(0.05)  # no hot loop against a load balancer with nothing behind it


async def _one_client(
    era: str, index: int, number: int, *, plan: Plan, record: Record, opening: Opening, rng: random.Random
) -> bool:
    """One client from opening to close; False when it ended on a failure."""
    call: Call | None = None
    failed = False
    timeout = httpx2.Timeout(30.0, read=300.0)  # the SDK's own defaults; call_timeout bounds each call
    try:
        # One scope over the client's whole life (the SDK's transports must be entered and left
        # in the same scope): its deadline bounds the opening, then the close.
        with anyio.CancelScope(deadline=anyio.current_time() + plan.call_timeout) as life:
            async with httpx2.AsyncClient(headers=plan.headers(era, index), timeout=timeout) as http:
                transport = streamable_http_client(plan.url, http_client=http)
                mode = "legacy" if era == LEGACY else "auto"
                async with Client(transport, mode=mode, sampling_callback=_sampling, cache=None) as client:
                    opening.end, opening.outcome = plan.clock(), "ok"
                    opening.protocol = client.protocol_version
                    life.deadline = math.inf
                    errors_in_a_row = 0
                    while plan.clock() < plan.end_at and (era == MODERN or opening.calls < plan.session_calls):
                        serial = f"{era[:4]}-{index}-{number}-{opening.calls}"
                        tool, arguments, text = _pick(rng, plan, era, serial)
                        progress = tool == "sleep" and rng.random() < plan.progress_share
                        call = Call(
                            era=era,
                            tool=tool,
                            worker=index,
                            client=number,
                            start=plan.clock(),
                            serial=text,
                            progress=progress,
                        )
                        record.calls.append(call)
                        opening.calls += 1
                        result: types.CallToolResult | None = None
                        try:
                            with anyio.move_on_after(plan.call_timeout) as bound:
                                result = await client.call_tool(
                                    plan.tool_prefix + tool,
                                    arguments,
                                    progress_callback=_progress if progress else None,
                                )
                        except Exception as exc:
                            call.end, call.outcome, call.detail = plan.clock(), "error", describe(exc)
                            call = None
                            errors_in_a_row += 1
                            if era == LEGACY or errors_in_a_row >= 2:
                                failed = True
                                break
                            continue
                        if bound.cancelled_caught or result is None:
                            call.end, call.outcome = plan.clock(), "hang"
                            call.detail = f"no answer within {plan.call_timeout:g} s"
                            call = None
                            failed = True
                            break
                        call.end = plan.clock()
                        call.outcome, call.detail, call.replica = judge(result, tool, text)
                        if call.replica and call.replica not in opening.replicas:
                            opening.replicas.append(call.replica)
                        call = None
                        errors_in_a_row = 0
                    life.deadline = anyio.current_time() + CLOSE_TIMEOUT
        if life.cancelled_caught:
            if opening.outcome == "":
                opening.end, opening.outcome = plan.clock(), "hang"
                opening.detail = f"not open within {plan.call_timeout:g} s"
            else:
                opening.outcome, opening.detail = "close-hang", f"not closed within {CLOSE_TIMEOUT:g} s"
            return False
    except Exception as exc:
        if call is not None:
            call.end, call.outcome, call.detail = plan.clock(), "error", describe(exc)
        elif opening.outcome == "":
            opening.end, opening.outcome, opening.detail = plan.clock(), "error", describe(exc)
        return False
    return not failed


def monotonic() -> float:
    return time.monotonic()
