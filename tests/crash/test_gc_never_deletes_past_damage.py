"""GC and compaction never delete an entry log the index still points into, and a scan cut
by a damaged size field decides nothing (issue 13 bug 2; GC's G2 and G7, reader's E5).

Found by review: in a log holding ledgers 1 (deleted) and 2 (live), a size field of one of
ledger 1's entries overwritten with 0x7FFFFFF0 made the scan stop as if at a torn tail;
compaction copied what it saw (nothing of ledger 2 after the damage) and deleted the old log,
and plain GC deleted a trailer-less log after kill -9 the same way: every entry of ledger 2
then answered 500 EIO, and GC reported no problem.
"""

from __future__ import annotations

import glob
import os
import random
import struct

from api.client import BookieClient
from tests.integration.test_gc_api import KEY, config_for, entry, gc_post
from tests.support.servers import Daemon, running_bookie

DAMAGED_SIZE = struct.pack(">i", 0x7FFFFFF0)


def damage_size_field(data_dir: str, target: bytes) -> str:
    """Overwrite the size field of the record holding ``target``; returns the log's name."""
    for path in glob.glob(os.path.join(data_dir, "ledgers", "current", "*.log")):
        with open(path, "r+b") as handle:
            at = handle.read().find(target)
            if at >= 0:
                handle.seek(at - 4)
                handle.write(DAMAGED_SIZE)
                return os.path.basename(path)
    raise AssertionError("entry not found in any entry log")


async def _write_two_ledgers(client: BookieClient, rng: random.Random) -> dict:
    written = {}
    for entry_id in range(10):
        for ledger_id in (1, 2):
            data = written[(ledger_id, entry_id)] = entry(ledger_id, entry_id, rng, 600)
            await client.add_entry(ledger_id, entry_id, data, KEY)
    await client.checkpoint()
    await client.delete_ledger(1)
    await client.checkpoint()
    return written


async def test_compaction_of_a_rolled_log_with_a_damaged_size_field_loses_nothing(
        data_dir, seed):
    rng = random.Random(seed)
    config = config_for(data_dir, entrylog_max_bytes=64 * 1024)
    async with running_bookie(config) as running, BookieClient(running.url) as client:
        written = await _write_two_ledgers(client, rng)
    damaged = damage_size_field(data_dir, written[(1, 0)])
    assert damaged == "0.log"
    async with running_bookie(config) as running, BookieClient(running.url) as client:
        result = await gc_post(client, "major")
        assert 0 not in result["logsDeleted"] and 0 not in result["logsCompacted"]
        assert any("0" in problem for problem in result["problems"]), result
        for entry_id in range(10):
            assert await client.read_entry(2, entry_id) == written[(2, entry_id)]


async def test_gc_of_a_trailerless_log_after_kill9_with_a_damaged_size_field_loses_nothing(
        tmp_path, seed):
    rng = random.Random(seed)
    data_dir = str(tmp_path / "data")
    daemon = Daemon(data_dir, "--checkpoint-interval-ms", "86400000",
                    "--gc-interval-ms", "0").start()
    async with BookieClient(daemon.url) as client:
        written = await _write_two_ledgers(client, rng)
    daemon.kill9()  # 0.log stays without a ledgersMap
    assert damage_size_field(data_dir, written[(1, 0)]) == "0.log"
    daemon.start()
    async with BookieClient(daemon.url) as client:
        result = await gc_post(client)
        assert 0 not in result["logsDeleted"], result
        assert result["problems"], result
        for entry_id in range(10):
            assert await client.read_entry(2, entry_id) == written[(2, entry_id)]
    assert daemon.terminate() == 0
