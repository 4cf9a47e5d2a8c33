"""Appending to one BKLO entry log and finalizing it (BookKeeper's BufferedLogChannel).

Writer rules, docs/formats.md §5.5: create with a 1024-byte header (version 1, offset 0, count 0),
append ``i32 size | entry`` records, and on roll or close write the ledgersMap trailer, fsync,
point the header at it, fsync (E1). A log with no entries is deleted instead.

Invariants (with E1..E4 of entrylog/format.py):
    EW1. written_position + len(buffer) == position: every byte below ``position`` is either
        in the file or in the write buffer, in order.
    EW2. After a write or fsync error the channel is failed: every later call raises
        IOFailure and no fsync is retried (A5).
"""

from __future__ import annotations

import itertools
import operator
import os
from typing import TYPE_CHECKING

from bookie.entry import IDS
from bookie.errors import IOFailure
from entrylog.format import (
    HEADER_PATCH_OFFSET, HEADER_SIZE, MAX_POS, MIN_ENTRY_SIZE, SIZE, compacting_file_name,
    encode_header, encode_header_patch, encode_ledgers_map, log_file_name, make_location,
)

_ADD, _OR = operator.add, operator.or_

if TYPE_CHECKING:
    from bookie.disk import Disk, DiskFile

WRITE_BUFFER_BYTES = 1024 * 1024
#: The page cache forgets synced bytes of an active log in steps of this size.
CACHE_DROP_STEP_BYTES = 1024 * 1024


