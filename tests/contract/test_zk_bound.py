"""ZK5 (api/client/zk_bound.py): no ZooKeeper call of the project waits longer than
ZK_ANSWER_S. kazoo's blocking calls (``client.get``, ``set``, ``create``, ``delete``, ...,
``transaction().commit()``, ``start``) wait for ever while ZooKeeper is away; every module
that talks to ZooKeeper calls the bounded helpers (``zk_read``, ``zk_call``, ``zk_start``,
``zk_watch``) instead. This finds a blocking call on a kazoo client in any of them."""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
BLOCKING = {"get", "set", "create", "delete", "get_children", "exists", "ensure_path",
            "commit", "start", "restart", "sync", "get_acls", "set_acls", "retry",
            "DataWatch", "ChildrenWatch", "Lock", "Election", "Barrier", "Counter"}
TALKS_TO_ZOOKEEPER = ("kazoo", "api.client.zookeeper", "api.client.zk_auth",
                      "api.client.zk_bound", "api.cluster.zookeeper", "api.cluster.underreplication")


def _zookeeper_modules():
    for package in ("api", "bookie", "scripts"):
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text())
            imported = {node.module for node in ast.walk(tree)
                        if isinstance(node, ast.ImportFrom) and node.module} | \
                {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                 for alias in node.names}
            if any(name.startswith(TALKS_TO_ZOOKEEPER) for name in imported):
                yield path.relative_to(ROOT).as_posix(), tree


def _blocking(call: ast.Call) -> bool:
    """A blocking kazoo method called on something named a client, or a transaction's
    commit (its other methods only add operations)."""
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in BLOCKING:
        return False
    receiver = func.value
    if func.attr == "commit":
        return "transaction" in ast.unparse(receiver)
    name = receiver.attr if isinstance(receiver, ast.Attribute) else \
        receiver.id if isinstance(receiver, ast.Name) else ""
    return "client" in name


def test_every_zookeeper_call_is_bounded():
    found = [f"{path}:{node.lineno}: {ast.unparse(node.func)}(...)"
             for path, tree in _zookeeper_modules() for node in ast.walk(tree)
             if isinstance(node, ast.Call) and _blocking(node)]
    assert not found, ("blocking kazoo calls, unbounded while ZooKeeper is away; use "
                       "zk_read/zk_call/zk_start/zk_watch (ZK5):\n" + "\n".join(found))


def test_the_check_sees_a_blocking_call_and_no_other():
    tree = ast.parse("self.client.set(path, data)\nclient.transaction().commit()\n"
                     "zk_call(self.client.set_async, path, data)\ntransaction.delete(path)\n"
                     "ZkCookies(client, root).delete(bookie_id)\n")
    assert [ast.unparse(n.func) for n in ast.walk(tree)
            if isinstance(n, ast.Call) and _blocking(n)] == [
        "self.client.set", "client.transaction().commit"]
