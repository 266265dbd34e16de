"""What upstreams are offered of the client's capabilities, and what one client declared of a request.

An upstream's session is offered capabilities once, when it connects. On stdio that is the one
client's own declaration (``offered``: sampling with its ``tools`` and ``context``, elicitation
with its modes, roots, ``tasks`` and every ``extensions`` entry, such as the MCP Apps one with
its mime types), so an upstream sees the host it serves. ``experimental`` is not carried: what
it may bring has no way through the proxy.

On the gateway upstream sessions are shared by every member and start before anyone connects,
so they are offered what some member's client may answer (``GATEWAY_OFFER``): sampling with
tools, elicitation in both modes, and the MCP Apps extension (a server that sees it lists its
apps beside its tools; SEP-2133 asks a UI tool to answer meaningful text all the same, which is
what a member without apps reads). Not roots (a team's gateway has no one client's folders), not
sampling's ``context`` (soft-deprecated; a server without it simply sends none), not ``tasks``
(an upstream's ``tasks/get`` for a task a member's client holds comes after the call that made
it, when it can no longer be tied to that member), and no other extension (its settings are
a client's own, unknown until some member connects).

What an upstream then asks a client that did not declare it is answered for that client as the
specification says (``refusal``): a request of a capability it lacks, ``-32601``; an
elicitation in a mode it did not declare (the spec's ``-32602``) or a sampling request with
tools it did not declare (``-32602`` too, the code the spec gives a sampling request the client
cannot take).

Pure: values in, values out.
"""

from __future__ import annotations

from typing import Final

import mcp_types as types

__all__ = [
    "APPS_EXTENSION",
    "APP_MIME_TYPE",
    "GATEWAY_OFFER",
    "offered",
    "refusal",
    "takes_url_elicitation",
]

APPS_EXTENSION: Final = "io.modelcontextprotocol/ui"
"""The MCP Apps extension's identifier (the SDK's ``mcp.server.apps.EXTENSION_ID``)."""
APP_MIME_TYPE: Final = "text/html;profile=mcp-app"
"""The mime type of an MCP Apps resource (the SDK's ``mcp.server.apps.APP_MIME_TYPE``)."""

GATEWAY_OFFER: Final = types.ClientCapabilities(
    sampling=types.SamplingCapability(tools=types.SamplingToolsCapability()),
    elicitation=types.ElicitationCapability(
        form=types.FormElicitationCapability(), url=types.UrlElicitationCapability()
    ),
    extensions={APPS_EXTENSION: {"mimeTypes": [APP_MIME_TYPE]}},
)
"""What the gateway offers every upstream (the module docstring says why)."""

_NEEDS: Final = {
    "sampling/createMessage": "sampling",
    "elicitation/create": "elicitation",
    "roots/list": "roots",
}


def offered(declared: types.ClientCapabilities | None) -> types.ClientCapabilities | None:
    """What a stdio upstream is offered of the client's declaration: all of it but ``experimental``."""
    if declared is None:
        return None
    return declared.model_copy(update={"experimental": None})


def refusal(declared: types.ClientCapabilities | None, request: types.InputRequest) -> types.ErrorData | None:
    """The answer for a client that did not declare what ``request`` needs; None when it did."""
    method = request.method
    capability = _NEEDS[method]
    if declared is None or getattr(declared, capability) is None:
        return types.ErrorData(
            code=types.METHOD_NOT_FOUND,
            message=f"The client did not declare {capability}; it cannot answer {method}.",
        )
    match request:
        case types.CreateMessageRequest(params=params) if params.tools is not None or params.tool_choice is not None:
            if declared.sampling is None or declared.sampling.tools is None:
                return types.ErrorData(
                    code=types.INVALID_PARAMS,
                    message="The client did not declare sampling.tools; it cannot sample with tools.",
                )
        case types.ElicitRequest(params=params):
            mode = "url" if isinstance(params, types.ElicitRequestURLParams) else "form"
            if mode not in _elicitation_modes(declared.elicitation):
                return types.ErrorData(
                    code=types.INVALID_PARAMS,
                    message=f"The client did not declare elicitation.{mode}; it cannot answer a {mode} elicitation.",
                )
        case _:
            pass
    return None


def takes_url_elicitation(declared: types.ClientCapabilities | None) -> bool:
    """Whether the client declared URL elicitation (and so reads a ``-32042`` error's URLs)."""
    return declared is not None and "url" in _elicitation_modes(declared.elicitation)


def _elicitation_modes(elicitation: types.ElicitationCapability | None) -> frozenset[str]:
    if elicitation is None:
        return frozenset()
    modes = frozenset(mode for mode in ("form", "url") if getattr(elicitation, mode) is not None)
    return modes or frozenset({"form"})  # an empty object is form mode (the spec's backward compatibility)
