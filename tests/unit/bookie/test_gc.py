"""Garbage collection (bookie/gc.py) over a real LedgerStorage: files, RocksDB, no HTTP.

Each test writes entries through the storage's checkpoint path (``flush``), so the logs and
the index are the daemon's own, then runs ``GarbageCollector.run`` synchronously.
"""

from __future__ import annotations

import os

import pytest

from bookie.config import BookieConfig
from bookie.disk import OsDisk
from bookie.entry import frame_entry
from bookie.gc import GarbageCollector
from bookie.storage import LedgerStorage
from entrylog.entry_logger import QUARANTINED_SUFFIX
from entrylog.format import HEADER_SIZE, encode_ledgers_map
from entrylog.reader import EntryLogReader


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def storage(tmp_path):
    config = BookieConfig(data_dir=str(tmp_path / "data"), entrylog_max_bytes=4096,
                          compaction_rate_bytes=0)
    opened = LedgerStorage(OsDisk(), config)
    opened.open()
    yield opened
    opened.close()


def entry(ledger_id: int, entry_id: int, size: int = 600) -> bytes:
    payload = bytes([(ledger_id * 7 + entry_id) % 251]) * size
    return frame_entry(ledger_id, entry_id, entry_id - 1, len(payload), payload)


def fill(storage: LedgerStorage, ledger_ids, count: int, size: int = 600) -> dict:
    """``count`` rounds of one entry per ledger, a checkpoint flush after each round."""
    written = {}
    for entry_id in range(count):
        for ledger_id in ledger_ids:
            data = entry(ledger_id, entry_id, size)
            storage.add_entry(ledger_id, entry_id, data)
            written[(ledger_id, entry_id)] = data
        storage.flush()
    return written


def roll(storage: LedgerStorage) -> None:
    """Finalize the active log, as a roll does: every log becomes a rolled one."""
    logger = storage.entry_logger
    if logger.current_log_id is not None:
        logger._finish_active()


def log_bytes(storage: LedgerStorage) -> int:
    """Bytes of the entry log files in the data dir (RocksDB's own files are left out:
    they change size with its background compactions)."""
    ledger_dir = storage.ledger_dir
    return sum(os.path.getsize(os.path.join(ledger_dir, name))
               for name in os.listdir(ledger_dir) if name.endswith(".log"))


def ledgers_maps(storage: LedgerStorage) -> dict[int, dict[int, int]]:
    maps = {}
    for log_id in storage.entry_logger.log_ids():
        with EntryLogReader(storage.disk, storage.entry_logger.log_path(log_id), log_id) as r:
            maps[log_id] = r.ledgers_map()
    return maps


def test_gc_deletes_logs_of_deleted_ledgers_and_frees_what_their_ledgers_maps_say(storage):
    written = fill(storage, [0], 6) | fill(storage, [1], 6) | fill(storage, [2], 6)
    roll(storage)
    maps = ledgers_maps(storage)
    assert all(m is not None for m in maps.values())
    for ledger_id in (0, 2):  # ledger 0 is a ledger like any other
        storage.delete_ledger(ledger_id)
    storage.flush()
    dead = {log_id: m for log_id, m in maps.items() if set(m) <= {0, 2}}
    assert len(dead) >= 2
    expected = sum(HEADER_SIZE + sum(m.values()) + len(encode_ledgers_map(m))
                   for m in dead.values())
    before = log_bytes(storage)

    result = GarbageCollector(storage).run()

    assert sorted(result.logs_deleted) == sorted(dead)
    assert before - log_bytes(storage) == expected == result.bytes_reclaimed_deletion
    assert set(storage.entry_logger.log_ids()) == set(maps) - set(dead)
    for (ledger_id, entry_id), data in written.items():
        if ledger_id == 1:
            assert storage.get_entry(ledger_id, entry_id) == data
    assert result.problems == []


def test_a_log_with_one_live_ledger_is_kept_whole_and_ledger_zero_is_live(storage):
    written = fill(storage, [0, 5], 8)
    roll(storage)
    logs = storage.entry_logger.log_ids()
    storage.delete_ledger(5)
    storage.flush()
    result = GarbageCollector(storage).run()
    assert result.logs_deleted == [] and storage.entry_logger.log_ids() == logs
    for entry_id in range(8):
        assert storage.get_entry(0, entry_id) == written[(0, entry_id)]


def _unfinalize(storage: LedgerStorage, log_id: int) -> None:
    """Header bytes 8..19 back to zero: the log of a crash, read by scanning (§5.6)."""
    with open(storage.entry_logger.log_path(log_id), "r+b") as handle:
        handle.seek(8)
        handle.write(bytes(12))


