"""``mcp-patchbay call NAME [KEY=VALUE ...] [--args JSON] [--json] [--timeout S]``: one tool call
from the terminal, through ``calls.path.ToolPath.run`` as a client's call goes (name resolution,
argument checks, policies, and every failure as the same ``isError`` result).

Arguments: ``KEY=VALUE`` is JSON when the value parses as JSON (``count=3``, ``on=true``,
``filter={"a":1}``), else the text itself; ``KEY=@FILE`` reads the value from a file;
``--args '{...}'`` (or ``--args @FILE``) gives a JSON object, which ``KEY=VALUE`` overrides key by
key. Where the tool's inputSchema leaves no doubt, a ``KEY=VALUE`` is taken as the type it asks
for: a ``"string"`` property given ``42`` gets the text ``"42"`` as typed.

Which servers start: when a part of the name names one server of the config (``time`` in
``time__get_current_time``), that one first, and the others too unless the name is one of its
tools' exact names (a mistaken name is resolved, or answered with suggestions, among every
server's tools, as the proxy does); otherwise all of them.

What is printed: a text content as it is, images, audio and resources as a line saying their
type, size and MIME type, ``structuredContent`` as indented JSON when there is no text (all of
the ``CallToolResult`` as JSON with ``--json``). A mistaken name that resolves runs, and stderr
says which tool ran. Exit status 0 on success, 1 on an ``isError`` result (its text on stderr, in
the user's words for a name that names no tool), 2 on a usage or config mistake. Progress the
upstream reports is shown on a terminal, as one line rewritten in place.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from mcp_patchbay.bounded_read import ARGUMENTS_FILE_BYTES, read_text
from mcp_patchbay.cli.logs import StatusLine
from mcp_patchbay.cli.options import UsageError
from mcp_patchbay.cli.terminal import (
    EXIT_FAILED,
    EXIT_OK,
    Parser,
    add_common,
    load,
    not_a_config,
    run_command,
    running,
    setup_logs,
    start_the_rest,
)

if TYPE_CHECKING:
    from mcp_patchbay.catalog.merge import CatalogTool
    from mcp_patchbay.config import Config
    from mcp_patchbay.session.proxy import Proxy
    from mcp_patchbay.upstreams.diagnosis import Diagnosis
    from mcp_patchbay.upstreams.transports import Connector
__all__ = ["CallRequest", "call_tool", "coerce", "main", "parse_arguments", "run", "server_for", "show_result"]

ARGUMENTS_HELP = 'arguments are KEY=VALUE (text=hello count=3 tags=\'["a","b"]\'), or --args \'{"text": "hello"}\''
MAX_NAME_PARTS = 16
"""A called name's parts tried as server names (a real name has two or three)."""


@dataclass(frozen=True)
class CallRequest:
    """What the command line asks: the tool's name and arguments, and how to show the result."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict[str, Any])
    texts: dict[str, str] = field(default_factory=dict[str, str])
    """Each ``KEY=VALUE``'s value as typed (for the inputSchema's coercions)."""
    as_json: bool = False
    timeout: float | None = None
    """Seconds the call may take (without progress): the config's ``timeout`` for this call."""


def _parser() -> Parser:
    parser = Parser(
        prog="mcp-patchbay call",
        description="Call one tool through the proxy, as a client would: a mistaken name that resolves runs; "
        "the arguments are checked against the tool's inputSchema.",
        epilog="Examples: mcp-patchbay call time__get_current_time timezone=Europe/Paris; "
        "mcp-patchbay call memory__create_entities --args @entities.json. Exit status: 0 on success, 1 when "
        "the result is an error, 2 for a usage or config mistake.",
    )
    parser.add_argument("name", metavar="NAME", help="the tool's name, as 'mcp-patchbay tools' lists it")
    parser.add_argument(
        "pairs",
        nargs="*",
        metavar="KEY=VALUE",
        help="an argument: VALUE is JSON when it parses as JSON, else text; KEY=@FILE reads it from a file",
    )
    parser.add_argument("--args", metavar="JSON", help="the arguments as a JSON object (or @FILE); KEY=VALUE wins")
    parser.add_argument(
        "--timeout", type=_seconds, metavar="SECONDS", help="how long the call may take (default: the config's)"
    )
    add_common(parser)
    return parser


