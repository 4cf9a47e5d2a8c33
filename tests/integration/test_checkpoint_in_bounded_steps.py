"""A checkpoint handles a big ledger in bounded steps (bookie/write_cache.py
FLUSH_RUN_ENTRIES), and a new ledger's first burst of adds loads its runtime once
(bookie/node/runtime.py ``load_runtime``): issue 28's latency work, checked for what it
must not change."""

from __future__ import annotations

import asyncio

from bookie import write_cache
from bookie.entry import frame_entry, master_key
from bookie.write_cache import WriteCache
from tests.support.servers import running_bookie

KEY = master_key(b"steps")


def test_flushing_runs_are_bounded_ascending_and_cover_the_half():
    cache = WriteCache()
    count = 2 * write_cache.FLUSH_RUN_ENTRIES + 17
    for entry_id in reversed(range(count)):  # out of order on purpose
        cache.put(7, entry_id, b"e%d" % entry_id)
    cache.put(3, 0, b"other")
    cache.swap()
    runs = list(cache.flushing_runs())
    assert [ledger for ledger, _ in runs] == [3, 7, 7, 7]
    assert all(len(run) <= write_cache.FLUSH_RUN_ENTRIES for _, run in runs)
    ids = [entry_id for ledger, run in runs if ledger == 7 for entry_id, _ in run]
    assert ids == list(range(count))
    assert all(data == b"e%d" % entry_id for ledger, run in runs if ledger == 7
               for entry_id, data in run)
    cache.clear_flushing()
    assert list(cache.flushing_runs()) == []


async def test_a_ledger_flushed_in_several_runs_is_indexed_and_counted_whole(bookie_config):
    count = write_cache.FLUSH_RUN_ENTRIES * 2 + 5
    entries = [frame_entry(9, e, e - 1, 0, bytes([e % 251]) * 40) for e in range(count)]
    async with running_bookie(bookie_config) as running:
        bookie = running.bookie
        for start in range(0, count, 500):
            chunk = entries[start:start + 500]
            await bookie.add_batch(9, [(start + i, e) for i, e in enumerate(chunk)], KEY)
        await bookie.checkpoint()
        assert bookie.storage.cache.get(9, 0) is None  # moved out of the write cache
        info = await bookie.ledger_info(9)
        assert (info["entries"], info["bytes"]) == (count, sum(len(e) for e in entries))
        assert await bookie.read_range(9, 0, 3) == entries[:4]
        assert await bookie.read_entry(9, count - 1) == entries[-1]


async def test_a_new_ledgers_burst_of_adds_loads_its_runtime_once(bookie_config):
    async with running_bookie(bookie_config) as running:
        bookie = running.bookie
        loads = []
        real = bookie._load_runtime

        def counting(ledger_id):  # the real load, counted
            loads.append(ledger_id)
            return real(ledger_id)

        bookie._load_runtime = counting
        adds = [bookie.add_entry(11, e, frame_entry(11, e, e - 1, 0, b"x" * 30), KEY)
                for e in range(200)]
        await asyncio.gather(*adds)
        assert loads == [11]
        assert await bookie.entry_id_ranges(11) == [[0, 199]]
