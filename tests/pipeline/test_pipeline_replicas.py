"""``python -m bookie.pipeline replicas`` (docs/pipeline.md "Jobs"): the replica check as a
Spark job over a real cluster (ZooKeeper, bookie daemons), one task per share of the ledger
tree's slices."""

from __future__ import annotations

import asyncio

import pytest

from api.client import BookieClient
from api.client.codec import LedgerCodec
from api.client.ensemble import BookKeeper, EnsembleWriter
from api.client.metadata import LedgerMetadata
from api.cluster.underreplication import Underreplication
from bookie.pipeline.__main__ import parse_args
from bookie.pipeline.replicas import run_replicas
from tests.support.servers import Daemon

FLAGS = ("--checkpoint-interval-ms", "3600000", "--journal-prealloc-bytes", "1MiB",
         "--autorecovery-daemon-enabled", "false")


@pytest.fixture
def bookies(tmp_path, zk_uri):
    daemons = [Daemon(str(tmp_path / f"b{i}" / "data"), *FLAGS, "--metadata-service-uri",
                      zk_uri).start() for i in range(3)]
    yield daemons
    for daemon in daemons:
        assert daemon.terminate() == 0


#: Explicit ids in different slices of the id space, one in the long (19-digit) layout.
IDS = (1, 10_001, 20_002, 2**31 + 5, 30_003)


async def make_ledgers(zk_uri: str) -> None:
    async with await BookKeeper.connect(zk_uri) as bk:
        ensemble = tuple(await bk.writable_bookies())
        for ledger_id in IDS:
            metadata = await bk.store.create(LedgerMetadata(
                ledger_id=ledger_id, ensemble_size=3, write_quorum=2, ack_quorum=2,
                password=b"pw", ensembles=((0, ensemble),)))
            writer = EnsembleWriter(bk, metadata, LedgerCodec.for_password(
                ledger_id, b"pw", metadata.digest_type))
            for i in range(12):
                await writer.append(b"entry %d" % i)
            await writer.close()


def test_the_replicas_job_marks_exactly_the_ledgers_missing_copies(spark, bookies, zk_uri):
    asyncio.run(make_ledgers(zk_uri))
    damaged = IDS[3]

    async def damage() -> tuple[int, str]:
        async with await BookKeeper.connect(zk_uri) as bk:
            holder = (await bk.store.read(damaged)).ensembles[0][1][1]
            async with BookieClient(f"http://{holder}") as client:
                await client.delete_ledger(damaged)
            return holder
    holder = asyncio.run(damage())
    dry = run_replicas(spark, zk_uri, mark=False)
    assert dry.problems == 1 and dry.summary["ledgers"] == 5 and dry.summary["marked"] == 0
    assert dry.summary["slices"] == 5  # each id in a slice of its own
    assert [(r["ledgerId"], r["bookieId"]) for r in dry.rows] == [(damaged, holder)]
    assert dry.rows[0]["missing"] == 8  # E=3, Qw=2: 2/3 of 12 entries
    result = run_replicas(spark, zk_uri, tasks=3)
    assert result.problems == 1 and result.summary["marked"] == 1

    async def marker():
        async with await BookKeeper.connect(zk_uri) as bk:
            ur = Underreplication(bk.store.client, bk.store.root)
            return await asyncio.to_thread(ur.marked), await asyncio.to_thread(ur.marker,
                                                                               damaged)
    marked, found = asyncio.run(marker())
    assert marked == [damaged] and found[0] == [holder]


def test_the_replicas_job_needs_a_metadata_service_and_no_path():
    with pytest.raises(SystemExit):
        parse_args(["replicas"])
    with pytest.raises(SystemExit):
        parse_args(["scrub"])
    assert parse_args(["replicas", "--metadata-service-uri", "zk://h:1/ledgers"]).paths == []


def test_the_replicas_job_over_a_tls_cluster_with_zookeeper_acls(spark, tmp_path, zk_uri,
                                                                monkeypatch):
    """The tasks reach mutual-TLS bookies and an ACL'd ZooKeeper with the driver's file
    variables (docs/operations.md §6, §7), never a shipped password."""
    from api.client import zk_auth
    from api.tls import CLIENT_CERT_ENV, CLIENT_KEY_ENV, TRUST_ENV
    from tests.support.tls import pki_under

    pki = pki_under(str(tmp_path))
    digest = tmp_path / "zk-digest"
    digest.write_text("pipeline:pipeline-secret\n")
    for name, value in ((TRUST_ENV, pki.ca.cert_file), (CLIENT_CERT_ENV, pki.client.cert_file),
                        (CLIENT_KEY_ENV, pki.client.key_file),
                        (zk_auth.DIGEST_FILE_ENV, str(digest))):
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(zk_auth, "_told", [])
    daemons = []
    try:
        for i in range(3):
            daemon = pki.daemon(str(tmp_path / f"b{i}" / "data"), f"b{i}", *FLAGS,
                                "--metadata-service-uri", zk_uri)
            daemons.append(daemon)
            daemon.start()
        asyncio.run(make_ledgers(zk_uri))
        result = run_replicas(spark, zk_uri, mark=False, tasks=2)
        assert result.problems == 0 and result.summary["ledgers"] == len(IDS)
        assert result.summary["unansweredBookies"] == []  # every bookie answered over TLS
    finally:
        for daemon in daemons:
            daemon.terminate()
