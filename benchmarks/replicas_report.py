"""What scripts/replicas saw, judged and printed: pure functions over the run's records.

The one definition that needs saying: "new calls succeed again after X s" is, for a kill at
time K (for a SIGKILL, when the process was gone: below), the start of the first ok call that
began after the last failed call begun at or after K (failed openings of new clients count as
failed calls), minus the signal's time. Zero when no call begun
after K failed; none when failures went on to the end of the window (the next event or the
end of the run). Calls to ``ask`` (multi-round-trip, whose retry may land on another replica)
are reported apart and left out of it.

Each call that did not end ok around an event (SIGKILL, SIGSTOP, SIGTERM of replica R at K) is
one of:

- lost in flight: it began before K, and reached R's upstream or no upstream at all (it was on
  its way to R, or in R). Expected: a dead replica takes its calls with it. For a SIGKILL, K is
  when R's process was gone (reaped, so its sockets closed), not the signal: a killed process
  lives on for milliseconds (tens under load) while the kernel frees it, and a connection made
  to it meanwhile is accepted and then reset, its request as lost as one in flight (nothing can
  tell the balancer it was never read). The driver sees the reap a little late (a thread's
  wake-up), and those calls are counted apart in the report.
- lost with its session: a call that did not reach R, of a 2025-era session opened before K
  that lived on R (where its calls reached, or it had none yet): it can only fail (no other
  replica knows the session) and the client opens a new one. Expected too.
- a new-call failure: any other, i.e. a call begun at or after K, or one that reached a live
  replica's upstream. Nothing but R died, so such a call should have been sent to a live
  replica and succeeded; each one fails the run (as does a client opening begun after K that
  failed). Which upstreams a call reached comes from their ledger (benchmarks/replicas_upstream.py).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.replicas_clients import LEGACY, MODERN, Call, Opening

OUTCOMES = ("ok", "isError", "error", "hang", "wrong")
ROOT = Path(__file__).resolve().parent.parent


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def _rows(calls: list[Call]) -> list[dict[str, Any]]:
    groups: list[tuple[str, list[Call]]] = [
        (LEGACY, [c for c in calls if c.era == LEGACY]),
        (MODERN, [c for c in calls if c.era == MODERN and c.tool != "ask"]),
    ]
    asks = [c for c in calls if c.tool == "ask"]
    if asks:
        groups.append((f"{MODERN} ask", asks))
    rows: list[dict[str, Any]] = []
    for label, group in groups:
        counts = Counter(c.outcome for c in group)
        echo_ms = sorted((c.end - c.start) * 1000 for c in group if c.outcome == "ok" and c.tool == "echo")
        rows.append(
            {
                "era": label,
                "calls": len(group),
                **{o: counts.get(o, 0) for o in OUTCOMES},
                "echo_p50_ms": _percentile(echo_ms, 50),
                "echo_p99_ms": _percentile(echo_ms, 99),
            }
        )
    return rows


def _fate(call: Call, at: float, replica: str, lost_session: bool) -> str:
    """in_flight | session | new: see the module's docstring."""
    if any(r != replica for r in call.reached):
        return "new"
    if replica in call.reached:
        return "in_flight"
    # A call of a session that lived there and never reached it: under load the client may send
    # a call "begun" before the kill well after it, and another replica answers 404.
    if lost_session:
        return "session"
    return "in_flight" if call.start < at else "new"


def _failure(call: Call, at: float) -> dict[str, Any]:
    return {
        "after_ms": round((call.start - at) * 1000, 1),
        "era": call.era,
        "tool": call.tool,
        "outcome": call.outcome,
        "detail": call.detail,
        "reached": call.reached,
    }


def _seen(lost: list[Call], at: float) -> list[dict[str, Any]]:
    """What the calls lost in flight got, by era, answer (SSE from the start, or JSON) and
    error, with when they ended after the event (median, max)."""
    groups: dict[tuple[str, str, str], list[float]] = {}
    for call in lost:
        answer = "SSE" if call.progress else "JSON"
        groups.setdefault((call.era, answer, call.detail), []).append((call.end - at) * 1000)
    return [
        {
            "era": era,
            "answer": answer,
            "detail": detail,
            "count": len(ended),
            "ended_after_ms_median": round(statistics.median(ended), 1),
            "ended_after_ms_max": round(max(ended), 1),
        }
        for (era, answer, detail), ended in sorted(groups.items())
    ]


