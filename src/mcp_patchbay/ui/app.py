"""The page's ASGI application: its guard, its templates, its routes.

``Ui`` holds what every request needs (the sources, the guard's settings, the form tokens, the
notes shown after an action, the sign-ins in flight) and builds the Starlette app; the pages are
``pages``', the actions ``actions``'. Every request passes ``Ui.guard`` first (``guard`` says
what is checked): a refused one gets its status and one line of text, never a byte of the page.
Every answer says not to cache it, not to frame it, to send no referrer, and allows scripts,
styles and forms of the page's own origin only (Content-Security-Policy).
"""

from __future__ import annotations

import logging
import secrets
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_patchbay import __version__
from mcp_patchbay.ui.guard import COOKIE_PREFIX, FORM_FIELD, FORM_HEADER, FormTokens, HostOrigin, UiRefused, same_token
from mcp_patchbay.ui.signin import SignIns
from mcp_patchbay.ui.sources import Sources
from mcp_patchbay.ui.tools_search import ToolSearch

__all__ = ["Admission", "Ui"]

logger = logging.getLogger(__name__)

HERE = Path(__file__).parent
NOTES_KEPT = 64
SECURITY_HEADERS = [
    (b"cache-control", b"no-store"),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        b"form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
]


@dataclass(frozen=True)
class Admission:
    """Who a request is for (bound into its form tokens and written in the log)."""

    who: str
    set_cookie: bool = False


Admit = Callable[[Request], Awaitable[Admission]]
"""Who the caller is, or ``UiRefused``: the local token, or the gateway's admin check."""


class Ui:
    """The page over ``sources``, mounted at ``base`` ("" for ``mcp-patchbay ui``, "/ui" on the gateway)."""

    def __init__(
        self,
        sources: Sources,
        *,
        host_origin: HostOrigin,
        token: str | None = None,
        admit: Admit | None = None,
        base: str = "",
        port: int = 0,
        search: ToolSearch | None = None,
    ) -> None:
        if (token is None) == (admit is None):
            raise ValueError("give the page a token (mcp-patchbay ui) or an admission check (the gateway)")
        self.sources = sources
        self.host_origin = host_origin
        self.token = token
        self._admit = admit
        self.base = base
        self.cookie = f"{COOKIE_PREFIX}{port}"
        self.forms = FormTokens()
        self.search = search or ToolSearch()
        self.signins = SignIns()
        self._notes: OrderedDict[str, tuple[str, str]] = OrderedDict()
        from jinja2 import Environment, FileSystemLoader, select_autoescape

        self.templates = Environment(
            loader=FileSystemLoader(HERE / "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
            trim_blocks=True,
            lstrip_blocks=True,
        )

    # --- answering ----------------------------------------------------------------------

    def render(self, request: Request, template: str, **values: Any) -> HTMLResponse:
        who = request.state.ui_who
        page = self.templates.get_template(template).render(
            base=self.base,
            form_token=self.forms.issue(who),
            replica=self.sources.replica,
            version=__version__,
            request_path=request.url.path,
            note=self._notes.get(request.query_params.get("note", "")),
            **values,
        )
        return HTMLResponse(page)

    def after_action(self, page: str, kind: str, text: str, **query: str) -> RedirectResponse:
        """303 to ``page`` (its address under ``base``) showing ``text`` once it loads."""
        note = secrets.token_urlsafe(8)
        self._notes[note] = (kind, text)
        while len(self._notes) > NOTES_KEPT:
            self._notes.popitem(last=False)
        return RedirectResponse(f"{self.base}{page}?{urlencode({**query, 'note': note})}", status_code=303)

    async def form(self, request: Request) -> dict[str, str]:
        """A POST's fields, once its form token is checked (403 without a good one)."""
        data = await request.form(max_files=0, max_fields=32)
        fields = {key: value for key, value in data.items() if isinstance(value, str)}
        token = request.headers.get(FORM_HEADER) or fields.get(FORM_FIELD)
        if not self.forms.valid(token, request.state.ui_who):
            raise UiRefused(403, "refused: this form's token is missing or out of date; load the page again")
        return fields

    # --- the guard ----------------------------------------------------------------------

    async def admit(self, request: Request) -> Admission:
        if self._admit is not None:
            return await self._admit(request)
        assert self.token is not None
        if same_token(request.cookies.get(self.cookie), self.token):
            return Admission("mcp-patchbay ui")
        if same_token(request.query_params.get("token"), self.token) and request.method == "GET":
            return Admission("mcp-patchbay ui", set_cookie=True)
        raise UiRefused(401, "refused: open the address mcp-patchbay ui printed (it carries the page's token)")

    def guard(self, app: ASGIApp) -> ASGIApp:
        ui = self

        async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                return await app(scope, receive, send)

            async def secured(message: Message) -> None:
                if message["type"] == "http.response.start":
                    message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
                await send(message)

            request = Request(scope, receive)
            headers = {key.lower(): value for key, value in request.headers.items()}
            refused = ui.host_origin.refusal(request.method, request.url.scheme, headers)
            try:
                if refused is not None:
                    logger.info("ui: refused %s %s: %s", request.method, request.url.path, refused)
                    raise UiRefused(403, "refused: " + refused)
                admission = await ui.admit(request)
            except UiRefused as exc:
                return await PlainTextResponse(exc.text, exc.status, headers=exc.headers)(scope, receive, secured)
            if admission.set_cookie:  # the token leaves the address bar and the history
                query = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
                target = request.url.path + (f"?{urlencode(query)}" if query else "")
                answer = RedirectResponse(target, status_code=303)
                answer.set_cookie(
                    ui.cookie,
                    ui.token or "",
                    httponly=True,
                    samesite="strict",
                    path="/",
                    secure=request.url.scheme == "https",
                )
                return await answer(scope, receive, secured)
            scope.setdefault("state", {})["ui_who"] = admission.who
            await app(scope, receive, secured)

        return guarded

    # --- the application ----------------------------------------------------------------

    def app(self) -> ASGIApp:
        from mcp_patchbay.ui import actions, pages

        def page(handler: Callable[[Ui, Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
            async def endpoint(request: Request) -> Response:
                return await handler(self, request)

            return endpoint

        routes = [
            Route("/", page(pages.overview), methods=["GET"]),
            Route("/held", page(pages.held), methods=["GET"]),
            Route("/tools", page(pages.tools), methods=["GET"]),
            Route("/log", page(pages.log), methods=["GET"]),
            Route("/log/new", page(pages.log_new), methods=["GET"]),
            Route("/approve", page(actions.approve), methods=["POST"]),
            Route("/server", page(actions.turn_server), methods=["POST"]),
            Route("/tool", page(actions.turn_tool), methods=["POST"]),
            Route("/signin", page(actions.sign_in), methods=["POST"]),
            Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
        ]

        async def refused(request: Request, exc: Exception) -> Response:
            assert isinstance(exc, UiRefused)
            return PlainTextResponse(exc.text, exc.status, headers=exc.headers)

        return self.guard(Starlette(routes=routes, exception_handlers={UiRefused: refused}))
