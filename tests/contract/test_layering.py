"""docs/design.md §5: who may import what. Parses every module with ast (skipping
``if TYPE_CHECKING:`` blocks) and fails naming the offending file and line."""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = ("bookie", "journal", "entrylog", "ledgerindex", "api")
STORAGE = ("journal", "entrylog", "ledgerindex")
LEAVES = ("bookie.errors", "bookie.entry")
FORMAT_MODULES = ("journal/format.py", "entrylog/format.py", "ledgerindex/keys.py",
                  "ledgerindex/ledger_data.py", "ledgerindex/bkld_legacy.py",
                  "bookie/entry.py", "api/wire.py")
# itertools and operator: the C loops of the hot codecs (bookie/entry.py first_bad_digest,
# journal/format.py encode_adds); pure, no I/O, like the rest of the list.
FORMAT_ALLOWED = {"struct", "dataclasses", "enum", "zlib", "hmac", "hashlib", "crc32c",
                  "itertools", "operator", "__future__", "bookie.errors", "typing"}
SYNC_CALLS = {"fsync", "fdatasync", "rename", "replace"}


def _modules():
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text())


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST):
    """(module, line) for every import outside TYPE_CHECKING blocks."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module, node.lineno
            for alias in node.names:
                yield f"{node.module}.{alias.name}", node.lineno
        stack.extend(ast.iter_child_nodes(node))


def _top(name: str) -> str:
    return name.split(".")[0]


def _violations(rule) -> list[str]:
    found = []
    for path, tree in _modules():
        for module, line in _imports(tree):
            problem = rule(path, module)
            if problem:
                found.append(f"{path}:{line}: imports {module}: {problem}")
    return sorted(set(found))


def _storage_rule(path: str, module: str) -> str | None:
    package = path.split("/")[0]
    if package not in STORAGE:
        return None
    if _top(module) in STORAGE and _top(module) != package:
        return "storage packages import none of each other (rule 1)"
    if _top(module) == "api":
        return "storage packages never import api (rule 1)"
    if _top(module) == "bookie" and not any(module == leaf or module.startswith(leaf + ".")
                                            for leaf in LEAVES) and module != "bookie":
        return "storage packages import only the bookie leaves (rule 1)"
    return None


def _leaf_rule(path: str, module: str) -> str | None:
    if path not in ("bookie/errors.py", "bookie/entry.py"):
        return None
    if _top(module) in PACKAGES and module not in LEAVES and not module.startswith(
            "bookie.errors"):
        return "leaves import only the standard library and crc32c (rule 2)"
    return None


def _core_rule(path: str, module: str) -> str | None:
    if not path.startswith("bookie/") or path.startswith(("bookie/pipeline/", "bookie/shell/")):
        return None
    if path in ("bookie/cli.py", "bookie/__main__.py"):
        return None  # the composition root
    if _top(module) in ("api", "aiohttp", "pyspark", "pyarrow"):
        return "the bookie core never imports api, aiohttp, pyspark or pyarrow (rule 3)"
    if module == "asyncio" and not path.startswith("bookie/node/"):
        return "only the bookie/node/ package imports asyncio (rule 3)"
    return None


def _rooms_rule(path: str, module: str) -> str | None:
    """Rule 4, api/'s rooms: ``server/`` serves a bookie.node.Bookie over HTTP and
    imports neither of the others; ``client/`` (the library users run, next to no bookie)
    imports neither of the others nor bookie.node; ``cluster/`` (a bookie's cluster duties)
    builds on client/ and bookie/, never on server/. ``admin/`` (BookKeeper's admin REST
    API, docs/admin-api.md) sits above all three and may use each; none of them imports it.
    ``api/wire.py`` is shared below all of them."""
    room = path.split("/")[1] if path.startswith("api/") and path.count("/") > 1 else None
    below = {"server": ("api.client", "api.cluster", "api.admin"),
             "client": ("api.server", "api.cluster", "bookie.node", "api.admin"),
             "cluster": ("api.server", "api.admin")}.get(room, ())
    if any(module == other or module.startswith(other + ".") for other in below):
        return f"api/{room}/ never imports {module} (rule 4: the three rooms of api/)"
    return None


def _single_importer_rule(path: str, module: str) -> str | None:
    owners = {"rocksdict": ("ledgerindex/kv.py",), "aiohttp": ("api/",),
              "pyspark": ("bookie/pipeline/",), "pyarrow": ("bookie/pipeline/",),
              "crcmod": ("tests/",),
              # The client's metadata store and membership reads, its calls' bound and its
              # ledger ids; every session's credentials and ACL; a bookie's registration, cookies and instance id;
              # autorecovery's markers, locks and election.
              "kazoo": ("api/client/zookeeper.py", "api/client/zk_auth.py",
                        "api/client/zk_bound.py", "api/client/zk_ids.py",
                        "api/cluster/zookeeper.py", "api/cluster/underreplication.py"),
              "cryptography": ("api/cluster/certs.py", "tests/")}
    allowed = owners.get(_top(module))
    if allowed and not path.startswith(allowed):
        return f"{_top(module)} is imported only under {', '.join(allowed)} (rule 5)"
    return None


def _format_rule(path: str, module: str) -> str | None:
    # A format module may build on another (keys.py on ledger_data.py): still pure.
    parts = module.split(".")
    if any("/".join(parts[:n]) + ".py" in FORMAT_MODULES for n in range(1, len(parts) + 1)):
        return None
    if path in FORMAT_MODULES and module not in FORMAT_ALLOWED and not any(
            module.startswith(allowed + ".") for allowed in FORMAT_ALLOWED):
        return "format modules import only struct, dataclasses, enum, zlib, hmac, hashlib, " \
               "crc32c, itertools, operator (rule 6)"
    return None


@pytest.mark.parametrize("rule", [_storage_rule, _leaf_rule, _core_rule, _rooms_rule,
                                  _single_importer_rule, _format_rule],
                         ids=lambda r: r.__name__.strip("_"))
def test_imports_follow_the_layering_rules(rule):
    assert _violations(rule) == []


def test_only_bookie_disk_calls_fsync_and_rename():
    found = []
    for path, tree in _modules():
        if path == "bookie/disk.py":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in SYNC_CALLS and isinstance(
                    node.value, ast.Name) and node.value.id == "os":
                found.append(f"{path}:{node.lineno}: os.{node.attr} outside bookie/disk.py")
    assert found == []


def test_format_modules_never_open_files():
    found = []
    for path, tree in _modules():
        if path not in FORMAT_MODULES:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id == "open":
                found.append(f"{path}:{node.lineno}: open()")
    assert found == []


def test_storage_packages_open_files_only_through_the_disk_seam():
    """Rule 1's other half: journal/ and entrylog/ are handed a ``Disk`` (bookie/disk.py) and
    open, sync and rename nothing themselves, so the crash-injecting and faulty disks of the
    crash tests see every file operation they make."""
    found = []
    for path, tree in _modules():
        if not path.startswith(("journal/", "entrylog/")):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id == "os" and node.attr in SYNC_CALLS | {"open"}:
                found.append(f"{path}:{node.lineno}: os.{node.attr}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id == "open":
                found.append(f"{path}:{node.lineno}: open()")
    assert found == []
