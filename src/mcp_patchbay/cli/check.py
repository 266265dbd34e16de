"""``check``: connect to every upstream once and report, one line per server (or ``--json``),
with what the client would list (``session.exposure``) and the tool names too long for a known client
(``catalog.client_quirks``). Exit status 1 when a server is not ready. With ``--profile`` the config is
that profile's share (``config.profiles``): its servers, its tools, its listing cost.

Lazy servers (``"start": "lazy"``) are started too: it is a check, and their listing is then
kept (``upstreams.listing_cache``), so the next start lists them without starting any. The report says
which are lazy.

Overrides that do not fit what their server listed (a tool it lacks, an argument its schema
does not take, a value it refuses: ``catalog.remarks``) are listed with their keys; each was
skipped alone, so they do not change the exit status.

What the proxy holds back until the user approves it (``trust``: a definition changed since it
was approved, a new one under ``new_tools: "hold"``, one the scan flagged) is listed after the
servers, each as a diff of the approved definition against the new one, with the scan's
sentences and the command that approves it (``held`` in ``--json``); anything held makes the exit
status 1, as a server not ready does: the proxy does not serve all the config asks for.
What it serves although the scan flagged it (``patchbay.scan: "warn"``) is listed after that, each
with the scan's sentences (``flagged`` in ``--json``); it does not change the exit status.

The PROBLEM column is for the person who runs it (``upstreams.diagnosis``: which command
was not found and where it was looked for, which URL refused); ``--json`` gives both that
(``problem``) and what the model is told (``reason``)."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from mcp_patchbay.cli.options import ASSUMED_REGISTERED_AS

if TYPE_CHECKING:
    from mcp_patchbay.config import Config
    from mcp_patchbay.trust.decide import Flagged, Held
    from mcp_patchbay.upstreams.transports import Connector
    from mcp_patchbay.upstreams.upstream import State


def name_warnings(tool_names: list[str], registered_as: str) -> list[dict[str, Any]]:
    """The exposed names some known client cannot take whole (``catalog.client_quirks.over_limits``), as rows."""
    from mcp_patchbay.catalog.client_quirks import over_limits

    return [
        {
            "tool": o.exposed,
            "client": o.client,
            "sent_as": o.sent,
            "length": o.length,
            "limit": o.limit,
            "consequence": o.consequence,
        }
        for o in over_limits(tool_names, registered_as)
    ]


# Long on purpose: the report's steps in the order it prints them.
async def run_check(  # noqa: PLR0915
    config: Config, as_json: bool, registered_as: str | None = None, *, connector: Connector | None = None
) -> int:
    """The report, printed; the exit status. ``connector``: the tests' in-memory upstreams."""
    import anyio

    from mcp_patchbay.upstreams.diagnosis import of_upstream
    from mcp_patchbay.upstreams.supervisor import Supervisor
    from mcp_patchbay.upstreams.upstream import State

    supervisor = Supervisor(config, start_all=True, connector=connector)
    started = time.monotonic()
    rows: list[dict[str, Any]] = []
    states: dict[str, State] = {}
    """Each server's state when the report was taken (the rows spell it as the status does)."""
    held: list[dict[str, Any]] = []
    flagged: list[dict[str, Any]] = []
    async with anyio.create_task_group() as tg:
        await tg.start(supervisor.run)
        with anyio.move_on_after(config.settings.connect_timeout + 5):
            for upstream in list(supervisor.upstreams.values()):
                await upstream.first_attempt_done.wait()
            await supervisor.reviewed()  # each listing's verdict: what is held, what is served
        for name, upstream in supervisor.upstreams.items():
            status = upstream.status()
            status["name"] = name
            if upstream.state is State.STARTING:
                status["reason"] = "did not answer before the check gave up"
            if upstream.state is State.SIGN_IN and upstream.gate is not None:
                status["reason"] = f"run: {upstream.gate.login_command}"
            found = of_upstream(upstream)
            status["problem"] = (
                "" if found.state == "ready" else found.line() + (f"; {found.next}" if found.next else "")
            )
            status["origin"] = upstream.entry.spec.origin if upstream.entry.spec is not None else None
            states[name] = upstream.state
            rows.append(status)
        await supervisor.listing_cache.flush()  # the lazy servers' listings, for the next start
        held.extend(held_json(name, item) for name, items in supervisor.trust.holding().items() for item in items)
        flagged.extend(flagged_json(name, item) for name, items in supervisor.trust.flagged().items() for item in items)
        tg.cancel_scope.cancel()
    failed = [name for name, state in states.items() if state not in (State.READY, State.DISABLED)]
    assumed = registered_as is None
    registered_as = registered_as or ASSUMED_REGISTERED_AS
    exposure, listed = _exposure(config, supervisor)
    too_long = name_warnings(listed, registered_as)
    if as_json:
        names = {"registered_as": registered_as, "assumed": assumed, "too_long": too_long}
        document = {
            "profile": config.profile,
            "servers": rows,
            "tools": len(supervisor.catalog.tools),
            "names": names,
            "exposure": exposure,
            "overrides_skipped": [
                {"server": r.server, "key": r.key, "problem": r.sentence} for r in supervisor.catalog.remarks
            ],
            "held": held,
            "flagged": flagged,
        }
        print(json.dumps(document, indent=2))
    else:
        width = max([len(r["name"]) for r in rows] + [6])
        print(f"{'SERVER':<{width}}  {'TRANSPORT':<9}  {'STATE':<13}  {'TOOLS':>5}  {'READY IN':>8}  PROBLEM")
        for r in rows:
            ready = f"{r['ready_after_ms']} ms" if r["ready_after_ms"] is not None else "-"
            state = _state_label(states[r["name"]])
            print(
                f"{r['name']:<{width}}  {r['transport']:<9}  {state:<13}  {r['tools']:>5}  {ready:>8}  {r['problem']}"
            )
        total = len(supervisor.catalog.tools)
        print(
            f"\n{len(rows) - len(failed)} of {len(rows)} servers ok, {total} tools, "
            f"checked in {time.monotonic() - started:.1f}s ({config.path}"
            + (f", profile {config.profile!r})" if config.profile else ")")
        )
        lazy = [r["name"] for r in rows if r["start"] == "lazy"]
        if lazy:
            print(
                f"\nstarted when needed (lazy): {', '.join(lazy)}; started for this check, and their listing kept, "
                "so the proxy lists them without starting them"
            )
        origins = [(r["name"], r["origin"]) for r in rows if r["origin"]]
        if origins:
            print("\nwhere the servers came from (import):")
            for name, origin in origins:
                print(f"  {name:<{width}}  {origin}")
        _print_exposure(exposure)
        _print_skipped_overrides(supervisor.catalog.remarks, config)
        _print_name_warnings(too_long, registered_as, assumed, config)
        _print_held(held, config)
        _print_flagged(flagged)
    return 1 if failed or held else 0


