"""The gateway's ``/ui``: the same page, for the identities an access rule names ``"admin": true``.

Mounted by ``gateway.app`` only when its config has such a rule (and so a sign-in): anyone else
gets nothing there, a caller without credentials 401 (``WWW-Authenticate: Bearer``), a member
who is no admin 403. The caller is the bearer token's identity, checked on every request as
``/mcp`` checks it (the gateway's own middleware), so a browser reaches it through what adds the
header (a sign-in proxy in front, or a header extension): no cookie is set here. Host and Origin
are the gateway's own (``gateway.host_checks.security_settings``), and every POST carries a form token
bound to the identity. What it shows is this replica's: its proxy, its sessions, its data
folder's activity log; it signs in to nothing (the loopback redirect would land on the replica).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.routing import BaseRoute, Mount

from mcp_patchbay.ui.app import Admission, Ui
from mcp_patchbay.ui.guard import HostOrigin, UiRefused
from mcp_patchbay.ui.log import open_log
from mcp_patchbay.ui.sources import ReplicaSources

if TYPE_CHECKING:
    from mcp_patchbay.gateway.app import Gateway
__all__ = ["PATH", "has_admins", "ui_routes"]

PATH = "/ui"


def has_admins(gateway: Gateway) -> bool:
    """Whether the page is served at all: an access rule names admins, and the gateway signs in."""
    rules = gateway.settings.access or ()
    return gateway.auth is not None and any(rule.admin for rule in rules)


def ui_routes(gateway: Gateway) -> list[BaseRoute]:
    """``/ui`` for the gateway's admins; none when no rule names one."""
    if not has_admins(gateway):
        return []
    from mcp_patchbay.gateway.host_checks import security_settings

    security = security_settings(gateway.settings, gateway.host, gateway.port)
    checked = security.enable_dns_rebinding_protection
    host_origin = HostOrigin(
        hosts=tuple(security.allowed_hosts) if checked else (), origins=tuple(security.allowed_origins)
    )

    async def admit(request: Request) -> Admission:
        token = getattr(request.scope.get("user"), "access_token", None)
        if token is None:
            raise UiRefused(401, "refused: sign in (a bearer token) to open this page", {"WWW-Authenticate": "Bearer"})
        if not gateway.policy.is_admin(token):
            raise UiRefused(403, "refused: this page is for the gateway's admins")
        return Admission(str(getattr(token, "identity", None) or token.client_id))

    sources = ReplicaSources(gateway.proxy, open_log(), sessions=lambda: gateway.manager.sessions)
    ui = Ui(sources, host_origin=host_origin, admit=admit, base=PATH)
    return [Mount(PATH, app=ui.app())]
