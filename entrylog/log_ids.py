"""Entry log id allocation over the ``lastId`` file (BookKeeper's EntryLoggerAllocator).

docs/formats.md §5.7. ``lastId`` holds the **last id allocated**, lowercase hex and "\\n".

Invariants:
    LI1. An id is written to lastId in every ledger dir, durably, before its log file is
        created, so after any crash the next start allocates above every log that exists.
    LI2. Ids only grow and never wrap (docs/formats.md §9.7): past 2**31-1 allocation fails and
        the bookie goes read-only.
    LI3. An id whose .log or .log.compacting file exists in any dir is skipped.

Crash story of one allocation, per dir (docs/design.md §1.6, A1, A4):
    1. write "<hex>\\n" to lastId.tmp    ! crash: a partial lastId.tmp, deleted at startup
    2. fsync lastId.tmp                 ! crash: same; lastId still holds the old id
    3. rename lastId.tmp over lastId    ! crash: old or new id (A4), no log uses the new one
    4. fsync the dir                    only now may the log file be created (LI1)

Thread-safety: owned by one thread (the checkpoint thread, through EntryLogger).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from bookie.errors import IOFailure
from entrylog.format import (
    COMPACTING_SUFFIX, LAST_ID_NAME, LAST_ID_TMP_NAME, MAX_LOG_ID, compacting_file_name,
    decode_last_id, encode_last_id, log_file_name, parse_hex_id, parse_log_id,
)

if TYPE_CHECKING:
    from bookie.disk import Disk

#: lastId is a short text file; read no more than this of it.
LAST_ID_READ_BYTES = 64


class LogIdAllocator:
    """Hands out entry log ids for a set of ledger dirs. See the module docstring."""

    def __init__(self, disk: Disk, ledger_dirs: list[str]) -> None:
        assert ledger_dirs, "at least one ledger dir"
        self._disk = disk
        self.ledger_dirs = list(ledger_dirs)
        for ledger_dir in self.ledger_dirs:
            self._delete_stale_tmp(ledger_dir)
        #: The last id allocated (or found at startup); -1 when there is none.
        self.last_id = max(self._startup_value(d) for d in self.ledger_dirs)

    def allocate(self) -> int:
        """The next free id, recorded in every dir's lastId before it is returned (LI1)."""
        candidate = self.last_id + 1
        while candidate <= MAX_LOG_ID and self._in_use(candidate):
            candidate += 1  # LI3
        if candidate > MAX_LOG_ID:
            raise IOFailure(f"log ids exhausted: the last id is {self.last_id:x} (LI2)")
        # Taken before writing: if a write fails half-way, the id is never handed out again.
        self.last_id = candidate
        for ledger_dir in self.ledger_dirs:
            self._write_last_id(ledger_dir, candidate)
        return candidate

    def _in_use(self, log_id: int) -> bool:
        names = (log_file_name(log_id), compacting_file_name(log_id))
        return any(self._disk.exists(os.path.join(d, name))
                   for d in self.ledger_dirs for name in names)

    def _startup_value(self, ledger_dir: str) -> int:
        # readLastLogId: lastId if it parses and is > 0, else the largest log id, else -1.
        last_id = self._read_last_id(ledger_dir)
        if last_id is not None and last_id > 0:
            return last_id
        return max(self._ids_on_disk(ledger_dir), default=-1)

    def _ids_on_disk(self, ledger_dir: str) -> list[int]:
        ids = []
        for name in self._listdir(ledger_dir):
            log_id = parse_log_id(name)
            if log_id is None and name.endswith(COMPACTING_SUFFIX):
                log_id = parse_hex_id(name[:-len(COMPACTING_SUFFIX)])
            if log_id is not None:
                ids.append(log_id)
        return ids

    def _read_last_id(self, ledger_dir: str) -> int | None:
        path = os.path.join(ledger_dir, LAST_ID_NAME)
        if not self._disk.exists(path):
            return None
        try:
            handle = self._disk.open(path)
            try:
                data = handle.read_at(0, LAST_ID_READ_BYTES)
            finally:
                handle.close()
        except OSError as err:
            raise IOFailure(f"cannot read {path}: {err}") from err
        return decode_last_id(data)

    def _listdir(self, ledger_dir: str) -> list[str]:
        try:
            return self._disk.listdir(ledger_dir)
        except OSError as err:
            raise IOFailure(f"cannot list ledger dir {ledger_dir}: {err}") from err

    def _delete_stale_tmp(self, ledger_dir: str) -> None:
        # Left by a crash in steps 1-2 of the crash story; lastId itself is whole (A4).
        tmp = os.path.join(ledger_dir, LAST_ID_TMP_NAME)
        try:
            if self._disk.exists(tmp):
                self._disk.unlink(tmp)
        except OSError as err:
            raise IOFailure(f"cannot delete {tmp}: {err}") from err

    def _write_last_id(self, ledger_dir: str, log_id: int) -> None:
        """Steps 1-4 of the crash story, through the Disk seam only."""
        tmp = os.path.join(ledger_dir, LAST_ID_TMP_NAME)
        path = os.path.join(ledger_dir, LAST_ID_NAME)
        try:
            if self._disk.exists(tmp):
                self._disk.unlink(tmp)
            handle = self._disk.create(tmp)
            try:
                handle.write_at(0, encode_last_id(log_id))
                handle.fsync()
            finally:
                handle.close()
            self._disk.rename(tmp, path)
            self._disk.fsync_dir(ledger_dir)
        except OSError as err:
            raise IOFailure(f"cannot write {path} = {log_id:x}: {err}") from err
