"""``mcp-patchbay trust``: what the proxy holds back, and approving it.

    mcp-patchbay trust [--list] [SERVER]        what is held (every server of the config, or one),
                                                each with a diff against what was approved and the
                                                scan's findings, and the command that approves it;
                                                then what is served although the scan flagged it
                                                (patchbay.scan: "warn"), with the findings
    mcp-patchbay trust SERVER                   approve everything held on SERVER
    mcp-patchbay trust SERVER --tool NAME --fingerprint FP
                                                approve one tool (--prompt NAME: one prompt), only
                                                if it is still the definition FP names (the one
                                                the person read: the printed commands carry it)
    mcp-patchbay trust --all                    approve everything held on every server of the config

The config comes as for ``tools`` (``--config``, ``$PATCHBAY_CONFIG``, the default config;
``--profile``); the pins are the ones its servers were pinned under (``trust.store``). Nothing is
started: approving writes the pins file, and the serving proxies, which watch it, serve what was
approved and tell their clients (``list_changed``).

Exit status: 0 done (or, listing, nothing is held); 1 nothing to approve, or (listing) something
is held, or the pins file cannot be used; 2 a usage or config mistake.
"""

from __future__ import annotations

import json
import sys
import time
from typing import TYPE_CHECKING, Any

from mcp_patchbay.cli.options import UsageError
from mcp_patchbay.cli.terminal import EXIT_FAILED, EXIT_OK, Parser, load, run_command, server_named

if TYPE_CHECKING:
    from mcp_patchbay.config import Config
    from mcp_patchbay.trust.decide import Flagged, Pending, ServerPins
    from mcp_patchbay.trust.store import PinStore
__all__ = ["main", "run"]


def _parser() -> Parser:
    parser = Parser(
        prog="mcp-patchbay trust",
        description="Show what the proxy holds back (tools and prompts whose definition changed since you "
        "approved it, new ones, or ones the scan flagged), and approve it.",
        epilog="Without SERVER, --tool or --all it lists what is held. Exit status: 0 done, or nothing held; 1 "
        "nothing to approve, something held (listing), or the pins file cannot be used; 2 a usage or config "
        "mistake. Serving proxies pick up an approval on their own and tell their clients.",
    )
    parser.add_argument("server", nargs="?", metavar="SERVER", help="the server, as the config names it")
    parser.add_argument("--tool", "-t", metavar="NAME", help="approve this tool of SERVER only")
    parser.add_argument("--prompt", metavar="NAME", help="approve this prompt of SERVER only")
    parser.add_argument(
        "--fingerprint",
        metavar="FP",
        help="with --tool or --prompt: approve it only if the held definition is still the one whose "
        "fingerprint starts with FP (as trust --list, check and the proxy's message print it)",
    )
    parser.add_argument("--all", action="store_true", help="approve everything held on every server of the config")
    parser.add_argument("--list", "-l", action="store_true", help="only show what is held (the default without SERVER)")
    parser.add_argument(
        "--config",
        "-c",
        metavar="PATH",
        help="the patchbay config (default: $PATCHBAY_CONFIG, else the default config 'mcp-patchbay import' writes)",
    )
    parser.add_argument("--profile", metavar="NAME", help="only the servers of the config's profile NAME")
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")
    return parser


def run(command: str, argv: list[str]) -> int:
    """``mcp-patchbay trust ...`` (``cli.main`` dispatches it here)."""
    return run_command(command, main, argv)


