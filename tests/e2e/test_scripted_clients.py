"""End to end: the proxy in search mode behind real clients (Claude Code 2.1, Gemini CLI 0.61, Codex
0.169) whose model is a scripted stub on 127.0.0.1 (``tests/e2e/scripted``).

Each run gives a client a throwaway HOME, registers ``python -m mcp_patchbay CONFIG`` in it as
``patchbay`` (search mode, in front of ``scripted/upstream.py``'s ``notes`` server, one read-only
tool and one destructive one, and ``archive``, whose command does not exist), points the client's
model API at the stub, and runs one prompt headless. The stub's script (``SCRIPT``) does what
find_tools' answer says: search, the read-only tool through the read route (``call_read``), a typo
of it and the broken server's tool the same way, the destructive tool through the read route (a
model that tries), then through ``call_tool``, then by its own name if the client lists it, then
end. Every request body is recorded: its tool results are what the model was shown. The upstream
records every call that ran, whatever a client showed.

Four approval settings per client (``APPROVALS``):

- ``defaults``: the client's own, untouched.
- ``approved``: the user has allowed the search tools that only read, find_tools and the read
  route, as each client lets a user do it ahead of time (Claude Code ``--allowedTools``, a Gemini
  CLI policy rule on ``readOnlyHint``, a Codex per-tool ``approval_mode``), as "always allow" would
  when asked.
- ``call_tool``: ``call_tool`` allowed too.
- ``confirm``: as ``call_tool``, with ``patchbay.confirm`` on.

``OUTCOMES`` is what each client did at each step with each setting (these pinned versions).

The clients come from npm (``scripted/package.json``, pinned, with its lock) into
``tests/e2e/.clients`` (git-ignored), once per session. Without node 20+ and npm, when the install
fails, or with ``PATCHBAY_SKIP_CLIENT_E2E=1``, every test here skips and says why.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform as host
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.scripted.anthropic import Anthropic
from tests.e2e.scripted.gemini import Gemini
from tests.e2e.scripted.model import Exchange, Provider, ScriptedModel, Step, ToolResult
from tests.e2e.scripted.openai import OpenAI
from tests.e2e.scripted.upstream import DELETED_MARK, NOTE_MARK
from tests.e2e_util import ROOT

TYPO_MARK = "Did you mean"
BROKEN_MARK = "could not start"
NOT_READ_ONLY_MARK = "runs only tools that say they only read"
DECLINED_MARK = "did not approve running"

INSTALL_TIMEOUT = 300.0
RUN_TIMEOUT = 90.0
"""One client run, startup to exit (they take 2 to 5 s here)."""

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(INSTALL_TIMEOUT + 2 * RUN_TIMEOUT)]

SCRIPTED = Path(__file__).resolve().parent / "scripted"
UPSTREAM = SCRIPTED / "upstream.py"
CLIENTS = ROOT / "tests" / "e2e" / ".clients"
SKIP_VARIABLE = "PATCHBAY_SKIP_CLIENT_E2E"
HOW_TO_RUN = (
    f"to run them: node 20+ and npm on PATH, network access to the npm registry for the first run (it installs "
    f"{SCRIPTED.relative_to(ROOT)}/package.json into {CLIENTS.relative_to(ROOT)}), {SKIP_VARIABLE} unset"
)

FIND, READ, CALL = "patchbay__find_tools", "patchbay__call_read", "patchbay__call_tool"
PROMPT = "Tidy up my notes."
SCRIPT = (
    Step("find", FIND, {"query": "read or delete notes"}),
    Step("read", READ, {"name": "notes__read_note", "arguments": {"title": "groceries"}}),
    Step("typo", READ, {"name": "notes__raed_note", "arguments": {"title": "groceries"}}),
    Step("broken", READ, {"name": "archive__search_archive", "arguments": {"query": "2019"}}),
    Step("sneak", READ, {"name": "notes__delete_notes", "arguments": {"folder": "work"}}),
    Step("destroy", CALL, {"name": "notes__delete_notes", "arguments": {"folder": "work"}}),
    Step("listed", "notes__delete_notes", {"folder": "work"}),
    Step("end", text="Your notes are tidy."),
)
"""As find_tools' answer guides: the read-only tool, a typo of it and the broken server's tool
through the read route; the destructive tool through the read route too (a model that tries), then
through call_tool, then by its own name once the client lists it. Each tool is found by how its name
ends in the request's tools, as each client names it."""
STEPS = tuple(step.label for step in SCRIPT if step.tool is not None)
APPROVALS = ("defaults", "approved", "call_tool", "confirm")
"""``approved``: the user allowed find_tools and the read route; ``call_tool``: call_tool too;
``confirm``: as ``call_tool``, with ``patchbay.confirm`` on."""
ALLOWED = {"defaults": (), "approved": (FIND, READ), "call_tool": (FIND, READ, CALL), "confirm": (FIND, READ, CALL)}
# What a step came to, in OUTCOMES: "ran": the upstream tool ran and the model saw its output
# (find_tools: its answer); "answered": the proxy's own answer reached the model (a typo's suggestion,
# a broken server's state, the read route's refusal of a tool that may change things); "declined":
# the user declined the proxy's question (patchbay.confirm); "refused": the client answered the model
# itself; "not offered": the client did not list the step's tool; "not reached": the turn had ended.
# "a|b": either, where the client's timing decides.
_READING = {"find": "ran", "read": "ran", "typo": "answered", "broken": "answered", "sneak": "answered"}
"""The steps through find_tools and the read route, where the client lets them run."""
OUTCOMES: dict[tuple[str, str], dict[str, str]] = {
    # Headless, Claude Code asks for every MCP tool the user has not allowed, read-only ones too; with
    # no one to answer it tells the model "Claude requested permissions to use ..., but you haven't
    # granted it yet".
    ("claude", "defaults"): {**dict.fromkeys(STEPS[:-1], "refused"), "listed": "not offered"},
    # The tools found join its list (tools/list_changed) a request or two after find_tools' answer,
    # each approved on its own: the destructive one by its name is refused ("not offered" if the
    # refresh has not landed by then).
    ("claude", "approved"): {**_READING, "destroy": "refused", "listed": "refused|not offered"},
    ("claude", "call_tool"): {**_READING, "destroy": "ran", "listed": "refused|not offered"},
    # It answers the proxy's elicitation itself, headless: declined.
    ("claude", "confirm"): {**_READING, "destroy": "declined", "listed": "refused|not offered"},
    # Headless, Gemini CLI's policy denies what it would ask about: MCP tools are not offered at all.
    ("gemini", "defaults"): {"find": "not offered", **dict.fromkeys(STEPS[1:], "not reached")},
    # A rule allowing the proxy's read-only tools (by annotation): call_tool is not offered headless.
    ("gemini", "approved"): {**_READING, "destroy": "not offered", "listed": "not reached"},
    # Tools added by tools/list_changed do not join the turn's declarations.
    ("gemini", "call_tool"): {**_READING, "destroy": "ran", "listed": "not offered"},
    # It declares no elicitation: the proxy cannot ask, the user's approval of call_tool stands.
    ("gemini", "confirm"): {**_READING, "destroy": "ran", "listed": "not offered"},
    # codex exec never asks: a tool runs only when annotated read-only (find_tools, the read route);
    # call_tool says it may destroy ("MCP tool call requires approval, but approval policy is never").
    # It does not re-list within a turn.
    ("codex", "defaults"): {**_READING, "destroy": "refused", "listed": "not offered"},
    ("codex", "approved"): {**_READING, "destroy": "refused", "listed": "not offered"},
    ("codex", "call_tool"): {**_READING, "destroy": "ran", "listed": "not offered"},
    ("codex", "confirm"): {**_READING, "destroy": "declined", "listed": "not offered"},
}


