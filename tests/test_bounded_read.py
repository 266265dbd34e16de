"""Files read by path are read within a limit, and only when they are regular files (``bounded_read``).

The hardening finding: ``mcp-patchbay check /dev/zero`` read without bound (519 MiB after 1.5 s,
still reading), and a FIFO named as the config waited for a writer that never came. Every test
here is bounded in time: a reader that reads, or waits, fails it instead of hanging.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_patchbay import cli
from mcp_patchbay.bounded_read import FileRefused, read_bytes, read_config
from mcp_patchbay.config import ConfigError, load_config
from mcp_patchbay.upstreams.early_start import EARLY_MARK, early
from mcp_patchbay.wire.early_handshake import _search_listing  # pyright: ignore[reportPrivateUsage]

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="devices, FIFOs and sockets as POSIX has them"),
    pytest.mark.timeout(10),
]

MiB = 1024 * 1024


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Path]:
    """A FIFO with no writer. Should a reader wait on it after all, a writer's open frees it."""
    path = tmp_path / "config.fifo"
    os.mkfifo(path)
    yield path
    with contextlib.suppress(OSError):  # nobody is waiting: as it should be
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))


@pytest.fixture
def unix_socket(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "s"
    if len(str(path)) > 100:
        pytest.skip("the temporary folder's path is too long for a socket's name")
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(path))
        yield path


def sparse(path: Path, size: int) -> Path:
    with path.open("wb") as file:
        file.truncate(size)
    return path


def test_what_is_not_a_regular_file_is_refused_naming_what_it_is(tmp_path: Path, fifo: Path, unix_socket: Path) -> None:
    for path, kind in [
        (Path("/dev/zero"), "a character device"),
        (tmp_path, "a directory"),
        (fifo, "a FIFO (named pipe)"),
        (unix_socket, "a socket"),
    ]:
        with pytest.raises(FileRefused) as refused:
            read_bytes(path, 1024, "a test file")
        assert refused.value.kind == kind
        assert str(refused.value) == f"not a regular file ({kind})"


def test_a_file_over_the_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = sparse(tmp_path / "big", 3 * 1024)
    with pytest.raises(FileRefused) as refused:
        read_bytes(path, 2048, "a test file", "TEST_LIMIT")
    assert str(refused.value) == "3 KiB, over the 2 KiB limit for a test file (set TEST_LIMIT to read a larger one)"
    assert refused.value.kind is None
    assert read_bytes(path, 3 * 1024, "a test file") == bytes(3 * 1024)  # the limit itself is allowed


def test_a_missing_file_is_still_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_bytes(tmp_path / "none", 1024, "a test file")


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("device", "not a regular file (a character device); give the path of a JSON config file"),
        ("directory", "not a regular file (a directory); give the path of a JSON config file"),
        ("fifo", "not a regular file (a FIFO (named pipe)); give the path of a JSON config file"),
        (
            "large",
            "10.0 MiB, over the 4 MiB limit for a config file (set PATCHBAY_MAX_CONFIG_BYTES to read a larger one)",
        ),
    ],
)
def test_a_config_path_that_is_not_a_config_file_is_refused_at_once(
    tmp_path: Path, fifo: Path, kind: str, message: str
) -> None:
    path = {
        "device": Path("/dev/zero"),
        "directory": tmp_path,
        "fifo": fifo,
        "large": sparse(tmp_path / "big.json", 10 * MiB + 10 * 1024),
    }[kind]
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    assert refused.value.message == message


def test_the_config_limit_is_set_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "patchbay.json"
    path.write_text(json.dumps({"mcpServers": {}}), encoding="utf-8")
    monkeypatch.setenv("PATCHBAY_MAX_CONFIG_BYTES", "10")
    with pytest.raises(ConfigError, match="over the 10 bytes limit for a config file"):
        load_config(path)
    monkeypatch.setenv("PATCHBAY_MAX_CONFIG_BYTES", "ten")
    with pytest.raises(ConfigError, match="PATCHBAY_MAX_CONFIG_BYTES is not a number of bytes"):
        load_config(path)
    monkeypatch.setenv("PATCHBAY_MAX_CONFIG_BYTES", str(100 * MiB))
    assert read_config(path) == '{"mcpServers": {}}'


