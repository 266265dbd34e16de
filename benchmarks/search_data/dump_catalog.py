"""Regenerate catalog.json: the real tools/list of real MCP servers from npm and PyPI.

    .venv/bin/python benchmarks/search_data/dump_catalog.py [--install] [--root DIR] [--only NAME ...]

With ``--install``, each npm package is installed (``npm install --ignore-scripts``: no
browser downloads) into its own folder under ``--root`` (default ``.bench/search-servers``)
and each PyPI server into its own venv there (their pins conflict). Then every server is started over stdio with dummy
credentials (raw JSON-RPC, no SDK), its ``tools/list`` (all pages) and ``instructions`` are taken, and it is
stopped. A server that fails to start or list (some need the internet) is skipped and
reported. The result is ``{server: {"package", "instructions", "tools": [...]}}``, tools
as the server sent them (name, title, description, inputSchema, annotations).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, cast

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
OUT = HERE / "catalog.json"

# name: (npm package@version, extra args, dummy env)
NPM: dict[str, tuple[str, list[str], dict[str, str]]] = {
    "everything": ("@modelcontextprotocol/server-everything@2026.8.31", [], {}),
    "memory": ("@modelcontextprotocol/server-memory@2026.8.31", [], {}),
    "sequential-thinking": ("@modelcontextprotocol/server-sequential-thinking@2026.8.31", [], {}),
    "filesystem": ("@modelcontextprotocol/server-filesystem@2026.8.31", ["/tmp"], {}),
    "github": ("@modelcontextprotocol/server-github@2025.4.8", [], {"GITHUB_PERSONAL_ACCESS_TOKEN": "dummy"}),
    "puppeteer": ("@modelcontextprotocol/server-puppeteer@2025.5.12", [], {}),
    "brave-search": ("@modelcontextprotocol/server-brave-search@0.6.2", [], {"BRAVE_API_KEY": "dummy"}),
    "slack": ("@modelcontextprotocol/server-slack@2025.4.25", [], {"SLACK_BOT_TOKEN": "x", "SLACK_TEAM_ID": "T1"}),
    "gitlab": ("@modelcontextprotocol/server-gitlab@2025.4.25", [], {"GITLAB_PERSONAL_ACCESS_TOKEN": "dummy"}),
    "google-maps": ("@modelcontextprotocol/server-google-maps@0.6.2", [], {"GOOGLE_MAPS_API_KEY": "dummy"}),
    "postgres": ("@modelcontextprotocol/server-postgres@0.6.2", ["postgresql://localhost/none"], {}),
    "redis": ("@modelcontextprotocol/server-redis@2025.4.25", ["redis://127.0.0.1:1"], {}),
    "everart": ("@modelcontextprotocol/server-everart@0.6.2", [], {"EVERART_API_KEY": "dummy"}),
    "gdrive": ("@modelcontextprotocol/server-gdrive@2025.1.14", [], {}),
    "playwright": ("@playwright/mcp@0.0.83", [], {}),
    "notion": ("@notionhq/notion-mcp-server@2.5.2", [], {"NOTION_TOKEN": "dummy"}),
    "supabase": ("@supabase/mcp-server-supabase@0.13.0", [], {"SUPABASE_ACCESS_TOKEN": "dummy"}),
    "kubernetes": ("mcp-server-kubernetes@4.1.7", [], {}),
    "sentry": ("@sentry/mcp-server@0.39.0", ["--access-token=dummy"], {"SENTRY_ACCESS_TOKEN": "dummy"}),
    "firecrawl": ("firecrawl-mcp@3.26.0", [], {"FIRECRAWL_API_KEY": "fc-dummy"}),
    "context7": ("@upstash/context7-mcp@4.1.1", [], {}),
    "tavily": ("tavily-mcp@0.2.22", [], {"TAVILY_API_KEY": "tvly-dummy"}),
    "exa": ("exa-mcp-server@3.4.1", [], {"EXA_API_KEY": "dummy"}),
    "hubspot": ("@hubspot/mcp-server@0.4.0", [], {"PRIVATE_APP_ACCESS_TOKEN": "dummy"}),
    "mongodb": ("mongodb-mcp-server@3.0.4", [], {}),
    "heroku": ("@heroku/mcp-server@1.2.8", [], {"HEROKU_API_KEY": "dummy"}),
    "airtable": ("airtable-mcp-server@1.14.0", [], {"AIRTABLE_API_KEY": "patdummy.dummy"}),
    "desktop-commander": ("@wonderwhy-er/desktop-commander@0.2.52", [], {}),
    "stripe": ("@stripe/mcp@0.3.3", ["--tools=all", "--api-key=sk_test_dummy"], {}),
    "azure-devops": ("@azure-devops/mcp@2.10.0", ["contoso"], {}),
    "chart": ("@antv/mcp-server-chart@0.9.10", [], {}),
    "chrome-devtools": ("chrome-devtools-mcp@1.11.0", [], {}),
    "jira": (
        "@aashari/mcp-server-atlassian-jira@3.3.0",
        [],
        {"ATLASSIAN_SITE_NAME": "example", "ATLASSIAN_USER_EMAIL": "a@example.com", "ATLASSIAN_API_TOKEN": "dummy"},
    ),
}

# name: (PyPI requirement, module or console script, args, env)
PYPI: dict[str, tuple[str, str, list[str], dict[str, str]]] = {
    "time": ("mcp-server-time==2026.10.19", "mcp-server-time", [], {}),
    "fetch": ("mcp-server-fetch==2026.10.24", "mcp-server-fetch", [], {}),
    "git": ("mcp-server-git==2026.10.19", "mcp-server-git", ["--repository", str(ROOT)], {}),
    "sqlite": ("mcp-server-sqlite==2025.4.25", "mcp-server-sqlite", ["--db-path", "/tmp/search-bench.db"], {}),
    "duckduckgo": ("duckduckgo-mcp-server==0.7.0", "duckduckgo-mcp-server", [], {}),
    "arxiv": ("arxiv-mcp-server==0.8.2", "arxiv-mcp-server", ["--storage-path", "/tmp/arxiv-bench"], {}),
    "obsidian": ("mcp-obsidian==0.2.3", "mcp-obsidian", [], {"OBSIDIAN_API_KEY": "dummy"}),
    "calculator": ("mcp-server-calculator==0.2.1", "mcp-server-calculator", [], {}),
    "atlassian": (
        "mcp-atlassian==0.23.1",
        "mcp-atlassian",
        [],
        {
            "JIRA_URL": "https://example.atlassian.net",
            "JIRA_USERNAME": "a@example.com",
            "JIRA_API_TOKEN": "dummy",
            "CONFLUENCE_URL": "https://example.atlassian.net/wiki",
            "CONFLUENCE_USERNAME": "a@example.com",
            "CONFLUENCE_API_TOKEN": "dummy",
        },
    ),
}


def slug(spec: str) -> str:
    return spec.replace("/", "_").replace("@", "_")


def package_name(spec: str) -> str:
    return spec.rsplit("@", 1)[0] if spec.count("@") > (1 if spec.startswith("@") else 0) else spec


def npm_command(root: Path, spec: str) -> list[str]:
    """The package's bin, from its package.json (the first one, or the one named like it)."""
    folder = root / slug(spec) / "node_modules" / package_name(spec)
    manifest = json.loads((folder / "package.json").read_text())
    bins: Any = manifest.get("bin")
    if isinstance(bins, str):
        target = bins
    else:
        short = package_name(spec).rsplit("/", 1)[-1]
        target = bins.get(short) or next(iter(bins.values()))
    return ["node", str(folder / target)]


