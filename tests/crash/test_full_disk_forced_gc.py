"""gc_force_when_full (BookKeeper's isForceGCAllowWhenNoSpace, which the Pulsar chart sets;
bookie/gc.py G6) on a real full-ish file system: a 64 MiB tmpfs mounted by the test (as root).

Half of every entry log belongs to a ledger that is then deleted; a ballast file pushes the
disk over the warn threshold. With the setting on, a compacting GC run starts by itself as
the disk monitor sees it, and gives the dead half back (every live entry still reads back);
with it off, compaction stays paused (G6), and even a requested run says why.
Where mounting is impossible (not root) the test skips with the reason; that is not a pass.
"""

from __future__ import annotations

import os

import pytest

from api.client import BookieClient
from bookie.config import BookieConfig
from bookie.entry import frame_entry, master_key
from bookie.errors import TooManyRequests
from tests.crash.test_full_disk import SIZE, _free, _until, small_tmpfs  # noqa: F401 (a fixture)
from tests.support.servers import running_bookie

KEY = master_key(b"forced-gc")
MiB = 1 << 20
KEPT, DELETED = 1, 2
ENTRIES = 12_000  # per ledger, 1 KiB each: about 24 MiB of entry logs, half of them dead


def _config(data_dir: str, force: bool) -> BookieConfig:
    return BookieConfig(data_dir=data_dir, port=0, journal_prealloc_bytes=64 * 1024,
                        journal_max_bytes=1 * MiB, journal_backups_count=0,
                        entrylog_max_bytes=1 * MiB, checkpoint_interval_ms=200,
                        disk_check_interval_ms=20, disk_usage_threshold=0.90,
                        disk_usage_warn_threshold=0.70, disk_usage_lwm_threshold=0.60,
                        disk_reserved_bytes=4 * MiB, gc_interval_ms=3_600_000,
                        major_compaction_threshold=0.8, major_compaction_interval_ms=0,
                        minor_compaction_interval_ms=0, compaction_rate_bytes=0,
                        write_cache_max_bytes=4 * MiB, gc_force_when_full=force)


def _entry(ledger_id: int, entry_id: int) -> bytes:
    return frame_entry(ledger_id, entry_id, entry_id - 1, entry_id,
                       bytes([(ledger_id + entry_id) % 251]) * 1024)


def _ballast(path: str, mount: str, used_ratio: float) -> None:
    """Grow a synced ballast file until the file system is ``used_ratio`` used."""
    with open(path, "ab") as handle:
        while (room := _free(mount) - int(SIZE * (1 - used_ratio))) > 0:
            handle.write(b"\xba" * min(room, MiB))
            handle.flush()
            os.fsync(handle.fileno())


async def _half_dead_logs(client: BookieClient) -> None:
    """Both ledgers' entries interleaved in every log, then one ledger deleted."""
    for first in range(0, ENTRIES, 500):
        for ledger_id in (KEPT, DELETED):
            batch = [_entry(ledger_id, e) for e in range(first, first + 500)]
            try:
                await client.add_batch(ledger_id, batch, KEY)
            except TooManyRequests:  # the write cache is full: back-pressure, as designed;
                await client.checkpoint()  # a finished checkpoint empties it (no sleep)
                await client.add_batch(ledger_id, batch, KEY)
    await client.delete_ledger(DELETED)
    await client.checkpoint()


@pytest.mark.parametrize("force", [True, False], ids=["gc_force_when_full", "default"])
async def test_a_disk_over_the_warn_threshold_compacts_only_when_forced(small_tmpfs, force):
    mount = small_tmpfs
    async with running_bookie(_config(os.path.join(mount, "data"), force)) as running:
        bookie = running.bookie
        async with BookieClient(running.url) as client:
            await _half_dead_logs(client)
            assert bookie.last_gc is None  # nothing ran yet: the interval is an hour
            _ballast(os.path.join(mount, "ballast"), mount, 0.78)  # over warn, under full
            await _until(lambda: _async(bookie.disk_monitor.warn), "the warn threshold", 30)
            if force:
                result = await _until(lambda: _async(bookie.last_gc), "a forced GC run", 30)
                assert result.compaction == "major", result.to_json()
                assert result.bytes_reclaimed_compaction > 8 * MiB, result.to_json()
                assert bookie.gc.status_json()["lastRun"]["compaction"] == "major"
            else:
                result = await bookie.run_gc()  # a requested, unforced run
                assert result.compaction is None
                assert result.compaction_skipped == \
                    "a data dir is over the disk usage warn threshold"
                assert result.bytes_reclaimed_compaction == 0
            for entry_id in range(0, ENTRIES, 97):  # the live half is all there
                assert await client.read_entry(KEPT, entry_id) == _entry(KEPT, entry_id)
            assert await client.read_entry(KEPT, ENTRIES - 1) == _entry(KEPT, ENTRIES - 1)


async def _async(value):
    return value
