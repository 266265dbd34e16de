"""Every server once: the entries found in several clients merged into one config's ``mcpServers``.

Entries with the same name and the same content (``entries.content``: what the server does,
wherever it was found) are one server, whose ``origin`` names every file that had it. The same
name with other content keeps the name for the first found (the clients' table order) and gives
the others ``NAME-CLIENT`` (``github-cursor``), or ``NAME-CLIENT-SCOPE`` when one client has two,
then a number; a new name never takes one that some client already uses. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mcp_patchbay.clients.entries import content
from mcp_patchbay.clients.locations import Place
from mcp_patchbay.clients.reading import Found

__all__ = ["Server", "merge"]


@dataclass(frozen=True)
class Server:
    """One server of the config ``import`` writes."""

    name: str
    entry: dict[str, Any]
    """Its entry, ``origin`` included."""
    sources: tuple[Found, ...]
    """Every client entry it stands for, in the order found."""
    renamed_from: str | None = None
    """The name the clients give it, when the server of that name here is another one (its content differs)."""

    @property
    def transport(self) -> str:
        return self.sources[0].normalized.transport or "stdio"


def merge(found: Sequence[Found], origin_of: Callable[[Place], str]) -> list[Server]:
    """The servers of ``found``, each once (see the module doc), in the order first found."""
    taken = {f.name for f in found}
    groups: dict[str, list[tuple[dict[str, Any], list[Found]]]] = {}
    for item in found:
        assert item.normalized.entry is not None
        same = content(item.normalized.entry)
        variants = groups.setdefault(item.name, [])
        for known, sources in variants:
            if known == same:
                sources.append(item)
                break
        else:
            variants.append((same, [item]))

    servers: list[Server] = []
    for name, variants in groups.items():
        for index, (_, sources) in enumerate(variants):
            first = sources[0]
            assert first.normalized.entry is not None
            new_name = name if index == 0 else _new_name(name, first.place, variants, taken)
            taken.add(new_name)
            origins = list(dict.fromkeys(origin_of(s.place) for s in sources))
            entry = {**first.normalized.entry, "origin": "; ".join(origins)}
            servers.append(Server(new_name, entry, tuple(sources), renamed_from=name if index else None))
    return servers


def _new_name(name: str, place: Place, variants: list[tuple[dict[str, Any], list[Found]]], taken: set[str]) -> str:
    clients = [sources[0].place.client for _, sources in variants]
    candidate = f"{name}-{place.client}"
    if clients.count(place.client) > 1:
        candidate = f"{name}-{place.client}-{place.scope}"
    base, n = candidate, 1
    while candidate in taken:
        n += 1
        candidate = f"{base}-{n}"
    return candidate
