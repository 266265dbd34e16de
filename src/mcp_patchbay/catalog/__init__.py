"""What the model sees of the upstreams' lists. Pure: values in, values out (a few memos).

- ``naming``: exposed names (``server__tool``): how they are built.
- ``resolution``: which tool a called name means, mistaken names included.
- ``suggestions``: the closest exposed names to a called name that names none.
- ``merge``: the merged lists of every upstream (``Catalog``), in a deterministic order.
- ``restriction``: the part of the catalog one caller may use (``restricted``).
- ``resources``: which server answers for a resource URI.
- ``overrides``: an entry's overrides applied to what its server lists.
- ``arguments``: ``inputSchema`` checks of a call's arguments.
- ``client_quirks``: what clients make of an exposed name, and its length limit.
- ``apps``: MCP Apps: a tool's user interface, who may call it, ``ui://`` URIs per server.
"""