HELD_WHY = {
    "changed": "its definition changed since it was approved",
    "new": 'it is new on a server whose definitions are pinned (patchbay.new_tools is "hold")',
    "flagged": "the scan found text aimed at the model in it",
}


def held_json(server: str, held: Held) -> dict[str, Any]:
    """One held definition as ``check`` reports it: why, the diff, the scan's sentences, the command."""
    from mcp_patchbay.trust.diff import definition_diff
    from mcp_patchbay.trust.wording import approve_command

    return {
        "server": server,
        "kind": held.kind,
        "name": held.name,
        "reason": held.reason,
        "why": HELD_WHY[held.reason],
        "diff": definition_diff(held.approved, held.definition),
        "findings": [finding.reported() for finding in held.findings],
        "approve": approve_command(server, held.kind, held.name, held.fingerprint),
    }


def flagged_json(server: str, flagged: Flagged) -> dict[str, Any]:
    """One definition served although the scan flagged it, as ``check`` reports it: the scan's sentences."""
    return {
        "server": server,
        "kind": flagged.kind,
        "name": flagged.name,
        "fingerprint": flagged.fingerprint,
        "findings": [finding.reported() for finding in flagged.findings],
    }


def _print_flagged(flagged: list[dict[str, Any]]) -> None:
    """What is served although the scan flagged it: each with the scan's sentences."""
    if not flagged:
        return
    from mcp_patchbay.trust.wording import printable

    print(f'\nflagged by the scan, served (patchbay.scan is "warn"; {len(flagged)}): read what it tells the model')
    for item in flagged:
        print(f"  {printable(item['server'])}: {item['kind']} '{printable(item['name'])}'")
        for finding in item["findings"]:
            print(f"    - {printable(finding['sentence'], 400)}")


