"""``mcp-patchbay log``: the activity log in a terminal.

    mcp-patchbay log [--follow] [--server S] [--client C] [--errors] [--since T] [--limit N] [--json]

The last ``--limit`` rows, oldest first: for a person one aligned line a row in local time, with
``--json`` one JSON object a line (``ActivityRow``'s fields). ``--follow`` then prints each row
as it is written, looking every ``POLL_SECONDS`` for rows past the last id printed, until Ctrl-C.
What servers and clients named (tool names, client names, error text) is printed with its
control characters escaped: a terminal never reads them.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from mcp_patchbay.activity.rows import COLUMNS, ActivityRow

if TYPE_CHECKING:
    from mcp_patchbay.activity.store import ActivityStore
__all__ = ["POLL_SECONDS", "line", "main", "parse_since", "run"]

POLL_SECONDS = 0.5
FOLLOW_BATCH = 500
"""Rows asked for at once while following (asked again at once while there are more)."""
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
_DURATION = re.compile(r"(?i)^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|d|w)\s*$")
_UNITS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcp-patchbay log",
        description="What went through the proxies of this user: tool calls, resource reads, prompt gets, "
        "upstream starts, crashes and restarts, sign-ins needed, held definitions and approvals "
        "(the activity log, kept in the data folder; patchbay.activity).",
    )
    parser.add_argument("--follow", "-f", action="store_true", help="then print rows as they are written, until Ctrl-C")
    parser.add_argument("--server", metavar="S", help="only rows of this server")
    parser.add_argument("--client", metavar="C", help="only rows of clients whose name (or gateway member) holds C")
    parser.add_argument("--errors", action="store_true", help="only rows whose outcome is not ok")
    parser.add_argument(
        "--since", metavar="T", help="only rows since T: a duration back from now (90s, 10m, 2h, 3d, 1w) or a local "
        "date and time (2026-11-24, 2026-11-24T09:30)"
    )  # fmt: skip
    parser.add_argument("--limit", "-n", type=int, default=50, metavar="N", help="the last N rows (default 50)")
    parser.add_argument("--json", action="store_true", help="one JSON object a line, the log's fields")
    return parser


def parse_since(text: str, now: float) -> float:
    """``--since``'s value as unix seconds; ValueError for anything else."""
    match = _DURATION.match(text)
    if match:
        return now - float(match[1]) * _UNITS[match[2].lower()]
    moment = datetime.fromisoformat(text.strip())
    return moment.timestamp()  # a naive time is local time


def run(command: str, argv: list[str]) -> int:
    return main(argv)


def main(
    argv: list[str],
    *,
    path: Path | None = None,
    out: TextIO | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """``path``: the log file (default: the data folder's); ``sleep``: how ``--follow`` waits."""
    stream = out if out is not None else sys.stdout
    parser = _parser()
    args = parser.parse_args(argv)
    since: float | None = None
    if args.since is not None:
        try:
            since = parse_since(args.since, time.time())
        except ValueError:
            parser.error(f"--since: expected a duration (10m, 2h, 3d) or a date and time, not {args.since!r}")
    if args.limit < 0:
        parser.error("--limit: expected 0 or more")
    from mcp_patchbay.activity.store import ActivityStore

    try:
        store = ActivityStore.open(path)
    except Exception as exc:
        print(f"mcp-patchbay log: cannot open the activity log: {exc}", file=sys.stderr)
        return EXIT_FAILED
    try:
        return _show(store, args, since, stream, sleep)
    except KeyboardInterrupt:
        return EXIT_OK
    finally:
        store.close()


def _show(
    store: ActivityStore, args: argparse.Namespace, since: float | None, out: TextIO, sleep: Callable[[float], None]
) -> int:
    write = _json_line if args.json else line
    last = store.last_id()
    filters = {"server": args.server, "client": args.client, "errors_only": args.errors}
    rows = store.query(since=since, limit=args.limit, **filters)
    for row in reversed(rows):
        print(write(row), file=out, flush=True)
    if not rows and not args.follow and not args.json:
        print(f"mcp-patchbay log: nothing recorded{_which(args, since)} in {store.path}", file=sys.stderr)
    if not args.follow:
        return EXIT_OK
    shown = {row.id for row in rows}
    while True:
        sleep(POLL_SECONDS)
        while True:
            fresh = store.query(after_id=last, limit=FOLLOW_BATCH, **filters)
            if not fresh:
                break
            last = max(row.id or 0 for row in fresh)
            for row in sorted(fresh, key=lambda row: row.id or 0):
                if row.id not in shown:  # printed already: written between last_id and the first query
                    print(write(row), file=out, flush=True)
            if len(fresh) < FOLLOW_BATCH:
                break


def _which(args: argparse.Namespace, since: float | None) -> str:
    said = [f"for server {args.server!r}" if args.server else "", f"for client {args.client!r}" if args.client else ""]
    said += ["with errors" if args.errors else "", f"since {_local(since)}" if since is not None else ""]
    return "".join(f" {words}" for words in said if words)


# --- a row on a line ------------------------------------------------------------------------------


def line(row: ActivityRow) -> str:
    """One row for a person: when (local time), what, how it went, how long, where, who, sizes, why."""
    duration = "-" if row.duration_ms is None else f"{row.duration_ms:,.1f} ms"
    name = _shown(row.exposed or "")
    if row.upstream and row.upstream != row.exposed:
        name = f"{name} -> {_shown(row.upstream)}" if name else _shown(row.upstream)
    who = ", ".join(_shown(part) for part in (row.client, row.proxy) if part)
    parts = [
        _local(row.at),
        f"{row.kind:<16}",
        f"{_shown(row.outcome or '-'):<18}",
        f"{duration:>11}",
        f"{_shown(row.server or '-'):<16}",
        name or "-",
        f"({who})" if who else "",
    ]
    if row.bytes_in is not None or row.bytes_out is not None:
        parts.append(f"in {_bytes(row.bytes_in)} out {_bytes(row.bytes_out)}")
    if row.detail:
        parts.append(f"| {_shown(row.detail, 500)}")
    if row.arguments is not None:
        parts.append(f"| arguments {_shown(row.arguments, 2000)}")
    if row.result is not None:
        parts.append(f"| result {_shown(row.result, 2000)}")
    return "  ".join(part for part in parts if part)


def _json_line(row: ActivityRow) -> str:
    return json.dumps({name: getattr(row, name) for name in COLUMNS}, ensure_ascii=False)


def _local(at: float | None) -> str:
    if at is None:
        return "-"
    moment = datetime.fromtimestamp(at)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d}"


def _bytes(count: int | None) -> str:
    if count is None:
        return "-"
    if count < 10_000:
        return f"{count} B"
    if count < 10_000_000:
        return f"{count / 1024:,.0f} KiB"
    return f"{count / 1024 / 1024:,.0f} MiB"


def _shown(text: str, limit: int = 200) -> str:
    from mcp_patchbay.trust.wording import printable

    return printable(text, limit)
