"""GC and forced compaction over damaged entry logs: every live entry still reads back, or
the log is quarantined and reported, never deleted (issue 13; GC's G2, G5, G7, reader's E5).

Damage, each in turn, a size field, the header, the ledgersMap trailer and a record body, of a
log finalized by a clean stop ("rolled": it has a trailer) and of one left by kill -9
("active": no trailer), holding a deleted ledger (1) and a live one (2) interleaved.
"""

from __future__ import annotations

import glob
import os
import random
import struct

import pytest

from api.client import BookieClient
from bookie.errors import BookieError
from entrylog import format as fmt
from tests.crash.test_gc_never_deletes_past_damage import _write_two_ledgers
from tests.integration.test_gc_api import gc_post
from tests.support.servers import Daemon

CASES = [("size", "rolled"), ("header", "rolled"), ("trailer", "rolled"), ("body", "rolled"),
         ("size", "active"), ("header", "active"), ("body", "active")]


def _log0(data_dir: str) -> str:
    return os.path.join(data_dir, "ledgers", "current", "0.log")


def _damage(path: str, kind: str, dead_entry: bytes) -> None:
    with open(path, "r+b") as handle:
        data = handle.read()
        at = data.find(dead_entry)
        assert at > 0
        header = fmt.decode_header(data[:fmt.HEADER_SIZE])
        if kind == "size":
            handle.seek(at - 4)
            handle.write(struct.pack(">i", 0x7FFFFFF0))
        elif kind == "header":  # the ledgersMap offset points past the end of the file
            handle.seek(8)
            handle.write(struct.pack(">q", len(data) + 4096))
        elif kind == "trailer":
            assert header.map_offset > 0, "a rolled log has a trailer"
            handle.seek(header.map_offset + 24)
            handle.write(b"\xff" * 8)  # the first ledger id of the map
        else:  # body: the payload of an entry of the deleted ledger
            handle.seek(at + len(dead_entry) - 3)
            handle.write(b"\x00\xff\x00")


@pytest.mark.parametrize("kind,state", CASES)
async def test_gc_and_forced_compaction_never_lose_a_live_entry(tmp_path, seed, kind, state):
    rng = random.Random(seed)
    data_dir = str(tmp_path / "data")
    flags = ("--checkpoint-interval-ms", "86400000", "--gc-interval-ms", "0")
    daemon = Daemon(data_dir, *flags).start()
    async with BookieClient(daemon.url) as client:
        written = await _write_two_ledgers(client, rng)
    if state == "rolled":
        assert daemon.terminate() == 0
    else:
        daemon.kill9()
    _damage(_log0(data_dir), kind, written[(1, 3)])
    daemon.start()
    async with BookieClient(daemon.url) as client:
        results = [await gc_post(client), await gc_post(client, "major")]
        deleted = [log_id for r in results for log_id in r["logsDeleted"]]
        compacted = [log_id for r in results for log_id in r["logsCompacted"]]
        quarantined = [path for r in results for path in r["quarantined"]]
        problems = [p for r in results for p in r["problems"]]
        unreadable = []
        for entry_id in range(10):
            try:
                assert await client.read_entry(2, entry_id) == written[(2, entry_id)]
            except BookieError as error:
                unreadable.append((entry_id, error))
    assert daemon.terminate() == 0
    print(f"{kind}/{state}: deleted={deleted} compacted={compacted} "
          f"quarantined={len(quarantined)} unreadable={len(unreadable)}")
    if unreadable:  # only where the log was kept, quarantined and reported
        assert quarantined and problems and 0 not in deleted, (unreadable, results)
        assert glob.glob(_log0(data_dir) + "*"), "the damaged log must still be on disk"
    if 0 in deleted and 0 not in compacted:
        pytest.fail(f"log 0 deleted whole although ledger 2 lives in it: {results}")
