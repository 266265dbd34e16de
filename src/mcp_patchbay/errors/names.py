"""What the model is told when a name does not name a tool. Pure.

Every text says what happened, why, and what to do next, and stays under 500
characters however large the catalog: suggestions are capped at five, and the
"nothing is close" text names the servers with a few of their tools each (by the
exposed names the model can call), within a character budget.

Texts are built from the resolver they are given, which holds only what the caller may
see (``catalog.restricted``): a name the caller may not use answers exactly as a name
nothing ever had, with the same code and wording, naming nothing it cannot see.
"""

from __future__ import annotations

from collections.abc import Sequence

from mcp_patchbay.catalog.resolution import Resolution, Resolver
from mcp_patchbay.errors.tree import MAX_MODEL_TEXT, ClientError, Code


def _quoted(names: Sequence[str]) -> str:
    return ", ".join(f"'{n}'" for n in names)


def _shown(called: str, limit: int = 80) -> str:
    return called if len(called) <= limit else called[: limit - 1] + "…"


def unknown_name(
    resolution: Resolution, resolver: Resolver, *, kind: str = "tool", search_tool: str | None = None
) -> ClientError:
    """For kinds "unknown" and "ambiguous". ``search_tool`` (search mode's ``find_tools``) is
    named as the way to find the right tool when no name comes close."""
    called = _shown(resolution.called)
    code = Code.TOOL_NOT_FOUND if kind == "tool" else Code.PROMPT_NOT_FOUND
    if resolution.kind == "ambiguous" and len(resolution.candidates) == 1:
        # The other match is a tool the config turns off (never run in its place).
        only = resolution.candidates[0]
        return ClientError(
            Code.TOOL_AMBIGUOUS if kind == "tool" else code,
            f"The {kind} name '{called}' matches '{only}' and also a {kind} turned off in the proxy's "
            f"configuration. Nothing was run. If you mean '{only}', call it by that exact name.",
            suggestions=resolution.candidates,
        )
    if resolution.kind == "ambiguous":
        return ClientError(
            Code.TOOL_AMBIGUOUS if kind == "tool" else code,
            f"The {kind} name '{called}' matches several {kind}s: {_quoted(resolution.candidates[:5])}. "
            f"Nothing was run. Call the one you mean by its exact name.",
            suggestions=resolution.candidates[:5],
        )
    suggestions = resolution.candidates[:5]
    search = f" If none fits, search with {search_tool}." if search_tool is not None else ""
    if len(suggestions) == 1:
        return ClientError(
            code,
            f"Unknown {kind} '{called}'. Did you mean '{suggestions[0]}'? Call it with its exact name.{search}",
            suggestions=suggestions,
        )
    if suggestions:
        return ClientError(
            code,
            f"Unknown {kind} '{called}'. Did you mean one of: {_quoted(suggestions)}? "
            f"Call the right one with its exact name.{search}",
            suggestions=suggestions,
        )
    head = f"Unknown {kind} '{called}', and no {kind} has a similar name. "
    tail = (
        f" Search with {search_tool} for what you need to do, then call a tool it finds."
        if search_tool is not None
        else f" List the {kind}s again to see every exact name."
    )
    return ClientError(code, head + _overview(resolver, MAX_MODEL_TEXT - len(head) - len(tail)) + tail)


def _overview(resolver: Resolver, budget: int) -> str:
    """'Servers: fs (fs__read_file, fs__write_file, …), github (…).' within ``budget``
    characters: the exposed names, which the model can call as they are."""
    servers = resolver.servers()
    if not servers:
        return "No servers are serving tools right now."
    text = "Servers:"
    for index, server in enumerate(servers):
        items = [entry.exposed for entry in resolver.entries_of(server)[:3]]
        more = ", …" if len(resolver.entries_of(server)) > 3 else ""
        piece = f" {server} ({', '.join(items)}{more})" + ("," if index < len(servers) - 1 else ".")
        if len(text) + len(piece) > budget - 6:
            return text.rstrip(",") + " and more."
        text += piece
    return text


def hidden_tool(resolution: Resolution) -> ClientError:
    return ClientError(
        Code.TOOL_NOT_AVAILABLE,
        f"This tool is not available: '{_shown(resolution.called)}' is turned off in the proxy's configuration. "
        "Use another tool, or tell the user it would need to be allowed.",
        server=resolution.server,
    )
