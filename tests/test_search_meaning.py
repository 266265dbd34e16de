"""Search by meaning (mcp_patchbay.search.meaning) and its fusion with the lexical index."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcp_patchbay.search import IndexedTool, ToolIndex
from mcp_patchbay.search import meaning as meaning_module
from mcp_patchbay.search.meaning import Meaning


def tool(server: str, name: str, description: str) -> IndexedTool:
    return IndexedTool(name=f"{server}__{name}", server=server, tool=name, description=description)


TOOLS = [
    tool("art", "generate_image", "Generate images from a prompt and return a link to view them"),
    tool("github", "create_issue", "Create a new issue in a GitHub repository"),
    tool("filesystem", "list_directory", "Get a detailed listing of all files and directories"),
    tool("slack", "post_message", "Post a new message to a Slack channel"),
    tool("time", "get_current_time", "Get current time in a specific timezone"),
    tool("kubernetes", "kubectl_scale", "Scale a Kubernetes deployment"),
]


@pytest.fixture(scope="module")
def model() -> Meaning:
    loaded = Meaning.load()
    assert loaded is not None, "wordllama is a dependency: the meaning model must load"
    return loaded


def names(index: ToolIndex, query: str, **kw: Any) -> list[str]:
    return [hit.tool.name for hit in index.search(query, **kw)]


def test_vectors_are_unit_rows_and_an_empty_text_is_zeros(model: Meaning) -> None:
    vectors = model.encode(["open a bug report", "a picture of a cat", ""])
    assert vectors.shape == (3, model.dimensions)
    norms = (vectors * vectors).sum(axis=1)
    assert norms[0] == pytest.approx(1.0, abs=1e-5)
    assert norms[1] == pytest.approx(1.0, abs=1e-5)
    assert norms[2] == 0.0


def test_the_model_loads_once_per_process(model: Meaning) -> None:
    assert Meaning.load() is model


def test_related_texts_are_nearer_than_unrelated_ones(model: Meaning) -> None:
    picture, photo, timezone = model.encode(["draw me a picture", "generate a photo", "what time is it in Tokyo"])
    assert float(picture @ photo) > float(picture @ timezone)


def test_a_need_in_words_no_tool_uses_is_found_by_meaning() -> None:
    # No word of the query is in any tool's text: lexical ranking alone finds nothing.
    without, with_meaning = ToolIndex.build(TOOLS, meaning=False), ToolIndex.build(TOOLS)
    assert with_meaning.uses_meaning
    for query, expected in (
        ("paint a sunset", "art__generate_image"),
        ("what hour is it in Tokyo", "time__get_current_time"),
        ("how many pods should run", "kubernetes__kubectl_scale"),
    ):
        assert names(without, query) == []
        assert names(with_meaning, query)[0] == expected


def test_the_trained_table_finds_a_need_wordllamas_table_misses() -> None:
    # The trained table (meaning_table.safetensors) gives MiniLM's reading of a request; WordLlama's
    # own rows, which it started from, put a deployment tool first for this one.
    tools = [
        *TOOLS,
        tool("notes", "append_note", "Append text to the end of an existing note"),
        tool("db", "explain_query", "Return the execution plan of a query"),
        tool("shell", "kill_process", "Terminate a running process by its PID"),
        tool("calendar", "create_event", "Create a calendar event with attendees"),
        tool("mail", "send_email", "Send an email message"),
        tool("browser", "take_screenshot", "Capture an image of the current page"),
    ]
    query = "ask the team in chat whether the deploy is done"
    wordllama = Meaning.load_wordllama()
    assert wordllama is not None
    assert names(ToolIndex(tools, wordllama), query)[0] != "slack__post_message"
    assert names(ToolIndex.build(tools), query)[0] == "slack__post_message"


def test_meaning_keeps_the_server_filter_and_the_limit() -> None:
    index = ToolIndex.build(TOOLS)
    assert names(index, "paint a sunset", server="slack") == ["slack__post_message"]
    assert len(names(index, "paint a sunset", limit=2)) == 2


def test_an_exact_or_mistaken_name_still_ranks_first_with_meaning() -> None:
    index = ToolIndex.build(TOOLS)
    assert names(index, "time__get_current_time")[0] == "time__get_current_time"
    assert names(index, "kubectl_scal")[0] == "kubernetes__kubectl_scale"


def test_queries_that_say_no_need_get_nothing_by_meaning() -> None:
    index = ToolIndex.build(TOOLS)
    for query in ("", "   ", "!!!", "the a of", "a" * 5_000, "zzqx", "asdkjh qwe"):
        assert names(index, query) == []


def test_a_word_only_the_catalog_uses_still_asks_meaning(model: Meaning) -> None:
    assert not model.knows("kubectl")
    index = ToolIndex.build(TOOLS)
    assert names(index, "kubectl")[0] == "kubernetes__kubectl_scale"


def test_an_index_without_the_model_ranks_by_words(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Meaning, "load", classmethod(lambda cls: None))
    index = ToolIndex.build(TOOLS)
    assert not index.uses_meaning
    assert names(index, "create an issue on GitHub")[0] == "github__create_issue"


def test_a_missing_package_is_said_once_and_search_goes_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(meaning_module, "_package_dir", lambda: None)
    with caplog.at_level(logging.INFO, logger="mcp_patchbay.search.meaning"):
        assert Meaning._load() is None  # pyright: ignore[reportPrivateUsage]
    assert "wordllama package is not installed" in caplog.text


def test_broken_model_files_fall_back_to_words(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "l2_supercat_256.safetensors").write_bytes(b"\x04\x00\x00\x00\x00\x00\x00\x00{}  ")
    monkeypatch.setattr(meaning_module, "_package_dir", lambda: tmp_path)
    with caplog.at_level(logging.WARNING, logger="mcp_patchbay.search.meaning"):
        assert Meaning._load() is None  # pyright: ignore[reportPrivateUsage]
    assert "did not load" in caplog.text


def test_a_broken_meaning_table_falls_back_to_words(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broken = tmp_path / "meaning_table.safetensors"
    header = b'{"rows": {"dtype": "I8", "shape": [4, 2], "data_offsets": [0, 8]}}'
    broken.write_bytes(len(header).to_bytes(8, "little") + header + b"\x01" * 3)  # 3 bytes of 8
    monkeypatch.setattr(meaning_module, "TABLE", broken)
    with caplog.at_level(logging.WARNING, logger="mcp_patchbay.search.meaning"):
        assert Meaning._load() is None  # pyright: ignore[reportPrivateUsage]
    assert "did not load" in caplog.text


def test_the_table_is_read_as_the_training_wrote_it(tmp_path: Path) -> None:
    import numpy as np

    table = np.random.default_rng(23).normal(size=(50, 8)).astype(np.float32)
    table[3] = 0.0  # a row no text used and that maps to zeros keeps a usable scale
    meaning_module.write_table(table, tmp_path / "t.safetensors")
    read = meaning_module._read_table(tmp_path / "t.safetensors")  # pyright: ignore[reportPrivateUsage]
    assert read.shape == (50, 8)
    assert read.dtype == np.float16
    assert np.abs(read.astype(np.float32) - table).max() <= np.abs(table).max() / 127 + 1e-3


def test_the_shipped_table_is_the_trained_one_and_fits_the_tokenizer(model: Meaning) -> None:
    wordllama = Meaning.load_wordllama()
    assert wordllama is not None
    assert model.table.shape == (wordllama.tokenizer.get_vocab_size(), 256)
    # Trained from WordLlama's rows, not the same rows: the same text gets another vector.
    ours, theirs = model.encode(["open a bug report"])[0], wordllama.encode(["open a bug report"])[0]
    assert float(ours @ theirs) < 0.9


def test_the_model_is_not_imported_at_startup() -> None:
    # Its import (numpy, tokenizers) belongs to the index's worker thread, never to the proxy's start.
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "mcp_patchbay", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert not {"numpy", "tokenizers", "mcp_patchbay.search.meaning"} & imported
