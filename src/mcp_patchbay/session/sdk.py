"""Where the proxy's calls reach past the MCP SDK's public API: the raw send, what is offered, a connection.

A tool call crosses the proxy unchanged, so its upstream half needs no pydantic model of
the request or of the result. ``ClientSession.send_request`` offers no such path: it dumps
a request model and validates the result into one. ``send_raw`` does on the wire what
``send_request`` does (the session's per-era stamp, the ``Mcp-Name`` header, the
dispatcher) and nothing else, through two private attributes of ``ClientSession``:
``_stamp`` and ``_dispatcher``. ``OfferingSession`` replaces its ``_build_capabilities``, so an
upstream is offered what the proxy's client declared rather than what the SDK derives.

On the server side, ``connection_of`` finds the connection behind a request's session
(``ServerSession`` is made per request; its ``_connection`` is the client's session,
what the gateway keys per-client state by). The gateway's session manager, which reaches
past the SDK's too, is ``session.http_sessions``.

``sdk_internals_problem`` says what is missing should the SDK change shape under us;
``tests/test_sdk.py`` runs it, so an SDK upgrade that moves them fails the suite loudly
rather than slowing every call down. ``pyproject.toml`` bounds ``mcp`` to the minor
versions that test passed on. Should it happen at run time anyway, ``send_raw`` falls
back to the public ``send_request``.
"""

from __future__ import annotations

import inspect
from typing import Any, cast

import mcp_types as types
from mcp.client.session import ClientSession
from mcp.server.connection import Connection
from mcp.server.session import ServerSession
from mcp.shared.inbound import MCP_NAME_HEADER, encode_header_value

from mcp_patchbay.calls.deadlines import ProgressFn


def sdk_internals_problem(session: ClientSession) -> str | None:
    """What ``send_raw`` needs of an SDK session and does not find, or None."""
    dispatcher = getattr(session, "_dispatcher", None)
    if dispatcher is None:
        return "ClientSession has no _dispatcher"
    if not callable(getattr(session, "_stamp", None)):
        return "ClientSession has no callable _stamp"
    send = getattr(dispatcher, "send_raw_request", None)
    if send is None or not inspect.iscoroutinefunction(send):
        return f"{type(dispatcher).__name__} has no async send_raw_request"
    if list(inspect.signature(send).parameters)[:3] != ["method", "params", "opts"]:
        return f"send_raw_request takes {list(inspect.signature(send).parameters)}"
    build = getattr(session, "_build_capabilities", None)
    if build is None or list(inspect.signature(build).parameters) != ["version"]:
        return "ClientSession has no _build_capabilities(version) (OfferingSession replaces it)"
    return None


async def send_raw(
    session: ClientSession, method: str, params: dict[str, Any], on_progress: ProgressFn | None = None
) -> dict[str, Any]:
    """A request as JSON values, its result as JSON values (``tools/call`` and alike)."""
    dispatcher = getattr(session, "_dispatcher", None)
    stamp = getattr(session, "_stamp", None)
    if dispatcher is None or stamp is None:  # pragma: no cover - only if the SDK changes shape
        request = types.CallToolRequest(params=types.CallToolRequestParams.model_validate(params))
        model = await session.send_request(request, types.CallToolResult, progress_callback=cast(Any, on_progress))
        return model.model_dump(by_alias=True, mode="json", exclude_none=True)
    data: dict[str, Any] = {"method": method, "params": params}
    opts: dict[str, Any] = {}
    stamp(data, opts)
    name = params.get("name")
    if method == "tools/call" and isinstance(name, str):
        # What send_request sets for a name-bearing request, for HTTP routing by tool name.
        opts.setdefault("headers", {}).setdefault(MCP_NAME_HEADER, encode_header_value(name))
    if on_progress is not None:
        opts["on_progress"] = on_progress
    return await dispatcher.send_raw_request(method, data.get("params"), opts)


class OfferingSession(ClientSession):
    """The SDK's client session, declaring exactly the capabilities it is given (``offered``).

    The SDK builds its declaration from the callbacks it holds and always declares both
    elicitation modes and never ``tasks``; an upstream must see what the proxy's client
    declared (``capabilities``), so its private ``_build_capabilities`` is replaced."""

    def __init__(self, *args: Any, offered: types.ClientCapabilities | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._offered = offered

    def _build_capabilities(self, version: str) -> types.ClientCapabilities:
        if self._offered is None:
            return super()._build_capabilities(version)
        return self._offered


def connection_of(session: ServerSession) -> Connection:
    """The connection (one client session) a request's ``ServerSession`` belongs to."""
    return session._connection  # pyright: ignore[reportPrivateUsage]


__all__ = ["OfferingSession", "connection_of", "sdk_internals_problem", "send_raw"]
