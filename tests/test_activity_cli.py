"""``mcp-patchbay log``: the activity log in a terminal, as text and as JSON, filtered, followed."""

from __future__ import annotations

import dataclasses
import io
import json
import time
from datetime import datetime
from pathlib import Path

import pytest

from mcp_patchbay.activity import command
from mcp_patchbay.activity.rows import COLUMNS, ActivityRow
from mcp_patchbay.activity.store import ActivityStore
from mcp_patchbay.cli import main as cli_main

NOW = time.time()


def call(at: float, **values: object) -> ActivityRow:
    fields: dict[str, object] = {
        "id": None,
        "at": at,
        "kind": "tool_call",
        "proxy": "stdio pid 42",
        "client": "claude-code 2.1.0",
        "server": "files",
        "exposed": "files__read",
        "upstream": "read",
        "duration_ms": 12.345,
        "outcome": "ok",
        "bytes_in": 20,
        "bytes_out": 345,
    }
    fields.update(values)
    return ActivityRow(**fields)  # pyright: ignore[reportArgumentType]


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "activity.sqlite3"
    store = ActivityStore.open(path)
    store.record(call(NOW - 7200, exposed="files__old"))
    store.record(call(NOW - 60, server="mail", exposed="mail__send", upstream="send", client="Cursor 1.2"))
    store.record(call(NOW - 30, outcome="TIMEOUT", error_code="TIMEOUT", detail="Server 'files' took too long."))
    crash = ActivityRow(id=None, at=NOW - 20, kind="upstream_crash", proxy="gateway :8080 pid 7", server="mail")
    store.record(dataclasses.replace(crash, outcome="CONNECTION_LOST", error_code="CONNECTION_LOST"))
    store.close()
    return path


def run(path: Path, *argv: str, sleep: object = None) -> tuple[int, list[str]]:
    out = io.StringIO()
    kwargs = {"sleep": sleep} if sleep is not None else {}
    code = command.main(list(argv), path=path, out=out, **kwargs)  # pyright: ignore[reportArgumentType]
    return code, out.getvalue().splitlines()


def test_text_is_one_aligned_line_a_row_oldest_first_in_local_time(log: Path) -> None:
    code, lines = run(log)
    assert code == 0 and len(lines) == 4
    first = lines[0]
    assert first.startswith(datetime.fromtimestamp(NOW - 7200).strftime("%Y-%m-%d %H:%M:%S."))
    assert "tool_call" in first and "ok" in first and "12.3 ms" in first and "files__old -> read" in first
    assert "(claude-code 2.1.0, stdio pid 42)" in first and "in 20 B out 345 B" in first
    assert "TIMEOUT" in lines[2] and "| Server 'files' took too long." in lines[2]
    assert "upstream_crash" in lines[3] and "mail" in lines[3]
    kinds = ("tool_call", "tool_call", "tool_call", "upstream_crash")
    starts = {line.index(kind) for line, kind in zip(lines, kinds, strict=True)}
    assert len(starts) == 1  # the columns line up


def test_json_is_one_object_a_line_with_the_rows_fields(log: Path) -> None:
    _, lines = run(log, "--json")
    objects = [json.loads(line) for line in lines]
    assert [list(o) for o in objects] == [list(COLUMNS)] * 4
    assert objects[0]["exposed"] == "files__old" and objects[-1]["kind"] == "upstream_crash"
    assert isinstance(objects[0]["id"], int) and objects[0]["at"] == pytest.approx(NOW - 7200)


def test_filters_by_server_client_errors_since_and_limit(log: Path) -> None:
    def exposed(*argv: str) -> list[str | None]:
        return [json.loads(line)["exposed"] for line in run(log, "--json", *argv)[1]]

    assert exposed("--server", "mail") == ["mail__send", None]
    assert exposed("--client", "cursor") == ["mail__send"]
    assert exposed("--errors") == ["files__read", None]
    assert exposed("--since", "10m") == ["mail__send", "files__read", None]
    assert exposed("--limit", "1") == [None]


def test_since_takes_a_duration_or_a_local_date_and_time() -> None:
    assert command.parse_since("90s", 1000.0) == 910.0
    assert command.parse_since("2h", 10_000.0) == 2800.0
    assert command.parse_since("1w", 700_000.0) == 700_000.0 - 7 * 86400
    assert command.parse_since("2026-11-24T09:30", 0.0) == datetime(2026, 11, 24, 9, 30).timestamp()
    with pytest.raises(ValueError):
        command.parse_since("yesterday-ish", 0.0)


def test_a_bad_since_is_a_usage_error(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        run(log, "--since", "soon")
    assert exit_.value.code == 2 and "--since" in capsys.readouterr().err


def test_follow_prints_rows_as_they_are_written_and_ctrl_c_ends_it_quietly(log: Path) -> None:
    polls = 0

    def sleep(seconds: float) -> None:
        nonlocal polls
        polls += 1
        assert seconds == command.POLL_SECONDS
        if polls == 1:
            store = ActivityStore.open(log)
            store.record(call(NOW, exposed="files__new", server="files"))
            store.record(call(NOW, exposed="mail__new", server="mail"))
            store.close()
        if polls == 3:
            raise KeyboardInterrupt

    code, lines = run(log, "--follow", "--server", "files", "--limit", "1", sleep=sleep)
    assert code == 0 and polls == 3
    assert len(lines) == 2 and "files__read" in lines[0] and "files__new" in lines[1]


def test_what_a_server_named_is_printed_with_its_control_characters_escaped(tmp_path: Path) -> None:
    path = tmp_path / "activity.sqlite3"
    store = ActivityStore.open(path)
    store.record(call(NOW, exposed="evil\x1b]0;owned\x07", detail="line\nbreak"))
    store.close()
    _, lines = run(path)
    assert (
        len(lines) == 1 and "\x1b" not in lines[0] and "\\x1b]0;owned\\x07" in lines[0] and "line\\nbreak" in lines[0]
    )


def test_an_empty_log_says_so_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines = run(tmp_path / "activity.sqlite3", "--errors")
    assert code == 0 and lines == []
    assert "nothing recorded with errors in" in capsys.readouterr().err


def test_log_is_a_command_of_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    store = ActivityStore.open()  # the data folder's, as the command reads it
    store.record(call(NOW, server="cli-test-server", exposed="cli__x"))
    store.close()
    assert cli_main(["log", "--server", "cli-test-server", "--json"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert json.loads(line)["exposed"] == "cli__x"