def _recovery(
    at: float, until: float, replica: str, calls: list[Call], openings: list[Opening], *, gone: float | None = None
) -> dict[str, Any]:
    """What the calls around one event got; see the module's docstring for "succeed again" and
    for what counts as lost and what as a new-call failure. ``gone``: when a killed replica's
    process was reaped (its sockets closed), if known; calls begun before it count as in flight."""
    opened = {(o.era, o.worker, o.client): o for o in openings}
    # Where each client's calls went, failed ones too (the upstreams' ledger): a session lives
    # where its calls reached.
    where: dict[tuple[str, int, int], set[str]] = {}
    for call in calls:
        where.setdefault((call.era, call.worker, call.client), set()).update(call.reached)
    cut = max(at, gone) if gone is not None else at
    in_flight = [c for c in calls if c.start < cut and at <= c.end]
    window = [c for c in calls if cut <= c.start and c.end <= until and c.tool != "ask"]

    def lost(call: Call) -> bool:
        # A 2025-era session opened before the event on the replica it took down: its next call
        # can only fail (another replica does not know the session), and the client opens anew.
        key = (call.era, call.worker, call.client)
        session = opened[key]
        return call.era == LEGACY and session.start < at and where[key] | set(session.replicas) <= {replica}

    # In flight at this event, or begun after it and over before the next one (a call in flight at
    # the next event is that one's).
    failed = [c for c in [*in_flight, *window] if c.outcome != "ok" and c.tool != "ask"]
    fates = {id(c): _fate(c, cut, replica, lost(c)) for c in failed}
    lost_in_flight = [c for c in failed if fates[id(c)] == "in_flight"]
    new_failures = sorted((c for c in failed if fates[id(c)] == "new"), key=lambda c: c.start)
    lost_calls = [c for c in window if lost(c)] + [
        c for c in in_flight if c.outcome != "ok" and c.tool != "ask" and fates[id(c)] == "session"
    ]
    new = [c for c in window if not lost(c)]
    failed_new = [c for c in new if c.outcome != "ok"]
    failed_openings = [
        o for o in openings if cut <= o.start and o.end <= until and o.outcome not in ("ok", "close-hang")
    ]
    failed_starts = [c.start for c in failed_new] + [o.start for o in failed_openings]
    recovered: float | None
    if not failed_starts:
        recovered = 0.0
    else:
        last = max(failed_starts)
        after = [c.start for c in new if c.outcome == "ok" and c.start > last]
        recovered = (min(after) - at) if after else None
    return {
        "in_flight": dict(Counter(c.outcome for c in in_flight)),
        "in_flight_by_era": {
            era: dict(Counter(c.outcome for c in in_flight if c.era == era)) for era in (LEGACY, MODERN)
        },
        "lost_in_flight": len(lost_in_flight),
        "lost_in_flight_reached": sum(1 for c in lost_in_flight if replica in c.reached),
        "lost_in_flight_dying": sum(1 for c in lost_in_flight if c.start >= at),
        "lost_in_flight_seen": _seen(lost_in_flight, at),
        "openings_in_flight_failed": sum(
            1 for o in openings if o.start < cut and at <= o.end and o.outcome not in ("ok", "close-hang")
        ),
        "lost_sessions": len({(c.worker, c.client) for c in lost_calls if c.outcome != "ok"}),
        "lost_session_calls": dict(Counter(c.outcome for c in lost_calls)),
        "new_calls": len(new),
        "new_failed": dict(Counter((c.era, c.outcome) for c in failed_new).most_common()),
        "new_failed_openings": len(failed_openings),
        "new_failures": [_failure(c, at) for c in new_failures],
        "new_failed_opening_list": [
            {"after_ms": round((o.start - at) * 1000, 1), "era": o.era, "outcome": o.outcome, "detail": o.detail}
            for o in sorted(failed_openings, key=lambda o: o.start)
        ],
        "first_failure_after": (min(failed_starts) - at) if failed_starts else None,
        "last_failure_after": (max(failed_starts) - at) if failed_starts else None,
        "recovered_after": recovered,
    }


def _git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
        return out.stdout.strip()
    except OSError:
        return ""


def _gone(event: Any) -> float | None:
    after = event.notes.get("gone_after")
    return None if after is None else event.at + after