def _seconds(text: str) -> float:
    import argparse

    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds above 0, got {text!r}")
    return seconds


def run(command: str, argv: list[str]) -> int:
    """``mcp-patchbay call ...`` (``cli.main`` dispatches it here)."""
    return run_command(command, main, argv)


def main(argv: list[str]) -> int:
    args = _parser().parse_intermixed_args(argv)
    not_a_config([args.name], "call")
    arguments, texts = parse_arguments(args.pairs, args.args)
    setup_logs(args.log_level)
    config = load(args.config, profile=args.profile)
    request = CallRequest(args.name, arguments, texts, as_json=args.json, timeout=args.timeout)
    import anyio

    return anyio.run(call_tool, config, request)


# --- the arguments ---------------------------------------------------------------------------


def parse_arguments(pairs: Sequence[str], args_json: str | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    """(the arguments, each ``KEY=VALUE``'s text); ``UsageError`` for a malformed one."""
    arguments: dict[str, Any] = _args_object(args_json) if args_json is not None else {}
    texts: dict[str, str] = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key.strip():
            raise UsageError(f"expected KEY=VALUE, got {pair!r}: {ARGUMENTS_HELP}")
        key = key.strip()
        if key in texts:
            raise UsageError(f"'{key}' is given twice")
        if value.startswith("@"):
            value = _read(value[1:], f"{key}=@")
        texts[key] = value
        arguments[key] = _value(value)
    return arguments, texts


def _value(text: str) -> Any:
    """``text`` as JSON when it is JSON (NaN and Infinity are not), else ``text``."""

    def no_constant(name: str) -> Any:
        raise ValueError(name)

    try:
        return json.loads(text, parse_constant=no_constant)
    except ValueError:
        return text


def _read(path: str, what: str) -> str:
    if not path:
        raise UsageError(f"{what} needs a file's path after the @ (text that starts with @: use --args)")
    try:
        return read_text(Path(path).expanduser(), ARGUMENTS_FILE_BYTES, "an arguments file")
    except FileNotFoundError:
        raise UsageError(f"{what}{path}: no such file (text that starts with @: use --args)") from None
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UsageError(f"{what}{path}: cannot read the file: {why}") from None


def _args_object(text: str) -> dict[str, Any]:
    source = "--args"
    if text.startswith("@"):
        source, text = f"--args {text}", _read(text[1:], "--args @")
    try:
        value: object = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"{source} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}. "
            'Expected an object, like --args \'{"text": "hello"}\''
        ) from None
    if not isinstance(value, dict):
        got = _json_type(value)
        raise UsageError(
            f'{source} must be a JSON object, like \'{{"text": "hello"}}\'; got {"an" if got == "array" else "a"} {got}'
        )
    return cast("dict[str, Any]", value)


def _json_type(value: object) -> str:
    """``value``'s type as JSON Schema names it."""
    kinds: dict[type, str] = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array"}
    return kinds.get(type(value)) or ("null" if value is None else "object")


