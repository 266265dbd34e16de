"""``tools`` and ``call``: the proxy's tools from the terminal, through the core that serves them.

``mcp-patchbay tools [-c CONFIG] [--server S] [QUERY] [--json] [--all]`` starts the servers as
``check`` does and lists the tools a client reaches, grouped by server, each server with its
state in plain words (what failed, where it was looked for, what to run next); with QUERY it
searches them with ``find_tools``' own index and ranking (``session.exposure.Exposure.index``).
``mcp-patchbay call ...`` is ``calling``'s.

Both build a ``server.Proxy`` with no client on it: its supervisor starts the upstreams at
once (there is no client to wait for, and nothing to ask one), and a call goes through
``calls.path.ToolPath.run`` exactly as a client's would. This module owns what both share:
the config's finding (``--config``, ``$PATCHBAY_CONFIG``, the default config), the running
proxy (``running``) and the one updating status line on a terminal (``StatusLine``); a
server's state as a person reads it is ``upstreams.diagnosis``'s, as for ``check``.

Nothing heavier than argparse is imported before the command line has been read: a usage
mistake is answered at once.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import AsyncGenerator, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, cast

from mcp_patchbay.cli.logs import StatusLine
from mcp_patchbay.cli.options import EXIT_CONFIG, UsageError, default_config_if_any, log_level

if TYPE_CHECKING:
    from mcp_patchbay.config import Config
    from mcp_patchbay.session.proxy import Proxy
    from mcp_patchbay.upstreams.transports import Connector
    from mcp_patchbay.upstreams.upstream import Upstream
__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_USAGE",
    "list_tools",
    "load",
    "run",
    "running",
]

EXIT_OK = 0
EXIT_FAILED = 1
"""``call``: the result is an ``isError`` one; ``tools``: a server failed (not ``Diagnosis.ok``), or nothing matched."""
EXIT_USAGE = EXIT_CONFIG
"""A usage or config mistake: nothing was started."""
QUIET_LEVEL = "CRITICAL"
"""stderr's log level unless ``--log-level`` (or ``$PATCHBAY_LOG_LEVEL``) asks for more: these
commands say what failed in their own words, and the log would say it again in the model's."""
STARTUP_GRACE = 5.0
"""Seconds past ``connect_timeout`` a server's first attempt is waited for (as ``check`` does)."""


# --- the command line ------------------------------------------------------------------------


