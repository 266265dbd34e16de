"""Suggestions for a called name that names no tool: the typos' closest exposed names.

Pure: values in, values out. ``catalog.resolution`` builds one ``Suggester`` per catalog
over the tools a model may be offered (never hidden or app-only ones) and asks it when a
name resolves to nothing.

Suggesting (``Resolver.suggest``)
    rapidfuzz ``ratio`` over normalized strings precomputed here. The called name is
    split at the separator whose preceding segment is closest to a server name (which
    also skips client prefixes). A candidate's score is the best of: server part and
    tool part weighted together; the tool part alone (discounted: a missing or wrong
    server); the whole name, unless the server part named a server (it would reward a
    right server with a wrong tool); and, for a name without a separator, the server
    alone (full score for a one-tool server). Candidates come from three
    ``process.extract`` calls with a ``score_cutoff``: whole names, distinct tool names,
    and the tools of the closest servers. Scores below ``SUGGEST_CUTOFF`` are dropped,
    so nonsense gets no suggestions; ties go to the smaller exposed name.
"""

from __future__ import annotations

from collections.abc import Sequence

from rapidfuzz import fuzz, process

from mcp_patchbay.catalog.naming import delimiter_positions, normalize

__all__ = ["SUGGEST_CUTOFF", "Suggester"]

SUGGEST_CUTOFF = 70.0
"""Suggestions scoring below this (0-100) are not shown."""

_SERVER_CUTOFF = 60.0  # a called name's segment this close to a server name is taken as naming it
_TOOL_CUTOFF = 50.0  # tool parts below this cannot reach SUGGEST_CUTOFF even with a perfect server


class Suggester:
    """The fuzzy indexes over one catalog's offered tools, built once, here."""

    def __init__(self, offered: Sequence[tuple[str, str, str]], delimiters: tuple[str, ...]) -> None:
        """``offered``: each tool's (exposed name, server, item); ``delimiters``: the separators."""
        self._delimiters = delimiters
        # Everything here is indexed by rank in exposed-name order, so that ties (and the
        # limits of process.extract) never depend on the order the entries came in.
        ranked = sorted(offered)
        self._fz_names = [exposed for exposed, _, _ in ranked]
        self._fz_whole = [normalize(server) + normalize(item) for _, server, item in ranked]
        self._fz_item = [normalize(item) for _, _, item in ranked]
        self._fz_server = [normalize(server) for _, server, _ in ranked]
        item_ranks: dict[str, list[int]] = {}
        server_ranks: dict[str, list[int]] = {}
        for rank, (_, server, _) in enumerate(ranked):
            item_ranks.setdefault(self._fz_item[rank], []).append(rank)
            server_ranks.setdefault(server, []).append(rank)
        self._fz_server_size = [len(server_ranks[server]) for _, server, _ in ranked]
        self._fz_items = list(item_ranks)
        self._fz_item_ranks = list(item_ranks.values())
        servers = sorted(server_ranks)
        self._fz_server_keys = [normalize(server) for server in servers]
        self._fz_server_ranks = [server_ranks[server] for server in servers]
        self._fz_server_items = [[self._fz_item[rank] for rank in server_ranks[server]] for server in servers]

    def suggest(self, called: str, limit: int = 5) -> tuple[str, ...]:
        """Up to ``limit`` exposed names close to ``called``, best first."""
        if limit <= 0 or not normalize(called) or not self._fz_whole:
            return ()
        server_part, tool_part, whole_part, server_matched = self._split(called)
        tool_key, whole_key = normalize(tool_part), normalize(whole_part)
        server_key = normalize(server_part if server_part is not None else called)
        depth = max(4 * limit, 20)

        candidates: dict[int, None] = {}
        if not server_matched:  # else the server's own tools are searched below, more cheaply
            for _, _, rank in process.extract(
                whole_key, self._fz_whole, scorer=fuzz.ratio, processor=None, score_cutoff=SUGGEST_CUTOFF, limit=depth
            ):
                candidates[rank] = None
        for _, _, i in process.extract(
            tool_key, self._fz_items, scorer=fuzz.ratio, processor=None, score_cutoff=_TOOL_CUTOFF, limit=depth
        ):
            candidates.update(dict.fromkeys(self._fz_item_ranks[i][:depth]))
        close_servers = process.extract(
            server_key, self._fz_server_keys, scorer=fuzz.ratio, processor=None, score_cutoff=_SERVER_CUTOFF, limit=3
        )
        for _, _, s in close_servers:
            if server_part is None:
                # A bare name close to a server's name: that server's tools, in name order.
                candidates.update(dict.fromkeys(self._fz_server_ranks[s][:limit]))
                continue
            for _, _, i in process.extract(
                tool_key,
                self._fz_server_items[s],
                scorer=fuzz.ratio,
                processor=None,
                score_cutoff=_TOOL_CUTOFF,
                limit=depth,
            ):
                candidates[self._fz_server_ranks[s][i]] = None

        scored: list[tuple[float, int]] = []
        for rank in candidates:
            tool = fuzz.ratio(tool_key, self._fz_item[rank])
            server = fuzz.ratio(server_key, self._fz_server[rank])
            if server_matched:
                # The whole-name ratio would reward a right server with a wrong tool.
                score = max(0.35 * server + 0.65 * tool, 0.85 * tool)
            elif server_part is not None:
                score = max(fuzz.ratio(whole_key, self._fz_whole[rank]), 0.35 * server + 0.65 * tool, 0.85 * tool)
            else:
                server_only = server if self._fz_server_size[rank] == 1 else 0.9 * server
                score = max(fuzz.ratio(whole_key, self._fz_whole[rank]), 0.95 * tool, server_only)
            if score >= SUGGEST_CUTOFF:
                scored.append((-score, rank))
        scored.sort()
        return tuple(self._fz_names[rank] for _, rank in scored[:limit])

    def _split(self, called: str) -> tuple[str | None, str, str, bool]:
        """(server part, tool part, the name from the server part on, server part matched).

        Every delimiter is a possible split; the one whose preceding segment is closest to
        a server name wins, else the last one (so ``mcp__x__fs__read`` still splits at
        ``fs``). A name without delimiters has no server part.
        """
        splits: list[tuple[int, int, int]] = []  # (segment start, delimiter start, delimiter length)
        segment_start = 0
        for start, length in delimiter_positions(called, self._delimiters):
            if start >= segment_start:
                splits.append((segment_start, start, length))
                segment_start = start + length
        if not splits:
            return None, called, called, False
        best, best_score = splits[-1], _SERVER_CUTOFF
        for split in splits:
            segment = normalize(called[split[0] : split[1]])
            match = process.extractOne(
                segment, self._fz_server_keys, scorer=fuzz.ratio, processor=None, score_cutoff=best_score
            )
            if segment and match is not None and match[1] > best_score:
                best, best_score = split, match[1]
        segment_start, start, length = best
        matched = best_score > _SERVER_CUTOFF
        return called[segment_start:start], called[start + length :], called[segment_start:], matched
