"""``mcp-patchbay tools [-c CONFIG] [--server S] [QUERY] [--json] [--all]``: the proxy's tools from
the terminal, through the core that serves them.

It starts the servers as ``check`` does (``terminal.running``: a proxy with no client) and lists
the tools a client reaches, grouped by server, each server with its state in plain words (what
failed, where it was looked for, what to run next; ``upstreams.diagnosis``'s, as for ``check``);
with QUERY it searches them with ``find_tools``' own index and ranking
(``session.exposure.Exposure.index``). ``mcp-patchbay call ...`` is ``calling``'s; what both
share is ``terminal``'s.

Nothing heavier than argparse is imported before the command line has been read: a usage
mistake is answered at once.
"""

from __future__ import annotations

import shutil
import sys
from typing import TYPE_CHECKING, Any, cast

from mcp_patchbay.cli.terminal import (
    EXIT_FAILED,
    EXIT_OK,
    Parser,
    add_common,
    load,
    not_a_config,
    run_command,
    running,
    server_named,
    setup_logs,
)

if TYPE_CHECKING:
    from mcp_patchbay.config import Config
    from mcp_patchbay.session.proxy import Proxy
    from mcp_patchbay.upstreams.transports import Connector
__all__ = ["list_tools", "run", "tools_report"]


def run(command: str, argv: list[str]) -> int:
    """``mcp-patchbay tools ...`` (``cli.main`` dispatches it here)."""
    return run_command(command, _tools_main, argv)


# --- the command line ------------------------------------------------------------------------


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
