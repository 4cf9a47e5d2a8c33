"""The client API's shape (issue 55 item 2), against a real bookie on 127.0.0.1: one
argument order for create and open, one range-read shape on both readers, one closed-ledger
error, every error exported from api.client, and delete beside create."""

from __future__ import annotations

import os

import pytest

import api.client
import bookie.errors
from api.client import (BookieError, FileMetadataStore, LedgerClosed, LedgerReader,
                        LedgerWriter, NoEntry, NoLedger, delete_ledger)

PASSWORD = b"api-tests"


async def test_create_takes_the_ledger_id_second_as_open_does(server):
    # The trap of the old order: create(URL, 101, b"pw") took 101 as the password and
    # failed on b"pw" as a digest type.
    async with await LedgerWriter.create(server.url, 101, b"pw") as writer:
        assert writer.ledger_id == 101
        assert await writer.append(b"one") == 0
    async with await LedgerReader.open(server.url, 101, b"pw") as reader:
        assert (await reader.read_entry(0)).payload == b"one"


async def test_create_refuses_a_password_where_the_ledger_id_goes(server):
    with pytest.raises(TypeError, match="password"):
        await LedgerWriter.create(server.url, b"pw")


async def test_a_single_bookie_range_read_streams_and_collects_as_a_replicated_one(server):
    async with await LedgerWriter.create(server.url, 102, PASSWORD) as writer:
        for i in range(5):
            await writer.append(b"e%d" % i)
    async with await LedgerReader.open(server.url, 102, PASSWORD) as reader:
        streamed = [entry.payload async for entry in reader.read_range(1, 3)]
        collected = [entry.payload for entry in await reader.read_range(1, 3)]
        with pytest.raises(NoEntry):
            await reader.read_range(3, 9)
    assert streamed == collected == [b"e1", b"e2", b"e3"]


async def test_a_closed_writer_raises_the_one_closed_ledger_error(server):
    writer = await LedgerWriter.create(server.url, 103, PASSWORD)
    await writer.append(b"x")
    await writer.close()
    with pytest.raises(LedgerClosed) as raised:
        await writer.append(b"too late")
    assert isinstance(raised.value, BookieError)
    assert raised.value.code == "ELEDGERCLOSED"


def test_every_error_the_clients_raise_is_exported_from_api_client():
    errors = {name for name, value in vars(bookie.errors).items()
              if isinstance(value, type) and issubclass(value, Exception)}
    assert errors <= set(api.client.__all__)
    for name in ("LedgerClosed", "NotEnoughBookies", "RecoveryUndecided",
                 "BeyondLastConfirmed", "DigestMismatch", "BadVersion", "LedgerExists"):
        assert hasattr(api.client, name), name


async def test_delete_removes_the_ledger_and_its_metadata_and_can_be_repeated(server, tmp_path):
    store = FileMetadataStore(os.path.join(str(tmp_path), "ledgers.json"))
    async with await LedgerWriter.create(server.url, password=PASSWORD,
                                         metadata_store=store) as writer:
        await writer.append(b"gone soon")
    ledger_id = writer.ledger_id
    await delete_ledger(server.url, ledger_id, metadata_store=store)
    with pytest.raises(NoLedger):
        await store.read(ledger_id)
    with pytest.raises((NoLedger, NoEntry)):
        async with await LedgerReader.open(server.url, ledger_id, PASSWORD) as reader:
            await reader.read_entry(0)
    await delete_ledger(server.url, ledger_id, metadata_store=store)   # after a crash: again