# --- the clients, from npm ----------------------------------------------------------------------


@dataclass(frozen=True)
class Installed:
    claude: Path
    gemini: Path
    codex: Path


def _pins() -> dict[str, str]:
    return json.loads((SCRIPTED / "package.json").read_text())["dependencies"]


def _installed_version(package: str) -> str | None:
    manifest = CLIENTS / "node_modules" / package / "package.json"
    try:
        return str(json.loads(manifest.read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


def _node_problem() -> str | None:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        missing = " and ".join(name for name, path in (("node", node), ("npm", npm)) if path is None)
        return f"{missing} not found on PATH"
    version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30, check=False)
    major = version.stdout.strip().lstrip("v").split(".")[0]
    if not major.isdigit() or int(major) < 20:
        return f"node {version.stdout.strip() or '?'} is older than 20 (Gemini CLI needs 20+)"
    return None


def _install() -> str | None:
    """Install the pinned clients into CLIENTS unless they are there; why it failed, or None."""
    pins = _pins()
    if all(_installed_version(package) == version for package, version in pins.items()):
        return None
    CLIENTS.mkdir(parents=True, exist_ok=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(SCRIPTED / name, CLIENTS / name)
    npm = shutil.which("npm")
    assert npm is not None
    command = [npm, "install", "--prefix", str(CLIENTS), "--no-audit", "--no-fund"]
    try:
        done = subprocess.run(
            command, cwd=CLIENTS, capture_output=True, text=True, timeout=INSTALL_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired:
        return f"'npm install' did not finish within {INSTALL_TIMEOUT:.0f} s"
    if done.returncode != 0:
        said = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        errors = [line for line in said if "error" in line.lower()][:4] or said[-3:]
        return f"'npm install' failed (exit {done.returncode}): {' | '.join(errors)[:500]}"
    wrong = {p: _installed_version(p) for p, v in pins.items() if _installed_version(p) != v}
    return f"'npm install' left other versions: {wrong}" if wrong else None


def _claude_binary(node_bin: Path) -> Path:
    """The platform package's native binary: the wrapper's ``bin/claude.exe`` is a placeholder until
    its postinstall copies that binary over it, and npm may skip install scripts."""
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64"}.get(host.machine().lower(), host.machine().lower())
    native = CLIENTS / "node_modules" / "@anthropic-ai" / f"claude-code-{sys.platform}-{arch}" / "claude"
    return native if native.exists() else node_bin / "claude"


@pytest.fixture(scope="session")
def clients() -> Installed:
    if os.environ.get(SKIP_VARIABLE) == "1":
        pytest.skip(f"{SKIP_VARIABLE}=1 is set: the real-client runs are skipped; {HOW_TO_RUN}")
    problem = _node_problem() or _install()
    if problem is not None:
        pytest.skip(f"the real clients cannot be installed: {problem}; {HOW_TO_RUN}")
    node_bin = CLIENTS / "node_modules" / ".bin"
    return Installed(_claude_binary(node_bin), node_bin / "gemini", node_bin / "codex")


# --- one run --------------------------------------------------------------------------------------


@dataclass
class Run:
    client: str
    approvals: str
    model: ScriptedModel
    ran: list[dict[str, Any]]
    """The upstream's record: every tool call that ran there."""
    seconds: float
    output: str
    results: dict[str, ToolResult] = field(default_factory=lambda: dict[str, ToolResult]())
    """Step label to its tool result, as the model was shown it."""

    def __post_init__(self) -> None:
        shown = self.model.last_results()
        for number, step in enumerate(SCRIPT):  # the stub's call ids: call_<step>_<label>, kept or prefixed
            found = [r for r in shown if r.call_id.endswith(f"call_{number}_{step.label}")]
            if found:
                self.results[step.label] = found[0]

    def exchange(self, label: str) -> Exchange | None:
        step = next(n for n, s in enumerate(SCRIPT) if s.label == label)
        return next((e for e in self.model.conversation() if e.step == step and not e.waited), None)

    def text(self, label: str) -> str:
        result = self.results.get(label)
        assert result is not None, f"{self.client}: no tool result for step {label!r}\n{self.describe()}"
        return result.text

    def outcome(self, label: str) -> str:
        exchange = self.exchange(label)
        if exchange is None:
            return "not reached"
        if exchange.called is None:
            return "not offered"
        result = self.results.get(label)
        if result is None:
            return "no result"
        if DELETED_MARK in result.text:
            return "ran"
        marks = {
            "find": ("notes__read_note", "ran"),
            "read": (NOTE_MARK, "ran"),
            "typo": (TYPO_MARK, "answered"),
            "broken": (BROKEN_MARK, "answered"),
            "sneak": (NOT_READ_ONLY_MARK, "answered"),
            "destroy": (DECLINED_MARK, "declined"),
            "listed": (DECLINED_MARK, "declined"),
        }
        mark, outcome = marks[label]
        return outcome if mark in result.text else "refused"

    def seen(self, mark: str) -> int:
        """How many times ``mark`` is in what the model was last shown: the whole conversation of the
        longest request, as sent (JSON), whatever part of it a client put the tool results in."""
        turns = [e for e in self.model.conversation() if not e.waited]
        longest = max(turns, key=lambda e: len(e.results), default=None)
        return json.dumps(longest.body, ensure_ascii=False).count(mark) if longest is not None else 0

    def outcomes(self) -> dict[str, str]:
        return {label: self.outcome(label) for label in STEPS}

    def names(self) -> list[str]:
        """The tool names the model's calls used, as the client listed them."""
        return [name for _, name in self.model.calls()]

    def describe(self) -> str:
        lines = [f"{self.client} ({self.approvals}, {self.seconds:.1f} s): {self.outcomes()}"]
        for label, result in self.results.items():
            lines.append(f"  {label}: {result.name}: {result.text[:400]!r}")
        lines.append(f"  upstream ran: {self.ran}")
        lines.append(f"  stub errors: {self.model.errors}")
        lines.append(f"  client output (tail): {self.output[-1500:]!r}")
        return "\n".join(lines)


def agrees(outcomes: Mapping[str, str], expected: Mapping[str, str]) -> bool:
    return outcomes.keys() == expected.keys() and all(outcomes[step] in expected[step].split("|") for step in expected)


@dataclass(frozen=True)
class Setup:
    argv: list[str]
    env: dict[str, str]


def _proxy_entry(work: Path) -> dict[str, Any]:
    return {
        "command": sys.executable,
        "args": ["-m", "mcp_patchbay", str(work / "patchbay.json")],
        "env": {"XDG_CONFIG_HOME": str(work / "xdg-config"), "XDG_DATA_HOME": str(work / "xdg-data")},
    }


def _claude(installed: Installed, work: Path, url: str, approvals: str) -> Setup:
    config = work / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"patchbay": _proxy_entry(work)}}))
    argv = [str(installed.claude), "-p", PROMPT, "--mcp-config", str(config), "--strict-mcp-config"]
    argv += ["--output-format", "stream-json", "--verbose"]
    if ALLOWED[approvals]:
        argv += ["--allowedTools", ",".join(f"mcp__patchbay__{tool}" for tool in ALLOWED[approvals])]
    env = {
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_API_KEY": "scripted",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    return Setup(argv, env)


def _gemini(installed: Installed, work: Path, url: str, approvals: str) -> Setup:
    settings_dir = work / "home" / ".gemini"
    settings_dir.mkdir(parents=True)
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "mcpServers": {"patchbay": _proxy_entry(work)},
        "privacy": {"usageStatisticsEnabled": False},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        "telemetry": {"enabled": False},
    }
    (settings_dir / "settings.json").write_text(json.dumps(settings))
    (settings_dir / "trustedFolders.json").write_text(json.dumps({str(work / "project"): "TRUST_FOLDER"}))
    if ALLOWED[approvals]:
        # The proxy's tools that only read, by their annotations (find_tools, the read route, and
        # read-only tools listed by their own names); call_tool by name ("__" in a rule's toolName
        # draws a warning that it is deprecated MCP syntax; the rule still applies).
        rules = '[[rule]]\nmcpName = "patchbay"\ntoolName = "*"\ntoolAnnotations = { readOnlyHint = true }\n'
        rules += 'decision = "allow"\npriority = 100\n\n'
        if CALL in ALLOWED[approvals]:
            rules += f'[[rule]]\nmcpName = "patchbay"\ntoolName = "{CALL}"\ndecision = "allow"\npriority = 100\n'
        (settings_dir / "policies").mkdir()
        (settings_dir / "policies" / "patchbay.toml").write_text(rules)
    return Setup(
        [str(installed.gemini), "-p", PROMPT, "-o", "stream-json"],
        {"GOOGLE_GEMINI_BASE_URL": url, "GEMINI_API_KEY": "scripted"},
    )


