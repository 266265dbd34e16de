"""Search mode's pure core: a ranked index over the merged catalog, and ``find_tools``' answers.

No I/O, no awaits. The proxy (``session.exposure``) builds a ``ToolIndex`` once per catalog, at its
first search, in a worker thread, and, per
``find_tools`` call, runs ``search`` then ``render_answer``::

    index = ToolIndex.build(
        IndexedTool.of(t.exposed, t.server, t.upstream_name, t.definition, instructions.get(t.server))
        for t in catalog.by_exposed.values()
    )
    hits = index.search(query, limit=limit, server=server)          # limit clamped to 1..20
    notes = [ServerNote(s, "starting", "try again in a few seconds", note_match(query, s, known))]
    structured, text = render_answer(hits, query=query, unavailable=notes, server=server)
    # structured satisfies OUTPUT_SCHEMA; len(text) <= TEXT_BUDGET (< 10,000)
    description = find_tools_description(index.tools, servers={"github": instructions, ...})

Modules, each with its rules in its docstring:

- ``text``: words (snake/kebab/camel/dotted splitting), folding, stop words, synonyms,
  two-word phrases; ``lexicon``: those word lists, as data.
- ``documents``: ``IndexedTool`` (a tool as search sees it), its fields' terms, a query's
  weighted terms, ``Hit``, ``note_match`` (how well an unavailable server's known text
  matches a query).
- ``index``: ``ToolIndex`` (BM25F fused with meaning, plus name similarity): how the scores
  below combine, and every lexical rule and weight.
- ``name_match``: ``NameMatch``, how closely a short query spells a tool's name (exact and
  rapidfuzz-near exposed and upstream names).
- ``nearest``: ``Nearest``, the tools' vectors and the meaning score of the tools nearest a
  query (what is embedded, which queries say a need).
- ``meaning``: ``Meaning``, the static embedding model that gives texts vectors for
  ``nearest``: the trained table ``meaning_table.safetensors`` (package data, 8.3 MB) read
  with WordLlama's tokenizer (from its wheel).
- ``render``: ``render_answer``, ``OUTPUT_SCHEMA``, ``ServerNote``, schema compaction.
- ``describe``: ``find_tools_description``.

The lexical index uses rapidfuzz and plain Python: at 10,000 tools a search adds up a few
precomputed postings, so no BM25 library is needed. The meaning model brings numpy and
tokenizers, imported only when the first index is built (in the proxy's worker thread): a
search adds one tokenizer call and one matrix-vector product, still well under the 5 ms goal.
Nothing here is imported by the proxy at startup; the server imports this package when it
first builds an index.
"""

from mcp_patchbay.search.describe import DESCRIPTION_BUDGET, find_tools_description, server_summary
from mcp_patchbay.search.documents import Hit, IndexedTool, ToolDefinition, note_match
from mcp_patchbay.search.index import DEFAULT_LIMIT, MAX_LIMIT, ToolIndex, clamp_limit
from mcp_patchbay.search.render import (
    FULL_SCHEMAS,
    OUTPUT_SCHEMA,
    TEXT_BUDGET,
    ServerNote,
    brief_schema,
    compact_schema,
    render_answer,
)

__all__ = [
    "DEFAULT_LIMIT",
    "DESCRIPTION_BUDGET",
    "FULL_SCHEMAS",
    "MAX_LIMIT",
    "OUTPUT_SCHEMA",
    "TEXT_BUDGET",
    "Hit",
    "IndexedTool",
    "ServerNote",
    "ToolDefinition",
    "ToolIndex",
    "brief_schema",
    "clamp_limit",
    "compact_schema",
    "find_tools_description",
    "note_match",
    "render_answer",
    "server_summary",
]
