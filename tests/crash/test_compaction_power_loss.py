"""Power lost at every sync and rename of GC and compaction (crash model "power loss",
docs/design.md §2.2): what each fsync and dir fsync of bookie/compaction.py's crash story is for.

A LedgerStorage on a SimDisk is prepared once (interleaved ledgers, some deleted, every log
rolled and synced). For k = 1, 2, ... a copy of it runs ``GarbageCollector.run(force="major")``
and loses power at the k-th sync or rename: unsynced writes come back kept, dropped, cut,
garbled or zeroed, and unsynced creates, renames and unlinks may be forgotten. RocksDB is
outside the seam and keeps what it was given (tests/support/power_loss.py explains why that is
sound: every index write here follows the syncs it relies on). After each loss a fresh
storage must open, read every live entry byte-identical, hold no location pointing at a
missing log and no ``.log.compacting``, and finish the work with a clean forced run.
"""

from __future__ import annotations

import os
import shutil

from bookie.config import BookieConfig
from bookie.entry import frame_entry
from bookie.gc import GarbageCollector
from bookie.storage import LedgerStorage
from entrylog.format import parse_log_id
from ledgerindex import keys
from tests.support.sim_disk import SimDisk

LIVE, DELETED = (0, 2), (1, 3)


def config_for(data_dir: str) -> BookieConfig:
    return BookieConfig(data_dir=data_dir, entrylog_max_bytes=8192, compaction_rate_bytes=0)


def _prepare(config: BookieConfig, disk: SimDisk) -> dict:
    storage = LedgerStorage(disk, config)
    storage.open()
    live = {}
    for entry_id in range(16):
        for ledger_id in (0, 1, 2):
            payload = bytes([(entry_id * 3 + ledger_id) % 251]) * (400 + 37 * entry_id)
            data = frame_entry(ledger_id, entry_id, entry_id - 1, len(payload), payload)
            storage.add_entry(ledger_id, entry_id, data)
            live[(ledger_id, entry_id)] = data
        if entry_id % 4 == 3:
            storage.flush()
    for entry_id in range(12):  # ledger 3 fills logs of its own: GC deletes them whole
        payload = bytes([entry_id]) * 900
        storage.add_entry(3, entry_id, frame_entry(3, entry_id, -1, len(payload), payload))
    storage.flush()
    for ledger_id in DELETED:
        storage.delete_ledger(ledger_id)
    storage.flush()
    storage.close()  # finalizes the active log: every log is a rolled one, all synced
    path = config.ledger_dir
    while len(path) >= len(disk.root):  # the dirs themselves, as the bookie's init does
        disk.fsync_dir(path)
        path = os.path.dirname(path)
    return {k: v for k, v in live.items() if k[0] in LIVE}


def _copy_rocksdb(config: BookieConfig, target: str) -> None:
    for name in ("locations", "ledgers"):
        shutil.rmtree(os.path.join(target, name), ignore_errors=True)
        shutil.copytree(os.path.join(config.ledger_dir, name), os.path.join(target, name))


def _restore_rocksdb(config: BookieConfig, source: str) -> None:
    for name in ("locations", "ledgers"):
        shutil.rmtree(os.path.join(config.ledger_dir, name), ignore_errors=True)
        shutil.copytree(os.path.join(source, name), os.path.join(config.ledger_dir, name))


def _close_quietly(storage: LedgerStorage) -> None:
    try:
        storage.close()
    except Exception:  # noqa: BLE001 - the disk is off: finalizing the active log fails
        for index in (storage.locations, storage.ledgers):
            if index is not None:
                index.close()


def _run_until_power_loss(config: BookieConfig, disk: SimDisk) -> None:
    storage = LedgerStorage(disk, config)
    try:
        storage.open()
        GarbageCollector(storage).run(force="major")
    except Exception:  # noqa: BLE001 - power lost under it: whatever it raised is moot
        assert disk.crashed_at is not None
    finally:
        disk.crash_now()
        _close_quietly(storage)


def _check(config: BookieConfig, disk: SimDisk, live: dict, k: int) -> None:
    storage = LedgerStorage(disk, config)
    storage.open()
    try:
        names = disk.listdir(config.ledger_dir)
        assert not [n for n in names if n.endswith(".log.compacting")], (k, names)
        logs = {parse_log_id(n) for n in names} - {None}
        for key, value in storage.locations.kv.items():
            location = keys.decode_location_value(value)
            assert location >> 32 in logs, (k, keys.decode_location_key(key), location)
        for key, data in live.items():
            assert storage.get_entry(*key) == data, (k, key)
        result = GarbageCollector(storage).run(force="major")
        assert result.problems == [], (k, result.problems)
        for key, data in live.items():
            assert storage.get_entry(*key) == data, (k, key)
    finally:
        storage.close()


def test_power_lost_at_every_gc_and_compaction_sync_loses_no_live_entry(tmp_path):
    root = str(tmp_path / "disk")
    config = config_for(os.path.join(root, "data"))
    os.makedirs(config.ledger_dir)  # the real dir under which RocksDB keeps its files
    template = SimDisk(root)
    live = _prepare(config, template)
    rocksdb = str(tmp_path / "rocksdb-prepared")
    _copy_rocksdb(config, rocksdb)
    crash_points = 0
    for k in range(1, 500):
        _restore_rocksdb(config, rocksdb)
        disk = template.after_power_loss(0)  # all of it was synced: an exact copy
        disk.crash_at = k
        _run_until_power_loss(config, disk)
        if not disk.reached_crash_point:
            break
        crash_points += 1
        at_crash = str(tmp_path / "rocksdb-at-crash")
        _copy_rocksdb(config, at_crash)
        for fate in range(3):  # several ways the unsynced writes may come back
            _restore_rocksdb(config, at_crash)  # the checks below change the index
            _check(config, disk.after_power_loss(k * 7919 + fate), live, k)
    else:
        raise AssertionError("the sweep never reached a run without a power loss")
    print(f"gc/compaction power-loss sweep: {crash_points} crash points, k={k} ran clean")
    assert crash_points >= 20, crash_points
