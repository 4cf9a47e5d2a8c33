"""`GET /v1/ledgers/{L}` costs O(cached entries), never a walk over the ledger (issue 13).

Before, ledger info read every entry of the ledger (0.4 s for 60k entries, on the read
threads). Now the counters live in the ledger's state: the proof here is that info still
answers the exact figures after every entry log on disk was truncated to nothing, when any
read of a stored entry fails. Re-adds are not counted twice; the counters survive a clean
restart and a kill -9 with replay.
"""

from __future__ import annotations

import glob
import os

import pytest

from api.client import BookieClient
from bookie.errors import IOFailure
from bookie.entry import DigestType, frame_entry, master_key
from tests.support.servers import Daemon, running_bookie

KEY = master_key(b"usage")


def entry(ledger_id: int, entry_id: int) -> bytes:
    return frame_entry(ledger_id, entry_id, entry_id - 1, 0, bytes(10 + entry_id),
                       DigestType.CRC32C)


async def add(client: BookieClient, ledger_id: int, entry_ids) -> int:
    size = 0
    for entry_id in entry_ids:
        data = entry(ledger_id, entry_id)
        await client.add_entry(ledger_id, entry_id, data, KEY)
        size += len(data)
    return size


async def usage(client: BookieClient, ledger_id: int) -> tuple[int, int]:
    info = await client.ledger_info(ledger_id)
    return info["entries"], info["bytes"]


async def test_info_is_exact_without_reading_a_stored_entry(server, client, bookie_config):
    size = await add(client, 7, range(30))
    await add(client, 7, [3, 29])  # client retries: identical re-adds, not new entries
    assert await usage(client, 7) == (30, size)
    await client.checkpoint()
    assert await usage(client, 7) == (30, size)
    size += await add(client, 7, range(30, 40))  # in the write cache only
    assert await usage(client, 7) == (40, size)
    await client.checkpoint()
    for log in glob.glob(os.path.join(bookie_config.ledger_dir, "*.log")):
        os.truncate(log, 0)
    with pytest.raises(IOFailure):  # 500 EIO: every stored copy is gone
        await client.read_entry(7, 5)
    assert await usage(client, 7) == (40, size)


async def test_counters_survive_a_clean_restart(server, client, bookie_config):
    size = await add(client, 8, range(25))
    await server.bookie.close()
    async with running_bookie(bookie_config) as running:
        async with BookieClient(running.url) as again:
            assert await usage(again, 8) == (25, size)


async def test_and_a_kill9_with_replay(tmp_path):
    daemon = Daemon(str(tmp_path / "data"), "--checkpoint-interval-ms", "86400000").start()
    async with BookieClient(daemon.url) as client:
        size = await add(client, 9, range(20))
        await client.checkpoint()
        size += await add(client, 9, range(20, 26))
        await add(client, 9, [4])  # a re-add after the checkpoint: replayed, not new
    daemon.kill9()
    daemon.start()
    async with BookieClient(daemon.url) as client:
        assert await usage(client, 9) == (26, size)
    assert daemon.terminate() == 0


async def test_a_ledger_created_by_an_add_has_known_counters_from_its_first_checkpoint(
        bookie_config):
    """docs/formats.md §7.2: a new ledger's counters start at 0, 0 and each checkpoint adds
    what it indexed. A ledger made by the write path started "not known", so its first
    ledger info walked it in the index (U2's recount) instead of reading two numbers."""
    async with running_bookie(bookie_config) as running, BookieClient(running.url) as client:
        size = await add(client, 5, range(4))
        await client.checkpoint()
        state = running.bookie.storage.ledgers.get(5)
        assert (state.entry_count, state.byte_count) == (4, size)
        assert await usage(client, 5) == (4, size)
