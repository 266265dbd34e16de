"""The structure floor (issue 34): no run-time import cycle in ``src/mcp_patchbay``, and no module
too long to read.

**What a cycle is here.** Module A *imports B at run time* when A holds an import statement that
runs when the proxy runs: at module level or inside a function or method, anywhere but under
``if TYPE_CHECKING:`` (its ``else:`` runs, so it counts). ``import B``, ``from B import name``,
``from pkg import B`` (B a submodule) and ``importlib.import_module("B")`` with the name written
out all count; relative imports are resolved. A package's ``__init__`` is a module like any
other: ``from mcp_patchbay.config import RemoteSpec`` imports ``mcp_patchbay.config``, and that
``__init__`` imports whatever it re-exports from. The package an importing module sits in is
loaded first in any case, so passing through it is no edge (naming it is: a module that takes a
name from its own package's ``__init__`` while that ``__init__`` imports the module is a cycle); a
package a module merely passes through on the way to a submodule (``mcp_patchbay.upstreams`` for
``mcp_patchbay.upstreams.spawn``) is one, since its ``__init__`` runs then (those are docstrings,
and must stay cheap). A *cycle* is a set of two
or more modules each reaching every other along these edges (a strongly connected component),
whether the imports are at module level (an import order that breaks on a partly initialised
module) or in functions (layers that lean on each other, and laziness that hides it). The
shared piece goes to the module that owns it, or to a small module both import.

Not seen: an import by a name computed at run time (``cli.main`` runs the module
``cli.options.OWN_PARSER_COMMANDS`` names, none of which imports ``cli``).
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SRC / "mcp_patchbay"

LONG = 450
"""Lines above which a module is long: at most ``MAX_LONG`` of them."""
MAX_LONG = 2
LONGEST = 600
"""Lines no module may exceed."""


def _module_name(path: Path, root: Path = SRC) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules(root: Path = SRC, package: Path = PACKAGE) -> dict[str, Path]:
    return {_module_name(p, root): p for p in sorted(package.rglob("*.py")) if "__pycache__" not in p.parts}


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _named(name: str, source: str, *, package: bool) -> Iterator[tuple[str, int]]:
    """Every module name an import in ``source`` (module ``name``) names at run time, with its line."""

    def visit(node: ast.AST) -> Iterator[tuple[str, int]]:
        if isinstance(node, ast.If) and _type_checking(node.test):
            for inner in node.orelse:
                yield from visit(inner)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = name.split(".") if package else name.split(".")[:-1]
                here = here[: len(here) - (node.level - 1)]
                base = ".".join([*here, *([node.module] if node.module else [])])
            for alias in node.names:
                yield f"{base}.{alias.name}", node.lineno  # a submodule, or (trimmed below) a name in base
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.args[0].value, node.lineno
        for child in ast.iter_child_nodes(node):
            yield from visit(child)

    yield from visit(ast.parse(source))


def import_graph(modules: dict[str, Path]) -> dict[str, dict[str, int]]:
    """Each module's run-time imports of the package's modules, each with the line of its first import."""
    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        edges: dict[str, int] = {}
        for named, line in _named(name, path.read_text(encoding="utf-8"), package=path.name == "__init__.py"):
            target = named
            while target not in modules and "." in target:  # ``from a.b import name``: a.b
                target = target.rsplit(".", 1)[0]
            if target not in modules:
                continue  # outside the package
            parts = target.split(".")
            passed = [".".join(parts[:k]) for k in range(2, len(parts))]  # the packages run on the way
            for module in passed:
                if module != name and not name.startswith(module + "."):
                    edges.setdefault(module, line)
            if target != name:
                edges.setdefault(target, line)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of two or more modules (Tarjan's), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph[node]:
            if other not in index:
                connect(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return sorted(found)


def one_loop(graph: dict[str, dict[str, int]], component: list[str]) -> str:
    """A shortest way round ``component`` from its first module, each hop with its line."""
    start, members = component[0], set(component)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for other in sorted(graph[node]):
                if other not in members or other in came_from:
                    continue
                came_from[other] = node
                following.append(other)
        if start in came_from:
            break
        frontier = following
    hops = [start]
    node = came_from[start]
    while node != start:
        hops.append(node)
        node = came_from[node]
    hops.append(start)
    hops.reverse()
    words = [hops[0]]
    for before, after in itertools.pairwise(hops):
        words.append(f"-> {after} (line {graph[before][after]} of {before})")
    return " ".join(words)


def test_no_module_imports_itself_back_at_run_time() -> None:
    graph = import_graph(_modules())
    found = cycles(graph)
    assert not found, "run-time import cycles:\n" + "\n".join(one_loop(graph, c) for c in found)


def test_the_graph_sees_lazy_imports_and_not_type_checking_ones(tmp_path: Path) -> None:
    """The rule above, on a package made for it: a cycle through a function's import and a
    package's re-export is one; imports for the type checker are none."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\n",
        "b.py": "def f():\n    from . import a\n",
        "c.py": "def g():\n    import importlib\n    importlib.import_module('pkg.sub.d')\n",
        "sub/__init__.py": "from pkg.sub.d import D\n",
        "sub/d.py": "from pkg.c import g\nD = 1\n",
        "e.py": "from pkg.sub import D\n",
    }
    for relative, text in files.items():
        (package / relative).write_text(text, encoding="utf-8")
    graph = import_graph(_modules(tmp_path, package))
    assert graph["pkg.a"] == {}  # under TYPE_CHECKING only
    assert graph["pkg.b"] == {"pkg.a": 2}  # in a function, relative
    assert graph["pkg.c"] == {"pkg.sub": 3, "pkg.sub.d": 3}  # import_module, and the package on the way
    assert graph["pkg.sub"] == {"pkg.sub.d": 1}  # its own package is no edge of pkg.sub.d's
    assert graph["pkg.e"] == {"pkg.sub": 1}  # a name the package re-exports
    found = cycles(graph)
    assert found == [["pkg.c", "pkg.sub", "pkg.sub.d"]]
    assert one_loop(graph, found[0]) == "pkg.c -> pkg.sub.d (line 3 of pkg.c) -> pkg.c (line 1 of pkg.sub.d)"


def test_modules_are_short_enough_to_read() -> None:
    lengths = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in _modules().items()}
    longest = sorted(((n, name) for name, n in lengths.items() if n > LONG), reverse=True)
    too_long = [f"{name} ({n})" for n, name in longest if n > LONGEST]
    assert not too_long, f"over {LONGEST} lines: {', '.join(too_long)}"
    assert len(longest) <= MAX_LONG, f"more than {MAX_LONG} modules over {LONG} lines: " + ", ".join(
        f"{name} ({n})" for n, name in longest
    )