def coerce(arguments: Mapping[str, Any], texts: Mapping[str, str], schema: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments, each ``KEY=VALUE`` taken as text where its property asks for a string and
    not for what the value parsed as (``"type": "string"`` given ``42``: ``"42"``, as typed)."""
    coerced = dict(arguments)
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return coerced
    for key, text in texts.items():
        prop = _object(cast("dict[str, Any]", properties).get(key)) or {}
        declared: object = prop.get("type")
        allowed: set[object] = {declared} if isinstance(declared, str) else set()
        if isinstance(declared, list):
            allowed = set(cast("list[object]", declared))
        if "string" not in allowed:
            continue
        kind = _json_type(coerced[key])
        if kind not in allowed and not (kind == "integer" and "number" in allowed):
            coerced[key] = text
    return coerced


# --- which servers to start ------------------------------------------------------------------


def server_for(name: str, config: Config) -> str | None:
    """The one server of ``config`` a part of ``name`` names (``time`` in ``time__now`` or in
    ``mcp__patchbay__time__now``); None when none or several do: then every server starts."""
    from mcp_patchbay.catalog.naming import normalize, sanitize

    servers = {normalize(sanitize(entry.name)): entry.name for entry in config.servers}
    separator = config.settings.separator
    parts = name.split(separator)[:MAX_NAME_PARTS]
    found = {
        servers[key]
        for i in range(len(parts))
        for j in range(i + 1, len(parts) + 1)
        if (key := normalize(separator.join(parts[i:j]))) in servers
    }
    return found.pop() if len(found) == 1 else None


def with_timeout(config: Config, seconds: float) -> Config:
    """``config`` with every server's ``timeout`` ``seconds`` (and no per-tool ones)."""
    update: dict[str, Any] = {"timeout": seconds, "tool_timeouts": {}}
    entries = tuple(
        replace(entry, spec=entry.spec.model_copy(update=update)) if entry.spec is not None else entry
        for entry in config.servers
    )
    return replace(config, servers=entries)


# --- the call --------------------------------------------------------------------------------


async def call_tool(config: Config, request: CallRequest, *, connector: Connector | None = None) -> int:
    """Run the call and print its result; the exit status."""
    if request.timeout is not None:
        config = with_timeout(config, request.timeout)
    server = server_for(request.name, config)
    status = StatusLine.current()
    async with running(config, only={server} if server is not None else None, connector=connector) as proxy:
        if server is not None and request.name not in proxy.views.view().catalog.by_exposed:
            # Not one of its tools' exact names: resolved (or suggested for) among every server's
            # tools, as the proxy does; a loose rule could match another server's tool.
            await start_the_rest(proxy, config)
        target = _target(proxy, request.name)
        arguments = request.arguments
        if target is not None:
            arguments = coerce(arguments, request.texts, target.definition.input_schema)
            if target.exposed != request.name:
                print(
                    f"mcp-patchbay call: calling {target.exposed} ('{request.name}' is not its exact name)",
                    file=sys.stderr,
                )
        shown = target.exposed if target is not None else request.name

        async def progress(done: float, total: float | None, message: str | None) -> None:
            share = f"{done:g}/{total:g} ({done / total:.0%})" if total else f"{done:g}"
            status.show(f"{shown}: {share}" + (f" {message}" if message else ""))

        status.show(f"calling {shown}...")
        # named_as_data: an unknown name is answered with a result whatever unknown_tool says (a
        # JSON-RPC error is for a client's tools/call); the terminal reads the result's suggestions.
        try:
            result = await proxy.run_tool(request.name, arguments, progress, None, named_as_data=True)
        finally:
            status.clear()
        from mcp_patchbay.upstreams.diagnosis import of_upstream

        failed = _server_of(result)
        upstream = proxy.supervisor.upstreams.get(failed) if failed is not None else None
        state = of_upstream(upstream, config.path) if upstream is not None else None
    takes = f"{target.exposed} takes: {arguments_of(target.definition.input_schema)}" if target is not None else None
    return show_result(result, request, state=state, takes=takes)


def _target(proxy: Proxy, name: str) -> CatalogTool | None:
    """The tool ``name`` runs, as the proxy resolves it now (None: it runs none)."""
    catalog = proxy.views.view().catalog
    exact = catalog.by_exposed.get(name)
    if exact is not None or catalog.tool_resolver is None:
        return exact
    resolution = catalog.tool_resolver.resolve(name)
    if resolution.kind in ("exact", "resolved") and resolution.entry is not None:
        return catalog.by_exposed.get(resolution.entry.exposed)
    return None


def _server_of(result: Mapping[str, Any]) -> str | None:
    """The server a proxy's error result names, if any."""
    server = _error(result).get("server")
    return server if isinstance(server, str) else None


def _object(value: object) -> dict[str, Any] | None:
    return cast("dict[str, Any]", value) if isinstance(value, dict) else None


def _error(result: Mapping[str, Any]) -> dict[str, Any]:
    """The proxy's structured error in ``result`` (empty: none)."""
    return _object((_object(result.get("structuredContent")) or {}).get("error")) or {}


# --- the result ------------------------------------------------------------------------------


def show_result(
    result: Mapping[str, Any], request: CallRequest, *, state: Diagnosis | None = None, takes: str | None = None
) -> int:
    """Print ``result`` for a person (or as JSON); the exit status. For an error: ``state``, that
    of the server that failed; ``takes``, the arguments the tool takes."""
    blocks = [cast("dict[str, Any]", b) for b in result.get("content") or () if isinstance(b, dict)]
    texts = [str(b.get("text", "")) for b in blocks if b.get("type") == "text"]
    if result.get("isError"):
        if request.as_json:
            print(json.dumps(result, indent=2, ensure_ascii=False))
        print(_error_words(result, request.name, "\n".join(texts), state, takes), file=sys.stderr)
        return EXIT_FAILED
    if request.as_json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
        return EXIT_OK
    for block in blocks:
        print(block.get("text", "") if block.get("type") == "text" else describe(block))
    structured = result.get("structuredContent")
    if structured is not None and not texts:
        print(json.dumps(structured, indent=2, ensure_ascii=False))
    return EXIT_OK


def _error_words(result: Mapping[str, Any], name: str, text: str, state: Diagnosis | None, takes: str | None) -> str:
    """An error result, for the user: a name that names no tool in our words, with the proxy's
    suggestions; any other error as its text, with the failing server's state and what next."""
    error = _error(result)
    code = error.get("code")
    suggestions = [str(s) for s in error.get("suggestions") or ()]
    listing = 'mcp-patchbay tools lists every tool; mcp-patchbay tools "what you need" searches them.'
    if code == "TOOL_NOT_FOUND":
        close = f" Did you mean: {', '.join(suggestions)}?" if suggestions else " No tool has a similar name."
        return f"mcp-patchbay call: no tool is named '{name}'.{close}\n  {listing}"
    if code == "TOOL_AMBIGUOUS":
        return (
            f"mcp-patchbay call: '{name}' could be any of: {', '.join(suggestions)}. Nothing was run: call the one "
            "you mean by its name."
        )
    if code == "TOOL_NOT_AVAILABLE":
        return f"mcp-patchbay call: '{name}' is turned off in the config (its server's tools.allow/deny): nothing ran."
    words = text or "the tool reported an error, without a text"
    if code == "INVALID_ARGUMENTS" and takes is not None:
        words += f"\n  {takes}"
    if code == "TIMEOUT":
        words += "\n  give it longer with --timeout SECONDS"
    if state is not None and not state.ok:
        words += f"\n  {state.name}: {state.line()}" + (f"\n  next: {state.next}" if state.next else "")
    return words


def arguments_of(schema: Mapping[str, Any]) -> str:
    """A tool's arguments in one line: ``timezone: string, format?: string`` (``?``: optional)."""
    properties = _object(schema.get("properties")) or {}
    required = schema.get("required")
    needed = {str(r) for r in cast("list[object]", required)} if isinstance(required, list) else set[str]()
    shown: list[str] = []
    for key, value in properties.items():
        declared = (_object(value) or {}).get("type")
        kind = "/".join(map(str, cast("list[object]", declared))) if isinstance(declared, list) else declared
        shown.append(f"{key}{'' if key in needed else '?'}: {kind or 'any'}")
    return ", ".join(shown) or "no arguments"


def describe(block: Mapping[str, Any]) -> str:
    """A content block other than text, as one line: its type, size and MIME type."""
    kind = str(block.get("type", "unknown"))
    if kind in ("image", "audio"):
        return f"[{kind}: {block.get('mimeType', 'no MIME type')}, {_size(_decoded(block.get('data')))}]"
    if kind == "resource_link":
        mime = f", {block['mimeType']}" if block.get("mimeType") else ""
        return f"[resource link: {block.get('uri')}{mime}]"
    if kind == "resource":
        item = _object(block.get("resource")) or {}
        mime = f", {item['mimeType']}" if item.get("mimeType") else ""
        if "text" in item:
            size = f"{_size(len(str(item['text']).encode()))} of text"
        else:
            size = _size(_decoded(item.get("blob")))
        return f"[resource: {item.get('uri')}{mime}, {size}]"
    return f"[{kind} content]"


def _decoded(data: object) -> int:
    """The size of base64 ``data`` once decoded."""
    if not isinstance(data, str):
        return 0
    data = data.strip()
    return max(0, len(data) * 3 // 4 - data[-2:].count("="))


def _size(count: int) -> str:
    if count < 1000:
        return f"{count} bytes"
    if count < 1_000_000:
        return f"{count / 1000:.1f} kB"
    return f"{count / 1_000_000:.1f} MB"
