"""entrylog/ keeps DESIGN.md §5's rules until tests/contract/test_layering.py covers it."""

from __future__ import annotations

import ast
import pathlib
import sys

ENTRYLOG = pathlib.Path(__file__).resolve().parents[3] / "entrylog"
ALLOWED_PROJECT = {"bookie.errors", "bookie.entry", "entrylog"}


def imports_outside_type_checking(tree: ast.Module):
    """(line, module) of every import not under ``if TYPE_CHECKING:``."""
    found = []

    def visit(node):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            return
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.append((node.lineno, node.module))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def test_entrylog_imports_only_the_stdlib_and_the_leaves():
    for path in sorted(ENTRYLOG.glob("*.py")):
        for line, module in imports_outside_type_checking(ast.parse(path.read_text())):
            top = module.split(".")[0]
            if top in sys.stdlib_module_names or top == "__future__":
                continue
            assert module in ALLOWED_PROJECT or module.startswith("entrylog."), \
                f"{path.name}:{line} imports {module}"


def test_entrylog_never_syncs_or_renames_by_itself():
    for path in sorted(ENTRYLOG.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id == "os":
                assert node.attr not in {"fsync", "fdatasync", "rename", "replace", "open"}, \
                    f"{path.name}:{node.lineno} calls os.{node.attr}"
