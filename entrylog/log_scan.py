"""The scan path of a BKLO entry log: every record in file order (docs/formats.md §5.6).

Split from ``entrylog/reader.py`` along its jobs: the reader owns the file, point reads and
the ledgersMap; a ``LogScan`` owns one walk over the records and what it found at the end
(``end``, ``corrupt``, the padding and oversize counters). The labels E2, E3 and E5 are the
reader module's (its docstring states them); the rules are unchanged by the split.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from typing import Iterator, Protocol

from bookie.errors import ScanEnd
from entrylog.format import HEADER_SIZE, MIN_ENTRY_SIZE, RECORD_HEAD, SIZE, LogHeader

log = logging.getLogger(__name__)

_NON_ZERO = re.compile(rb"[^\x00]")
CLEAN = "clean"


@dataclasses.dataclass(slots=True)
class ScannedEntry:
    """One entry found by a scan. ``offset`` is the size field's, ``location`` = offset + 4."""

    offset: int
    size: int
    ledger_id: int
    entry_id: int
    location: int
    entry: bytes | None


class ScannedLog(Protocol):
    """What a scan needs of the log's reader (entrylog/reader.py's EntryLogReader)."""

    path: str
    log_id: int
    max_entry_size: int
    scan_chunk_bytes: int

    @property
    def header(self) -> LogHeader | None: ...

    def file_size(self) -> int: ...

    def _read(self, offset: int, size: int) -> bytes: ...