def test_check_names_what_the_path_is_for_a_person(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PATCHBAY_MAX_CONFIG_BYTES", raising=False)
    assert cli.main(["check", "/dev/zero"]) == cli.EXIT_CONFIG
    err = capsys.readouterr().err
    assert "/dev/zero: not a regular file (a character device); give the path of a JSON config file" in err
    big = sparse(tmp_path / "big.json", 10 * MiB)
    assert cli.main(["check", str(big)]) == cli.EXIT_CONFIG
    err = capsys.readouterr().err
    assert f"{big}: 10 MiB, over the 4 MiB limit for a config file (set PATCHBAY_MAX_CONFIG_BYTES" in err


def test_the_starts_before_the_config_check_decline_such_a_path(
    tmp_path: Path, fifo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(EARLY_MARK, raising=False)
    for path in (fifo, Path("/dev/zero"), tmp_path, sparse(tmp_path / "big.json", 10 * MiB)):
        assert early(str(path)) == {}
        assert _search_listing(str(path)) is None


def test_every_reader_of_a_named_file_refuses_a_fifo_without_waiting(
    fifo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp_patchbay.cli import calling, secret
    from mcp_patchbay.cli.options import UsageError
    from mcp_patchbay.clients import reading
    from mcp_patchbay.clients.files import read_bytes as client_file
    from mcp_patchbay.clients.installs import load_records
    from mcp_patchbay.oauth.store import TokenStore
    from mcp_patchbay.trust.store import PinStore, PinsUnreadable
    from mcp_patchbay.upstreams import start_memory
    from mcp_patchbay.upstreams.listing_cache import ListingCache

    named = "not a regular file (a FIFO (named pipe))"
    # The proxy's own data files: no cache, no sign-in, no memory; the pins file is reported.
    cache = ListingCache(fifo)
    cache.load()
    assert cache._records == {}  # pyright: ignore[reportPrivateUsage]
    assert TokenStore("https://example.com/mcp", fifo).tokens() is None
    monkeypatch.setattr(start_memory, "_file", lambda: fifo)
    assert start_memory.recall(fifo) is None
    with pytest.raises(PinsUnreadable, match=re.escape(named)):
        PinStore(fifo).load()
    with pytest.raises(ValueError, match=re.escape(named)):
        load_records(fifo)
    # Other clients' files (import, install) and the files a person names.
    with pytest.raises(FileRefused):
        client_file(fifo)
    survey = reading.Survey()
    assert reading._read(fifo, survey) is None  # pyright: ignore[reportPrivateUsage]
    assert [u.problem for u in survey.unreadable] == [named]
    with pytest.raises(UsageError, match=re.escape(f"--args @{fifo}: cannot read the file: {named}")):
        calling._read(str(fifo), "--args @")  # pyright: ignore[reportPrivateUsage]
    with pytest.raises(UsageError, match=re.escape(f"{fifo}: {named}; give the path of a JSON config file")):
        secret.main(["list", str(fifo)], io.StringIO(), io.StringIO(), io.StringIO())


def test_a_backup_of_what_is_not_a_regular_file_is_refused_not_copied_for_ever(tmp_path: Path, fifo: Path) -> None:
    from mcp_patchbay.cli import importing
    from mcp_patchbay.clients.files import backup

    for path in (Path("/dev/zero"), fifo):
        with pytest.raises(FileRefused):
            backup(path)
    from mcp_patchbay.clients.locations import Environment

    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"time": {"command": "mcp-server-time"}}}))
    env = Environment("linux", {"HOME": str(tmp_path / "home")}, tmp_path)
    out, err = io.StringIO(), io.StringIO()
    assert importing.main(["--from", "claude-code", "-o", "/dev/zero", "--force"], env, out, err) == cli.EXIT_CONFIG
    assert "cannot write /dev/zero: not a regular file (a character device)" in err.getvalue()