def _print_held(held: list[dict[str, Any]], config: Config) -> None:
    """What the proxy holds back until approved: each with its diff, the scan's sentences and the command."""
    if not held:
        return
    from mcp_patchbay.trust.wording import printable

    print(f"\nheld back until you approve them ({len(held)}; not listed, not callable):")
    option = f" -c {config.path}"
    for item in held:
        print(f"  {printable(item['server'])}: {item['kind']} '{printable(item['name'])}': {item['why']}")
        for line in item["diff"].splitlines():
            print(f"      {printable(line, 400)}")
        for finding in item["findings"]:
            print(f"    - {printable(finding['sentence'], 400)}")
        print(f"    approve: {item['approve']}{option}")
    print(f"  see them again: mcp-patchbay trust --list{option}")


def _state_label(state: State) -> str:
    """A state as the report's STATE column says it: a server still trying after the check's
    wait has failed it."""
    from mcp_patchbay.upstreams.upstream import State

    if state in (State.RESTARTING, State.STARTING):
        return "failed"
    if state is State.SIGN_IN:
        return "needs sign-in"
    return state.value


def _exposure(config: Config, supervisor: Any) -> tuple[dict[str, Any], list[str]]:
    """Which listing this config gets (``patchbay.expose``) and what each would cost; the
    names the client would list in the mode used."""
    from mcp_patchbay.session.exposure import Exposure, described_servers, listing_cost, search_mode

    catalog = supervisor.catalog
    servers = described_servers(supervisor.upstreams)
    settings = config.settings
    listings = {
        mode: Exposure(settings.model_copy(update={"expose": mode})).listing(catalog, servers)
        for mode in ("all", "search")
    }
    used = "search" if search_mode(settings, len(catalog.tools)) else "all"
    exposure: dict[str, Any] = {"mode": used, "expose": settings.expose, "threshold": settings.search_threshold}
    for mode, tools in listings.items():
        chars, tokens = listing_cost(tools)
        exposure[mode] = {"tools": len(tools), "chars": chars, "tokens": tokens}
    return exposure, [tool.name for tool in listings[used]]


def _print_exposure(exposure: dict[str, Any]) -> None:
    why = {
        "all": "every tool is listed",
        "search": "the client lists find_tools and call_tool",
    }[exposure["mode"]]
    if exposure["expose"] == "auto":
        why += f' (expose "auto", search_threshold {exposure["threshold"]})'
    print(f"\nexposed as: {exposure['mode']} mode: {why}")
    for mode in ("all", "search"):
        cost = exposure[mode]
        print(
            f"  {mode + ' mode:':<13}{cost['tools']:>4} tools listed, {cost['chars']:>9,} characters, "
            f"~{cost['tokens']:,} tokens"
        )


def _print_skipped_overrides(remarks: list[Any], config: Config) -> None:
    """Overrides that do not fit what their server listed (``catalog.remarks``): each was skipped
    alone, the rest of the server served."""
    if not remarks:
        return
    print(f"\nwarning: {len(remarks)} override(s) skipped, not fitting what the server listed ({config.path}):")
    for remark in remarks:
        print(f"  {remark}")


def _print_name_warnings(too_long: list[dict[str, Any]], registered_as: str, assumed: bool, config: Config) -> None:
    if not too_long:
        return
    how = "assumed; pass --as NAME" if assumed else "as given"
    print(f"\nwarning: {len(too_long)} tool name(s) too long for a client, registered as {registered_as!r} ({how}):")
    for w in too_long:
        print(
            f"  {w['tool']}: {w['length']} characters in {w['client']} ({w['sent_as']}), "
            f"over its limit of {w['limit']}; {w['consequence']}"
        )
    if config.settings.registered_as != registered_as:
        print(
            f'  fix: set "registered_as": "{registered_as}" in the config\'s "patchbay" object (names are then '
            "shortened to fit), or register the proxy under a shorter name"
        )
    else:
        print("  fix: register the proxy under a shorter name (the names cannot be shortened enough)")
