"""The activity log's file: private, WAL, several processes writing at once, queries, stats, pruning."""

from __future__ import annotations

import dataclasses
import os
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from mcp_patchbay.activity.rows import ActivityRow, Limits, Record, row_of
from mcp_patchbay.activity.store import ActivityStore, values_of
from mcp_patchbay.activity.writer import ActivityWriter


def row(at: float, kind: str = "tool_call", **values: object) -> ActivityRow:
    return ActivityRow(id=None, at=at, kind=kind, proxy="stdio pid 1", **values)  # pyright: ignore[reportArgumentType]


def test_the_file_is_ours_alone_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "data" / "activity.sqlite3"
    store = ActivityStore.open(path)
    store.record(row(1.0))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    for sibling in path.parent.glob("activity.sqlite3-*"):  # the WAL and its index: made with the file's mode
        assert stat.S_IMODE(sibling.stat().st_mode) == 0o600
    with sqlite3.connect(path) as other:
        assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    store.close()


def test_an_existing_file_readable_by_others_is_narrowed(tmp_path: Path) -> None:
    path = tmp_path / "activity.sqlite3"
    path.touch(mode=0o644)
    path.chmod(0o644)
    ActivityStore.open(path).close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_rows_come_back_newest_first_filtered(tmp_path: Path) -> None:
    store = ActivityStore.open(tmp_path / "a.sqlite3")
    store.record(row(10.0, server="files", client="claude-code 2.1", outcome="ok"))
    store.record(row(30.0, server="files", client="Cursor 1.0", outcome="TIMEOUT", error_code="TIMEOUT"))
    store.record(row(20.0, server="mail", client="claude-code 2.1", outcome="tool_error"))
    store.record(row(25.0, kind="upstream_start", server="mail"))
    assert [r.at for r in store.query()] == [30.0, 25.0, 20.0, 10.0]
    assert all(r.id is not None for r in store.query())
    assert [r.at for r in store.query(server="files")] == [30.0, 10.0]
    assert [r.at for r in store.query(client="CLAUDE")] == [20.0, 10.0]  # any case, a part of it
    assert [r.at for r in store.query(client="%")] == []  # the text, not a pattern
    assert [r.at for r in store.query(errors_only=True)] == [30.0, 20.0]
    assert [r.at for r in store.query(since=20.0)] == [30.0, 25.0, 20.0]
    assert [r.at for r in store.query(limit=2)] == [30.0, 25.0]
    store.close()


def test_after_id_gives_the_next_rows_written_so_a_follower_misses_none(tmp_path: Path) -> None:
    store = ActivityStore.open(tmp_path / "a.sqlite3")
    for at in (5.0, 1.0, 3.0, 2.0, 4.0):  # written in this order, times out of order (two proxies' batches)
        store.record(row(at))
    first = store.query(after_id=0, limit=3)
    assert sorted(r.id or 0 for r in first) == [1, 2, 3] and [r.at for r in first] == [5.0, 3.0, 1.0]
    rest = store.query(after_id=3, limit=3)
    assert sorted(r.id or 0 for r in rest) == [4, 5] and store.last_id() == 5
    assert store.query(after_id=5) == []
    store.close()


def test_server_stats_count_requests_errors_and_percentiles(tmp_path: Path) -> None:
    store = ActivityStore.open(tmp_path / "a.sqlite3")
    for number in range(1, 21):
        outcome = "ok" if number % 5 else "TIMEOUT"
        store.record(row(100.0 + number, server="files", duration_ms=float(number), outcome=outcome))
    store.record(row(110.0, kind="resource_read", server="files", duration_ms=1000.0, outcome="ok"))
    store.record(row(110.0, kind="upstream_crash", server="files", outcome="CONNECTION_LOST"))
    store.record(row(1.0, server="files", duration_ms=5000.0, outcome="ok"))  # before the window
    store.record(row(110.0, server="mail", duration_ms=7.0, outcome="tool_error"))
    other = ActivityRow(id=None, at=110.0, kind="tool_call", proxy="stdio pid 2", server="files", outcome="ok")
    store.record(other)  # another proxy's call: counted apart
    stats = store.server_stats(since=100.0)
    files = stats["stdio pid 1", "files"]
    assert (files.calls, files.errors) == (21, 4)
    assert (files.p50_ms, files.p95_ms) == (11.0, 20.0)
    mail = stats["stdio pid 1", "mail"]
    assert (mail.calls, mail.errors, mail.p50_ms) == (1, 1, 7.0)
    assert stats["stdio pid 2", "files"].calls == 1
    store.close()


def test_rows_older_than_the_days_kept_are_pruned_at_open(tmp_path: Path) -> None:
    path = tmp_path / "a.sqlite3"
    store = ActivityStore.open(path)
    now = 1_800_000_000.0
    store.insert([values_of(row(now - days * 86400)) for days in (30, 15, 13, 1)])
    store.close()
    store = ActivityStore.open(path, limits=Limits(keep_days=14))
    assert store.prune(now=now) == 2
    assert len(store.query(since=0)) == 2
    store.close()


