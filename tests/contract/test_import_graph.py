"""No import circles anywhere in the product: every module's imports, parsed with ast
(function-level and ``if TYPE_CHECKING:`` imports included: a circle hidden in a function or
behind a type annotation is still a circle), form a graph without cycles. A part that needs
the type of what composes it names a Protocol below both (api/client/bookies.py's Bookies,
journal/damage.py's ScannedJournal)."""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = ("bookie", "journal", "entrylog", "ledgerindex", "api")


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _exists(name: str) -> bool:
    base = ROOT.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _edges(path: pathlib.Path, modules: set[str]):
    """The product modules ``path`` imports (``from a.b import c``: a.b.c if it is a module,
    else a.b), each with the line."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [f"{node.module}.{alias.name}" if _exists(f"{node.module}.{alias.name}")
                     else node.module for alias in node.names]
        else:
            continue
        for name in names:
            if name in modules:
                yield name, node.lineno


def _graph() -> dict[str, dict[str, int]]:
    paths = [p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))]
    modules = {_module_name(p) for p in paths}
    return {_module_name(p): dict(_edges(p, modules)) for p in paths}


def _cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Every strongly connected component of more than one module, or a self-import."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph[node]:
                found.append(sorted(component))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_product_has_no_import_circles():
    graph = _graph()
    cycles = _cycles(graph)
    detail = ["; ".join(f"{a} imports {b} (line {graph[a][b]})" for a in cycle
                        for b in cycle if b in graph[a]) for cycle in cycles]
    assert cycles == [], "import circles:\n" + "\n".join(detail)


def test_the_graph_sees_imports_inside_functions_and_type_checking():
    """The check would be blind if it missed these: an edge of each kind it must see."""
    graph = _graph()
    assert "api.cluster.autorecovery.service" in graph["api.cluster.member"]  # in a method
    assert "api.server.app" in graph["bookie.cli"]  # in a function
    assert "bookie.storage" in graph["bookie.gc"]  # under TYPE_CHECKING
