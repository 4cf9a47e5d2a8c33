"""Ledgers our bookie placed outside dir ``L mod n`` because that dir was full (PL2 in
bookie/storage_routes.py), made by a real in-process bookie on real files: for the tests and
the interop script of ``bookie shell bk-ready --move`` (bookie/ledger_move.py)."""

from __future__ import annotations

from bookie.config import BookieConfig
from bookie.disk import OsDisk
from bookie.entry import frame_entry, master_key
from bookie.node import Bookie
from tests.support.dir_layout import dir_lists

KEY = master_key(b"dirs")
MOVED, DELETED, STAYED = 7, 10, 4  # of 3 dirs: 7 and 10 belong in dir 1 (full), so dir 2
ENTRIES = 5


class FullDirs(OsDisk):
    """The real disk, but the ledger dirs named in ``full`` report 99 % used."""

    def __init__(self) -> None:
        super().__init__()
        self.full: set[str] = set()

    def usage(self, path: str) -> tuple[int, int]:
        if any(path.startswith(f) for f in self.full):
            return 100 * 2**20, 2**20
        return super().usage(path)


def three_dirs(root) -> BookieConfig:
    ledger_dirs, journal_dirs = dir_lists(root, 3, 1)
    return BookieConfig(data_dir=str(root / "unused"), port=0, checkpoint_interval_ms=3_600_000,
                        gc_interval_ms=0, journal_prealloc_bytes=64 * 1024,
                        disk_check_interval_ms=3_600_000, ledger_dirs=ledger_dirs,
                        journal_dirs=journal_dirs)


def entry(ledger_id: int, entry_id: int) -> bytes:
    return frame_entry(ledger_id, entry_id, entry_id - 1, entry_id,
                       f"{ledger_id}/{entry_id}".encode() * 20)


async def off_home_ledgers(config: BookieConfig) -> None:
    """STAYED in its dir; MOVED (fenced) and DELETED (a tombstone) in dir 2, dir 1 being full;
    the bookie then stopped cleanly."""
    disk = FullDirs()
    bookie = Bookie(config, disk=disk)
    await bookie.start()
    try:
        await _write(bookie, STAYED)
        disk.full.add(config.ledger_dirs_current[1])
        bookie.poll_disks()
        await _write(bookie, MOVED)
        await _write(bookie, DELETED)
        await bookie.fence(MOVED, KEY)
        await bookie.delete_ledger(DELETED)
        assert bookie.storage.units[2].ledgers.get(MOVED) is not None
    finally:
        await bookie.close()


async def _write(bookie: Bookie, ledger_id: int) -> None:
    for entry_id in range(ENTRIES):
        await bookie.add_entry(ledger_id, entry_id, entry(ledger_id, entry_id), KEY)