def _codex(installed: Installed, work: Path, url: str, approvals: str) -> Setup:
    codex_home = work / "home" / ".codex"
    codex_home.mkdir(parents=True)
    entry = _proxy_entry(work)
    lines = [
        'model = "gpt-5"',
        'model_provider = "scripted"',
        "[model_providers.scripted]",
        'name = "scripted"',
        f"base_url = {json.dumps(url + '/v1')}",
        'wire_api = "responses"',
        'env_key = "SCRIPTED_API_KEY"',
        "[mcp_servers.patchbay]",
        f"command = {json.dumps(entry['command'])}",
        f"args = {json.dumps(entry['args'])}",
        "required = true",  # else its first request may leave before the proxy's tools are listed
        "[mcp_servers.patchbay.env]",
        *(f"{key} = {json.dumps(value)}" for key, value in entry["env"].items()),
    ]
    for tool in ALLOWED[approvals]:
        lines += [f"[mcp_servers.patchbay.tools.{tool}]", 'approval_mode = "approve"']
    (codex_home / "config.toml").write_text("\n".join(lines) + "\n")
    argv = [str(installed.codex), "exec", "--json", "--skip-git-repo-check", PROMPT]
    return Setup(argv, {"CODEX_HOME": str(codex_home), "SCRIPTED_API_KEY": "scripted"})


