"""Shared fixtures: data dirs, a real bookie behind a real aiohttp server on 127.0.0.1, clients.

Randomized tests take ``--seed``; each prints the seed it used on failure.
"""

from __future__ import annotations

import os
import random
import uuid

import pytest

from tests.support.zookeeper import ZooKeeperServer, missing


def pytest_addoption(parser):
    parser.addoption("--seed", type=int, default=None, help="seed for randomized tests")


@pytest.fixture
def seed(request) -> int:
    value = request.config.getoption("--seed")
    if value is None:
        value = random.SystemRandom().randrange(2**31)
    request.node.user_properties.append(("seed", value))
    print(f"seed={value} (re-run with --seed {value})")
    return value


@pytest.fixture
def data_dir(tmp_path) -> str:
    path = os.path.join(str(tmp_path), "data")
    os.makedirs(path)
    return path


@pytest.fixture
def bookie_config(data_dir):
    from bookie.config import BookieConfig

    return BookieConfig(data_dir=data_dir, port=0, checkpoint_interval_ms=3_600_000,
                        journal_prealloc_bytes=1024 * 1024)


@pytest.fixture
async def server(bookie_config):
    """A started bookie served on 127.0.0.1:<free port>: yields (bookie, base_url)."""
    from tests.support.servers import running_bookie

    async with running_bookie(bookie_config) as running:
        yield running


@pytest.fixture
async def client(server):
    from api.client import BookieClient

    async with BookieClient(server.url) as c:
        yield c


# -- a real ZooKeeper (tests/cluster/, tests/deploy/'s cluster bookie) ------------------------


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


@pytest.fixture
def zk(zookeeper):
    """A kazoo client of the test's own on the session's ZooKeeper (to look at what a bookie
    wrote there)."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=zookeeper.hosts)
    client.start(timeout=15)
    yield client
    client.stop()
    client.close()
