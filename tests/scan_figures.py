"""The trust scan's figures on the poisoning set (``fixtures/poisoned_tools.json``) and on the real
catalog (``benchmarks/search_data/catalog.json``), and their two gates: what ``test_scan.py``
asserts and ``benchmarks/scan.py`` prints."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mcp_patchbay.trust.fingerprint import Definition, Kind, definition_of
from mcp_patchbay.trust.scan import Finding, ScanContext, Scanner

ROOT = Path(__file__).resolve().parent.parent
POISONED = ROOT / "tests" / "fixtures" / "poisoned_tools.json"
CATALOG = ROOT / "benchmarks" / "search_data" / "catalog.json"
CAUGHT_GATE = 0.95
FALSE_POSITIVE_GATE = 0.01


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


def read_set(path: Path) -> dict[str, Any]:
    """A poisoning set in either format: this file's (``other_servers``, ``poisoned`` and ``benign``,
    each item's tool in ``definition``), or a list of ``cases`` (each with ``poisoned``: true or
    false, its tool in ``tool``, and its own ``other_servers`` if it has any)."""
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    if "cases" not in data:
        return data
    split: dict[str, Any] = {"other_servers": data.get("other_servers", {}), "poisoned": [], "benign": []}
    for case in data["cases"]:
        item = {
            "id": str(case.get("id", "")),
            "family": str(case.get("family", "")),
            "server": str(case.get("server") or "server"),
            "kind": "prompt" if case.get("kind") == "prompt" else "tool",
            "definition": case.get("tool") or case.get("definition") or {},
        }
        if isinstance(case.get("other_servers"), dict):
            item["other_servers"] = case["other_servers"]
        split["poisoned" if case.get("poisoned") is True else "benign"].append(item)
    return split


def fixture_figures(scanner: Scanner, path: Path = POISONED) -> dict[str, Any]:
    """A set's figures: what was caught and flagged, overall and per family (``families``:
    family -> [held, of], for ``poisoned`` and ``benign``)."""
    data = read_set(path)
    others: dict[str, list[str]] = data.get("other_servers", {})
    missed: list[str] = []
    benign_flags: dict[str, list[str]] = {}
    families: dict[str, dict[str, list[int]]] = {"poisoned": {}, "benign": {}}
    for label in ("poisoned", "benign"):
        for item in data[label]:
            found = scan_fixture_item(scanner, item, item.get("other_servers", others))
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
