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
``poisoned`` and ``benign``, each item with a ``family``), or of the ``cases`` format
(``{"cases": [{"id", "family", "poisoned": true|false, "server", "tool", "why"}]}``, as
``benchmarks/scan_data/blind_set_3.json``), and prints only counts: how many of each family's
poisoned and benign definitions are held, and the totals. It names no definition, so a held-out
set can be measured without its contents being read.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from tests.scan_figures import (  # noqa: E402
    CAUGHT_GATE,
    FALSE_POSITIVE_GATE,
    catalog_figures,
    catalog_listings,
    fixture_figures,
)

from mcp_patchbay.trust.scan import ScanContext, Scanner  # noqa: E402

TIMED_TOOLS = 1000


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
    parser.add_argument(
        "--patterns-only", action="store_true", help="the patterns and checks without the learned reading"
    )
    args = parser.parse_args(argv)
    started = time.process_time()
    scanner = Scanner.default(learned=not args.patterns_only)
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
        if not args.patterns_only:
            alone = counts_only(fixture_figures(Scanner.default(learned=False), args.set))
            print(
                f"  the patterns alone: poisoned held {alone['caught']} ({alone['caught_rate']:.1%}); "
                f"benign held {alone['benign_flagged']} ({alone['benign_flagged_rate']:.1%})"
            )
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
        f"(context included; patterns and model read once in {compiled * 1000:.0f} ms)"
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