def test_past_its_size_the_oldest_rows_go_and_the_file_shrinks(tmp_path: Path) -> None:
    path = tmp_path / "a.sqlite3"
    limit = 256 * 1024
    store = ActivityStore.open(path, limits=Limits(keep_days=1, max_bytes=limit))
    detail, base = "x" * 200, time.time()
    for batch in range(40):
        store.insert([values_of(row(base + batch * 100 + n, detail=detail)) for n in range(100)])
    store.prune()
    store.close()  # the WAL checkpointed into the file: its size is what the log holds
    size = path.stat().st_size
    store = ActivityStore.open(path, limits=Limits(keep_days=1, max_bytes=limit))
    kept = store.query(limit=100_000)
    assert size <= limit, size
    assert kept[0].at == base + 3999 and base < kept[-1].at and len(kept) < 4000  # the oldest went
    store.close()


def test_a_row_recorded_by_the_page_is_read_back_whole(tmp_path: Path) -> None:
    store = ActivityStore.open(tmp_path / "a.sqlite3")
    written = ActivityRow(
        id=None, at=12.5, kind="ui_action", proxy="ui", client="me", detail="turned tool x off", outcome="ok"
    )
    store.record(written)
    (read,) = store.query()
    assert read == dataclasses.replace(written, id=1)
    store.close()


_WRITER = """
import sys
import time
from pathlib import Path
from mcp_patchbay.activity.rows import ActivityRow
from mcp_patchbay.activity.writer import ActivityWriter
path, label, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
writer = ActivityWriter(path=path, linger=0.0, bound=count + 1).start()
print("ready", flush=True)
sys.stdin.readline()  # both processes start writing together
for number in range(count):
    writer.emit(ActivityRow(id=None, at=time.time(), kind="tool_call", proxy=label, exposed=str(number)))
assert writer.stop(30), "the writer did not finish"
print("done", writer.written, writer.dropped, flush=True)
"""


def test_two_processes_writing_at_once_lose_no_row(tmp_path: Path) -> None:
    path = tmp_path / "activity.sqlite3"
    count = 3000
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(path), f"stdio pid {n}", str(count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in (1, 2)
    ]
    try:
        for process in processes:
            assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        for process in processes:
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        for process in processes:
            out, _ = process.communicate(timeout=60)
            assert process.returncode == 0 and out.split() == ["done", str(count), "0"], out
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    store = ActivityStore.open(path)
    rows = store.query(since=0, limit=10 * count)
    assert len(rows) == 2 * count and len({r.id for r in rows}) == 2 * count
    for n in (1, 2):
        mine = sorted(int(r.exposed or -1) for r in rows if r.proxy == f"stdio pid {n}")
        assert mine == list(range(count))
    store.close()


def test_a_writer_whose_file_refuses_a_batch_counts_the_rows_and_goes_on() -> None:
    written: list[Record] = []
    refused = threading.Event()

    def flaky(batch: Sequence[Record]) -> None:
        if not refused.is_set():
            refused.set()
            raise OSError("disk full")
        written.extend(batch)

    writer = ActivityWriter(flaky, linger=0.0).start()
    writer.emit(row(1.0))
    assert refused.wait(5)
    writer.emit(row(2.0))
    assert writer.stop(5)
    assert writer.dropped == 1 and [row_of(r).at for r in written] == [2.0]


@pytest.mark.skipif(os.name == "nt", reason="POSIX modes")
def test_the_default_file_is_in_the_data_folder() -> None:
    from mcp_patchbay.places import data_dir

    store = ActivityStore.open()
    assert store.path == data_dir() / "activity.sqlite3"
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    store.close()


def test_runs_of_alike_rows_and_the_others_are_written_whole(tmp_path: Path) -> None:
    # A run of calls to one tool is written by statements that bind its names once (128, 2 and 1
    # rows here); rows alike fewer than four times, and rows with words, are bound whole.
    store = ActivityStore.open(tmp_path / "a.sqlite3")
    alike = [
        row(
            1000.0 + n,
            server="files",
            exposed="files__echo",
            upstream="echo",
            client="c 1",
            outcome="ok",
            duration_ms=n / 7,
            bytes_in=n,
            bytes_out=2 * n,
        )
        for n in range(131)
    ]
    few = [row(2000.0 + n, server="mail", exposed="mail__send", outcome="ok", bytes_in=n) for n in range(3)]
    worded = [
        row(
            3000.0 + n,
            server="files",
            exposed="files__echo",
            outcome="TIMEOUT",
            error_code="TIMEOUT",
            detail=f"late {n}",
        )
        for n in range(5)
    ]
    mixed = [*alike[:60], *few, *worded, *alike[60:]]
    store.insert([values_of(r) for r in mixed])
    found = sorted(store.query(since=0, limit=1000), key=lambda r: r.at)
    assert [dataclasses.replace(r, id=None) for r in found] == sorted(mixed, key=lambda r: r.at)
    assert len({r.id for r in found}) == len(mixed)
    store.close()


def test_a_batch_with_a_value_no_column_takes_is_refused_whole(tmp_path: Path) -> None:
    store = ActivityStore.open(tmp_path / "a.sqlite3")
    good = values_of(row(1.0, server="files"))
    bad = values_of(row(2.0, server="files", detail=["not", "text"]))  # pyright: ignore[reportArgumentType]
    with pytest.raises(sqlite3.Error):
        store.insert([good, bad])
    assert store.query(since=0) == []  # one transaction: nothing of it written
    store.insert([good])
    assert [r.at for r in store.query(since=0)] == [1.0]
    store.close()
