"""How well the trust scan (mcp_patchbay.trust.scan) tells poisoned definitions from real ones.

    .venv/bin/python -m benchmarks.scan [--verbose] [--json]
    .venv/bin/python -m benchmarks.scan --set benchmarks/scan_data/blind_set.json

Not a test (``tests/test_scan.py`` asserts the same two gates). Prints:

- caught: the poisoned definitions of ``tests/fixtures/poisoned_tools.json`` (built from the
  published attacks and their variants) flagged, each scanned as a tool of its ``server``
  beside that file's ``other_servers``; the gate is at least 95%. The ones missed are named.
- benign look-alikes of the same file flagged (the gate is none).
- false positives: the real tools of ``benchmarks/search_data/catalog.json`` flagged, each
  scanned beside every other server of the catalog; the gate is at most 1%. Each flag is
  printed with its findings' sentences, and the notes (long descriptions) are counted.
- the scan's CPU time over 1,000 real tools (the catalog, then its copy under other server
  names), context included.

``--set PATH`` reads any file of the poisoning set's format instead (``other_servers``,
``poisoned`` and ``benign``, each item with a ``family``) and prints only counts: how many of
each family's poisoned and benign definitions are held, and the totals. It names no
definition, so a held-out set (``benchmarks/scan_data/blind_set.json``) can be measured
without its contents being read.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from mcp_patchbay.trust.fingerprint import Definition, Kind, definition_of  # noqa: E402
from mcp_patchbay.trust.scan import Finding, ScanContext, Scanner  # noqa: E402

POISONED = ROOT / "tests" / "fixtures" / "poisoned_tools.json"
CATALOG = ROOT / "benchmarks" / "search_data" / "catalog.json"
CAUGHT_GATE = 0.95
FALSE_POSITIVE_GATE = 0.01
TIMED_TOOLS = 1000


def flagged(findings: Sequence[Finding]) -> bool:
    return any(finding.holds for finding in findings)


def scan_fixture_item(
    scanner: Scanner, item: Mapping[str, Any], other_servers: Mapping[str, Sequence[str]]
) -> tuple[Finding, ...]:
    """One definition of the poisoning set, scanned beside the set's other servers."""
    kind: Kind = "prompt" if item.get("kind") == "prompt" else "tool"
    definition = definition_of(item["definition"], kind)
    server = str(item["server"])
    listings: dict[str, list[Definition]] = {
        name: [{"name": tool} for tool in tools] for name, tools in other_servers.items()
    }
    listings[server] = [*listings.get(server, []), definition]
    return scanner.scan(definition, kind, server=server, context=ScanContext.of(listings))