class LogScan:
    """One scan of one reader's log, and its results once the iteration ends."""

    def __init__(self, reader: ScannedLog) -> None:
        self._reader = reader
        self.end: ScanEnd | None = None
        self.corrupt = False
        self.padding_bytes = 0
        self.oversize_entries = 0
        self._pad_start: int | None = None

    def run(self, from_offset: int = HEADER_SIZE,
             payload: bool = True) -> Iterator[ScannedEntry]:
        """Every entry from ``from_offset`` (a record boundary) in file order.

        After the iteration ``end`` holds the ScanEnd: where the written region ends, the
        bytes cut after it and why; ``corrupt`` is True if it ended at a size of 1..15.
        """
        if from_offset < HEADER_SIZE:
            raise ValueError(f"a scan starts at {HEADER_SIZE} or later, not {from_offset}")
        self._reader.header  # noqa: B018  (magic and version first: a foreign file is corruption)
        file_size = self._reader.file_size()
        if file_size < HEADER_SIZE:
            # Allocated, never written (or a torn header): no entries (§5.6 scan path 1).
            reason = CLEAN if file_size == 0 else "header cut short"
            self.end = ScanEnd(0, file_size, reason)
            return
        yield from self._scan_records(from_offset, file_size, payload)
        self._check_reached_map()
        if self.padding_bytes:
            log.warning("%s: skipped %d padding bytes (size <= 0)", self._reader.path,
                        self.padding_bytes)

    def _scan_records(self, pos: int, file_size: int,
                      payload: bool) -> Iterator[ScannedEntry]:
        # The fast loop takes whole records inside the chunk; everything else (a record
        # crossing the chunk's end, padding, the end of the log) is _next_step's business.
        unpack = RECORD_HEAD.unpack_from
        head_size = RECORD_HEAD.size
        base = self._reader.log_id << 32
        max_size = self._reader.max_entry_size
        buf, buf_pos, p = b"", pos, 0
        while True:
            n = len(buf)
            start_p = p
            while p + head_size <= n:
                size, ledger_id, entry_id = unpack(buf, p)
                end = p + 4 + size
                if size < MIN_ENTRY_SIZE or end > n:
                    break
                if ledger_id >= 0:  # ledgerId < 0: a ledgersMap batch, skipped
                    offset = buf_pos + p
                    if size > max_size:
                        self._note_oversize(offset, size)
                    yield ScannedEntry(offset, size, ledger_id, entry_id, base | (offset + 4),
                                       buf[p + 4:end] if payload else None)
                p = end
            if p != start_p:
                self._pad_start = None  # a record followed the padding run
            step = self._next_step(buf, buf_pos, p, file_size)
            if step is None:
                return
            if step > 0:
                p += step  # padding
            else:
                buf_pos += p
                want = max(self._reader.scan_chunk_bytes, -step)
                buf, p = self._reader._read(buf_pos, want), 0
                if len(buf) < min(want, file_size - buf_pos):
                    file_size = buf_pos + len(buf)  # truncated under the scan: stop there

    def _next_step(self, buf: bytes, buf_pos: int, p: int, file_size: int) -> int | None:
        """At a spot the fast loop cannot take: None = the scan ended (``end`` is set),
        k > 0 = skip k padding bytes, -k = read a chunk of at least k bytes at ``p``."""
        n = len(buf)
        offset = buf_pos + p
        at_eof = buf_pos + n >= file_size
        if n - p < SIZE.size:
            if not at_eof:
                return -RECORD_HEAD.size
            self._end_at_eof(offset, n - p, file_size, "size field cut short")
            return None
        size = SIZE.unpack_from(buf, p)[0]
        if size <= 0:
            return self._skip_padding(buf, p, offset)
        if size < MIN_ENTRY_SIZE:  # E3
            self.corrupt = True
            self.end = ScanEnd(offset, file_size - offset, f"corrupt: entry size {size} < 16")
            log.error("%s: corrupt entry size %d at %d; the scan of this log stops",
                      self._reader.path, size, offset)
            return None
        if offset + SIZE.size + size <= file_size:
            return -(SIZE.size + max(size, RECORD_HEAD.size))
        damage = self._damage_not_tail(offset, size)
        if damage is not None:  # E5
            self.corrupt = True
            self.end = ScanEnd(offset, file_size - offset, f"corrupt: {damage}")
            log.error("%s: %s at %d; the scan of this log stops", self._reader.path, damage, offset)
            return None
        self._end_at_eof(offset, file_size - offset, file_size,
                         f"record of size {size} cut short")
        return None

    def _damage_not_tail(self, offset: int, size: int) -> str | None:
        """Why a record that runs past the end of the file is damage rather than a torn tail
        (E5), or None. A writer never wrote a size above the maximum entry size, and never
        wrote a record past a finalized log's ledgersMap (``_check_reached_map``)."""
        if size > self._reader.max_entry_size:
            return f"entry size {size} above the maximum {self._reader.max_entry_size}"
        return None

    def _check_reached_map(self) -> None:
        """E5: a finalized log was fsynced whole before its header named the ledgersMap
        (E1), so a scan that ends before the map has met damage, not a torn tail."""
        map_offset = self._reader.header.map_offset
        end = self.end
        if map_offset and end.offset < map_offset and not self.corrupt:
            self.corrupt = True
            self.end = ScanEnd(end.offset, end.cut_bytes,
                               f"corrupt: the log ends at {end.offset}, before its ledgersMap "
                               f"at {map_offset} ({end.reason})")
            log.error("%s: %s", self._reader.path, self.end.reason)

    def _skip_padding(self, buf: bytes, p: int, offset: int) -> int:
        # size <= 0: BookKeeper advances one byte. Over a run of zeros every position up to
        # 3 bytes before the next non-zero byte also reads size 0, so jump there at once.
        if self._pad_start is None:
            self._pad_start = offset
        step = 1
        if buf[p] == 0:
            found = _NON_ZERO.search(buf, p)
            limit = found.start() if found is not None else len(buf)
            step = max(1, limit - 3 - p)
        self.padding_bytes += step
        return step

    def _end_at_eof(self, offset: int, left: int, file_size: int, torn_reason: str) -> None:
        if self._pad_start is not None:
            # E2: the writer stopped where the padding (zeros after a crash, A1) began.
            start = self._pad_start
            self.end = ScanEnd(start, file_size - start, "padding tail")
        elif left == 0:
            self.end = ScanEnd(offset, 0, CLEAN)
        else:
            self.end = ScanEnd(offset, left, torn_reason)
        if not self.end.clean:
            log.warning("%s: scan ended at %d, %d bytes cut: %s", self._reader.path, self.end.offset,
                        self.end.cut_bytes, self.end.reason)

    def _note_oversize(self, offset: int, size: int) -> None:
        if not self.oversize_entries:
            log.warning("%s: entry at %d has size %d above the maximum %d", self._reader.path,
                        offset, size, self._reader.max_entry_size)
        self.oversize_entries += 1

