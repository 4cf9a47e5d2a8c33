"""The replicated reader under BookKeeper's ReadHandle names (issue 55 item 2), on real
bookies and ZooKeeper: read, read_unconfirmed, the LAC without asking, with one answer and
with the long poll's piggybacked entry, and the ledger list."""

from __future__ import annotations

import asyncio

import pytest

from api.client import BeyondLastConfirmed, BookKeeper

FLAGS = ("--checkpoint-interval-ms", "3600000", "--journal-prealloc-bytes", "1MiB")
WAIT_S = 60  # bounds a failure; never a synchronisation


@pytest.fixture
def bookies(start_bookies):
    return start_bookies(3, *FLAGS)


async def test_read_handle_names_on_an_open_ledger(bookies, zk_uri):
    async with await BookKeeper.connect(zk_uri) as bk:
        writer = await bk.create_ledger(3, 2, 2, password=b"pw")
        for i in range(5):
            await writer.append(b"e%d" % i)
        reader = await bk.open_ledger(writer.ledger_id, b"pw", recover=False)
        assert not reader.is_closed and reader.last_add_confirmed == -1   # nothing asked yet
        # Entry 4 is acknowledged to the writer; the bookies may know a LAC below it (it
        # travels piggybacked on the next entry), so only read_unconfirmed promises it.
        unconfirmed = [e.payload async for e in reader.read_unconfirmed(0, 4)]
        assert unconfirmed == [b"e%d" % i for i in range(5)]
        first = await reader.try_read_last_add_confirmed()
        assert 2 <= first <= 4 and reader.last_add_confirmed == first   # any one bookie
        assert await reader.read_last_add_confirmed() >= first
        assert [e.payload for e in await reader.read(0, 3)] == unconfirmed[:4]
        with pytest.raises(BeyondLastConfirmed):
            await reader.read(0, 9)

        # The long poll: asked for entry 5 before it exists, answered once it is confirmed.
        waiting = asyncio.ensure_future(reader.read_last_add_confirmed_and_entry(5, 20_000))
        await writer.append(b"e5")
        await writer.append(b"e6")      # carries LAC 5 to the bookies
        lac, entry = await asyncio.wait_for(waiting, WAIT_S)
        assert lac >= 5 and entry.entry_id == 5 and entry.payload == b"e5"
        lac, entry = await reader.read_last_add_confirmed_and_entry(100, 50)
        assert entry is None and lac < 100                                   # timed out

        assert await writer.close() == 6
        closed = await bk.open_ledger(writer.ledger_id, b"pw")
        assert closed.is_closed and closed.length == 14
        assert writer.ledger_id in await bk.list_ledgers()
        await bk.delete_ledger(writer.ledger_id)
        assert writer.ledger_id not in await bk.list_ledgers()


async def test_batch_read_and_the_explicit_lac_of_an_idle_writer(bookies, zk_uri):
    async with await BookKeeper.connect(zk_uri) as bk:
        writer = await bk.create_ledger(3, 2, 2, password=b"pw", explicit_lac_interval_ms=50)
        for i in range(5):
            await writer.append(b"e%d" % i)
        reader = await bk.open_ledger(writer.ledger_id, b"pw", recover=False)
        # The last entry's own LAC (3) travels with no later entry: only the idle writer's
        # explicit LAC (EL1) tells the bookies 4 is confirmed, and ends this long poll.
        lac, entry = await reader.read_last_add_confirmed_and_entry(4, 20_000)
        assert lac == 4 and entry.payload == b"e4"
        batch = await reader.batch_read(1, 3, 10**6)
        assert [e.payload for e in batch] == [b"e1", b"e2", b"e3"]
        assert [e.payload for e in await reader.batch_read(1, 10, 4)] == [b"e1", b"e2"]
        assert [e.payload for e in await reader.batch_read(3, 10, 10**6)] == [b"e3", b"e4"]
        with pytest.raises(BeyondLastConfirmed):
            await reader.batch_read(5, 10, 10**6)
        await writer.close()
