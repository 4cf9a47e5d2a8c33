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

import logging
import os
from typing import TYPE_CHECKING, Iterator

from bookie.entry import IDS
from bookie.errors import CorruptRecord, IOFailure, ScanEnd
from entrylog.format import (
    HEADER_SIZE, MAP_BATCH_LEN_MAX, MIN_ENTRY_SIZE, RECORD_HEAD, SIZE, LogHeader, Oversize,
    decode_header, decode_ledgers_map_batch, header_problem, parse_hex_id,
)
from entrylog.log_scan import LogScan, ScannedEntry

if TYPE_CHECKING:
    from bookie.disk import Disk

log = logging.getLogger(__name__)

DEFAULT_MAX_ENTRY_SIZE = 5 * 1024 * 1024
SCAN_CHUNK_BYTES = 8 * 1024 * 1024
#: One pread covers the size field and an entry of up to 4092 bytes (docs/design.md §3.3).
READ_AHEAD_BYTES = 4096


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
        self._scan = LogScan(self)  # results of the latest scan (none yet: clean, empty)

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
        The walk is entrylog/log_scan.py's; its results stay readable here.
        """
        self._scan = LogScan(self)
        return self._scan.run(from_offset, payload)

    @property
    def end(self) -> ScanEnd | None:
        return self._scan.end

    @property
    def corrupt(self) -> bool:
        return self._scan.corrupt

    @property
    def padding_bytes(self) -> int:
        return self._scan.padding_bytes

    @property
    def oversize_entries(self) -> int:
        return self._scan.oversize_entries


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
