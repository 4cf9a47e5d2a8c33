"""bookie/recovery.py: replay leaves no journal open behind it."""

from __future__ import annotations

import os
import threading

from bookie.checkpoint import list_journal_ids
from bookie.config import BookieConfig
from bookie.disk import OsDisk
from bookie.entry import frame_entry
from bookie.recovery import Replayer
from bookie.storage import LedgerStorage
from journal.format import LogMark, encode_add
from journal.journal import Journal
from tests.support.small_fs import open_files_under

ENTRIES = 24


def _write_journals(disk: OsDisk, journal_dir: str) -> None:
    """One synced group per add in 4 KiB journals: several files to replay."""
    synced = threading.Semaphore(0)
    journal = Journal(disk, journal_dir, max_bytes=4096, prealloc_bytes=64 * 1024,
                      complete_group=lambda tokens, error: [synced.release() for _ in tokens])
    journal.start()
    try:
        for entry_id in range(ENTRIES):
            entry = frame_entry(1, entry_id, entry_id - 1, entry_id, b"r" * 300)
            journal.submit(encode_add(entry), entry_id)
            assert synced.acquire(timeout=30)
    finally:
        journal.close()


def test_replay_closes_every_journal_it_reads(tmp_path):
    """Regression (found by the real-device EIO test, whose unmount said "target is busy"):
    replay left each journal it read open for the bookie's lifetime, so a journal deleted
    by retention later kept its disk space, and its file system stayed busy."""
    config = BookieConfig(data_dir=str(tmp_path / "data"), port=0)
    disk = OsDisk()
    os.makedirs(config.journal_dir)
    _write_journals(disk, config.journal_dir)
    journal_ids = list_journal_ids(disk, config.journal_dir)
    assert len(journal_ids) > 2
    storage = LedgerStorage(disk, config)
    storage.open()
    try:
        replayer = Replayer(disk, config, storage)
        replayer.run(LogMark(0, 0), journal_ids)
        assert replayer.report.adds == ENTRIES
        assert len(replayer.report.files) == len(journal_ids)
        assert open_files_under(config.journal_dir) == []
    finally:
        storage.close()
