"""Reading BKLO entry logs: point reads, scans and the ledgersMap (docs/formats.md §5.6).

One reader serves the daemon (point reads), ``bookie shell readlog``, scrub, GC and the
pipeline (docs/design.md §8). Scans read the file in large chunks and parse records with
``struct.unpack_from``, one unpack per record, never one pread per entry.

Paths (docs/formats.md §5.6):
    index path  ledgers_map(): the header points at a whole trailer (E1); any doubt about it
                (offset outside the file, wrong count, bad batch) discards it with a
                warning and returns None, and ledger_totals() falls back to scanning.
    scan path   scan(): records from offset 1024; map batches (ledgerId < 0) are skipped;
                the end of the written region is a ScanEnd value, never an exception (E2).
                A size of 1..15 (E3) ends the scan too, with ``corrupt`` set, so that scrub
                and GC can go on to the next log.
                E5. A record that runs past the end of the file is a torn tail only where a
                writer could have left it: its size is at most the maximum entry size and
                the log has no ledgersMap after it. Otherwise it is a damaged size field,
                and the scan ends ``corrupt``: it has not seen the whole log, so it decides
                nothing (GC's G2; GC deleted live entries after such a scan: docs/drills.md
                "Track record").

Thread-safety: a reader is immutable after construction apart from the scan results
(``end``, ``corrupt``, counters) and the lazily read header. ``read_entry`` uses pread only
and may be called from several threads at once; ``scan`` and ``ledgers_map`` belong to the
one thread that calls them.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from typing import TYPE_CHECKING, Iterator

from bookie.entry import IDS
from bookie.errors import CorruptRecord, IOFailure, ScanEnd
from entrylog.format import (
    HEADER_SIZE, MAP_BATCH_LEN_MAX, MIN_ENTRY_SIZE, RECORD_HEAD, SIZE, LogHeader, Oversize,
    decode_header, decode_ledgers_map_batch, header_problem, parse_hex_id,
)

if TYPE_CHECKING:
    from bookie.disk import Disk

log = logging.getLogger(__name__)

DEFAULT_MAX_ENTRY_SIZE = 5 * 1024 * 1024
SCAN_CHUNK_BYTES = 8 * 1024 * 1024
#: One pread covers the size field and an entry of up to 4092 bytes (docs/design.md §3.3).
READ_AHEAD_BYTES = 4096
_NON_ZERO = re.compile(rb"[^\x00]")
_CLEAN = "clean"


@dataclasses.dataclass(slots=True)
class ScannedEntry:
    """One entry found by a scan. ``offset`` is the size field's, ``location`` = offset + 4."""

    offset: int
    size: int
    ledger_id: int
    entry_id: int
    location: int
    entry: bytes | None


