"""The tools page's search: ``find_tools``' own index (``search.ToolIndex``) over a proxy's tools.

The tools come from the proxy's presence snapshot (names, titles, descriptions, input schemas,
each server as ``find_tools`` describes it), so a query ranks them as the model's search would.
An index is built once per snapshot, in a worker thread (the meaning model loads on the first),
and kept for the last few snapshots.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import anyio

if TYPE_CHECKING:
    from mcp_patchbay.search import ToolIndex
__all__ = ["ToolSearch"]

KEPT = 8
"""Indexes kept (one a proxy snapshot): a page that switches between proxies builds none again."""


def _indexed(snapshot: Mapping[str, Any]) -> list[Any]:
    from mcp_patchbay.search import IndexedTool

    described = {s.get("name"): s.get("described") for s in snapshot.get("servers") or ()}
    tools: list[Any] = []
    for tool in snapshot.get("tools") or ():
        schema = tool.get("input_schema")
        tools.append(
            IndexedTool(
                name=str(tool.get("name")),
                server=str(tool.get("server")),
                tool=str(tool.get("tool")),
                description=str(tool.get("description") or ""),
                title=tool.get("title"),
                input_schema=cast("dict[str, Any]", schema) if isinstance(schema, dict) else {},
                server_instructions=described.get(tool.get("server")),
            )
        )
    return tools


class ToolSearch:
    def __init__(self, *, meaning: bool = True) -> None:
        self.meaning = meaning
        self._indexes: OrderedDict[tuple[object, ...], ToolIndex] = OrderedDict()

    async def search(self, snapshot: Mapping[str, Any], query: str, limit: int = 20) -> Sequence[str]:
        """The exposed names of the best ``limit`` tools for ``query``, best first."""
        key = (snapshot.get("pid"), snapshot.get("updated_at"))
        index = self._indexes.get(key)
        if index is None:
            from mcp_patchbay.search import ToolIndex

            tools = _indexed(snapshot)
            index = await anyio.to_thread.run_sync(lambda: ToolIndex.build(tools, meaning=self.meaning))
            self._indexes[key] = index
            while len(self._indexes) > KEPT:
                self._indexes.popitem(last=False)
        return [hit.tool.name for hit in index.search(query, limit=limit)]