def summarize(args: argparse.Namespace, setup: Any, run: Any, elapsed: float, ready_in: float) -> dict[str, Any]:
    calls: list[Call] = run.record.calls
    openings: list[Opening] = run.record.openings
    events: list[dict[str, Any]] = []
    ordered = sorted(run.events, key=lambda e: e.at)
    for index, event in enumerate(ordered):
        until = ordered[index + 1].at if index + 1 < len(ordered) else elapsed
        down = next(
            (
                t - event.at
                for t, name, _, new in run.transitions
                if name == event.replica and t >= event.at and not new.startswith("UP")
            ),
            None,
        )
        events.append(
            {
                "kind": event.kind,
                "replica": event.replica,
                "at": event.at,
                "haproxy_down_after": down,
                **event.notes,
                **_recovery(event.at, until, event.replica, calls, openings, gone=_gone(event)),
            }
        )

    sessions = [o for o in openings if o.era == LEGACY and o.outcome != "error"]
    split = [o for o in sessions if len(o.replicas) > 1]
    by_replica = {
        era: dict(sorted(Counter(c.replica for c in calls if c.era == era and c.outcome == "ok").items()))
        for era in (LEGACY, MODERN)
    }
    after_kill = next((e for e in events if e["kind"] != "SIGTERM"), None)
    if after_kill is not None:
        at = after_kill["at"]
        by_replica_after = {
            era: dict(
                sorted(
                    Counter(
                        c.replica for c in calls if c.era == era and c.outcome == "ok" and c.start >= at + 1
                    ).items()
                )
            )
            for era in (LEGACY, MODERN)
        }
    else:
        by_replica_after = {}
    errors = Counter((c.era, c.outcome, c.detail) for c in calls if c.outcome not in ("ok",))
    opening_errors = Counter((o.era, o.outcome, o.detail) for o in openings if o.outcome not in ("ok",))
    protocols = {
        era: dict(Counter(o.protocol for o in openings if o.era == era and o.protocol)) for era in (LEGACY, MODERN)
    }

    checks: list[dict[str, Any]] = []

    def check(name: str, passed: bool, detail: str = "") -> None:
        checks.append({"check": name, "passed": passed, "detail": detail})

    hangs = sum(1 for c in calls if c.outcome == "hang") + sum(
        1 for o in openings if o.outcome in ("hang", "close-hang")
    )
    check("no call or client opening hung", hangs == 0, f"{hangs} hung" if hangs else "")
    wrong = sum(1 for c in calls if c.outcome == "wrong")
    check("every ok answer is the call's own", wrong == 0, f"{wrong} wrong" if wrong else "")
    check(
        "every 2025-era session was served by one replica",
        not split,
        f"{len(split)} sessions on two replicas" if split else f"{len(sessions)} sessions",
    )
    modern_protocols = protocols[MODERN]
    check(
        "2026-07-28 clients negotiated 2026-07-28",
        not modern_protocols or set(modern_protocols) == {MODERN},
        str(modern_protocols),
    )
    ok_calls = sum(1 for c in calls if c.outcome == "ok")
    check("calls succeeded", ok_calls > 0, f"{ok_calls} ok")
    twice = [c for c in calls if len(c.reached) > 1]
    unseen = [c for c in calls if c.outcome == "ok" and c.replica not in c.reached]
    check(
        "no call reached an upstream twice (none was sent again)",
        not twice and not unseen,
        "; ".join(
            part
            for part in (
                f"{len(twice)} reached two: " + ", ".join(f"{c.serial} {c.reached}" for c in twice[:3])
                if twice
                else "",
                f"{len(unseen)} ok calls missing from the upstreams' ledger" if unseen else "",
            )
            if part
        ),
    )
    for event in events:
        if event["kind"] != "SIGTERM":
            recovered = event["recovered_after"]
            check(
                f"new calls succeed again within {args.recover_within:g} s of the {event['kind']} "
                f"of {event['replica']}",
                recovered is not None and recovered <= args.recover_within,
                "never" if recovered is None else f"{recovered:.2f} s",
            )
        if event["kind"] != "SIGTERM":
            calls_failed, openings_failed = len(event["new_failures"]), event["new_failed_openings"]
            check(
                f"no new call failed at the {event['kind']} of {event['replica']} (only calls in flight on it lost)",
                calls_failed + openings_failed == 0,
                f"{event['lost_in_flight']} lost in flight; new: {calls_failed} calls and {openings_failed} "
                "client openings failed",
            )
        if event["kind"] == "SIGKILL":
            gone = event.get("upstream_gone_after")
            check(
                f"the upstream of {event['replica']} did not outlive it",
                bool(event.get("upstream_pids")) and gone is not None,
                "no upstream found"
                if not event.get("upstream_pids")
                else ("still running 10 s later" if gone is None else f"gone after {gone:.2f} s"),
            )
        elif event["kind"] == "SIGTERM":
            code = event.get("exit_code")
            check(
                f"{event['replica']} drained on SIGTERM and exited 0",
                code == 0,
                f"exit {code} after {event.get('exited_after')} s, "
                f"/readyz 404 (draining) after {event.get('readyz_draining_after')} s",
            )
            failed = {k: n for k, n in event["in_flight"].items() if k != "ok"}
            check(
                f"every call in flight at the SIGTERM of {event['replica']} finished ok",
                not failed,
                ", ".join(f"{n} {k}" for k, n in failed.items()),
            )

    return {
        "meta": {
            "replicas": len(setup.names),
            "balancer": setup.balancer_version,
            "url": setup.url,
            "tokens": len(setup.tokens),
            "commit": _git_commit(),
            "duration": round(elapsed, 2),
            "ready_in": round(ready_in, 2),
            "clients": {LEGACY: args.legacy, MODERN: args.modern},
            "call_timeout": args.call_timeout,
            "session_calls": args.session_calls,
            "sleep_share": args.sleep_share,
            "progress_share": args.progress_share,
            "ask_share": args.ask_share,
            "seed": args.seed,
        },
        "rows": _rows(calls),
        "openings": {era: dict(Counter(o.outcome for o in openings if o.era == era)) for era in (LEGACY, MODERN)},
        "protocols": protocols,
        "events": events,
        "by_replica": by_replica,
        "by_replica_after_kill": by_replica_after,
        "errors": [
            {"era": era, "outcome": outcome, "detail": detail, "count": n}
            for (era, outcome, detail), n in errors.most_common(12)
        ],
        "opening_errors": [
            {"era": era, "outcome": outcome, "detail": detail, "count": n}
            for (era, outcome, detail), n in opening_errors.most_common(8)
        ],
        "transitions": [{"t": round(t, 3), "server": s, "from": a, "to": b} for t, s, a, b in run.transitions],
        "after": run.after,
        "checks": checks,
        "passed": all(c["passed"] for c in checks),
    }


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def render(summary: dict[str, Any]) -> str:
    meta = summary["meta"]
    lines = [
        f"{meta['replicas']} replicas behind {meta['balancer']} at {meta['url']}"
        f" ({meta['tokens'] or 'no'} bearer tokens; gateway at {meta['commit'] or '?'})",
        f"ready in {meta['ready_in']:.2f} s; {meta['duration']:.1f} s of calls from "
        f"{meta['clients'][LEGACY]} {LEGACY} and {meta['clients'][MODERN]} {MODERN} clients",
        "",
        f"{'ERA':<16}{'CALLS':>7}{'OK':>7}{'ISERROR':>9}{'ERROR':>7}{'HANG':>6}{'WRONG':>7}"
        f"{'ECHO P50 MS':>13}{'P99 MS':>8}",
    ]
    for row in summary["rows"]:
        lines.append(
            f"{row['era']:<16}{row['calls']:>7}{row['ok']:>7}{row['isError']:>9}{row['error']:>7}{row['hang']:>6}"
            f"{row['wrong']:>7}{_ms(row['echo_p50_ms']):>13}{_ms(row['echo_p99_ms']):>8}"
        )
    lines.append("")
    for era in (LEGACY, MODERN):
        counts = summary["openings"][era]
        total = sum(counts.values())
        what = "sessions opened" if era == LEGACY else "clients opened"
        detail = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
        protocols = ", ".join(f"{p} x{n}" for p, n in summary["protocols"][era].items())
        lines.append(f"{era}: {total} {what} ({detail}); negotiated {protocols or '-'}")
    lines.append(
        "ok calls by replica: " + "; ".join(f"{era} {dict(counts)}" for era, counts in summary["by_replica"].items())
    )
    if summary["by_replica_after_kill"]:
        lines.append(
            "  from 1 s after the kill: "
            + "; ".join(f"{era} {dict(counts)}" for era, counts in summary["by_replica_after_kill"].items())
        )
    for event in summary["events"]:
        lines.append("")
        lines.append(f"{event['kind']} {event['replica']} at {event['at']:.2f} s:")
        if event["haproxy_down_after"] is not None:
            lines.append(f"  HAProxy marked it down after {_s(event['haproxy_down_after'])}")
        if event["kind"] == "SIGKILL":
            if event.get("gone_after") is not None:
                lines.append(
                    f"  its process was gone (reaped, its sockets closed) {event['gone_after'] * 1000:.1f} ms after "
                    "the signal; calls begun before then count as in flight"
                )
            gone = event.get("upstream_gone_after")
            lines.append(
                f"  its stdio upstream {event.get('upstream_pids')} exited after {_s(gone)}"
                if gone is not None
                else f"  its stdio upstream {event.get('upstream_pids')} still runs"
            )
        elif event["kind"] == "SIGTERM":
            lines.append(
                f"  /readyz 404 (draining) after {_s(event.get('readyz_draining_after'))}; exited with "
                f"{event.get('exit_code')} after {_s(event.get('exited_after'))}"
            )
        in_flight = ", ".join(f"{n} {k}" for k, n in sorted(event["in_flight"].items())) or "none"
        lines.append(f"  calls in flight at that moment (or begun before the process was gone): {in_flight}")
        reached = event["lost_in_flight_reached"]
        lines.append(
            f"  lost in flight on {event['replica']} (expected): {event['lost_in_flight']} "
            f"({reached} had reached its upstream, {event['lost_in_flight'] - reached} had not; "
            f"{event['lost_in_flight_dying']} began after the signal, before the process was gone); "
            f"client openings in flight that failed: {event['openings_in_flight_failed']}"
        )
        for item in event["lost_in_flight_seen"]:
            lines.append(
                f"    {item['count']:>3}  {item['era']} ({item['answer']} answer): {item['detail']}, ended "
                f"{item['ended_after_ms_median']:.0f} ms after it (max {item['ended_after_ms_max']:.0f} ms)"
            )
        lost = ", ".join(f"{n} {k}" for k, n in sorted(event["lost_session_calls"].items())) or "none"
        lines.append(f"  2025-era sessions lost with it: {event['lost_sessions']} (their calls since: {lost})")
        failures = event["new_failures"]
        lines.append(
            f"  NEW-CALL FAILURES (begun once it was gone, or on a live replica): {len(failures)} of "
            f"{event['new_calls']} calls, {event['new_failed_openings']} client openings"
        )
        for item in failures[:8]:
            lines.append(
                f"    {item['after_ms']:+.1f} ms  {item['era']} {item['tool']} {item['outcome']}: {item['detail']}"
                f" (reached: {', '.join(item['reached']) or 'no upstream'})"
            )
        for item in event["new_failed_opening_list"][:4]:
            lines.append(f"    {item['after_ms']:+.1f} ms  {item['era']} opening {item['outcome']}: {item['detail']}")
        lines.append(
            f"  new calls succeed again after {_s(event['recovered_after'])} "
            f"(failures began after {_s(event['first_failure_after'])}, "
            f"the last after {_s(event['last_failure_after'])})"
        )
    if summary["errors"] or summary["opening_errors"]:
        lines.append("")
        lines.append("what the clients saw, other than ok:")
        for item in summary["errors"]:
            lines.append(f"  {item['count']:>5}  {item['era']}  call {item['outcome']}: {item['detail']}")
        for item in summary["opening_errors"]:
            lines.append(f"  {item['count']:>5}  {item['era']}  opening {item['outcome']}: {item['detail']}")
    if summary["transitions"]:
        lines.append("")
        lines.append(
            "HAProxy: "
            + "; ".join(f"{t['server']} {t['from']} -> {t['to']} at {t['t']:.2f} s" for t in summary["transitions"])
        )
    lines.append("after the run: " + "; ".join(f"{name} {info}" for name, info in summary["after"].items()))
    lines.append("")
    for item in summary["checks"]:
        mark = "ok  " if item["passed"] else "FAIL"
        lines.append(f"{mark} {item['check']}" + (f" ({item['detail']})" if item["detail"] else ""))
    return "\n".join(lines)


def to_json(summary: dict[str, Any], run: Any) -> dict[str, Any]:
    events = [
        {**e, "new_failed": [{"era": k[0], "outcome": k[1], "count": n} for k, n in e["new_failed"].items()]}
        for e in summary["events"]
    ]
    return {
        **summary,
        "events": events,
        "calls": [c.to_json() for c in run.record.calls],
        "openings": [o.to_json() for o in run.record.openings],
        "opening_counts": summary["openings"],
    }
