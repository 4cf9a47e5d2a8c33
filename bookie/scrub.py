"""Scrub: read back every entry the ``locations`` index points at, and check it.

Used by ``bookie shell scrub`` and ``check-index`` on a stopped bookie's files (or a copy);
the daemon runs no scrub (the Spark pipeline's ``scrub`` job is the other, parallel way).
Apache BookKeeper's nearest tool is ``bookkeeper shell localconsistencycheck``, which reads
every index entry back; this adds the digest check that our ledger states make possible
(docs/formats.md §9.4).

Checks, per index entry (L, E) -> location (log, pos) (docs/formats.md §5.3, §5.6, §6):
    1. the log ``<hex>.log`` exists and ``pos`` lies past its 1024-byte header
    2. framing: the size at ``pos - 4`` is >= 16 and the entry ends inside the file
    3. the entry's own ledgerId and entryId are (L, E)
    4. CRC32C and CRC32 ledgers (the type kept in the ``ledgers`` index, §7.2): the digest
       matches. MAC, DUMMY and not-yet-known types get checks 1-3 only and are counted.

Order: one pread per index entry would cost a system call per 1 KiB, so instead
    1. the index is read in key order, in windows of at most ``window_entries`` (SC3);
    2. a window is sorted by location, and each log's positions are coalesced into reads of
       up to ``chunk_bytes``;
    3. a reader thread prefetches those reads (pread releases the GIL), so cold reads overlap
       the checking on this thread; ``rate_bytes_per_s`` throttles the checking side, and
       the reader stays at most ``READ_AHEAD_DEPTH`` reads ahead of it.

Invariants:
    SC1. Read-only: files are opened for reading only and no index is written.
    SC2. A problem is reported only if the index still maps (L, E) to the same location when
        it is found: on a running bookie, replay or compaction may move an entry meanwhile.
    SC3. Memory is bounded by ``window_entries`` and the read-ahead depth, not the index size.

Thread-safety: ``run`` on one thread (it starts and joins its own reader thread); ``stop``
from any thread.
"""

from __future__ import annotations

import bisect
import collections
import os
import struct
import threading
import time
import zlib
from typing import TYPE_CHECKING, Callable, Iterator

import crc32c as _crc32c

from bookie.entry import (CRC32_PAYLOAD_OFFSET, CRC32C_PAYLOAD_OFFSET, IDS, METADATA_LENGTH,
                          DigestType, digest_mismatch)
from bookie.disk import will_need
from bookie.scrub_reads import ReadAhead, ScrubRead, first_gap, index_windows
from bookie.scrub_report import (_KIND_NAMES, NO_STATE, NOT_VERIFIED,
                                 ScrubProblem, ScrubReport)
from entrylog.format import (
    HEADER_SIZE, MIN_ENTRY_SIZE, SIZE, log_file_name, parse_log_id,
)

if TYPE_CHECKING:
    from bookie.disk import Disk, DiskFile
    from ledgerindex.ledgers import LedgerMetadataIndex
    from ledgerindex.locations import EntryLocationIndex

#: Entries held per index window (SC3): ~170 bytes each while sorted, so ~170 MiB; 1 GiB of
#: 1 KiB entries fits one window, and is then read strictly sequentially.
WINDOW_ENTRIES = 1 << 20
#: Bytes per sequential read of an entry log.
CHUNK_BYTES = 8 << 20
#: Read past the last entry of a read, whose size is not known yet; a larger entry there
#: is read again on its own.
TAIL_BYTES = 64 << 10
READ_AHEAD_DEPTH = 4
#: Bytes of the first logs the kernel is asked to read while the first index window is
#: decoded, so that cold reads overlap that CPU work too.
FIRST_HINT_BYTES = 256 << 20
#: Problems kept in the report; all are counted and passed to ``on_problem``.
PROBLEMS_KEPT_MAX = 10_000

