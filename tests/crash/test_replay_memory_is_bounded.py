"""Replay holds at most the write cache's budget in memory (issue 13: a data dir whose
lastMark is missing replayed every journal, up to backups x 2 GiB, into memory). Past half
the budget it flushes to the entry log and the index without moving lastMark (kill -9 model,
real daemon)."""

from __future__ import annotations

from api.client import BookieClient
from bookie.entry import DigestType, frame_entry, master_key
from tests.support.servers import Daemon

KEY = master_key(b"bounded")
PAYLOAD = bytes(range(256)) * 32  # 8 KiB
ENTRIES = 1000                    # ~8 MiB of journal
BUDGET = 1 << 20


def entry(entry_id: int) -> bytes:
    return frame_entry(6, entry_id, entry_id - 1, (entry_id + 1) * len(PAYLOAD), PAYLOAD,
                       DigestType.CRC32C)


async def test_replay_flushes_at_the_write_cache_budget_and_loses_nothing(tmp_path):
    data_dir = str(tmp_path / "data")
    daemon = Daemon(data_dir, "--checkpoint-interval-ms", "86400000",
                    "--write-cache-max-bytes", "64MiB").start()
    async with BookieClient(daemon.url) as client:
        for first in range(0, ENTRIES, 100):
            await client.add_batch(6, [entry(e) for e in range(first, first + 100)], KEY)
    daemon.kill9()  # nothing checkpointed since the start: replay has ~8 MiB to apply

    daemon = Daemon(data_dir, "--checkpoint-interval-ms", "86400000",
                    "--write-cache-max-bytes", str(BUDGET)).start()
    async with BookieClient(daemon.url) as client:
        replay = (await client.info())["replay"]
        assert replay["adds"] == ENTRIES
        assert replay["flushes"] >= (ENTRIES * len(PAYLOAD)) // BUDGET
        assert replay["cache_peak_bytes"] <= BUDGET // 2 + len(entry(0))
        for entry_id in range(0, ENTRIES, 37):
            assert await client.read_entry(6, entry_id) == entry(entry_id)
        assert await client.read_entry(6, ENTRIES - 1) == entry(ENTRIES - 1)
    assert daemon.terminate() == 0