def main(argv: list[str], store: PinStore | None = None) -> int:
    from mcp_patchbay.trust.store import PinStore, PinsUnreadable

    args = _parser().parse_args(argv)
    if (args.tool or args.prompt) and not args.server:
        raise UsageError("--tool and --prompt need the server: mcp-patchbay trust SERVER --tool NAME")
    if args.fingerprint and not (args.tool or args.prompt):
        raise UsageError("--fingerprint names one held definition: give --tool NAME or --prompt NAME with it")
    if args.fingerprint is not None and not _is_hex(args.fingerprint):
        raise UsageError("--fingerprint takes the hex characters the listing printed (at least 4)")
    if args.tool and args.prompt:
        raise UsageError("approve a tool or a prompt, not both at once")
    if args.all and args.server:
        raise UsageError("--all approves every server's held definitions; name a SERVER or give --all, not both")
    if args.list and (args.all or args.tool or args.prompt):
        raise UsageError("--list only shows; leave it out to approve")
    config = load(args.config, profile=args.profile)
    server = server_named(args.server, config) if args.server else None
    store = store or PinStore()
    try:
        if args.list or not (server or args.all):
            return _list(config, store, server, as_json=args.json)
        return _approve(
            config,
            store,
            server,
            tool=args.tool,
            prompt=args.prompt,
            fingerprint=args.fingerprint or "",
            as_json=args.json,
        )
    except PinsUnreadable as exc:
        print(f"mcp-patchbay trust: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except TimeoutError:
        print(
            f"mcp-patchbay trust: the pins file {store.path} is locked by another process; try again", file=sys.stderr
        )
        return EXIT_FAILED


def _records(config: Config, store: PinStore, server: str | None) -> list[tuple[str, str, ServerPins | None]]:
    from mcp_patchbay.trust.store import entry_key

    records = store.load()
    names = [entry.name for entry in config.servers if server is None or entry.name == server]
    return [(name, key, records.get(key)) for name in names for key in [entry_key(config.path, name)]]


def _item_json(server: str, kind: str, name: str, pending: Pending, approved: dict[str, Any] | None) -> dict[str, Any]:
    from mcp_patchbay.trust.diff import definition_diff
    from mcp_patchbay.trust.wording import approve_command

    return {
        "server": server,
        "kind": kind,
        "name": name,
        "reason": pending.reason,
        "held": pending.held,
        "first_seen": pending.first_seen,
        "diff": definition_diff(approved, pending.definition),
        "findings": [finding.reported() for finding in pending.findings],
        "fingerprint": pending.fingerprint,
        "approve": approve_command(server, kind, name, pending.fingerprint),
    }


def _served_json(server: str, item: Flagged) -> dict[str, Any]:
    """A definition pinned and served although the scan flagged it (``patchbay.scan: "warn"``)."""
    return {
        "server": server,
        "kind": item.kind,
        "name": item.name,
        "reason": "flagged",
        "held": False,
        "first_seen": item.since,
        "diff": "",
        "findings": [finding.reported() for finding in item.findings],
        "fingerprint": item.fingerprint,
        "approve": "",
    }


def _list(config: Config, store: PinStore, server: str | None, *, as_json: bool) -> int:
    items: list[dict[str, Any]] = []
    served: list[dict[str, Any]] = []
    for name, _key, record in _records(config, store, server):
        if record is None:
            continue
        for kind in ("tool", "prompt"):
            for item_name, pending in sorted(record.pending[kind].items()):
                pin = record.approved[kind].get(item_name)
                items.append(_item_json(name, kind, item_name, pending, pin.definition if pin else None))
        served += [
            _served_json(name, item) for item in record.served_flagged() if item.name not in record.pending[item.kind]
        ]
    items.extend(served)
    held = [item for item in items if item["held"]]
    if as_json:
        print(json.dumps({"config": str(config.path), "pins": str(store.path), "items": items}, indent=2))
        return EXIT_FAILED if held else EXIT_OK
    where = f"server '{server}'" if server else "the servers of " + str(config.path)
    if not items:
        print(f"Nothing is held for {where}. (Pins: {store.path})")
        return EXIT_OK
    for item in items:
        _print_item(item)
    if held:
        count = f"{len(held)} definition{'s' if len(held) != 1 else ''}"
        again = f"mcp-patchbay trust {server}" if server else "mcp-patchbay trust --all"
        print(f"{count} held for {where}. Approve one with the command under it, or all with: {again}")
    return EXIT_FAILED if held else EXIT_OK


_WHY = {
    "changed": "its definition changed since it was approved",
    "new": 'it is new on a server whose definitions are pinned (patchbay.new_tools is "hold")',
    "flagged": "the scan found text aimed at the model in it",
}


def _print_item(item: dict[str, Any]) -> None:
    from mcp_patchbay.trust.wording import printable

    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(item["first_seen"]))
    state = "held" if item["held"] else "served with a warning"
    if not item["held"] and item["reason"] == "flagged":
        state = 'served although flagged (patchbay.scan is "warn")'
    name = printable(item["name"])
    print(f"{item['server']}: {item['kind']} '{name}' is {state}: {_WHY[item['reason']]} (seen {when})")
    if item["diff"]:
        for line in item["diff"].splitlines():
            print(f"    {printable(line, 1000)}")
    if item["findings"]:
        print("  The scan found:")
        for finding in item["findings"]:
            print(f"    - {printable(finding['sentence'], 1000)}")
    if item["held"]:
        print(f"  Approve: {item['approve']}")
    print()


def _approve(
    config: Config,
    store: PinStore,
    server: str | None,
    *,
    tool: str | None,
    prompt: str | None,
    fingerprint: str,
    as_json: bool,
) -> int:
    from mcp_patchbay.trust.decide import approve
    from mcp_patchbay.trust.wording import FINGERPRINT_CHARS, printable

    kind = "tool" if tool else "prompt" if prompt else None
    name = tool or prompt
    done: list[dict[str, Any]] = []
    moved: list[str] = []
    now = time.time()
    for server_name, key, record in _records(config, store, server):
        if record is None or not record.held():
            continue

        def change(current: ServerPins | None, server_name: str = server_name) -> ServerPins | None:
            if current is None:
                return None
            for held_kind, held_name, pending in current.held():
                if (kind is None or held_kind == kind) and (name is None or held_name == name):
                    if fingerprint and not pending.fingerprint.startswith(fingerprint.lower()):
                        moved.append(pending.fingerprint)
                        continue
                    pin = current.approved[held_kind].get(held_name)
                    before = pin.definition if pin else None
                    done.append(_item_json(server_name, held_kind, held_name, pending, before))
            return approve(current, kind, name, now=now, fingerprint=fingerprint)[0]

        store.update(key, change)
    from mcp_patchbay.activity.wiring import record_approvals

    record_approvals(config.settings, done)  # one "approved" row each in the activity log
    if as_json:
        print(json.dumps({"approved": done}, indent=2))
    for item in [] if as_json else done:
        print(
            f"Approved {item['kind']} '{printable(item['name'])}' of server '{item['server']}' "
            f"({_WHY[item['reason']]}), fingerprint {item['fingerprint'][:FINGERPRINT_CHARS]}."
        )
    if done:
        if not as_json:
            print("Proxies serving this config pick it up within seconds and tell their clients.")
        return EXIT_OK
    shown = printable(name or "")
    what = f"{kind} '{shown}' of server '{server}'" if name else f"server '{server}'" if server else "this config"
    if moved and not as_json:
        print(
            f"Not approved: the {what} changed again after the listing you read (it named {fingerprint}; "
            f"the server's definition now held is {moved[0][:FINGERPRINT_CHARS]}). Read the new one before "
            f"approving it: mcp-patchbay trust --list {server}",
            file=sys.stderr,
        )
    elif not as_json:
        print(f"Nothing is held for {what}: nothing to approve. See what is held: mcp-patchbay trust --list")
    return EXIT_FAILED


def _is_hex(text: str) -> bool:
    return len(text) >= 4 and all(char in "0123456789abcdefABCDEF" for char in text)