def test_a_log_without_its_trailer_is_scanned_never_taken_as_empty(storage):
    written = fill(storage, [0], 10)
    roll(storage)
    logs = storage.entry_logger.log_ids()
    for log_id in logs:
        _unfinalize(storage, log_id)
    assert GarbageCollector(storage).run().logs_deleted == []
    assert storage.entry_logger.log_ids() == logs
    assert all(storage.get_entry(0, e) == written[(0, e)] for e in range(10))
    storage.delete_ledger(0)
    storage.flush()
    assert sorted(GarbageCollector(storage).run().logs_deleted) == logs


def test_leftover_locations_of_a_deleted_ledger_are_removed_and_its_tombstone_stays(storage):
    fill(storage, [3, 4], 4)
    # A crash after the synced tombstone lost the pending range delete (storage R3).
    storage.ledgers.mark_deleted(3)
    assert storage.locations.last_entry_id(3) == 3
    result = GarbageCollector(storage).run()
    assert result.ledgers_index_cleaned == 1
    assert storage.locations.last_entry_id(3) is None
    assert list(storage.locations.entries(3)) == []
    assert storage.ledgers.is_deleted(3)  # G4
    assert storage.locations.last_entry_id(4) == 3


def test_a_corrupt_log_is_quarantined_reported_and_gc_goes_on(storage):
    written = fill(storage, [7], 9) | fill(storage, [8], 9) | fill(storage, [9], 9)
    roll(storage)
    maps = ledgers_maps(storage)
    bad = min(log_id for log_id, m in maps.items() if set(m) == {7})
    torn = min(log_id for log_id, m in maps.items() if set(m) == {8})
    with open(storage.entry_logger.log_path(bad), "r+b") as handle:
        handle.write(b"XXXX")  # not BKLO: corruption (§5.6 magic rule)
    _unfinalize(storage, torn)
    with open(storage.entry_logger.log_path(torn), "r+b") as handle:
        handle.seek(HEADER_SIZE)
        handle.write((5).to_bytes(4, "big"))  # an entry size of 5: corruption (E3)
    storage.delete_ledger(9)
    storage.flush()

    result = GarbageCollector(storage).run()

    ledger_dir = storage.ledger_dir
    for log_id in (bad, torn):
        assert os.path.exists(os.path.join(ledger_dir, f"{log_id:x}{QUARANTINED_SUFFIX}"))
        assert log_id not in storage.entry_logger.log_ids()
    assert len(result.quarantined) == 2 and len(result.problems) == 2
    assert {log_id for log_id, m in maps.items() if set(m) == {9}} <= set(result.logs_deleted)
    # The index still points into the quarantined log, and what is whole there reads back.
    readable = [e for e in range(9) if storage.locations.get(7, e) is not None
                and storage.locations.get(7, e) >> 32 == bad]
    assert readable and all(storage.get_entry(7, e) == written[(7, e)] for e in readable)
    again = GarbageCollector(storage).run()
    assert again.quarantined == [] and again.problems == []


def test_the_active_log_is_never_collected(storage):
    fill(storage, [11], 2)
    active = storage.entry_logger.current_log_id
    assert active is not None
    storage.delete_ledger(11)
    storage.flush()
    GarbageCollector(storage).run()
    assert active in storage.entry_logger.log_ids()


def test_unforced_compaction_waits_for_its_interval_and_is_suspended_by_warn_or_operator(
        storage):
    clock = FakeClock()
    gc = GarbageCollector(storage, clock=clock)
    assert gc.run().compaction is None
    clock.now += 3600
    result = gc.run()
    assert result.compaction == "minor"
    clock.now += 3600
    assert gc.run(disk_warn=True).compaction is None
    assert "warn threshold" in gc.last_result.compaction_skipped
    assert gc.run(force="minor", disk_warn=True).compaction == "minor"
    gc.suspended = True
    clock.now += 86400
    assert gc.run().compaction is None and gc.last_result.compaction_skipped
    assert gc.run(force="major").compaction == "major"
    gc.suspended = False
    assert gc.run().compaction is None  # the forced major run reset both intervals
    assert gc.counters.runs == 7


def test_many_tombstones_are_settled_in_chunks_across_steps(storage):
    ledger_ids = list(range(0, 600, 2))  # 300 ledgers: more than one chunk of phase 1
    for ledger_id in ledger_ids:
        storage.add_entry(ledger_id, 0, entry(ledger_id, 0, 40))
    storage.flush()
    for ledger_id in ledger_ids:
        storage.ledgers.mark_deleted(ledger_id)  # pending range deletes lost, as after a crash
    gc = GarbageCollector(storage)
    run = gc.begin()
    steps = 0
    while gc.step(run, budget_s=0.0) is not None:  # one action per step
        steps += 1
    assert steps >= 2 and run.result.ledgers_index_cleaned == len(ledger_ids)
    assert all(storage.locations.last_entry_id(i) is None for i in ledger_ids)
    active = storage.entry_logger.current_log_id
    assert storage.entry_logger.log_ids() == [active]  # every rolled log was all dead
    assert len(run.result.logs_deleted) >= 2
