"""What the client's tool listing costs in each mode of ``patchbay.expose``, for the bench catalog.

    .venv/bin/python -m benchmarks.listing [--catalog benchmarks/search_data/catalog.json] [--json FILE]

The catalog is real servers' ``tools/list`` (``benchmarks/search_data/catalog.json``); the
listing is built by the proxy's own code (``catalog.build_catalog`` then
``exposure.Exposure``), so the figures are what a client receives. Sizes are characters of
the tools as JSON; tokens are estimated at four characters each. Not a test: a benchmark.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

import mcp_types as types  # noqa: E402

from mcp_patchbay.catalog.merge import Source, build_catalog  # noqa: E402
from mcp_patchbay.config import Settings  # noqa: E402
from mcp_patchbay.session.exposure import Exposure, listing_cost  # noqa: E402


def load(path: Path) -> tuple[list[Source], dict[str, str | None]]:
    data: dict[str, Any] = json.loads(path.read_text())
    sources: list[Source] = []
    instructions: dict[str, str | None] = {}
    for server, entry in data.items():
        tools = [types.Tool.model_validate(tool) for tool in entry.get("tools", [])]
        sources.append(Source(server=server, tools=tools))
        instructions[server] = entry.get("instructions")
    return sources, instructions


def measure(path: Path) -> dict[str, Any]:
    sources, servers = load(path)
    settings = Settings()
    catalog = build_catalog(
        sources, separator=settings.separator, max_length=settings.max_name_length, validate_arguments=False
    )
    result: dict[str, Any] = {"servers": len(sources), "tools": len(catalog.tools)}
    for mode in ("all", "search"):
        listing = Exposure(settings.model_copy(update={"expose": mode})).listing(catalog, servers)
        chars, tokens = listing_cost(listing)
        result[mode] = {"listed": len(listing), "chars": chars, "tokens": tokens}
    per_tool = [listing_cost([tool])[0] for tool in catalog.tools]
    result["per_tool_chars"] = {"median": statistics.median(per_tool), "max": max(per_tool)}
    result["search_share"] = result["search"]["chars"] / result["all"]["chars"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--catalog", type=Path, default=ROOT / "benchmarks" / "search_data" / "catalog.json")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    result = measure(args.catalog)
    print(f"catalog: {result['servers']} servers, {result['tools']} tools ({args.catalog.name})\n")
    print("| Mode | Tools listed | Characters | Estimated tokens |")
    print("| --- | --- | --- | --- |")
    for mode in ("all", "search"):
        row = result[mode]
        print(f"| {mode} | {row['listed']} | {row['chars']:,} | {row['tokens']:,} |")
    print(
        f"\nsearch mode lists {result['search_share']:.2%} of the all-tools listing's characters; "
        f"a tool definition is {result['per_tool_chars']['median']:,.0f} characters at the median, "
        f"{result['per_tool_chars']['max']:,} at most"
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
