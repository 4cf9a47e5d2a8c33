"""Ledger ids past 2^31 (docs/cluster.md §1): BookKeeper's ``idgen-long`` generator and its long
hierarchical znode paths (api/client/zk_ids.py ID1-ID4, api/client/metadata_paths.py), on a
real ZooKeeper. The cluster is put past 2^31 the way BookKeeper's own generator test does it
(TestLongZkLedgerIdGenerator): by creating ``idgen-long`` (and HOB- znodes) before the ids
are taken; ZooKeeper offers no way to move a sequential counter near 2^31 without 2^31
creates, so the 31-bit counter's own exhaustion is checked on ZooKeeper's names alone."""

from __future__ import annotations

import asyncio

from api.client import BookieClient
from api.client.ensemble import BookKeeper
from api.client.metadata import LedgerMetadata
from api.client.metadata_service import open_metadata_store
from api.client.metadata_uri import parse_uri
from api.client.zk_ids import hob_numbers, usable
from api.cluster.autorecovery.replica_check import check_ledgers
from api.cluster.underreplication import Underreplication
from bookie.errors import NoLedger

GC_FLAGS = ("--gc-interval-ms", "0", "--gc-metadata-grace-ms", "0")


def test_where_zookeepers_counter_ends_the_31_bit_ids():
    """ID1: ZooKeeper prints a sequential znode's counter %010d of a signed int, so after
    ID-2147483646 come ID-2147483647 (which ZkLedgerIdGenerator counts as exhausted) and
    ID--2147483648."""
    def sequence(name: str) -> int:
        return int(name.rsplit("ID-", 1)[1])
    assert usable(sequence("/ledgers/idgen/ID-0000000000"))
    assert usable(sequence("/ledgers/idgen/ID-2147483646"))
    assert not usable(sequence("/ledgers/idgen/ID-2147483647"))
    assert not usable(sequence("/ledgers/idgen/ID--2147483648"))
    assert not usable(sequence("/ledgers/idgen/ID--000000001"))
    assert hob_numbers(["HOB-0000000001", "HOB-0000000012", "ID-0000000003", "HOB-x"]) == \
        [1, 12]


async def test_past_2_31_ids_and_znodes_are_bookkeepers(zk_uri, zk):
    _, root = parse_uri(zk_uri)
    async with open_metadata_store(zk_uri) as store:
        short = await store.create(LedgerMetadata(ledger_id=None))
        assert 0 <= short.ledger_id < 2**31 - 1
        assert zk.exists(f"{root}/00/0000/L{short.ledger_id:04d}")
        # What a BookKeeper or Pulsar client leaves once the 31-bit ids are spent (ID2).
        zk.create(f"{root}/idgen-long")
        first = await store.create(LedgerMetadata(ledger_id=None))
        second = await store.create(LedgerMetadata(ledger_id=None))
        assert first.ledger_id == 1 << 32  # HOB-0000000001, its first sequence number
        assert 1 << 32 < second.ledger_id < (1 << 32) + 2**31 - 1
        assert zk.get_children(f"{root}/idgen-long") == ["HOB-0000000001"]
        assert zk.get_children(f"{root}/idgen-long/HOB-0000000001") == []  # ID- deleted
        # 4294967296 as 19 digits split 3/4/4/4/4: LongHierarchicalLedgerManager's path.
        assert zk.exists(f"{root}/000/0000/0042/9496/L7296")
        assert await store.ledger_ids() == [short.ledger_id, first.ledger_id,
                                            second.ledger_id]
        slices = await asyncio.to_thread(store.slices)
        assert ["00", "0000"] in slices and ["000", "0000"] in slices
        assert await asyncio.to_thread(store.ledger_ids_below, ["000", "0000"]) == \
            [first.ledger_id, second.ledger_id]
        assert (await store.read(first.ledger_id)).ledger_id == first.ledger_id
        await store.delete(first.ledger_id, first.version)
        assert await store.ledger_ids() == [short.ledger_id, second.ledger_id]


async def test_the_largest_hob_serves_and_all_but_three_are_cleaned_up(zk_uri, zk):
    """ID3, ID4: ids come from the largest HOB- znode; older ones go, the 3 largest stay."""
    _, root = parse_uri(zk_uri)
    for high in range(1, 6):
        zk.create(f"{root}/idgen-long/HOB-{high:010d}", makepath=True)
    async with open_metadata_store(zk_uri) as store:
        made = await store.create(LedgerMetadata(ledger_id=None))
        assert made.ledger_id == 5 << 32  # 21474836480
        assert zk.exists(f"{root}/000/0000/0214/7483/L6480")
        assert sorted(zk.get_children(f"{root}/idgen-long")) == [
            "HOB-0000000003", "HOB-0000000004", "HOB-0000000005"]


async def test_ledgers_past_2_31_are_written_read_collected_and_checked(zk_uri, zk,
                                                                        start_bookies):
    """Through the client and three bookie daemons: a ledger with a long id written, read
    back, deleted and collected by the bookies' GC from metadata, and the replica check
    finds and marks a long-id ledger that lost copies (BookKeeper's marker path)."""
    _, root = parse_uri(zk_uri)
    zk.create(f"{root}/idgen-long/HOB-0000000007", makepath=True)  # ids 7 << 32 on
    daemons = start_bookies(3, *GC_FLAGS)
    async with await BookKeeper.connect(zk_uri) as bk:
        ledgers = {}
        for name in ("kept", "doomed"):
            writer = await bk.create_ledger(3, 2, 2, password=b"pw")
            for i in range(10):
                await writer.append(f"{name} {i}".encode())
            assert await writer.close() == 9
            ledgers[name] = writer.ledger_id
        kept, doomed = ledgers["kept"], ledgers["doomed"]
        assert kept == 7 << 32 and 7 << 32 < doomed < 8 << 32
        reader = await bk.open_ledger(kept, b"pw")
        assert [e.payload for e in await reader.read_range(0, 9)] == \
            [f"kept {i}".encode() for i in range(10)]
        assert sorted(await bk.store.ledger_ids()) == [kept, doomed]

        await bk.delete_ledger(doomed)
        for daemon in daemons:  # GC from metadata: the doomed one goes, the kept one stays
            async with BookieClient(daemon.url) as client:
                result = await client._request("POST", "/v1/bookie/gc", admin=True)
                assert result["problems"] == []
                listed = (await client._request("GET", "/v1/ledgers"))["ledgers"]
                assert doomed not in listed and kept in listed
        for daemon in daemons:
            assert f"GC from metadata: deleted ledgers [{doomed}]" in daemon.log_text()

        holder = (await bk.store.read(kept)).ensembles[0][1][0]
        async with BookieClient(f"http://{holder}") as client:
            await client.delete_ledger(kept)  # its copies gone; the bookie lives on
            try:
                await client.read_entry(kept, 0)
                raise AssertionError("the copies are still there")
            except NoLedger:
                pass
        ur = Underreplication(bk.store.client, bk.store.root)
        await asyncio.to_thread(ur.ensure)

        async def mark(ledger_id, bookies):
            await asyncio.to_thread(ur.mark, ledger_id, bookies)
        result = await check_ledgers(bk, await bk.store.ledger_ids(),
                                     await bk.alive_bookies(), mark)
        assert list(result.missing) == [kept] and list(result.missing[kept]) == [holder]
        assert await asyncio.to_thread(ur.marked) == [kept]
        # ZkLedgerUnderreplicationManager's path: 16-bit hex levels, then urL%010d.
        assert zk.exists(f"{root}/underreplication/ledgers/0000/0007/0000/0000/"
                         f"urL{kept}")