def fixture_figures(scanner: Scanner, path: Path = POISONED) -> dict[str, Any]:
    """A set's figures: what was caught and flagged, overall and per family (``families``:
    family -> [held, of], for ``poisoned`` and ``benign``)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    others: dict[str, list[str]] = data.get("other_servers", {})
    missed: list[str] = []
    benign_flags: dict[str, list[str]] = {}
    families: dict[str, dict[str, list[int]]] = {"poisoned": {}, "benign": {}}
    for label in ("poisoned", "benign"):
        for item in data[label]:
            found = scan_fixture_item(scanner, item, others)
            held = flagged(found)
            counts = families[label].setdefault(str(item.get("family", "")), [0, 0])
            counts[0] += held
            counts[1] += 1
            if label == "poisoned" and not held:
                missed.append(item["id"])
            elif label == "benign" and held:
                benign_flags[item["id"]] = [f.sentence() for f in found if f.holds]
    total = len(data["poisoned"])
    return {
        "poisoned": total,
        "caught": total - len(missed),
        "caught_rate": (total - len(missed)) / total,
        "missed": missed,
        "benign": len(data["benign"]),
        "benign_flagged": benign_flags,
        "benign_flagged_rate": len(benign_flags) / max(len(data["benign"]), 1),
        "families": families,
    }


def counts_only(figures: Mapping[str, Any]) -> dict[str, Any]:
    """A set's figures without any definition's id or text: for a held-out set."""
    return {
        "poisoned": figures["poisoned"],
        "caught": figures["caught"],
        "caught_rate": figures["caught_rate"],
        "benign": figures["benign"],
        "benign_flagged": len(figures["benign_flagged"]),
        "benign_flagged_rate": figures["benign_flagged_rate"],
        "families": figures["families"],
    }


def print_families(figures: Mapping[str, Any]) -> None:
    for label in ("poisoned", "benign"):
        print(f"  {label}, held by family:")
        for family, (held, of) in sorted(figures["families"][label].items()):
            print(f"    {family or '(none)'}: {held}/{of}")


def catalog_listings(copies: int = 1) -> dict[str, list[Definition]]:
    catalog: dict[str, Any] = json.loads(CATALOG.read_text(encoding="utf-8"))
    listings: dict[str, list[Definition]] = {}
    for copy in range(copies):
        for server, entry in catalog.items():
            name = server if copy == 0 else f"{server}-{copy + 1}"
            listings[name] = [definition_of(tool, "tool") for tool in entry["tools"]]
    return listings


def catalog_figures(scanner: Scanner) -> dict[str, Any]:
    listings = catalog_listings()
    context = ScanContext.of(listings)
    flags: dict[str, list[str]] = {}
    notes = 0
    total = 0
    for server, definitions in listings.items():
        for definition in definitions:
            total += 1
            found = scanner.scan(definition, "tool", server=server, context=context)
            notes += any(not finding.holds for finding in found)
            if flagged(found):
                flags[f"{server}/{definition['name']}"] = [f.sentence() for f in found if f.holds]
    return {
        "servers": len(listings),
        "tools": total,
        "flagged": len(flags),
        "flagged_rate": len(flags) / total,
        "flags": flags,
        "noted": notes,
    }


def timing(scanner: Scanner, size: int = TIMED_TOOLS) -> dict[str, float]:
    """CPU seconds to scan ``size`` real tools (the catalog and its copy), context built in."""
    listings = catalog_listings(copies=2)
    pairs = [(server, definition) for server, defs in listings.items() for definition in defs][:size]
    started = time.process_time()
    context = ScanContext.of(listings)
    for server, definition in pairs:
        scanner.scan(definition, "tool", server=server, context=context)
    return {"tools": len(pairs), "cpu_seconds": time.process_time() - started}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.scan", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--verbose", "-v", action="store_true", help="print every flag's sentences")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--set", type=Path, metavar="PATH", help="only this set's counts, overall and per family (names nothing)"
    )
    args = parser.parse_args(argv)
    started = time.process_time()
    scanner = Scanner.default()
    compiled = time.process_time() - started
    if args.set is not None:
        figures = counts_only(fixture_figures(scanner, args.set))
        if args.json:
            print(json.dumps(figures, indent=1))
            return 0
        print(
            f"{args.set}: poisoned held {figures['caught']} of {figures['poisoned']} ({figures['caught_rate']:.1%}); "
            f"benign held {figures['benign_flagged']} of {figures['benign']} ({figures['benign_flagged_rate']:.1%})"
        )
        print_families(figures)
        return 0
    fixture = fixture_figures(scanner)
    real = catalog_figures(scanner)
    timed = timing(scanner)
    if args.json:
        print(json.dumps({"fixture": fixture, "catalog": real, "timing": timed, "compile_seconds": compiled}, indent=1))
        return 0 if _gates(fixture, real) else 1
    print(
        f"Poisoned definitions caught: {fixture['caught']} of {fixture['poisoned']} "
        f"({fixture['caught_rate']:.1%}; gate >= {CAUGHT_GATE:.0%})"
    )
    for missed in fixture["missed"]:
        print(f"  missed: {missed}")
    print(f"Benign look-alikes flagged: {len(fixture['benign_flagged'])} of {fixture['benign']}")
    for name, sentences in fixture["benign_flagged"].items():
        print(f"  {name}: " + " | ".join(sentences))
    if args.verbose:
        print_families(fixture)
    print(
        f"Real tools flagged: {real['flagged']} of {real['tools']} from {real['servers']} servers "
        f"({real['flagged_rate']:.2%}; gate <= {FALSE_POSITIVE_GATE:.0%}); noted only (long): {real['noted']}"
    )
    for name, sentences in real["flags"].items():
        print(f"  {name}:")
        for sentence in sentences if args.verbose else sentences[:2]:
            print(f"    - {sentence}")
    print(
        f"Scan time: {timed['cpu_seconds'] * 1000:.0f} ms of CPU for {timed['tools']:.0f} real tools "
        f"(context included; patterns compiled once in {compiled * 1000:.0f} ms)"
    )
    return 0 if _gates(fixture, real) else 1


def _gates(fixture: Mapping[str, Any], real: Mapping[str, Any]) -> bool:
    return (
        fixture["caught_rate"] >= CAUGHT_GATE
        and not fixture["benign_flagged"]
        and real["flagged_rate"] <= FALSE_POSITIVE_GATE
    )


if __name__ == "__main__":
    raise SystemExit(main())