class BufferedLogChannel:
    """One entry log being appended.

    Thread-safety: owned by one thread (the checkpoint thread). Other threads may read
    ``written_position`` (an int, replaced whole) to know which bytes are in the file.
    """

    def __init__(self, disk: Disk, handle: DiskFile, ledger_dir: str, path: str, log_id: int,
                 *, write_buffer_bytes: int = WRITE_BUFFER_BYTES,
                 cache_keep_bytes: int | None = None) -> None:
        self._disk = disk
        self._handle: DiskFile | None = handle
        self.ledger_dir = ledger_dir
        self.path = path
        self.log_id = log_id
        self.write_buffer_bytes = write_buffer_bytes
        self.position = HEADER_SIZE
        self.written_position = HEADER_SIZE
        self.synced_position = 0
        self.ledger_totals: dict[int, int] = {}
        self._buffer = bytearray()
        self._failure: str | None = None
        # Synced bytes more than cache_keep_bytes behind the end leave the page cache after
        # each sync (None: all stay, as in Apache BookKeeper's DefaultEntryLogger). Recent
        # entries stay cached for readers catching up; older ones are read from the disk,
        # and their pages serve the next checkpoint's writes (on this VM a page never touched
        # before costs ~10x more to fill: 15-20% more adds/s at 1 KiB, docs/operations.md §2.1).
        self.cache_keep_bytes = cache_keep_bytes
        self.dropped_end = 0  # the page cache holds nothing of the file below this

    @classmethod
    def create(cls, disk: Disk, ledger_dir: str, log_id: int, *, compacting: bool = False,
               write_buffer_bytes: int = WRITE_BUFFER_BYTES,
               cache_keep_bytes: int | None = None) -> BufferedLogChannel:
        """Create ``<hex id>.log`` (or ``.log.compacting``) and write its header.

        The allocator has already written lastId (docs/formats.md §5.5 step 1). The directory is
        fsynced before anything relies on the new name (docs/design.md §1.6).
        """
        name = compacting_file_name(log_id) if compacting else log_file_name(log_id)
        path = os.path.join(ledger_dir, name)
        try:
            handle = disk.create(path)
        except OSError as err:
            raise IOFailure(f"cannot create entry log {path}: {err}") from err
        channel = cls(disk, handle, ledger_dir, path, log_id,
                      write_buffer_bytes=write_buffer_bytes, cache_keep_bytes=cache_keep_bytes)
        channel._io(lambda: disk.fsync_dir(ledger_dir), "fsync of its directory")
        channel._io(lambda: handle.write_at(0, encode_header()), "write of the header")
        return channel

    @property
    def failed(self) -> bool:
        return self._failure is not None

    @property
    def has_entries(self) -> bool:
        return bool(self.ledger_totals)

    def would_exceed(self, size: int, limit: int) -> bool:
        """Whether appending an entry of ``size`` bytes would pass ``limit`` (§5.5 step 4)."""
        return self.position + SIZE.size + size > limit

    def add_entry(self, ledger_id: int, entry: bytes) -> int:
        """Buffer one record; return its location. Durable only after flush_and_sync."""
        self._check_usable()
        size = len(entry)
        assert size >= MIN_ENTRY_SIZE, size  # E3
        assert IDS.unpack_from(entry, 0)[0] == ledger_id, "entry belongs to another ledger"
        location = make_location(self.log_id, self.position + SIZE.size)
        self._buffer += SIZE.pack(size)
        self._buffer += entry
        self.position += SIZE.size + size
        self.ledger_totals[ledger_id] = self.ledger_totals.get(ledger_id, 0) + size + SIZE.size
        if len(self._buffer) >= self.write_buffer_bytes:
            self._write_buffer()
        return location

    def add_run(self, ledger_id: int, entries: list[bytes]) -> list[int]:
        """Buffer several entries of one ledger (each as ``add_entry`` would, E3): one
        buffer extend; their locations. The caller makes sure they fit (would_exceed)."""
        self._check_usable()
        # C loops (map, accumulate), not a Python step an entry: this runs for every entry
        # of every checkpoint. Each record is the size word then the entry (E3).
        sizes = list(map(len, entries))
        assert min(sizes) >= MIN_ENTRY_SIZE, min(sizes)  # E3
        ends = list(itertools.accumulate(map(_ADD, sizes, itertools.repeat(SIZE.size)),
                                         initial=self.position))
        locations = list(map(_OR, itertools.repeat(self.log_id << 32),
                             map(_ADD, ends, itertools.repeat(SIZE.size))))
        del locations[-1]  # ends[-1] is where the next record starts
        position = ends[-1]
        assert IDS.unpack_from(entries[0], 0)[0] == ledger_id, "entry of another ledger"
        assert position - SIZE.size - len(entries[-1]) <= MAX_POS, position  # E4
        self._buffer += b"".join(itertools.chain.from_iterable(
            zip(map(SIZE.pack, sizes), entries)))
        self.ledger_totals[ledger_id] = self.ledger_totals.get(ledger_id, 0) + \
            position - self.position
        self.position = position
        if len(self._buffer) >= self.write_buffer_bytes:
            self._write_buffer()
        return locations

    def write_buffered(self) -> None:
        """Hand the buffered records to the file (visible to readers, not yet durable)."""
        self._check_usable()
        self._write_buffer()

    def flush_and_sync(self) -> None:
        """Make every location returned so far durable: write the buffer, fdatasync."""
        self._check_usable()
        self._write_buffer()
        handle = self._handle
        self._io(handle.fdatasync, "fdatasync")
        self.synced_position = self.written_position
        if self.cache_keep_bytes is not None:
            end = (self.synced_position - self.cache_keep_bytes) & ~(CACHE_DROP_STEP_BYTES - 1)
            if end > self.dropped_end:
                handle.drop_cache(self.dropped_end, end - self.dropped_end)  # a hint: synced
                self.dropped_end = end

    def finalize(self) -> bool:
        """Write the ledgersMap and point the header at it; False if the log was deleted.

        Crash story (docs/formats.md §5.5 step 5, invariant E1):
            1. write the buffered records     ! crash: header offset 0, the log is scanned
            2. write all map batches at the   ! crash: a torn trailer after the entries; the
               current position                  header still says 0 and the scan skips the
                                                 batches (ledgerId -1)
            3. fsync                          ! crash: as 2, the trailer may be whole or not
            4. rewrite header bytes 8..19     ! crash: a torn patch (A1) fails the index
                                                 path's checks; the log is scanned
            5. fsync                          only now may a reader trust the header (E1)
        Apache BookKeeper skips step 3; its bytes are the same.
        """
        self._check_usable()
        if not self.has_entries:
            self._delete_empty()
            return False
        self._write_buffer()
        map_offset = self.position
        trailer = encode_ledgers_map(self.ledger_totals)
        handle = self._handle
        self._io(lambda: handle.write_at(map_offset, trailer), "write of the ledgersMap")
        self.position += len(trailer)
        self.written_position = self.position
        self._io(handle.fsync, "fsync of the ledgersMap")
        patch = encode_header_patch(map_offset, len(self.ledger_totals))
        self._io(lambda: handle.write_at(HEADER_PATCH_OFFSET, patch), "write of the header")
        self._io(handle.fsync, "fsync of the header")
        self.synced_position = self.position
        self.close()
        return True

    def close(self) -> None:
        """Close the file without finalizing it (after a failure, or once finalized)."""
        if self._handle is not None:
            handle, self._handle = self._handle, None
            try:
                handle.close()
            except OSError:
                pass  # nothing more is written through it; A5 makes its state moot

    def _delete_empty(self) -> None:
        # A log with no entries is deleted, not finalized (docs/formats.md §9.6).
        self.close()
        self._io(lambda: self._disk.unlink(self.path), "unlink of the empty log")
        self._io(lambda: self._disk.fsync_dir(self.ledger_dir), "fsync of its directory")

    def _write_buffer(self) -> None:
        if not self._buffer:
            return
        data, self._buffer = self._buffer, bytearray()
        offset = self.written_position
        handle = self._handle
        self._io(lambda: handle.write_at(offset, data), "write")
        self.written_position = offset + len(data)
        assert self.written_position == self.position  # EW1

    def _check_usable(self) -> None:
        if self._failure is not None:
            raise IOFailure(f"entry log {self.path} failed earlier: {self._failure}")  # EW2
        if self._handle is None:
            raise IOFailure(f"entry log {self.path} is closed")

    def _io(self, action, what: str) -> None:
        try:
            action()
        except OSError as err:
            self._failure = f"{what} failed: {err}"
            self.close()
            raise IOFailure(f"entry log {self.path}: {self._failure}") from err
