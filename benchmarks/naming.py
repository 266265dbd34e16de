"""Latency of tool-name resolution and suggestions on large generated catalogs.

    .venv/bin/python -m benchmarks.naming [--calls N] [--seed S]

For catalogs of 100, 1,000 and 10,000 tools it times what the proxy does with a called
name: ``Resolver.resolve``, which for an unknown name includes ``Resolver.suggest``, and
``suggest`` for the other names that cannot run. Three kinds of called names: exact hits,
normalized hits (case, dots, camelCase, client prefixes) and typos. It prints the median,
p99 and maximum in milliseconds. The target is p99 < 5 ms.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from mcp_patchbay.catalog.naming import build_names
from mcp_patchbay.catalog.resolution import NameEntry, Resolver

SERVER_WORDS = [
    "filesystem", "github", "gitlab", "memory", "slack", "jira", "confluence", "postgres", "sqlite", "redis",
    "notion", "linear", "sentry", "stripe", "shopify", "docker", "kubernetes", "aws", "gcp", "azure",
    "brave-search", "puppeteer", "playwright", "google-drive", "gmail", "calendar", "figma", "airtable",
    "hubspot", "salesforce", "zendesk", "discord", "twilio", "datadog", "grafana", "elastic", "mongodb",
]  # fmt: skip
VERBS = [
    "get", "list", "create", "update", "delete", "search", "read", "write", "move", "copy", "run",
    "query", "describe", "add", "remove", "open", "close", "merge", "send", "fetch", "upload", "download",
]  # fmt: skip
NOUNS = [
    "file", "files", "issue", "issues", "pull_request", "commit", "branch", "repository", "user", "users",
    "channel", "message", "page", "database", "table", "record", "document", "comment", "label", "project",
    "ticket", "event", "invoice", "customer", "order", "product", "container", "pod", "bucket", "object",
    "dashboard", "alert", "metric", "log", "entity", "relation", "observation", "node", "graph", "image",
]  # fmt: skip
QUALIFIERS = ["", "", "", "_by_id", "_details", "_contents", "_info", "_history", "_status", "s_batch"]


def catalog(size: int, rng: random.Random) -> list[tuple[str, str]]:
    """``size`` distinct (server, tool) pairs, about 25-60 tools per server, like real servers."""
    servers = max(2, size // 40)
    names = [SERVER_WORDS[i % len(SERVER_WORDS)] + ("" if i < len(SERVER_WORDS) else f"-{i}") for i in range(servers)]
    pairs: set[tuple[str, str]] = set()
    while len(pairs) < size:
        tool = f"{rng.choice(VERBS)}_{rng.choice(NOUNS)}{rng.choice(QUALIFIERS)}"
        if rng.random() < 0.15:
            tool = tool.replace("_", "-")
        pairs.add((rng.choice(names), tool))
    return sorted(pairs)


def normalized_variant(server: str, tool: str, rng: random.Random) -> str:
    forms = [
        f"{server}.{tool}",
        f"{server}/{tool}",
        f"{server}__{tool}".upper(),
        server + "__" + "".join(w.capitalize() if i else w for i, w in enumerate(tool.replace("-", "_").split("_"))),
        f"mcp__patchbay__{server}__{tool}",
    ]
    return rng.choice(forms)


def typo(text: str, rng: random.Random) -> str:
    chars = list(text)
    for _ in range(rng.choice([1, 1, 2])):
        i = rng.randrange(len(chars))
        op = rng.choice(["drop", "swap", "replace"])
        if op == "drop" and len(chars) > 3:
            del chars[i]
        elif op == "swap" and i + 1 < len(chars):
            chars[i], chars[i + 1] = chars[i + 1], chars[i]
        else:
            chars[i] = rng.choice("abcdefghijklmnopqrstuvwxyz")
    return "".join(chars)


def measure(resolver: Resolver, names: list[str], repeats: int) -> tuple[float, float, float]:
    """(median, p99, worst) in ms over ``names``; each name's time is its best of ``repeats``.

    Like ``timeit``, the garbage collector is off and the best of a few runs is kept, so
    that the figures describe the code rather than the scheduler of a shared machine.
    """
    timings: list[float] = []
    gc.disable()
    try:
        for name in names:
            best = float("inf")
            for _ in range(repeats):
                start = time.perf_counter()
                resolution = resolver.resolve(name)
                if resolution.kind not in ("exact", "resolved", "unknown"):
                    resolver.suggest(name)  # the error message wants suggestions; "unknown" has them already
                best = min(best, (time.perf_counter() - start) * 1000)
            timings.append(best)
    finally:
        gc.enable()
    timings.sort()
    return statistics.median(timings), timings[min(len(timings) - 1, int(len(timings) * 0.99))], timings[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000, help="called names per kind and size")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3, help="runs per name, best kept (1: single shot)")
    args = parser.parse_args()
    rng = random.Random(args.seed)

    print(f"{'tools':>7} {'build ms':>9}  {'kind':<11} {'median ms':>10} {'p99 ms':>8} {'max ms':>8}")
    for size in (100, 1_000, 10_000):
        pairs = catalog(size, rng)
        start = time.perf_counter()
        exposed = build_names(pairs, separator="__", max_length=48)
        resolver = Resolver([NameEntry(name, s, t) for (s, t), name in exposed.items()], separator="__")
        build_ms = (time.perf_counter() - start) * 1000
        sample = [rng.choice(pairs) for _ in range(args.calls)]
        kinds = {
            "exact": [exposed[pair] for pair in sample],
            "normalized": [normalized_variant(s, t, rng) for s, t in sample],
            "typo": [typo(exposed[pair], rng) for pair in sample],
        }
        for kind, names in kinds.items():
            median, p99, worst = measure(resolver, names, args.repeats)
            print(f"{size:>7} {build_ms:>9.1f}  {kind:<11} {median:>10.3f} {p99:>8.3f} {worst:>8.3f}")


if __name__ == "__main__":
    main()
