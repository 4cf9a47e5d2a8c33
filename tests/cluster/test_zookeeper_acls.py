"""ZooKeeper authentication and ACLs (docs/operations.md §7, api/client/zk_auth.py ZA1-ZA2),
against a real ZooKeeper and real bookie daemons: with credentials every znode the cluster
creates is that identity's alone, an unauthenticated session can neither read nor change any of
it, and a process with other credentials gets an error naming the path."""

from __future__ import annotations

import asyncio

import pytest
from kazoo.security import make_digest_acl

from api.client import zk_auth
from api.client.ensemble import BookKeeper
from api.client.metadata import MetadataError
from api.client.metadata_paths import ledger_path
from api.client.zookeeper import parse_uri
from tests.cluster.conftest import QUIET_FLAGS
from tests.cluster.credentialed import (credentialed_bookies, outsider_could, shown_by,
                                        walk, write_a_ledger)
from tests.support.servers import Daemon
from tests.support.zookeeper import free_port

USER, PASSWORD = "bookkeeper", "z00keeper-s3cret-password"


@pytest.fixture
def secured(tmp_path, zk_uri, monkeypatch):
    """Three bookies whose sessions authenticate (the password from a file), and this test
    process authenticating the same way (from the environment)."""
    with credentialed_bookies(tmp_path, zk_uri, monkeypatch, zk_auth.DIGEST_ENV,
                              "--zk-digest-file", f"{USER}:{PASSWORD}") as daemons:
        yield daemons


def test_every_znode_of_a_secured_cluster_is_its_owners_alone(secured, zk_uri, zookeeper):
    ledger_id = asyncio.run(write_a_ledger(zk_uri))
    hosts, root = parse_uri(zk_uri)
    owner = zk_auth.new_client(hosts)
    owner.start(timeout=15)
    try:
        paths = list(walk(owner, root))
        assert ledger_path(root, ledger_id) in paths
        assert any(p.startswith(f"{root}/available/") for p in paths)
        assert any(p.startswith(f"{root}/cookies/") for p in paths)
        assert any(p.startswith(f"{root}/underreplication") for p in paths)
        only = [make_digest_acl(USER, PASSWORD, all=True)]
        open_ones = [p for p in paths if owner.get_acls(p)[0] != only]
        assert open_ones == []  # ZA2: the root too
    finally:
        owner.stop()
        owner.close()
    for daemon in secured:  # ZA1: not in a log, the info, the metrics or the API's errors
        shown = shown_by(daemon)
        assert not [text for text in shown if PASSWORD in text or USER + ":" in text]


def test_an_unauthenticated_session_can_neither_read_nor_change_the_cluster(
        secured, zk_uri, zookeeper):
    ledger_id = asyncio.run(write_a_ledger(zk_uri))
    hosts, root = parse_uri(zk_uri)
    owner = zk_auth.new_client(hosts)
    owner.start(timeout=15)
    cookie = sorted(owner.get_children(f"{root}/cookies"))[0]
    owner.stop()
    owner.close()
    assert outsider_could(hosts, lambda outsider: {
        "read ledger metadata": lambda: outsider.get(ledger_path(root, ledger_id)),
        "list the registered bookies": lambda: outsider.get_children(f"{root}/available"),
        "delete ledger metadata": lambda: outsider.delete(ledger_path(root, ledger_id)),
        "forge a registration": lambda: outsider.create(
            f"{root}/available/10.0.0.66:3181", b"", ephemeral=True),
        "mark a ledger under-replicated": lambda: outsider.create(
            f"{root}/underreplication/ledgers/0000", b""),
        "take a replication lock": lambda: outsider.create(
            f"{root}/underreplication/locks/urL0000000001", b"", ephemeral=True),
        "disable autorecovery": lambda: outsider.create(
            f"{root}/underreplication/disable", b""),
        "replace a cookie": lambda: outsider.set(f"{root}/cookies/{cookie}", b"forged"),
        "delete a cookie": lambda: outsider.delete(f"{root}/cookies/{cookie}"),
    }) == []
    assert asyncio.run(_read_back(zk_uri, ledger_id)) == [b"entry %d" % i for i in range(10)]


async def _read_back(uri: str, ledger_id: int) -> list[bytes]:
    async with await BookKeeper.connect(uri) as bk:
        reader = await bk.open_ledger(ledger_id, b"pw", recover=False)
        return [e.payload for e in await reader.read_range(0, 9)]


def test_other_credentials_get_an_error_naming_the_path(secured, zk_uri, monkeypatch):
    ledger_id = asyncio.run(write_a_ledger(zk_uri))
    monkeypatch.setenv(zk_auth.DIGEST_ENV, "intruder:guess")

    async def open_it():
        async with await BookKeeper.connect(zk_uri) as bk:
            await bk.open_ledger(ledger_id, b"pw", recover=False)
    with pytest.raises(MetadataError) as refused:
        asyncio.run(open_it())
    message = str(refused.value)
    _, root = parse_uri(zk_uri)
    assert ledger_path(root, ledger_id) in message and "not authorized" in message
    assert "'intruder'" in message and "guess" not in message and PASSWORD not in message


def test_a_bookie_with_other_credentials_refuses_to_start_naming_the_path(secured, zk_uri,
                                                                         tmp_path):
    intruder = Daemon(str(tmp_path / "intruder" / "data"), *QUIET_FLAGS,
                      "--metadata-service-uri", zk_uri, "--port", str(free_port()),
                      env={zk_auth.DIGEST_ENV: "intruder:guess"})
    with pytest.raises(RuntimeError):  # it exits instead of getting ready
        intruder.start(timeout_s=60)
    intruder.proc.wait(timeout=30)
    log = intruder.log_text()
    _, root = parse_uri(zk_uri)
    assert "not authorized with user 'intruder'" in log and root in log
    assert "guess" not in log