_POS_MASK = 0xFFFFFFFF
_U64 = struct.Struct(">Q")
#: size | ledgerId | entryId | (LAC, length) | a CRC32C digest: one unpack per entry. An entry
#: shorter than 40 bytes leaves the last field meaningless; its size says so (docs/formats.md §6).
_HEAD = struct.Struct(">iqq16xI")
assert _HEAD.size == SIZE.size + CRC32C_PAYLOAD_OFFSET
#: Offsets from an entry's size field (the hot loop's ``p``): the entry, its digest, and the
#: payload behind a CRC32C (4-byte) or CRC32 (8-byte) digest (docs/formats.md §5.3, §6.1).
_ENTRY_AT = SIZE.size
_DIGEST_AT = SIZE.size + METADATA_LENGTH
_CRC32C_PAYLOAD_AT = SIZE.size + CRC32C_PAYLOAD_OFFSET
_CRC32_PAYLOAD_AT = SIZE.size + CRC32_PAYLOAD_OFFSET
_CRC32C = int(DigestType.CRC32C)
_CRC32 = int(DigestType.CRC32)








class Scrubber:
    """Checks every indexed entry (module docstring). One ``run`` per instance."""

    def __init__(self, disk: "Disk", ledger_dir: str, locations: "EntryLocationIndex",
                 ledgers: "LedgerMetadataIndex | None", *, verify_digest: bool = True,
                 rate_bytes_per_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep,
                 on_progress: Callable[[int, int], None] | None = None,
                 on_problem: Callable[[ScrubProblem], None] | None = None,
                 window_entries: int = WINDOW_ENTRIES, chunk_bytes: int = CHUNK_BYTES,
                 tail_bytes: int = TAIL_BYTES) -> None:
        assert window_entries > 0 and chunk_bytes > tail_bytes > SIZE.size
        assert rate_bytes_per_s is None or rate_bytes_per_s > 0
        self.disk = disk
        self.ledger_dir = ledger_dir
        self.locations = locations
        self.ledgers = ledgers
        self.verify_digest = verify_digest
        self.rate_bytes_per_s = rate_bytes_per_s
        self._clock = clock
        self._sleep = sleep
        self._on_progress = on_progress
        self._on_problem = on_problem
        self.window_entries = window_entries
        self.chunk_bytes = chunk_bytes
        self.tail_bytes = tail_bytes
        self.report = ScrubReport()
        self._types: dict[int, int] = {}
        self._framing_only: collections.Counter = collections.Counter()
        self._stop = threading.Event()
        self._started = 0.0
        self._bytes_total = 0
        self._handle: tuple[str, "DiskFile"] | None = None
        self._logs_read: set[int] = set()

    def stop(self) -> None:
        """Ask a running scrub to end after its current read (from another thread)."""
        self._stop.set()

    def run(self) -> ScrubReport:
        self._started = self._clock()
        logs = self._log_sizes()
        self._bytes_total = sum(size for _, size in logs)
        self._hint_first_logs(logs)
        try:
            for window in index_windows(self.locations, self.window_entries, self.report):
                self._scrub_window(window)
                if self._stop.is_set():
                    self.report.stopped = True
                    break
        finally:
            self._close_handle()
        self.report.framing_only = {_KIND_NAMES[kind]: count for kind, count
                                    in sorted(self._framing_only.items())
                                    if kind != NOT_VERIFIED}
        self.report.seconds = self._clock() - self._started
        return self.report

    # -- planning -------------------------------------------------------------------------

    def _log_sizes(self) -> list[tuple[str, int]]:
        """(path, size) of every entry log, in log id order."""
        logs = []
        ids = (parse_log_id(name) for name in self.disk.listdir(self.ledger_dir))
        for log_id in sorted(i for i in ids if i is not None):
            path = os.path.join(self.ledger_dir, log_file_name(log_id))
            try:
                logs.append((path, self.disk.file_size(path)))
            except OSError:
                pass  # deleted meanwhile (GC on a live bookie): not ours to read
        return logs

    def _hint_first_logs(self, logs: list[tuple[str, int]]) -> None:
        """Windows come in ledger order, and old ledgers mostly live in old logs: start the
        kernel reading those while this thread decodes the first window (a hint only)."""
        budget = FIRST_HINT_BYTES
        for path, size in logs:
            if budget <= 0:
                return
            try:
                handle = self.disk.open(path)
            except OSError:
                continue
            try:
                will_need(handle, 0, min(size, budget))
            finally:
                handle.close()
            budget -= size

    def _scrub_window(self, window: list[tuple[int, int, int]]) -> None:
        self.report.entries += len(window)
        reads = list(self._plan(window))
        with ReadAhead(self.disk, reads, READ_AHEAD_DEPTH) as read_ahead:
            for read, data in read_ahead:
                if isinstance(data, OSError):
                    for loc, lid, eid in window[read.first:read.last]:
                        self._problem(read.path, loc, lid, eid, f"cannot read: {data}")
                    continue
                self._check_read(window, read, data)
                self.report.bytes_read += len(data)
                self._progress()
                self._throttle()
                if self._stop.is_set():
                    break

    def _plan(self, window: list[tuple[int, int, int]]) -> Iterator[ScrubRead]:
        """Coalesced reads per log; entries that cannot be read are reported here."""
        first = 0
        while first < len(window):
            log_id = window[first][0] >> 32
            end = bisect.bisect_left(window, ((log_id + 1) << 32,), first)
            yield from self._plan_log(window, first, end, log_id)
            first = end

    def _plan_log(self, window, first: int, end: int, log_id: int) -> Iterator[ScrubRead]:
        base = log_id << 32
        if log_id < 0 or log_id > 0x7FFFFFFF:
            self._problems(window, first, end, "", "location is not a valid (logId, pos)")
            return
        path = os.path.join(self.ledger_dir, log_file_name(log_id))
        try:
            file_size = self.disk.file_size(path)
        except OSError as exc:
            self._problems(window, first, end, path, f"entry log missing: {exc.strerror}")
            return
        self._logs_read.add(log_id)
        self.report.logs = len(self._logs_read)
        # Additions, not ORs: a bound past 2**32 - 1 must not spill into the log id bits.
        inside = bisect.bisect_left(window, (base + HEADER_SIZE + SIZE.size,), first, end)
        self._problems(window, first, inside, path, "position lies inside the 1024-byte header")
        past = bisect.bisect_left(window, (base + file_size + SIZE.size,), inside, end)
        while inside < past:
            start = (window[inside][0] & _POS_MASK) - SIZE.size
            limit = base + start + self.chunk_bytes - self.tail_bytes
            last = max(inside + 1, bisect.bisect_left(window, (limit,), inside, past))
            last = first_gap(window, inside, last, self.tail_bytes)
            stop = min(file_size, (window[last - 1][0] & _POS_MASK) + self.tail_bytes)
            yield ScrubRead(base, path, start, stop - start, inside, last, file_size)
            inside = last
        self._problems(window, past, end, path,
                       f"position lies past the end of the file ({file_size} bytes)")

    # -- checking ---------------------------------------------------------------------------

    def _check_read(self, window, read: ScrubRead, buf: bytes) -> None:
        """The hot loop: framing, ids and digest of window[first:last] inside ``buf``.

        Written for speed (~0.5 µs an entry): locals only, offsets from one subtraction, the
        size, ids and CRC32C digest in one unpack; anything unusual goes to ``_examine``.
        """
        base = read.log_base + read.start + SIZE.size  # loc - base: the size field in buf
        mv, n, last_head = memoryview(buf), len(buf), len(buf) - _HEAD.size
        head, u64 = _HEAD.unpack_from, _U64.unpack_from
        crc32c, crc32, crc32c_kind, crc32_kind = _crc32c.crc32c, zlib.crc32, _CRC32C, _CRC32
        types, digest_type, framing_only = self._types, self._digest_type, self._framing_only
        previous, kind, verified = -1, 0, 0
        for loc, lid, eid in window[read.first:read.last]:
            p = loc - base
            if p > last_head:
                self._examine(read, loc, lid, eid)
                continue
            size, found_lid, found_eid, digest = head(buf, p)
            end = p + _ENTRY_AT + size
            if found_eid != eid or found_lid != lid or end > n or size < MIN_ENTRY_SIZE:
                self._examine(read, loc, lid, eid)
                continue
            if lid != previous:
                previous, kind = lid, types.get(lid)
                kind = digest_type(lid) if kind is None else kind
            if kind == crc32c_kind:
                ok = size >= CRC32C_PAYLOAD_OFFSET and crc32c(
                    mv[p + _CRC32C_PAYLOAD_AT:end],
                    crc32c(mv[p + _ENTRY_AT:p + _DIGEST_AT])) == digest
            elif kind == crc32_kind:
                ok = size >= CRC32_PAYLOAD_OFFSET and crc32(
                    mv[p + _CRC32_PAYLOAD_AT:end],
                    crc32(mv[p + _ENTRY_AT:p + _DIGEST_AT])) == u64(buf, p + _DIGEST_AT)[0]
            else:
                framing_only[kind] += 1
                continue
            if ok:
                verified += 1
            else:
                self._bad_digest(read, loc, lid, eid, buf[p + _ENTRY_AT:end], kind)
        self.report.verified += verified

    def _digest_type(self, ledger_id: int) -> int:
        if not self.verify_digest:
            kind = NOT_VERIFIED
        else:
            state = self.ledgers.get(ledger_id) if self.ledgers is not None else None
            kind = NO_STATE if state is None else state.digest_type
        self._types[ledger_id] = kind
        return kind

    def _examine(self, read: ScrubRead, loc: int, lid: int, eid: int) -> None:
        """The slow path: read one entry on its own and say what is wrong with it."""
        pos = loc & _POS_MASK
        try:
            handle = self._open(read.path)
            reason, entry = _framing_problem(handle, read.file_size, pos, lid, eid)
        except OSError as exc:
            reason, entry = f"cannot read: {exc}", None
        if reason is None:
            kind = self._types.get(lid)
            kind = self._digest_type(lid) if kind is None else kind
            if kind in (_CRC32C, _CRC32):
                reason = _digest_problem(entry, kind)
                if reason is None:
                    self.report.verified += 1
            else:
                self._framing_only[kind] += 1
        if reason is not None:
            self._problem(read.path, loc, lid, eid, reason)

    def _bad_digest(self, read: ScrubRead, loc: int, lid: int, eid: int, entry: bytes,
                    kind: int) -> None:
        self._problem(read.path, loc, lid, eid, _digest_problem(entry, kind))

    def _open(self, path: str) -> "DiskFile":
        if self._handle is None or self._handle[0] != path:
            self._close_handle()
            self._handle = (path, self.disk.open(path))
        return self._handle[1]

    def _close_handle(self) -> None:
        if self._handle is not None:
            self._handle[1].close()
            self._handle = None

    # -- reporting, progress, rate ----------------------------------------------------------

    def _problems(self, window, first: int, end: int, path: str, reason: str) -> None:
        for loc, lid, eid in window[first:end]:
            self._problem(path, loc, lid, eid, reason)

    def _problem(self, path: str, loc: int, lid: int, eid: int, reason: str | None) -> None:
        assert reason is not None
        if loc > 0 and self.locations.get(lid, eid) != loc:
            return  # SC2: moved since the index was read
        problem = ScrubProblem(path, (loc & _POS_MASK) - SIZE.size, lid, eid, loc, reason)
        self.report.problem_count += 1
        if len(self.report.problems) < PROBLEMS_KEPT_MAX:
            self.report.problems.append(problem)
        if self._on_problem is not None:
            self._on_problem(problem)

    def _progress(self) -> None:
        if self._on_progress is not None:
            self._on_progress(self.report.bytes_read, self._bytes_total)

    def _throttle(self) -> None:
        """Sleep until reading ``bytes_read`` at the rate limit would have taken this long."""
        if self.rate_bytes_per_s is None:
            return
        due = self._started + self.report.bytes_read / self.rate_bytes_per_s
        wait = due - self._clock()
        if wait > 0:
            self._sleep(wait)




# -- one entry --------------------------------------------------------------------------


def _framing_problem(handle: "DiskFile", file_size: int, pos: int, lid: int,
                     eid: int) -> tuple[str | None, bytes | None]:
    """(what is wrong with the framing or ids of the entry at ``pos``, its bytes)."""
    head = handle.read_at(pos - SIZE.size, SIZE.size)
    if len(head) < SIZE.size:
        return f"the file ends ({file_size} bytes) inside the size field", None
    size = SIZE.unpack(head)[0]
    if size < MIN_ENTRY_SIZE:
        return f"size field reads {size}, below the minimum 16", None
    if pos + size > file_size:
        return (f"entry of size {size} runs past the end of the file ({file_size} bytes)",
                None)
    entry = handle.read_at(pos, size)
    if len(entry) < size:
        return f"entry of size {size} is cut short at {pos + len(entry)}", None
    found = IDS.unpack_from(entry, 0)
    if found != (lid, eid):
        return f"holds entry {found[0]}/{found[1]}, not {lid}/{eid}", None
    return None, entry


def _digest_problem(entry: bytes, kind: int) -> str | None:
    return digest_mismatch(entry, DigestType(kind))




