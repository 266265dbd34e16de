"""End to end: the official MCP conformance suite's server scenarios, straight against the HTTP gateway.

One gateway for the module, ``mcp-patchbay serve --http 127.0.0.1:PORT CONFIG`` on a free port,
its config naming one upstream by URL: ``tests/servers/gateway_upstream.py --fixtures``, the
SDK's low-level ``Server`` under uvicorn with the suite's fixture tools, resources and prompts.
For each scenario the suite (``@modelcontextprotocol/conformance@0.1.16`` on node 22, both
pinned in tests/e2e/package.json and installed by scripts/install) connects to ``/mcp`` as a
client of the 2025-11-25 era and checks what it gets. A scenario passes when the suite exits 0
and its checks.json holds no failure and no warning.

The scenarios are those that apply through a namespacing proxy: the generic ones (``SCENARIOS``),
and those that call the suite's fixtures by bare names the gateway resolves (``THROUGH_NAMES``).
``scripts/conformance_server`` runs the generic ones (``--all``: every server scenario) beside the
upstream itself and prints a table.

No node 22 or no suite is a skip, with the reason and the command that installs them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e_util import (
    ANSI,
    CONFORMANCE_SUITE,
    NODE22,
    ROOT,
    bad_checks,
    conformance_suite_problem,
    run_suite,
    suite_checks,
)
from tests.processes import free_port

pytestmark = [pytest.mark.e2e]

SUITE = CONFORMANCE_SUITE
UPSTREAM = ROOT / "tests" / "servers" / "gateway_upstream.py"
START_TIMEOUT = 60.0
"""Our bound on the upstream's start and on the gateway's, until ``/readyz`` answers 200."""
RUN_TIMEOUT = 90.0
"""Our bound on one run of the suite (a scenario takes about a second)."""

SCENARIOS = [
    "server-initialize",
    "ping",
    "tools-list",
    "tools-call-error",
    "logging-set-level",
    "resources-list",
    "prompts-list",
    "dns-rebinding-protection",
    "server-sse-multiple-streams",
]
"""The generic scenarios: no fixture name in them."""

THROUGH_NAMES = [
    "completion-complete",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-with-logging",
    "tools-call-with-progress",
    "tools-call-sampling",
    "tools-call-elicitation",
    "elicitation-sep1034-defaults",
    "elicitation-sep1330-enums",
    "resources-read-text",
    "resources-read-binary",
    "resources-templates-read",
    "resources-subscribe",
    "resources-unsubscribe",
    "prompts-get-simple",
    "prompts-get-with-args",
    "prompts-get-embedded-resource",
    "prompts-get-with-image",
]
"""Scenarios that call the suite's fixtures by their bare names: the gateway resolves a tool's or a
prompt's bare name to the one it exposes (``test_sampling`` runs ``conf__test_sampling``), and
resource URIs pass unchanged. Sampling, elicitation, logging and progress check that what the
upstream sends back mid-call reaches the session whose call caused it.

Left out: ``json-schema-2020-12`` looks its tool up by exact name in ``tools/list`` (no namespacing
proxy can pass it); ``server-sse-polling`` ends in two warnings against the upstream itself (the
suite sends ``MCP-Protocol-Version: 2025-03-26``, for which the SDK sends no priming event)."""


@pytest.fixture(scope="module")
def node22() -> Path:
    problem = conformance_suite_problem()
    if problem is not None:
        pytest.skip(problem)
    return NODE22


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def wait_until(check: Callable[[], bool], what: str, process: subprocess.Popen[bytes], log: Path) -> None:
    """Poll ``check()`` until it is true; fail after START_TIMEOUT or when ``process`` exits."""
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        if process.poll() is not None:
            pytest.fail(f"{what}: the process exited with {process.returncode}\n{log.read_text()[-4000:]}")
        try:
            if check():
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not ready within {START_TIMEOUT:.0f}s\n{log.read_text()[-4000:]}")
        time.sleep(0.1)  # a poll, not ordering: the condition is another process's (a file, an HTTP answer)


def ready(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=2) as answer:
        return answer.status == 200


@pytest.fixture(scope="module")
def gateway_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``mcp-patchbay serve --http 127.0.0.1:PORT`` in front of the fixture upstream; yields its /mcp URL."""
    folder = tmp_path_factory.mktemp("gateway")
    upstream_port, gateway_port = free_port(), free_port()
    config = folder / "config.json"
    config.write_text(
        json.dumps({"mcpServers": {"conf": {"type": "http", "url": f"http://127.0.0.1:{upstream_port}/mcp"}}})
    )
    upstream_out, upstream_log, gateway_log = folder / "upstream.out", folder / "upstream.log", folder / "gateway.log"
    with upstream_out.open("wb") as out, upstream_log.open("wb") as err:
        upstream = subprocess.Popen(
            [sys.executable, str(UPSTREAM), "--fixtures", "--name", "conformance", "--port", str(upstream_port)],
            stdout=out,
            stderr=err,
            cwd=ROOT,
        )
    try:
        wait_until(lambda: b"ready" in upstream_out.read_bytes(), "the upstream", upstream, upstream_log)
        command = [sys.executable, "-m", "mcp_patchbay", "serve", "--http", f"127.0.0.1:{gateway_port}", str(config)]
        with gateway_log.open("wb") as log:
            gateway = subprocess.Popen(
                [*command, "--log-level", "INFO"], stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=dict(os.environ)
            )
        try:
            readyz = f"http://127.0.0.1:{gateway_port}/readyz"
            wait_until(lambda: ready(readyz), "the gateway's /readyz", gateway, gateway_log)
            yield f"http://127.0.0.1:{gateway_port}/mcp"
        finally:
            stop(gateway)
    finally:
        stop(upstream)


@pytest.mark.parametrize("scenario", SCENARIOS + THROUGH_NAMES)
def test_the_gateway_passes_the_conformance_suites_server_scenario(
    node22: Path, gateway_url: str, scenario: str, tmp_path: Path
) -> None:
    command = [str(node22), str(SUITE), "server", "--url", gateway_url, "--scenario", scenario]
    done = run_suite([*command, "--output-dir", str(tmp_path)], timeout=RUN_TIMEOUT)
    output = ANSI.sub("", done.stdout)
    checks = suite_checks(tmp_path)
    bad = bad_checks(checks)
    assert done.returncode == 0 and checks and not bad, (
        f"the conformance suite's {scenario} against the gateway (exit {done.returncode}, {len(checks)} checks)\n"
        + "\n".join(bad)
        + f"\n--- suite output ---\n{output[-6000:]}"
    )