class Parser(argparse.ArgumentParser):
    """argparse, with a mistake raised as ``UsageError`` (answered with exit status 2 by ``run``)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message}\n{self.format_usage().rstrip()}")


def add_common(parser: argparse.ArgumentParser) -> None:
    """The options ``tools`` and ``call`` share."""
    parser.add_argument(
        "--config",
        "-c",
        metavar="PATH",
        help="the patchbay config (default: $PATCHBAY_CONFIG, else the default config 'mcp-patchbay import' writes)",
    )
    parser.add_argument(
        "--profile",
        metavar="NAME",
        help="only the servers and tools of the config's profile NAME (default: $PATCHBAY_PROFILE)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")
    parser.add_argument(
        "--log-level",
        metavar="LEVEL",
        help="also show the proxy's log on stderr from this level (DEBUG, INFO, WARNING, ...; default: "
        "$PATCHBAY_LOG_LEVEL, else none)",
    )


def run(command: str, argv: list[str]) -> int:
    """``mcp-patchbay tools ...`` or ``mcp-patchbay call ...`` (``cli.main`` dispatches both here)."""
    try:
        if command == "call":
            from mcp_patchbay.cli import calling

            return calling.main(argv)
        return _tools_main(argv)
    except UsageError as exc:
        print(f"mcp-patchbay {command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    except KeyboardInterrupt:
        StatusLine.current().clear()
        print(f"mcp-patchbay {command}: interrupted", file=sys.stderr)
        return 130


def _tools_parser() -> Parser:
    parser = Parser(
        prog="mcp-patchbay tools",
        description="List the tools a client of the proxy reaches, grouped by server, with each server's state; "
        "with QUERY, search them as find_tools does (the same ranking).",
        epilog="Exit status: 0 when every server is ready or not running by the config's choice (disabled, lazy, "
        "stopped idle) and, with QUERY, something matched; 1 when a server failed or nothing matched; 2 for a "
        "usage or config mistake. "
        "Call a tool with: mcp-patchbay call NAME KEY=VALUE ...",
    )
    parser.add_argument("query", nargs="*", metavar="QUERY", help="what you need to do, in a few words")
    parser.add_argument("--server", "-s", metavar="NAME", help="only this server's tools")
    parser.add_argument(
        "--all",
        action="store_true",
        help="also the tools the config turns off (tools.allow/deny), and with QUERY up to 20 matches (not 5)",
    )
    add_common(parser)
    return parser


def _tools_main(argv: list[str]) -> int:
    args = _tools_parser().parse_intermixed_args(argv)
    query = " ".join(args.query).strip() or None
    not_a_config(args.query[:1], "tools")
    setup_logs(args.log_level)
    config = load(args.config, profile=args.profile)
    server = server_named(args.server, config) if args.server is not None else None
    import anyio

    return anyio.run(lambda: list_tools(config, query=query, server=server, as_json=args.json, show_all=args.all))


def not_a_config(words: Sequence[str], command: str) -> None:
    """Refuse a config file given where a word is expected: the config comes with ``--config``."""
    for word in words:
        if word.endswith(".json") and Path(word).expanduser().is_file():
            raise UsageError(f"the config comes with --config (or -c): mcp-patchbay {command} -c {word} ...")


def setup_logs(level: str | None, environ: Mapping[str, str] = os.environ) -> None:
    from mcp_patchbay.cli.logs import setup_logging

    setup_logging(log_level(level, environ) or QUIET_LEVEL, None)


# --- the config --------------------------------------------------------------------------------


def load(given: str | None, environ: Mapping[str, str] = os.environ, profile: str | None = None) -> Config:
    """The config named by ``--config``, else ``$PATCHBAY_CONFIG``, else the default config,
    narrowed to ``--profile`` (else ``$PATCHBAY_PROFILE``) when one is asked for; ``UsageError``
    saying every way to give one when there is none, or what is wrong with it."""
    from mcp_patchbay.cli.options import profile_option
    from mcp_patchbay.config import ConfigError, load_config

    if given:
        path, source = given, "--config"
    elif environ.get("PATCHBAY_CONFIG"):
        path, source = environ["PATCHBAY_CONFIG"], "$PATCHBAY_CONFIG"
    else:
        default = default_config_if_any()
        if default is None:
            from mcp_patchbay import places

            raise UsageError(
                "no config file. Name one with --config PATH (or -c PATH), or set PATCHBAY_CONFIG=PATH, or run "
                f"'mcp-patchbay import' to gather your MCP clients' servers into the default config "
                f"({places.default_config()}), which is read when no config is named."
            )
        path, source = default, "the default config"
    try:
        return load_config(Path(path).expanduser(), profile=profile_option(profile, environ))
    except ConfigError as exc:
        raise UsageError(f"the config ({source}) cannot be used: {exc}") from None


def server_named(given: str, config: Config) -> str:
    """The config's name for ``--server`` (case, ``-`` and ``_`` aside, as find_tools' ``server``)."""
    from mcp_patchbay.catalog.naming import normalize

    for entry in config.servers:
        if entry.name == given:
            return entry.name
    for entry in config.servers:
        if normalize(entry.name) == normalize(given):
            return entry.name
    names = ", ".join(entry.name for entry in config.servers) or "none"
    raise UsageError(f"no server is named '{given}' in {config.path}; its servers: {names}")


# --- the proxy, with no client ---------------------------------------------------------------


@asynccontextmanager
async def running(
    config: Config, *, only: Collection[str] | None = None, connector: Connector | None = None
) -> AsyncGenerator[Proxy]:
    """A ``Proxy`` on ``config`` (its servers named in ``only``, when given), yielded once each
    server it started has made its first attempt (or ``connect_timeout`` and a grace have
    passed, as ``check`` waits); everything stops when the block ends. ``connector``: the
    tests' in-memory upstreams."""
    import anyio

    from mcp_patchbay.session.proxy import Proxy

    if only is not None:
        config = replace(config, servers=tuple(entry for entry in config.servers if entry.name in only))
    proxy = Proxy(config, connector=connector)
    # No client to wait for before connecting: a terminal is no MCP client, and what an upstream
    # asks of one (sampling, elicitation, roots) is answered "not connected" at once.
    proxy.supervisor.wait_for_client = None
    # A run on part of the config (some servers, a profile) is no start to learn the catalog's
    # size from (start_memory).
    proxy.remembers_start = only is None and config.profile is None
    async with anyio.create_task_group() as tg:
        await tg.start(proxy.run)
        try:
            await first_attempts(proxy, list(proxy.supervisor.upstreams.values()))
            yield proxy
        finally:
            tg.cancel_scope.cancel()