def install(root: Path) -> None:
    env = os.environ | {"PUPPETEER_SKIP_DOWNLOAD": "1", "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1"}
    for spec, _, _ in NPM.values():
        folder = root / slug(spec)
        if (folder / "node_modules").exists():
            continue
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "package.json").write_text('{"name": "x", "version": "1.0.0", "private": true}')
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--ignore-scripts", spec], cwd=folder, env=env, check=False
        )
    for name, (requirement, _, _, _) in PYPI.items():
        venv = root / f"py-{name}"  # one venv each: their pins conflict
        if not (venv / "bin" / "python").exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            subprocess.run([str(venv / "bin" / "pip"), "install", "-q", requirement], check=False)


def dump_one(command: list[str], env: dict[str, str], timeout: float) -> dict[str, Any]:
    """initialize, then tools/list page by page, in raw JSON-RPC: the SDK's client would reject
    tools whose inputSchema lacks ``"type"`` (server-gitlab's), and we want them as sent."""
    process = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=os.environ | env,
        cwd="/tmp",
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None
    replies: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [replies.put(line) for line in process.stdout or ()], daemon=True).start()
    deadline = time.monotonic() + timeout

    def request(number: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        message = {"jsonrpc": "2.0", "id": number, "method": method, "params": params}
        assert process.stdin is not None
        process.stdin.write(json.dumps(message) + "\n")
        process.stdin.flush()
        while True:
            line = replies.get(timeout=max(0.1, deadline - time.monotonic()))
            try:
                reply = json.loads(line)
            except json.JSONDecodeError:
                continue  # a server logging to stdout
            if isinstance(reply, dict) and reply.get("id") == number:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return cast("dict[str, Any]", reply["result"])

    try:
        init = request(
            1,
            "initialize",
            {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "dump", "version": "1"}},
        )
        process.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        process.stdin.flush()
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        number = 2
        while True:
            page = request(number, "tools/list", {} if cursor is None else {"cursor": cursor})
            tools.extend(page.get("tools", []))
            cursor = page.get("nextCursor")
            number += 1
            if not cursor:
                break
        return {"instructions": init.get("instructions"), "tools": tools}
    except queue.Empty:
        raise TimeoutError(f"no answer in {timeout} s (exit code {process.poll()})") from None
    finally:
        process.kill()
        process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=ROOT / ".bench" / "search-servers")
    parser.add_argument("--install", action="store_true")
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args()
    if args.install:
        install(args.root)
    catalog: dict[str, Any] = json.loads(OUT.read_text()) if args.only and OUT.exists() else {}
    jobs: dict[str, tuple[str, list[str], dict[str, str]]] = {}
    for name, (spec, extra, env) in NPM.items():
        try:
            jobs[name] = (spec, [*npm_command(args.root, spec), *extra], env)
        except (OSError, ValueError, StopIteration) as exc:
            print(f"skip {name}: not installed ({exc})", file=sys.stderr)
    for name, (requirement, script, extra, env) in PYPI.items():
        jobs[name] = (requirement, [str(args.root / f"py-{name}" / "bin" / script), *extra], env)
    for name, (spec, command, env) in jobs.items():
        if args.only and name not in args.only:
            continue
        try:
            dumped = dump_one(command, env, args.timeout)
        except BaseException as exc:  # any failure skips the server
            if isinstance(exc, KeyboardInterrupt):
                raise
            while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
                exc = exc.exceptions[0]
            print(f"skip {name}: {type(exc).__name__}: {str(exc)[:300]}", file=sys.stderr)
            continue
        if not dumped["tools"]:
            print(f"skip {name}: no tools", file=sys.stderr)
            continue
        catalog[name] = {"package": spec, **dumped}
        print(f"{name}: {len(dumped['tools'])} tools", file=sys.stderr)
    OUT.write_text(json.dumps(catalog, indent=1, ensure_ascii=False) + "\n")
    total = sum(len(s["tools"]) for s in catalog.values())
    print(f"wrote {OUT}: {len(catalog)} servers, {total} tools", file=sys.stderr)


if __name__ == "__main__":
    main()
