"""GC from metadata (docs/cluster.md §2, GM1): a cluster bookie deletes the local ledgers its
ZooKeeper metadata no longer lists, once missing for the grace period, and never others."""

from __future__ import annotations


import pytest

from api.client import BookieClient
from api.client.metadata import LedgerMetadata
from api.client.metadata_service import open_metadata_store
from bookie.entry import frame_entry, master_key
from bookie.errors import NoLedger
from tests.support.servers import Daemon

KEY = master_key(b"gc-metadata")
FLAGS = ("--checkpoint-interval-ms", "3600000", "--journal-prealloc-bytes", "1MiB",
         "--gc-interval-ms", "0")


async def write(client: BookieClient, ledger_id: int, count: int = 5) -> None:
    for entry_id in range(count):
        await client.add_entry(ledger_id, entry_id, frame_entry(
            ledger_id, entry_id, entry_id - 1, entry_id, b"x" * 100), KEY)


async def setup(tmp_path, zk_uri: str, grace_ms: int):
    daemon = Daemon(str(tmp_path / "data"), *FLAGS, "--metadata-service-uri", zk_uri,
                    "--gc-metadata-grace-ms", str(grace_ms)).start()
    store = open_metadata_store(zk_uri)
    await store.__aenter__()
    doomed = await store.create(LedgerMetadata(ledger_id=None))
    kept = await store.create(LedgerMetadata(ledger_id=None))
    return daemon, store, doomed, kept


async def test_a_ledger_deleted_in_metadata_leaves_the_bookie_at_gc(tmp_path, zk_uri):
    daemon, store, doomed, kept = await setup(tmp_path, zk_uri, grace_ms=0)
    try:
        async with BookieClient(daemon.url) as client:
            await write(client, doomed.ledger_id)
            await write(client, kept.ledger_id)
            await store.delete(doomed.ledger_id, doomed.version)  # the client's delete
            result = await client._request("POST", "/v1/bookie/gc", admin=True)
            assert result["problems"] == []
            with pytest.raises(NoLedger):
                await client.read_entry(doomed.ledger_id, 0)
            assert await client.read_entry(kept.ledger_id, 4)
            listed = await client._request("GET", "/v1/ledgers")
            assert doomed.ledger_id not in listed["ledgers"]
            assert kept.ledger_id in listed["ledgers"]
    finally:
        await store.close()
        assert daemon.terminate() == 0
    assert "GC from metadata: deleted ledgers [%d]" % doomed.ledger_id in daemon.log_text()


async def test_a_ledger_missing_for_less_than_the_grace_period_is_kept(tmp_path, zk_uri):
    daemon, store, doomed, kept = await setup(tmp_path, zk_uri, grace_ms=3_600_000)
    try:
        async with BookieClient(daemon.url) as client:
            await write(client, doomed.ledger_id)
            await store.delete(doomed.ledger_id, doomed.version)
            await client._request("POST", "/v1/bookie/gc", admin=True)
            await client._request("POST", "/v1/bookie/gc", admin=True)
            assert await client.read_entry(doomed.ledger_id, 4)  # young: kept
    finally:
        await store.close()
        assert daemon.terminate() == 0
    assert "1 missing from metadata for less than the grace period" in daemon.log_text()