class EntryLogReader:
    """A BKLO log opened for reading. See the module docstring for thread-safety."""

    def __init__(self, disk: Disk, path: str, log_id: int | None = None,
                 max_entry_size: int = DEFAULT_MAX_ENTRY_SIZE, *,
                 scan_chunk_bytes: int = SCAN_CHUNK_BYTES) -> None:
        assert scan_chunk_bytes >= RECORD_HEAD.size
        self.path = path
        self.log_id = _log_id_of(path) if log_id is None else log_id
        self.max_entry_size = max_entry_size
        self.scan_chunk_bytes = scan_chunk_bytes
        try:
            self._file = disk.open(path)
        except OSError as err:
            raise IOFailure(f"cannot open entry log {path}: {err}") from err
        self._header: LogHeader | None = None
        self._header_read = False
        self.map_problem: str | None = None
        self._reset_scan_results()

    def _reset_scan_results(self) -> None:
        self.end: ScanEnd | None = None
        self.corrupt = False
        self.padding_bytes = 0
        self.oversize_entries = 0
        self._pad_start: int | None = None

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> EntryLogReader:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def file_size(self) -> int:
        try:
            return self._file.size()
        except OSError as err:
            raise IOFailure(f"{self.path}: cannot stat: {err}") from err

    def _read(self, offset: int, size: int) -> bytes:
        try:
            return self._file.read_at(offset, size)
        except OSError as err:
            raise IOFailure(f"{self.path}: read of {size} bytes at {offset} failed: {err}") \
                from err

    read_span = _read  # entrylog/run_reader.py's one read of a run (RR1)

    @property
    def header(self) -> LogHeader | None:
        """The decoded header, or None for a file shorter than 1024 bytes (no entries).

        Raises CorruptRecord for a wrong magic or version (docs/formats.md §5.6).
        """
        if not self._header_read:
            data = self._read(0, HEADER_SIZE)
            problem = header_problem(data)
            if problem is not None:
                raise CorruptRecord(self.path, 0, problem)
            self._header = decode_header(data) if len(data) == HEADER_SIZE else None
            self._header_read = True
        return self._header

    # ----------------------------------------------------------------- point reads

    def read_entry(self, pos: int, expected_ledger_id: int | None = None,
                   expected_entry_id: int | None = None, limit: int = 0):
        """The entry whose first byte is at ``pos`` (a location's low 32 bits); with a
        ``limit``, an entry larger than it is ``Oversize(size)``, its bytes not read (PB7).

        Its size is read at pos - 4 (below 16: CorruptRecord); its stored ids must equal the
        expected ones, else IOFailure (docs/design.md §1.10, BookKeeper's WrongEntryException).
        """
        if pos < HEADER_SIZE + SIZE.size:
            raise IOFailure(f"{self.path}: entry position {pos} lies inside the header")
        data = self._read(pos - SIZE.size, READ_AHEAD_BYTES)
        if len(data) < SIZE.size:
            raise IOFailure(f"{self.path}: no entry at {pos}: the file ends before it")
        size = SIZE.unpack_from(data, 0)[0]
        if size < MIN_ENTRY_SIZE:
            raise CorruptRecord(self.path, pos - SIZE.size, f"entry size {size} < 16")
        if size > self.max_entry_size:  # BookKeeper only warns (docs/formats.md §5.6)
            log.warning("%s: entry at %d has size %d above the maximum %d",
                        self.path, pos, size, self.max_entry_size)
        if limit and size > limit:
            return Oversize(size)
        if SIZE.size + size <= len(data):
            entry = data[SIZE.size:SIZE.size + size]
        else:
            entry = data[SIZE.size:] + self._read(pos + len(data) - SIZE.size,
                                                  size + SIZE.size - len(data))
        if len(entry) < size:
            raise IOFailure(f"{self.path}: entry at {pos} of size {size} is cut short "
                            f"at {pos + len(entry)}")
        _check_ids(self.path, pos, entry, expected_ledger_id, expected_entry_id)
        return entry

    # ----------------------------------------------------------------- index path

    def ledgers_map(self) -> dict[int, int] | None:
        """ledgerId -> total bytes from the trailer, or None (reason in ``map_problem``)."""
        self.map_problem = None
        header = self.header
        file_size = self.file_size()
        refusal = _index_path_refusal(header, file_size)
        if refusal is not None:
            self.map_problem = refusal
            return None
        try:
            return self._read_map_batches(header, file_size)
        except ValueError as err:
            # Not an error (docs/formats.md §5.6 index path 4): the caller scans instead.
            self.map_problem = str(err)
            log.warning("%s: ledgersMap discarded, scanning instead: %s", self.path, err)
            return None

    def _read_map_batches(self, header: LogHeader, file_size: int) -> dict[int, int]:
        # extractEntryLogMetadataFromIndex: batches until EOF or a batchLen <= 0.
        totals: dict[int, int] = {}
        offset = header.map_offset
        while offset < file_size:
            head = self._read(offset, SIZE.size)
            if len(head) < SIZE.size:
                raise ValueError(f"ledgersMap batchLen at {offset} is cut short")
            batch_len = SIZE.unpack(head)[0]
            if batch_len <= 0:
                break
            if batch_len > MAP_BATCH_LEN_MAX:
                raise ValueError(f"ledgersMap batchLen {batch_len} at {offset} is too large")
            data = self._read(offset, SIZE.size + batch_len)
            try:
                pairs, end = decode_ledgers_map_batch(data)
            except ValueError as err:
                raise ValueError(f"at {offset}: {err}") from None
            for ledger_id, total_bytes in pairs:
                totals[ledger_id] = totals.get(ledger_id, 0) + total_bytes
            if len(totals) > header.ledgers_count:
                break  # already wrong; the count check below names it
            offset += end
        if len(totals) != header.ledgers_count:
            raise ValueError(f"ledgersMap holds {len(totals)} ledgers, the header says "
                             f"{header.ledgers_count}")
        return totals

    def ledger_totals(self) -> tuple[dict[int, int], str]:
        """(ledgerId -> Σ(size + 4), source), source "ledgersMap" or "scan".

        A log whose header points nowhere is scanned, never taken as empty (docs/design.md §1.9).
        """
        totals = self.ledgers_map()
        if totals is not None:
            return totals, "ledgersMap"
        totals = {}
        for found in self.scan(payload=False):
            totals[found.ledger_id] = totals.get(found.ledger_id, 0) + found.size + SIZE.size
        return totals, "scan"

    # ----------------------------------------------------------------- scan path

    def scan(self, from_offset: int = HEADER_SIZE,
             payload: bool = True) -> Iterator[ScannedEntry]:
        """Every entry from ``from_offset`` (a record boundary) in file order.

        After the iteration ``end`` holds the ScanEnd: where the written region ends, the
        bytes cut after it and why; ``corrupt`` is True if it ended at a size of 1..15.
        """
        if from_offset < HEADER_SIZE:
            raise ValueError(f"a scan starts at {HEADER_SIZE} or later, not {from_offset}")
        self._reset_scan_results()
        self.header  # noqa: B018  (magic and version first: a foreign file is corruption)
        file_size = self.file_size()
        if file_size < HEADER_SIZE:
            # Allocated, never written (or a torn header): no entries (§5.6 scan path 1).
            reason = _CLEAN if file_size == 0 else "header cut short"
            self.end = ScanEnd(0, file_size, reason)
            return
        yield from self._scan_records(from_offset, file_size, payload)
        self._check_reached_map()
        if self.padding_bytes:
            log.warning("%s: skipped %d padding bytes (size <= 0)", self.path,
                        self.padding_bytes)

    def _scan_records(self, pos: int, file_size: int,
                      payload: bool) -> Iterator[ScannedEntry]:
        # The fast loop takes whole records inside the chunk; everything else (a record
        # crossing the chunk's end, padding, the end of the log) is _next_step's business.
        unpack = RECORD_HEAD.unpack_from
        head_size = RECORD_HEAD.size
        base = self.log_id << 32
        max_size = self.max_entry_size
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
                want = max(self.scan_chunk_bytes, -step)
                buf, p = self._read(buf_pos, want), 0
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
                      self.path, size, offset)
            return None
        if offset + SIZE.size + size <= file_size:
            return -(SIZE.size + max(size, RECORD_HEAD.size))
        damage = self._damage_not_tail(offset, size)
        if damage is not None:  # E5
            self.corrupt = True
            self.end = ScanEnd(offset, file_size - offset, f"corrupt: {damage}")
            log.error("%s: %s at %d; the scan of this log stops", self.path, damage, offset)
            return None
        self._end_at_eof(offset, file_size - offset, file_size,
                         f"record of size {size} cut short")
        return None

    def _damage_not_tail(self, offset: int, size: int) -> str | None:
        """Why a record that runs past the end of the file is damage rather than a torn tail
        (E5), or None. A writer never wrote a size above the maximum entry size, and never
        wrote a record past a finalized log's ledgersMap (``_check_reached_map``)."""
        if size > self.max_entry_size:
            return f"entry size {size} above the maximum {self.max_entry_size}"
        return None

    def _check_reached_map(self) -> None:
        """E5: a finalized log was fsynced whole before its header named the ledgersMap
        (E1), so a scan that ends before the map has met damage, not a torn tail."""
        map_offset = self.header.map_offset
        end = self.end
        if map_offset and end.offset < map_offset and not self.corrupt:
            self.corrupt = True
            self.end = ScanEnd(end.offset, end.cut_bytes,
                               f"corrupt: the log ends at {end.offset}, before its ledgersMap "
                               f"at {map_offset} ({end.reason})")
            log.error("%s: %s", self.path, self.end.reason)

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
            self.end = ScanEnd(offset, 0, _CLEAN)
        else:
            self.end = ScanEnd(offset, left, torn_reason)
        if not self.end.clean:
            log.warning("%s: scan ended at %d, %d bytes cut: %s", self.path, self.end.offset,
                        self.end.cut_bytes, self.end.reason)

    def _note_oversize(self, offset: int, size: int) -> None:
        if not self.oversize_entries:
            log.warning("%s: entry at %d has size %d above the maximum %d", self.path,
                        offset, size, self.max_entry_size)
        self.oversize_entries += 1


