"""Fixtures of the cluster tests: one real ZooKeeper server per session (tests/support/zookeeper.py),
and a fresh root znode per test so tests never see each other's ledgers."""

from __future__ import annotations

import uuid

import pytest

from tests.support.zookeeper import ZooKeeperServer, missing


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory):
    reason = missing()
    if reason is not None:
        pytest.fail(reason)  # never a skip: CI installs it, and a skip is not a pass
    server = ZooKeeperServer(str(tmp_path_factory.mktemp("zookeeper"))).start()
    yield server
    server.stop()


@pytest.fixture
def zk_uri(zookeeper) -> str:
    return f"zk://{zookeeper.hosts}/t{uuid.uuid4().hex[:12]}/ledgers"