async def first_attempts(proxy: Proxy, upstreams: Sequence[Upstream]) -> None:
    """Until each of ``upstreams`` made its first attempt, boundedly; on a terminal, the status
    line says which one is waited for."""
    import anyio

    status = StatusLine.current()
    try:
        with anyio.move_on_after(proxy.settings.connect_timeout + STARTUP_GRACE):
            for upstream in upstreams:
                if not upstream.first_attempt_done.is_set():
                    status.show(f"starting {upstream.name}...")
                    await upstream.first_attempt_done.wait()
            await proxy.supervisor.reviewed()  # each listing's verdict: what is held, what is served
    finally:
        status.clear()


async def start_the_rest(proxy: Proxy, config: Config) -> None:
    """Start every server of ``config`` that ``running(only=...)`` left out, and wait for them
    (and for a server that had failed: ``apply``, a reload, starts it again)."""
    before = {id(upstream) for upstream in proxy.supervisor.upstreams.values()}
    proxy.supervisor.apply(config)
    await first_attempts(proxy, [u for u in proxy.supervisor.upstreams.values() if id(u) not in before])


def _one_line(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- tools -----------------------------------------------------------------------------------


async def list_tools(
    config: Config,
    *,
    query: str | None = None,
    server: str | None = None,
    as_json: bool = False,
    show_all: bool = False,
    connector: Connector | None = None,
) -> int:
    """``mcp-patchbay tools``: print the listing (or a search's matches); the exit status."""
    # A search ranks over every server's tools, as find_tools does; one server's listing needs only it.
    only = {server} if server is not None and query is None else None
    async with running(config, only=only, connector=connector) as proxy:
        report = await tools_report(proxy, query=query, server=server, show_all=show_all, whole=only is None)
    if as_json:
        import json

        print(json.dumps(report, indent=2, ensure_ascii=False))
    elif query is None:
        _print_listing(report)
    else:
        _print_matches(report)
    ready = all(_ok(state) for state in report["servers"])
    return EXIT_OK if ready and (query is None or report["matches"]) else EXIT_FAILED


async def tools_report(
    proxy: Proxy, *, query: str | None = None, server: str | None = None, show_all: bool = False, whole: bool = True
) -> dict[str, Any]:
    """What ``tools`` prints, as JSON values: the servers' states, and each one's tools (or the
    matches of ``query``, ranked by find_tools' index over every server's tools). ``whole``:
    every server was started, so what a client lists (``mode``, ``listed``) can be told."""
    from mcp_patchbay.search import DEFAULT_LIMIT, MAX_LIMIT
    from mcp_patchbay.session.exposure import unavailable_notes
    from mcp_patchbay.upstreams.diagnosis import of_upstream

    view = proxy.views.view()
    catalog = view.catalog
    names = view.exposure.names
    upstreams = [u for name, u in proxy.supervisor.upstreams.items() if server is None or name == server]
    report: dict[str, Any] = {
        "config": str(proxy.config.path),
        "mode": ("search" if view.exposure.search_mode(catalog) else "all") if whole else None,
        "listed": [tool.name for tool in proxy.views.tools_listing(view)] if whole else None,
        "find_tools": names.find_tools,
        "call_tool": names.call_tool,
        "servers": [of_upstream(upstream, proxy.config.path).as_json() for upstream in upstreams],
    }
    rows = [_tool_row(catalog.by_exposed[tool.name]) for tool in catalog.tools]
    if query is not None:
        index = await view.exposure.index(catalog, view.servers)
        hits = index.search(query, limit=MAX_LIMIT if show_all else DEFAULT_LIMIT, server=server)
        by_name = {row["name"]: row for row in rows}
        report["query"] = query
        report["matches"] = [by_name[hit.tool.name] for hit in hits]
        report["unavailable"] = [
            {"server": note.server, "state": note.state, "match": round(note.match, 2)}
            for note in unavailable_notes(query, upstreams)
        ]
        return report
    holding = proxy.supervisor.trust.holding()
    held_pairs = {(server, item.name) for server, items in holding.items() for item in items if item.kind == "tool"}
    hidden = catalog.tool_resolver.hidden_pairs() if catalog.tool_resolver is not None else ()
    for state in report["servers"]:
        state["tools"] = [row for row in rows if row["server"] == state["name"]]
        held = [
            {"name": item.name, "kind": item.kind, "reason": item.reason} for item in holding.get(state["name"], ())
        ]
        if held:  # held back until the user approves them (trust): listed apart, never callable
            state["held"] = held
        if show_all:
            state["turned_off"] = sorted(
                tool for owner, tool in hidden if owner == state["name"] and (owner, tool) not in held_pairs
            )
    return report


def _ok(state: dict[str, Any]) -> bool:
    """A server's state as ``tools`` reports it, ``ok`` as ``upstreams.diagnosis`` says: serving, or not running
    by the config's choice (disabled, lazy and not needed yet, stopped idle)."""
    from mcp_patchbay.upstreams.diagnosis import Diagnosis

    return Diagnosis(state["name"], state["state"], state["label"]).ok


def _tool_row(tool: Any) -> dict[str, Any]:
    """One tool (a ``catalog.CatalogTool``) as ``tools`` shows it."""
    definition = tool.definition
    description = (definition.description or "").strip()
    required = definition.input_schema.get("required")
    return {
        "name": tool.exposed,
        "server": tool.server,
        "tool": tool.upstream_name,
        "description": description.splitlines()[0] if description else "",
        "required": [str(r) for r in cast("list[object]", required)] if isinstance(required, list) else [],
    }


_HELD = {"changed": "changed since approved", "new": "new, not approved yet", "flagged": "flagged by the scan"}
"""Why a definition is held, as a ``tools`` line says it."""


def _width() -> int:
    """A terminal's width; a pipe's lines are cut only at 200 characters of description."""
    return shutil.get_terminal_size().columns if sys.stdout.isatty() else 400


def _tool_line(row: dict[str, Any], name_width: int, width: int) -> str:
    needs = f"  [needs: {', '.join(row['required'])}]" if row["required"] else ""
    head = f"  {row['name']:<{name_width}}  "
    room = min(200, max(20, width - len(head) - len(needs) - 1))
    return head + _one_line(row["description"], room) + needs


def _print_state(state: dict[str, Any]) -> None:
    label = state["label"]
    if state["state"] == "ready":
        count = len(state.get("tools", ()))
        label += f", {count} tool{'s' if count != 1 else ''}" if "tools" in state else ""
    print(f"{state['name']}: {label}" + (f": {state['problem']}" if state["problem"] else ""))
    if state["next"]:
        print(f"  next: {state['next']}")


def _print_listing(report: dict[str, Any]) -> None:
    width = _width()
    rows = [row for state in report["servers"] for row in state["tools"]]
    name_width = min(48, max([len(row["name"]) for row in rows] + [4]))
    for state in report["servers"]:
        _print_state(state)
        for row in state["tools"]:
            print(_tool_line(row, name_width, width))
        for item in state.get("held", ()):
            print(f"  HELD {item['kind']} {item['name']} ({_HELD[item['reason']]}): mcp-patchbay trust --list")
        if state.get("turned_off"):
            print(f"  turned off in the config: {', '.join(state['turned_off'])}")
        print()
    servers = report["servers"]
    ready = sum(1 for state in servers if state["state"] == "ready")
    print(f"{ready} of {len(servers)} servers ready, {len(rows)} tools ({report['config']})")
    if report["mode"] == "all":
        print("A client lists every one of these tools.")
    elif report["mode"] == "search":
        print(
            f"A client lists {', '.join(report['listed'])} (search mode): the model finds these tools with "
            f"{report['find_tools']} and calls them with {report['call_tool']}."
        )
    print('Search: mcp-patchbay tools "what you need"    Call: mcp-patchbay call NAME KEY=VALUE ...')


def _print_matches(report: dict[str, Any]) -> None:
    matches: list[dict[str, Any]] = report["matches"]
    if matches:
        print(f'Best matches for "{report["query"]}", ranked as {report["find_tools"]} ranks them:')
        name_width = min(48, max(len(row["name"]) for row in matches))
        for row in matches:
            print(_tool_line(row, name_width, _width()))
    else:
        print(f'No tool matches "{report["query"]}". mcp-patchbay tools lists them all.')
    missing = [state for state in report["servers"] if not _ok(state)]
    if missing:
        print("\nNot searched (not ready):")
        for state in missing:
            print("  ", end="")
            _print_state(state)
    if matches:
        print(f"\nCall one: mcp-patchbay call {matches[0]['name']} KEY=VALUE ...")