def _log_id_of(path: str) -> int:
    # "2a.log" and "2a.log.compacting" both name log 2a.
    log_id = parse_hex_id(os.path.basename(path).split(".", 1)[0])
    if log_id is None:
        raise ValueError(f"cannot tell the log id of {path}: pass log_id")
    return log_id


def _index_path_refusal(header: LogHeader | None, file_size: int) -> str | None:
    """Why the index path does not apply, or None (docs/formats.md §5.6)."""
    if header is None:
        return "the file is shorter than its 1024-byte header"
    if not header.has_ledgers_map:
        return (f"no ledgersMap (version {header.version}, offset {header.map_offset}, "
                f"count {header.ledgers_count})")
    if not HEADER_SIZE <= header.map_offset < file_size:
        return f"ledgersMap offset {header.map_offset} lies outside the file ({file_size})"
    return None


def _check_ids(path: str, pos: int, entry: bytes, ledger_id: int | None,
               entry_id: int | None) -> None:
    found_ledger, found_entry = IDS.unpack_from(entry, 0)
    if (ledger_id is not None and found_ledger != ledger_id) or \
            (entry_id is not None and found_entry != entry_id):
        raise IOFailure(f"{path}: wrong entry at {pos}: expected {ledger_id}/{entry_id}, "
                        f"found {found_ledger}/{found_entry}")
