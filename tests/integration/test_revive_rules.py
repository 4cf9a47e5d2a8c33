"""W5 and W7 (bookie/node/writes.py, bookie/write_rules.py): a recovery add that lifts a
tombstone GC left, on a real bookie over real HTTP, asking a real metadata store (file://)
through GC from metadata's own ``listed`` (GM3), as a cluster bookie does. Issue 35's bugs
E (a wrong key revived the copy), F (the copy came back unfenced) and G (a delete between
the metadata read and the revive left a live copy of a deleted ledger)."""

from __future__ import annotations

import os

import pytest

from api.client import BookieClient
from api.client.metadata import FileMetadataStore, LedgerMetadata
from api.cluster.gc_metadata import MetadataGc
from bookie.entry import DigestType, frame_entry, master_key
from bookie.errors import Fenced, NoLedger, Unauthorized
from tests.support.servers import running_bookie

PASSWORD = b"revive"
KEY, OTHER_KEY = master_key(PASSWORD), master_key(b"someone else")
LEDGER = 41


def entry(entry_id: int, payload: bytes = b"r" * 40) -> bytes:
    return frame_entry(LEDGER, entry_id, entry_id - 1, (entry_id + 1) * len(payload),
                       payload, DigestType.CRC32)


@pytest.fixture
async def store(tmp_path):
    store = FileMetadataStore(os.path.join(str(tmp_path), "metadata.json"))
    await store.create(LedgerMetadata(LEDGER, digest_type=DigestType.CRC32,
                                      password=PASSWORD))
    return store


async def gc_deleted_copy(running, store, client) -> MetadataGc:
    """The ledger's copy written here, then deleted as GM2 deletes it (a synced tombstone),
    while the metadata still lists the ledger; the bookie asks ``listed`` before a revive."""
    for i in range(3):
        await client.add_entry(LEDGER, i, entry(i), KEY, digest_type="crc32")
    await running.bookie.delete_ledger(LEDGER)
    gc = MetadataGc("here:3181", store, None, 0.0, running.bookie.delete_ledger)
    running.bookie.may_revive = gc.listed
    return gc


async def test_e_a_revive_needs_the_key_the_ledger_was_deleted_with(bookie_config, store):
    async with running_bookie(bookie_config) as running:
        async with BookieClient(running.url) as client:
            await gc_deleted_copy(running, store, client)
            with pytest.raises(Unauthorized, match="not reviving"):
                await client.add_entry(LEDGER, 0, entry(0), OTHER_KEY, digest_type="crc32",
                                       recovery=True)
            assert running.bookie.storage.ledgers.is_deleted(LEDGER)
            with pytest.raises(NoLedger):
                await client.read_entry(LEDGER, 0)
            await client.add_entry(LEDGER, 0, entry(0), KEY, digest_type="crc32",
                                   recovery=True)
            assert await client.read_entry(LEDGER, 0) == entry(0)
            with pytest.raises(Unauthorized):  # the revived ledger kept its key
                await client.add_entry(LEDGER, 1, entry(1), OTHER_KEY, digest_type="crc32",
                                       recovery=True)


async def test_f_a_revived_copy_comes_back_fenced_with_its_digest_type(bookie_config, store):
    async with running_bookie(bookie_config) as running:
        async with BookieClient(running.url) as client:
            await gc_deleted_copy(running, store, client)
            await client.add_entry(LEDGER, 0, entry(0), KEY, digest_type="crc32",
                                   recovery=True)
            state = running.bookie.storage.ledgers.get(LEDGER)
            assert state.exists and state.fenced and state.digest_type == DigestType.CRC32
            with pytest.raises(Fenced):  # a zombie writer's add (S2)
                await client.add_entry(LEDGER, 3, entry(3), KEY, digest_type="crc32")
    async with running_bookie(bookie_config) as running:  # the revived state was synced
        async with BookieClient(running.url) as client:
            with pytest.raises(Fenced):
                await client.add_entry(LEDGER, 3, entry(3), KEY, digest_type="crc32")
            assert await client.read_entry(LEDGER, 0) == entry(0)


async def test_g_a_delete_between_the_metadata_read_and_the_revive_keeps_the_tombstone(
        bookie_config, store):
    async with running_bookie(bookie_config) as running:
        async with BookieClient(running.url) as client:
            gc = await gc_deleted_copy(running, store, client)

            async def listed_then_deleted(ledger_id: int) -> bool:
                """The metadata read answers "listed", and the client's delete lands right
                after it, before the revive: the worst moment."""
                listed = await gc.listed(ledger_id)
                if listed:
                    await store.delete(ledger_id, (await store.read(ledger_id)).version)
                return listed
            running.bookie.may_revive = listed_then_deleted
            with pytest.raises(NoLedger, match="deleted from the metadata"):
                await client.add_entry(LEDGER, 0, entry(0), KEY, digest_type="crc32",
                                       recovery=True)
            assert running.bookie.storage.ledgers.is_deleted(LEDGER)
            running.bookie.may_revive = gc.listed
            with pytest.raises(NoLedger):
                await client.add_entry(LEDGER, 0, entry(0), KEY, digest_type="crc32",
                                       recovery=True)
            with pytest.raises(NoLedger):
                await client.read_entry(LEDGER, 0)
