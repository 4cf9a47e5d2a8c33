"""Ledger metadata: FileMetadataStore's compare-and-set and id allocation, and the ledger
library's use of it (OPEN -> CLOSED on close, IN_RECOVERY -> CLOSED on recovery, a writer
that loses to recovery, tails that end with a closed ledger)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os

import pytest

from api.client import (BadVersion, FileMetadataStore, LedgerExists, LedgerMetadata,
                        LedgerReader, LedgerWriter, MetadataState, recover_ledger)
from bookie.entry import DigestType
from bookie.errors import Fenced, NoLedger

PASSWORD = b"metadata-tests"


@pytest.fixture
def store(tmp_path) -> FileMetadataStore:
    return FileMetadataStore(os.path.join(str(tmp_path), "meta", "ledgers.json"))


async def test_compare_and_set_lets_exactly_one_of_two_racing_updates_win(store):
    created = await store.create(LedgerMetadata(None, DigestType.CRC32))
    assert (created.ledger_id, created.version) == (0, 1)
    first = dataclasses.replace(created, custom={"by": "first"})
    second = dataclasses.replace(created, custom={"by": "second"})
    outcomes = await asyncio.gather(store.write(first), store.write(second),
                                    return_exceptions=True)
    assert sum(isinstance(o, BadVersion) for o in outcomes) == 1
    stored = await store.read(0)
    assert stored.version == 2 and stored.custom["by"] in ("first", "second")
    assert stored.digest_type is DigestType.CRC32


async def test_allocated_ids_are_unique_and_never_reused_after_delete(store):
    made = await asyncio.gather(*(store.create(LedgerMetadata(None)) for _ in range(10)))
    assert sorted(m.ledger_id for m in made) == list(range(10))
    await store.delete(9, 1)
    assert (await store.create(LedgerMetadata(None))).ledger_id == 10
    with pytest.raises(LedgerExists):
        await store.create(LedgerMetadata(3))
    with pytest.raises(NoLedger):
        await store.read(9)
    assert await store.ledger_ids() == list(range(9)) + [10]


async def test_the_file_is_whole_json_replaced_atomically(store):
    await store.create(LedgerMetadata(5))
    with open(store.path, "rb") as handle:
        document = json.loads(handle.read())
    assert document["nextLedgerId"] == 6 and document["ledgers"]["5"]["state"] == "OPEN"
    assert not os.path.exists(store.path + ".tmp")
    again = FileMetadataStore(store.path)  # another client on the same machine
    assert (await again.read(5)).version == 1


async def test_close_marks_the_ledger_closed_at_its_last_entry(server, store):
    writer = await LedgerWriter.create(server.url, password=PASSWORD, digest_type="crc32",
                                       metadata_store=store)
    assert writer.metadata.state is MetadataState.OPEN
    for i in range(4):
        await writer.append(b"x" * (i + 1))
    await writer.close()
    closed = await store.read(writer.ledger_id)
    assert (closed.state, closed.last_entry_id, closed.length) == (
        MetadataState.CLOSED, 3, 10)
    with pytest.raises(LedgerExists):
        await LedgerWriter.create(server.url, password=PASSWORD, ledger_id=writer.ledger_id,
                                  metadata_store=store)


async def test_recovery_closes_in_metadata_and_the_old_writers_close_loses(server, store):
    writer = await LedgerWriter.create(server.url, password=PASSWORD, digest_type="mac",
                                       metadata_store=store)
    for i in range(3):
        await writer.append(b"entry %d" % i)
    result = await recover_ledger(server.url, writer.ledger_id, PASSWORD, metadata_store=store)
    assert result.lac == 2
    closed = await store.read(writer.ledger_id)
    assert (closed.state, closed.last_entry_id) == (MetadataState.CLOSED, 2)
    with pytest.raises(Fenced):
        await writer.append(b"late")
    assert await writer.close() == 2  # stopped by the fence: no metadata write
    again = await recover_ledger(server.url, writer.ledger_id, PASSWORD, metadata_store=store)
    assert again.already_closed and again.lac == 2


async def test_a_writer_whose_ledger_was_recovered_cannot_close_it(server, store):
    writer = await LedgerWriter.create(server.url, password=PASSWORD, metadata_store=store)
    await writer.append(b"one")
    # Recovery's metadata moves on while this writer has not touched the bookie since.
    current = await store.read(writer.ledger_id)
    await store.write(dataclasses.replace(current, state=MetadataState.CLOSED,
                                          last_entry_id=-1))
    with pytest.raises(Fenced, match="recovery"):
        await writer.close()


async def test_tail_ends_at_the_end_of_a_ledger_closed_in_metadata(server, store):
    writer = await LedgerWriter.create(server.url, password=PASSWORD, metadata_store=store)
    reader = await LedgerReader.open(server.url, writer.ledger_id, PASSWORD,
                                     metadata_store=store)
    for i in range(5):
        await writer.append(b"%d" % i)
    await writer.close()
    assert [e.payload async for e in reader.tail()] == [b"%d" % i for i in range(5)]
    await reader.close()


async def test_reader_takes_the_digest_type_from_metadata(server, store):
    async with await LedgerWriter.create(server.url, password=PASSWORD, digest_type="crc32",
                                         metadata_store=store) as writer:
        await writer.append(b"typed")
    async with await LedgerReader.open(server.url, writer.ledger_id, PASSWORD,
                                       metadata_store=store) as reader:
        assert reader.codec.digest_type is DigestType.CRC32
        assert (await reader.read_entry(0)).payload == b"typed"
