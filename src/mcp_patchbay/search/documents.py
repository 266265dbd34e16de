"""What the index reads: a tool as a document of fields, and a query as weighted terms.

Pure. ``IndexedTool`` is one tool as search sees it (built from an upstream definition);
``fields`` turns it into the terms of each BM25F field (``index.FIELDS`` weighs them);
``query_terms`` gives a query's own terms and their synonyms; ``note_match`` scores how well
an unavailable server's known text covers a query. The ranking itself is ``index``'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from mcp_patchbay.search.text import SYNONYM_WEIGHT, SYNONYMS, split_words, terms

__all__ = [
    "FIELD_CHARS",
    "Hit",
    "IndexedTool",
    "ToolDefinition",
    "as_mapping",
    "fields",
    "meaning_text",
    "note_match",
    "query_terms",
]

FIELD_CHARS = 4_000
"""Text beyond this in one field is not indexed: the head says what a tool does, and an
upstream's 100 KB schema must not make every catalog rebuild slow."""


class _Annotations(Protocol):
    @property
    def title(self) -> str | None: ...


class ToolDefinition(Protocol):
    """What ``IndexedTool.of`` reads from a tool definition (an ``mcp_types.Tool`` has it)."""

    @property
    def title(self) -> str | None: ...
    @property
    def description(self) -> str | None: ...
    @property
    def input_schema(self) -> Mapping[str, Any]: ...
    @property
    def annotations(self) -> _Annotations | None: ...


@dataclass(frozen=True, slots=True)
class IndexedTool:
    """One tool as the index sees it. ``name`` is the exposed name (``server<sep>tool``)."""

    name: str
    server: str
    tool: str
    description: str = ""
    title: str | None = None
    input_schema: Mapping[str, Any] = field(default_factory=dict[str, Any])
    server_instructions: str | None = None

    @classmethod
    def of(
        cls, exposed: str, server: str, tool: str, definition: ToolDefinition, instructions: str | None = None
    ) -> IndexedTool:
        """From an upstream's definition (``CatalogTool.definition``); the title falls back to
        the annotations' title, as clients show it."""
        annotations = definition.annotations
        return cls(
            name=exposed,
            server=server,
            tool=tool,
            description=definition.description or "",
            title=definition.title or (annotations.title if annotations is not None else None),
            input_schema=definition.input_schema,
            server_instructions=instructions,
        )


@dataclass(frozen=True, slots=True)
class Hit:
    """A search result: the tool and its score (higher is better; only the order means anything)."""

    tool: IndexedTool
    score: float


def as_mapping(value: object) -> Mapping[str, Any] | None:
    """``value`` as a JSON object, or None: schemas come from upstreams and may be anything."""
    if type(value) is dict:  # the common case, without the ABC check
        return cast("Mapping[str, Any]", value)
    return cast("Mapping[str, Any]", value) if isinstance(value, Mapping) else None


def _param_fields(schema: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """Parameter names and descriptions, two levels of nesting deep (objects, arrays of objects)."""
    names: list[str] = []
    texts: list[str] = []

    def walk(node: Mapping[str, Any], depth: int) -> None:
        props = as_mapping(node.get("properties"))
        if props is not None:
            for key, value in props.items():
                names.append(str(key))
                sub = as_mapping(value)
                if sub is not None:
                    desc = sub.get("description")
                    if isinstance(desc, str):
                        texts.append(desc)
                    if depth < 2:
                        walk(sub, depth + 1)
        items = as_mapping(node.get("items"))
        if items is not None and depth < 2:
            walk(items, depth + 1)

    walk(schema, 0)
    return names, texts


def fields(
    tool: IndexedTool, shared: dict[tuple[str, str | None], tuple[list[str], list[str]]]
) -> dict[str, list[str]]:
    """A tool's fields' terms. ``shared`` caches the server's fields, the same for all its tools."""
    param_names, param_texts = _param_fields(tool.input_schema)
    key = (tool.server, tool.server_instructions)
    server = shared.get(key)
    if server is None:
        server = shared[key] = (terms(tool.server), terms((tool.server_instructions or "")[:FIELD_CHARS]))
    return {
        "name": terms(tool.tool),
        "title": terms((tool.title or "")[:FIELD_CHARS]),
        "description": terms(tool.description[:FIELD_CHARS]),
        "params": terms(" ".join(param_names)[:FIELD_CHARS]),
        "param_text": terms(" ".join(param_texts)[:FIELD_CHARS]),
        "server": server[0],
        "instructions": server[1],
    }


MEANING_CHARS = 400
"""How much of a description the meaning model reads (``meaning_text``)."""


def meaning_text(tool: IndexedTool) -> str:
    """What the meaning model embeds for a tool: its name's words, its title and the head of
    its description (a mean over a long text's tokens says less than its first sentences)."""
    server, name = " ".join(split_words(tool.server)), " ".join(split_words(tool.tool))
    return f"{server} {name}. {tool.title or ''} {tool.description[:MEANING_CHARS]}"


def query_terms(query: str) -> dict[str, float]:
    """Query term -> weight: the query's own terms at 1, their synonyms at SYNONYM_WEIGHT."""
    own = dict.fromkeys(terms(query), 1.0)
    weights = dict(own)
    for term in own:
        for synonym in SYNONYMS.get(term, ()):
            if synonym not in own:
                weights[synonym] = max(weights.get(synonym, 0.0), SYNONYM_WEIGHT)
    return weights


def note_match(query: str, *texts: str) -> float:
    """How much of the query ``texts`` cover, 0..1: the weighted share of query terms found.

    For servers that are not available (no tools to index): their names, known tool names
    and descriptions. A query naming the server (a word of its name) covers it fully.
    """
    weights = {t: w for t, w in query_terms(query).items() if w == 1.0}
    if not weights:
        return 0.0
    found: set[str] = set()
    for text in texts:
        found.update(terms(text))
    covered = 0.0
    for term in weights:
        if term in found:
            covered += 1.0
        elif any(s in found for s in SYNONYMS.get(term, ())):
            covered += SYNONYM_WEIGHT
    return min(1.0, covered / len(weights))