CLIENT_SETUPS = {"claude": (Anthropic, _claude), "gemini": (Gemini, _gemini), "codex": (OpenAI, _codex)}


def _write_proxy_config(work: Path, confirm: bool) -> Path:
    record = work / "ran.jsonl"
    servers = {
        "notes": {"command": sys.executable, "args": [str(UPSTREAM), "--record", str(record)]},
        "archive": {"command": "no-such-mcp-server-for-patchbay"},
    }
    settings: dict[str, Any] = {"expose": "search", "watch": False}
    if confirm:
        settings["confirm"] = True
    (work / "patchbay.json").write_text(json.dumps({"mcpServers": servers, "patchbay": settings}))
    return record


def _run_bounded(argv: list[str], cwd: Path, env: Mapping[str, str]) -> tuple[int, str]:
    """Run a client in its own process group, stdin closed; on timeout kill the group and fail."""
    with subprocess.Popen(
        argv,
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    ) as process:
        try:
            output, _ = process.communicate(timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate(timeout=10)
            pytest.fail(f"{argv[0]} did not finish within {RUN_TIMEOUT:.0f} s:\n{output[-3000:]}")
        finally:
            with contextlib.suppress(ProcessLookupError):  # whatever the client left behind in its group
                os.killpg(process.pid, signal.SIGKILL)
    return process.returncode, output


def run_client(installed: Installed, client: str, approvals: str, work: Path) -> Run:
    provider_type, setup = CLIENT_SETUPS[client]
    provider: Provider = provider_type()
    (work / "home").mkdir(parents=True)
    (work / "project").mkdir()
    record = _write_proxy_config(work, confirm=approvals == "confirm")
    model = ScriptedModel(provider, SCRIPT, wait_tools=("WaitForMcpServers",))
    with model.running():
        made = setup(installed, work, model.url, approvals)
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(work / "home"),
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "NO_COLOR": "1",
            **made.env,
        }
        began = time.monotonic()
        code, output = _run_bounded(made.argv, work / "project", env)
        seconds = time.monotonic() - began
    ran = [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []
    run = Run(client, approvals, model, ran, seconds, output)
    assert not model.errors, run.describe()
    assert code == 0, f"{client} exited {code}\n{run.describe()}"
    print(run.describe().splitlines()[0], "| tools called:", run.names())  # the report's table, with -s
    return run


class Runs(dict[tuple[str, str], Run]):
    """Each (client, approvals) run once, on first use: the tests that read one run share it."""

    def __init__(self, installed: Installed, folders: pytest.TempPathFactory) -> None:
        super().__init__()
        self.installed = installed
        self.folders = folders

    def __missing__(self, key: tuple[str, str]) -> Run:
        client, approvals = key
        run = run_client(self.installed, client, approvals, self.folders.mktemp(f"{client}-{approvals}"))
        self[key] = run
        return run


@pytest.fixture(scope="module")
def runs(clients: Installed, tmp_path_factory: pytest.TempPathFactory) -> Runs:
    return Runs(clients, tmp_path_factory)


CLIENT_NAMES = ("claude", "gemini", "codex")


# --- what the model was shown -----------------------------------------------------------------


def _structured(run: Run, label: str) -> dict[str, Any]:
    """The structured answer Claude Code and Codex show in place of the text (Codex after its
    'Wall time: N seconds\\nOutput:\\n' prefix)."""
    text = run.text(label)
    if run.client == "codex":
        head, _, text = text.partition("Output:\n")
        assert head.startswith("Wall time:"), text
    return json.loads(text)


FIRST_GUIDED = {"claude": "approved", "gemini": "approved", "codex": "defaults"}
"""The first setting, from the defaults on, under which each client runs find_tools."""
READS_RUN = [
    (client, approvals)
    for client in CLIENT_NAMES
    for approvals in APPROVALS
    if approvals != "defaults" or client == "codex"
]
"""The runs where the read route may run: the approved ones, and Codex's defaults (it runs a tool
annotated read-only without asking)."""


@pytest.mark.parametrize("client", CLIENT_NAMES)
def test_the_model_sees_how_to_call_what_find_tools_found(client: str, runs: Runs) -> None:
    run = runs[client, FIRST_GUIDED[client]]
    if client == "gemini":
        # Gemini CLI shows the text, as {"output": "<untrusted_context>\n...</untrusted_context>"}.
        shown = json.loads(run.text("find"))["output"]
        assert f'via {READ} {{"name": "<name>", "arguments": {{...}}}} for a tool that only reads' in shown, shown
        assert f'{CALL} {{"name": "<name>", "arguments": {{...}}}} for the others (the user may be asked)' in shown
        assert f"notes__read_note [via {READ}]: Read one note" in shown, shown
        assert f"notes__delete_notes [via {CALL}]: Delete every note" in shown, shown
        assert '"required":["title"]' in shown and "They also join your tool list" in shown, shown
    else:
        answer = _structured(run, "find")
        told = answer["next"]
        assert told.startswith('Call a tool with the tool its "via" names: '), answer
        assert f'{READ} {{"name": <its name>, "arguments": {{...}}}} for a tool that only reads' in told, told
        assert f'{CALL} {{"name": <its name>, "arguments": {{...}}}} for the others' in told, told
        assert 'Give every argument in its "required"' in told, told
        found = {tool["name"]: tool for tool in answer["tools"]}
        assert (found["notes__read_note"]["via"], found["notes__read_note"]["required"]) == (READ, ["title"])
        assert (found["notes__delete_notes"]["via"], found["notes__delete_notes"]["required"]) == (CALL, ["folder"])


@pytest.mark.parametrize(("client", "approvals"), READS_RUN)
def test_a_read_only_tool_found_by_search_runs_through_the_read_route(client: str, runs: Runs, approvals: str) -> None:
    run = runs[client, approvals]
    assert run.results["read"].name.endswith(READ), run.describe()
    assert NOTE_MARK in run.text("read"), run.describe()
    assert {"tool": "read_note", "arguments": {"title": "groceries"}} in run.ran, run.describe()


@pytest.mark.parametrize(("client", "approvals"), READS_RUN)
def test_a_typo_and_a_broken_server_get_the_proxy_s_answer_once(client: str, runs: Runs, approvals: str) -> None:
    run = runs[client, approvals]
    typo, broken = run.text("typo"), run.text("broken")
    # Once in all the model was shown: no client repeats it (Gemini CLI gets text alone).
    assert run.seen(TYPO_MARK) == 1 and run.seen(BROKEN_MARK) == 1, run.describe()
    assert "'notes__read_note'" in typo and "archive" in broken, run.describe()
    if client == "codex":
        # Codex shows the structured content in place of the text, and no error flag.
        assert _structured(run, "typo")["error"]["code"] == "TOOL_NOT_FOUND", typo
        assert _structured(run, "broken")["error"]["code"] == "SERVER_UNAVAILABLE", broken
    else:
        # Claude Code shows an error result's text (flagged is_error); Gemini CLI its text alone.
        assert typo.count("Unknown tool 'notes__raed_note'") == 1 and "TOOL_NOT_FOUND" not in typo, typo
        assert "SERVER_UNAVAILABLE" not in broken, broken
    if client == "claude":
        assert run.results["typo"].is_error and run.results["broken"].is_error, run.describe()


@pytest.mark.parametrize("approvals", ("defaults", "approved"))
@pytest.mark.parametrize("client", CLIENT_NAMES)
def test_a_destructive_tool_is_not_run_without_the_user_s_say(client: str, approvals: str, runs: Runs) -> None:
    """With the client's defaults, and with the search tools allowed (find_tools and the read
    route): the read route refuses it (the proxy's answer, once), call_tool is the client's to ask
    about (refused or not offered headless), and so is the tool by its own name."""
    run = runs[client, approvals]
    assert not any(call["tool"] == "delete_notes" for call in run.ran), run.describe()
    if OUTCOMES[client, approvals]["sneak"] == "answered":  # where the client lets the read route run
        assert run.seen(NOT_READ_ONLY_MARK) == 1, run.describe()
        assert f"call it with {CALL} instead" in run.text("sneak"), run.describe()
    assert agrees(run.outcomes(), OUTCOMES[client, approvals]), run.describe()


@pytest.mark.parametrize("client", CLIENT_NAMES)
def test_default_approvals_are_measured(client: str, runs: Runs) -> None:
    """Codex runs what says it only reads: find_tools and the read route, so a read-only tool found
    by search runs and a typo and a broken server get the proxy's answer. Claude Code asks for every
    MCP tool, read-only ones too (headless: refused, nothing reaches the proxy); Gemini CLI offers
    no MCP tool headless unless a policy rule allows it."""
    run = runs[client, "defaults"]
    if client == "codex":
        assert [name.rpartition(".")[2] for name in run.names()][:5] == [FIND, READ, READ, READ, READ]
        assert run.ran == [{"tool": "read_note", "arguments": {"title": "groceries"}}], run.describe()
    else:
        assert run.ran == [], run.describe()
    assert agrees(run.outcomes(), OUTCOMES[client, "defaults"]), run.describe()


@pytest.mark.parametrize("client", CLIENT_NAMES)
def test_call_tool_allowed_reaches_what_may_destroy(client: str, runs: Runs) -> None:
    """Allowing call_tool allows what it reaches (its annotations say it may destroy); the tool's
    own name is still approved on its own where the client lists it (Claude Code: refused)."""
    run = runs[client, "call_tool"]
    assert {"tool": "delete_notes", "arguments": {"folder": "work"}} in run.ran, run.describe()
    assert agrees(run.outcomes(), OUTCOMES[client, "call_tool"]), run.describe()


@pytest.mark.parametrize("client", CLIENT_NAMES)
def test_confirm_asks_the_user_where_the_client_can(client: str, runs: Runs) -> None:
    run = runs[client, "confirm"]
    assert agrees(run.outcomes(), OUTCOMES[client, "confirm"]), run.describe()
    deleted = any(call["tool"] == "delete_notes" for call in run.ran)
    if OUTCOMES[client, "confirm"]["destroy"] == "declined":
        assert not deleted, run.describe()
        assert run.text("destroy").count("did not approve running 'notes__delete_notes'") == 1, run.describe()
    else:
        assert deleted, run.describe()
