"""What the page does (POST): approve a held definition, turn a server or a tool off or on, sign
in. Each checks its form token (``Ui.form``), acts, writes a row in the activity log, and answers
303 to the page it came from with a note saying what happened (htmx follows it and swaps the
page in; with scripts off the browser does)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from mcp_patchbay.ui.guard import UiRefused

if TYPE_CHECKING:
    from mcp_patchbay.ui.app import Ui
    from mcp_patchbay.ui.signin import Started
__all__ = ["approve", "sign_in", "turn_server", "turn_tool"]

logger = logging.getLogger(__name__)

BACK = {"overview": "/", "held": "/held", "tools": "/tools", "log": "/log"}


def _config(ui: Ui, fields: dict[str, str]) -> Path:
    path = ui.sources.configs().get(fields.get("config", ""))
    if path is None:
        raise UiRefused(400, "no such config here: load the page again")
    return path


def _back(fields: dict[str, str]) -> str:
    return BACK.get(fields.get("back", ""), "/")


def _query(fields: dict[str, str]) -> dict[str, str]:
    """What the page it came from showed (the tools page's proxy and query), kept across the action."""
    return {key: fields[key] for key in ("proxy", "q") if fields.get(key)}


async def approve(ui: Ui, request: Request) -> Response:
    from mcp_patchbay.trust.store import PinsUnreadable
    from mcp_patchbay.ui.held import approve_exactly

    fields = await ui.form(request)
    path = _config(ui, fields)
    server, kind, name, fingerprint = (fields.get(k, "") for k in ("server", "kind", "name", "fingerprint"))
    who = request.state.ui_who
    try:
        outcome = approve_exactly(path, server, kind, name, fingerprint=fingerprint)
    except (PinsUnreadable, TimeoutError, OSError) as exc:
        ui.sources.log.record("ui_action", client=who, outcome="error", detail=f"approve {kind} {name}: {exc}")
        return ui.after_action("/held", "error", f"Nothing was approved: {exc}")
    short = fingerprint[:8]
    if outcome.outcome == "approved":
        ui.sources.log.record(
            "approved",
            client=who,
            server=server,
            exposed=name,
            outcome="ok",
            detail=f"approved {kind} '{name}' of '{server}', fingerprint {short}, from the page",
        )
        return ui.after_action(
            "/held",
            "ok",
            f"Approved {kind} '{name}' of '{server}' (fingerprint {short}). The proxies serving {path} list it "
            "within their trust_poll (2 s by default).",
        )
    if outcome.outcome == "moved":
        now = (outcome.now_fingerprint or "")[:8]
        ui.sources.log.record(
            "ui_action",
            client=who,
            server=server,
            exposed=name,
            outcome="refused",
            detail=f"approve {kind} '{name}': it changed again ({short} shown, {now} held now)",
        )
        return ui.after_action(
            "/held",
            "error",
            f"Not approved: the server changed {kind} '{name}' again after this page showed it "
            f"(fingerprint {short}; {now} is held now). Read the new diff below before approving it.",
        )
    return ui.after_action("/held", "error", f"Nothing to approve: {kind} '{name}' of '{server}' is no longer held.")


async def _edit(ui: Ui, request: Request, fields: dict[str, str], change: object, what: str) -> Response:
    from mcp_patchbay.ui.config_edit import EditRefused, apply

    path = _config(ui, fields)
    who = request.state.ui_who
    server = fields.get("server", "")
    try:
        edited = apply(path, change)  # pyright: ignore[reportArgumentType]
    except EditRefused as exc:
        ui.sources.log.record("ui_action", client=who, server=server, outcome="refused", detail=f"{what}: {exc}")
        return ui.after_action(_back(fields), "error", f"Not changed: {exc}", **_query(fields))
    except OSError as exc:
        ui.sources.log.record("ui_action", client=who, server=server, outcome="error", detail=f"{what}: {exc}")
        return ui.after_action(_back(fields), "error", f"The config could not be written: {exc}", **_query(fields))
    ui.sources.log.record(
        "ui_action", client=who, server=server, exposed=fields.get("tool") or None, outcome="ok", detail=edited.said
    )
    said = edited.said[0].upper() + edited.said[1:]
    if edited.backup is not None:
        said += f" in {path} (backup: {edited.backup.name}); the running proxies reload it."
    return ui.after_action(_back(fields), "ok", said, **_query(fields))


async def turn_server(ui: Ui, request: Request) -> Response:
    from mcp_patchbay.ui.config_edit import turn_server as change

    fields = await ui.form(request)
    on = fields.get("on") == "1"
    server = fields.get("server", "")
    return await _edit(ui, request, fields, change(server, on), f"turn server '{server}' {'on' if on else 'off'}")


async def turn_tool(ui: Ui, request: Request) -> Response:
    from mcp_patchbay.ui.config_edit import turn_tool as change

    fields = await ui.form(request)
    on = fields.get("on") == "1"
    server, tool = fields.get("server", ""), fields.get("tool", "")
    return await _edit(ui, request, fields, change(server, tool, on), f"turn tool '{tool}' of '{server}'")


async def sign_in(ui: Ui, request: Request) -> Response:
    from mcp_patchbay.config import ConfigError, RemoteSpec, load_config

    fields = await ui.form(request)
    who = request.state.ui_who
    if ui.sources.replica:
        return ui.after_action(
            "/", "error", "Sign in from the gateway's host: mcp-patchbay login SERVER (its browser must reach it)."
        )
    path = _config(ui, fields)
    server = fields.get("server", "")
    try:
        config = load_config(path)
    except ConfigError as exc:
        return ui.after_action("/", "error", f"The config cannot be used: {exc}")
    entry = next((e for e in config.servers if e.name == server), None)
    spec = entry.spec if entry is not None else None
    if not isinstance(spec, RemoteSpec) or spec.oauth is False:
        return ui.after_action(
            "/", "error", f"Server '{server}' does not sign in (it is not a remote server with OAuth)."
        )

    def ended(name: str, started: Started) -> None:
        outcome = "ok" if started.signed_in else "error" if started.failure else "ok"
        said = started.failure or ("signed in" if started.signed_in else "the server did not ask for a sign-in")
        ui.sources.log.record("ui_action", client=who, server=name, outcome=outcome, detail=f"sign in: {said}")

    ui.sources.log.record("ui_action", client=who, server=server, outcome="started", detail="sign in started")
    started = await ui.signins.start(str(path), server, spec, ended)
    if started.url is not None and not started.done:
        return RedirectResponse(started.url, status_code=303)  # to the authorization page; it comes back to us
    if started.failure:
        return ui.after_action("/", "error", f"Signing in to '{server}' failed: {started.failure}")
    if started.signed_in or started.done:
        return ui.after_action("/", "ok", f"Signed in to '{server}': the proxies serving it connect within 2 s.")
    return ui.after_action("/", "error", f"Signing in to '{server}' did not get as far as its page: try again.")
