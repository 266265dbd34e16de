"""End to end: ``mcp-patchbay tools`` and ``mcp-patchbay call`` as a user types them, the real CLI in a
subprocess in front of ``tests/servers/fault_server.py`` over stdio, and an entry whose command is
missing. Each run is bounded (``RUN_TIMEOUT``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e_util import ROOT, fault_entry

pytestmark = pytest.mark.e2e

RUN_TIMEOUT = 60.0


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcp_patchbay", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli-tools") / "patchbay.json"
    servers = {"fault": fault_entry("fault"), "gone": {"command": "no-such-mcp-server-for-patchbay"}}
    path.write_text(json.dumps({"mcpServers": servers, "patchbay": {"watch": False}}))
    return path


def test_tools_lists_the_real_server_s_tools_and_says_why_the_other_failed(config: Path) -> None:
    done = _cli("tools", "-c", str(config))
    assert done.returncode == 1, done  # 'gone' failed
    lines = done.stdout.splitlines()
    assert "fault: ready, 15 tools" in lines
    assert any(line.split()[:2] == ["fault__echo", "Return"] for line in lines)
    assert "gone: failed: its command 'no-such-mcp-server-for-patchbay' was not found on PATH (" in done.stdout
    assert f'install no-such-mcp-server-for-patchbay, or fix the entry "gone" in {config}' in done.stdout
    assert done.stderr == ""


def test_call_runs_the_tool_and_a_mistaken_name_says_which_ran(config: Path) -> None:
    done = _cli("call", "-c", str(config), "fault__echo", "text=hello from the terminal")
    assert (done.returncode, done.stdout, done.stderr) == (0, "hello from the terminal\n", "")
    typo = _cli("call", "fault_echo", "--config", str(config), "text=42", "--json")
    assert typo.returncode == 0, typo
    assert json.loads(typo.stdout)["content"] == [{"type": "text", "text": "42"}]  # a string property: as typed
    assert typo.stderr == "mcp-patchbay call: calling fault__echo ('fault_echo' is not its exact name)\n"
