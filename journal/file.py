"""One journal file being written: create, zero-filled preallocation, append, fdatasync.

Implements docs/formats.md §3.6 and §3.8 "Creation" (BookKeeper's JournalChannel). The file is
addressed by offset through a ``DiskFile``; nothing here calls os directly.

Preallocation writes real zeros, not a sparse extension as Apache BookKeeper does: the bytes
are the same, but a group's fdatasync then overwrites allocated blocks instead of extending
the file, measured at ~7.1k against ~4.8k syncs/s (docs/design.md §3.1 step 5, §11). The file grows
by whole chunks (16 MiB by default, rounded down to the alignment), in one step, just before
an append would pass the zero-filled end; those zeros reach the disk with that group's sync.

Crash story of ``create`` (A1, A4; docs/design.md §1.6):
    1. create <hex id>.txn.tmp        ! crash: a temp file no reader matches (docs/formats.md §2);
    2. write the V6 header and zeros    the next start deletes it
    3. fsync the file
    4. rename it to <hex id>.txn      ! crash: the rename may be forgotten (no dir fsync yet):
                                        then the temp file is all that is left, as above
    5. fsync the directory            only now does anything rely on the name
The name appears only over a synced header. Written in place, a power loss could leave
the header's unsynced bytes as garbage under the journal's own name, which reads as a V1
journal and refused the next start (found by the power-loss sweep, seed 604369521).
Invariants:
    F1. Every byte from ``position`` to the end of the file is zero (J2), because appends go
        only to ``position`` and extensions write zeros past the previous end.
    F2. The file is never truncated and never reopened for append.

Thread-safety: owned by the journal thread; not thread-safe.
"""

from __future__ import annotations

import errno
import os.path
from typing import TYPE_CHECKING

from journal.format import ALIGNMENT, CURRENT_VERSION, encode_header, journal_file_name

if TYPE_CHECKING:
    from bookie.disk import Disk, DiskFile

DEFAULT_PREALLOC_BYTES = 16 << 20  # journalPreAllocSizeMB
#: A journal being created (crash story of ``create``); ends in .tmp, so no reader takes it.
TEMP_SUFFIX = ".tmp"
_ZERO_PIECE_BYTES = 1 << 20
#: Zero-filling writes from one reused buffer: a fresh 16 MiB bytes object would cost a page
#: fault per 4 KiB on every extension (measured 4x slower).
_ZEROS = bytes(_ZERO_PIECE_BYTES)
#: Synced journal bytes are dropped from the page cache in steps of this size, keeping this
#: lag behind the position (BookKeeper's cacheDropLagBytes), so the page the next group
#: starts in, and the zero-filled pages ahead, stay cached: a write into a dropped page
#: would first read it back from the disk.
DROP_STEP_BYTES = 1 << 20
DROP_LAG_BYTES = 1 << 20


class JournalChannel:
    """An open journal file. ``position`` is where the next append goes."""

    def __init__(self, handle: "DiskFile", journal_id: int, position: int, prealloc_end: int,
                 chunk_bytes: int) -> None:
        self.handle = handle
        self.dropped_end = 0  # the page cache holds nothing of the file below this
        self.path = handle.path
        self.journal_id = journal_id
        self.position = position
        self.prealloc_end = prealloc_end
        self.chunk_bytes = chunk_bytes

    @classmethod
    def create(cls, disk: "Disk", journal_dir: str, journal_id: int,
               prealloc_bytes: int = DEFAULT_PREALLOC_BYTES,
               alignment: int = ALIGNMENT) -> "JournalChannel":
        """Create ``<hex id>.txn`` with a V6 header, zero-filled to one chunk, durably named.

        Raises FileExistsError if the journal exists (ids are never reused) and OSError on
        I/O. Crash-safe: see the module docstring.
        """
        header = encode_header(CURRENT_VERSION)
        chunk_bytes = max(prealloc_bytes // alignment * alignment, alignment)
        prealloc_end = max(chunk_bytes, len(header))
        path = os.path.join(journal_dir, journal_file_name(journal_id))
        if disk.exists(path):
            raise FileExistsError(errno.EEXIST, "journal ids are never reused", path)
        temp = path + TEMP_SUFFIX
        if disk.exists(temp):
            disk.unlink(temp)  # a creation a crash cut short: never read
        handle = disk.create(temp)
        try:
            handle.write_at(0, header)
            _write_zeros(handle, len(header), prealloc_end)
            handle.fsync()
            disk.rename(temp, path)
            handle.path = path  # the open file is the journal now, for messages and faults
            disk.fsync_dir(journal_dir)
        except BaseException:
            handle.close()
            raise
        return cls(handle, journal_id, len(header), prealloc_end, chunk_bytes)

    def append(self, data) -> None:
        """Write ``data`` at ``position`` and advance it; not durable until ``fdatasync``."""
        end = self.position + len(data)
        if end > self.prealloc_end:
            self._preallocate(end)
        self.handle.write_at(self.position, data)
        self.position = end

    def _preallocate(self, end: int) -> None:
        """Extend the zero-filled region by whole chunks to cover ``end`` (F1)."""
        chunks = -(-(end - self.prealloc_end) // self.chunk_bytes)
        new_end = self.prealloc_end + chunks * self.chunk_bytes
        _write_zeros(self.handle, self.prealloc_end, new_end)
        self.prealloc_end = new_end

    def fdatasync(self) -> None:
        self.handle.fdatasync()

    def drop_synced(self) -> None:
        """Drop synced bytes up to ``DROP_LAG_BYTES`` before ``position`` from the page
        cache; call only after an ``fdatasync`` covering ``position``."""
        end = (self.position - DROP_LAG_BYTES) & ~(DROP_STEP_BYTES - 1)
        if end > self.dropped_end:
            self.handle.drop_cache(self.dropped_end, end - self.dropped_end)
            self.dropped_end = end

    def close(self) -> None:
        self.handle.close()

    def __repr__(self) -> str:
        return f"JournalChannel({self.path!r}, position={self.position})"


def _write_zeros(handle: "DiskFile", start: int, end: int) -> None:
    view = memoryview(_ZEROS)
    while start < end:
        piece = min(end - start, _ZERO_PIECE_BYTES)
        handle.write_at(start, view[:piece])
        start += piece
