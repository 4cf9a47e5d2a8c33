"""Scrub: read back every entry the ``locations`` index points at, and check it.

Used by ``bookie shell scrub`` and, rate-limited, by the daemon (DESIGN.md §8, issue 7).
Apache BookKeeper's nearest tool is ``bookkeeper shell localconsistencycheck``, which reads
every index entry back; this adds the digest check that our ledger states make possible
(FORMATS.md §9.4).

Checks, per index entry (L, E) -> location (log, pos) (FORMATS.md §5.3, §5.6, §6):
    1. the log ``<hex>.log`` exists and ``pos`` lies past its 1024-byte header
    2. framing: the size at ``pos - 4`` is >= 16 and the entry ends inside the file
    3. the entry's own ledgerId and entryId are (L, E)
    4. CRC32C and CRC32 ledgers (the type kept in the ``ledgers`` index, §7.2): the digest
       matches. MAC, DUMMY and not-yet-known types get checks 1-3 only and are counted.

Order: one pread per index entry would cost a system call per 1 KiB, so instead
    1. the index is read in key order, in windows of at most ``window_entries`` (S3);
    2. a window is sorted by location, and each log's positions are coalesced into reads of
       up to ``chunk_bytes``;
    3. a reader thread prefetches those reads (pread releases the GIL), so cold reads overlap
       the checking on this thread; ``rate_bytes_per_s`` throttles the checking side, and
       the reader stays at most ``READ_AHEAD_DEPTH`` reads ahead of it.

Invariants:
    S1. Read-only: files are opened for reading only and no index is written.
    S2. A problem is reported only if the index still maps (L, E) to the same location when
        it is found: on a running bookie, replay or compaction may move an entry meanwhile.
    S3. Memory is bounded by ``window_entries`` and the read-ahead depth, not the index size.

Thread-safety: ``run`` on one thread (it starts and joins its own reader thread); ``stop``
from any thread.
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import itertools
import operator
import os
import queue
import struct
import threading
import time
import zlib
from typing import TYPE_CHECKING, Callable, Iterator

import crc32c as _crc32c

from bookie.entry import IDS, METADATA_LENGTH, DigestType, compute_digest
from bookie.errors import IOFailure
from entrylog.format import (
    HEADER_SIZE, MIN_ENTRY_SIZE, SIZE, log_file_name, parse_log_id,
)

if TYPE_CHECKING:
    from bookie.disk import Disk, DiskFile
    from ledgerindex.ledgers import LedgerMetadataIndex
    from ledgerindex.locations import EntryLocationIndex

#: Entries held per index window (S3): ~170 bytes each while sorted, so ~170 MiB; 1 GiB of
#: 1 KiB entries fits one window, and is then read strictly sequentially.
WINDOW_ENTRIES = 1 << 20
#: Bytes per sequential read of an entry log.
CHUNK_BYTES = 8 << 20
#: Read past the last entry of a read, whose size is not known yet; a larger entry there
#: is read again on its own.
TAIL_BYTES = 64 << 10
READ_AHEAD_DEPTH = 4
#: Reads the kernel is asked to start (posix_fadvise WILLNEED) beyond the one being made.
HINT_AHEAD_READS = 4
#: Bytes of the first logs the kernel is asked to read while the first index window is
#: decoded, so that cold reads overlap that CPU work too.
FIRST_HINT_BYTES = 256 << 20
#: Problems kept in the report; all are counted and passed to ``on_problem``.
PROBLEMS_KEPT_MAX = 10_000

_POS_MASK = 0xFFFFFFFF
_FIRST = operator.itemgetter(0)
_U64 = struct.Struct(">Q")
#: size | ledgerId | entryId | (LAC, length) | a CRC32C digest: one unpack per entry. An entry
#: shorter than 40 bytes leaves the last field meaningless; its size says so (FORMATS.md §6).
_HEAD = struct.Struct(">iqq16xI")
assert _HEAD.size == SIZE.size + METADATA_LENGTH + 4
_CRC32C = int(DigestType.CRC32C)
_CRC32 = int(DigestType.CRC32)
#: Digest type numbers (FORMATS.md §6.2) as report names; 0 is "not known yet" (§9.4).
TYPE_NAMES = {0: "unknown", 1: "crc32", 2: "mac", 3: "crc32c", 4: "dummy"}
#: A ledger with locations but no state in the ``ledgers`` index.
NO_STATE = -1
#: ``verify_digest=False``: every entry is checked for framing and ids only.
NOT_VERIFIED = -2
_KIND_NAMES = {**TYPE_NAMES, NO_STATE: "no-state"}


@dataclasses.dataclass(frozen=True, slots=True)
class ScrubProblem:
    """One bad index entry. ``offset`` is the size field's (pos - 4), as scanners report."""

    path: str
    offset: int
    ledger_id: int
    entry_id: int
    location: int
    reason: str

    def to_json(self) -> dict:
        return {"type": "problem", "file": self.path, "offset": self.offset,
                "ledgerId": self.ledger_id, "entryId": self.entry_id,
                "logId": self.location >> 32, "pos": self.location & _POS_MASK,
                "reason": self.reason}


@dataclasses.dataclass
class ScrubReport:
    entries: int = 0
    verified: int = 0
    #: Entries checked for framing and ids only, by digest type name (and "no-state").
    framing_only: dict[str, int] = dataclasses.field(default_factory=dict)
    #: Index entries per ledger: check-index compares them with the ledgers index.
    ledger_entries: collections.Counter = dataclasses.field(
        default_factory=collections.Counter)
    bytes_read: int = 0
    logs: int = 0
    problem_count: int = 0
    problems: list[ScrubProblem] = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    stopped: bool = False

    @property
    def clean(self) -> bool:
        return self.problem_count == 0

    def to_json(self) -> dict:
        return {"type": "summary", "entries": self.entries, "verified": self.verified,
                "framingOnly": dict(self.framing_only), "bytesRead": self.bytes_read,
                "logs": self.logs, "problems": self.problem_count,
                "seconds": round(self.seconds, 3), "stopped": self.stopped}


@dataclasses.dataclass(frozen=True, slots=True)
class _Read:
    """One planned read: ``length`` bytes of ``path`` at ``start``, for window[first:last].

    ``log_base`` is the log id shifted into a location's high 32 bits.
    """

    log_base: int
    path: str
    start: int
    length: int
    first: int
    last: int
    file_size: int


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
        """Ask a running scrub to end after its current read (the daemon's shutdown)."""
        self._stop.set()

    def run(self) -> ScrubReport:
        self._started = self._clock()
        logs = self._log_sizes()
        self._bytes_total = sum(size for _, size in logs)
        self._hint_first_logs(logs)
        try:
            for window in _windows(self.locations, self.window_entries, self.report):
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
                _will_need(handle, 0, min(size, budget))
            finally:
                handle.close()
            budget -= size

    def _scrub_window(self, window: list[tuple[int, int, int]]) -> None:
        self.report.entries += len(window)
        reads = list(self._plan(window))
        with _ReadAhead(self.disk, reads, READ_AHEAD_DEPTH) as read_ahead:
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

    def _plan(self, window: list[tuple[int, int, int]]) -> Iterator[_Read]:
        """Coalesced reads per log; entries that cannot be read are reported here."""
        first = 0
        while first < len(window):
            log_id = window[first][0] >> 32
            end = bisect.bisect_left(window, ((log_id + 1) << 32,), first)
            yield from self._plan_log(window, first, end, log_id)
            first = end

    def _plan_log(self, window, first: int, end: int, log_id: int) -> Iterator[_Read]:
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
            last = _first_gap(window, inside, last, self.tail_bytes)
            stop = min(file_size, (window[last - 1][0] & _POS_MASK) + self.tail_bytes)
            yield _Read(base, path, start, stop - start, inside, last, file_size)
            inside = last
        self._problems(window, past, end, path,
                       f"position lies past the end of the file ({file_size} bytes)")

    # -- checking ---------------------------------------------------------------------------

    def _check_read(self, window, read: _Read, buf: bytes) -> None:
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
            end = p + 4 + size
            if found_eid != eid or found_lid != lid or end > n or size < 16:
                self._examine(read, loc, lid, eid)
                continue
            if lid != previous:
                previous, kind = lid, types.get(lid)
                kind = digest_type(lid) if kind is None else kind
            if kind == crc32c_kind:
                ok = size >= 36 and crc32c(mv[p + 40:end], crc32c(mv[p + 4:p + 36])) == digest
            elif kind == crc32_kind:
                ok = size >= 40 and crc32(mv[p + 44:end], crc32(mv[p + 4:p + 36])) == \
                    u64(buf, p + 36)[0]
            else:
                framing_only[kind] += 1
                continue
            if ok:
                verified += 1
            else:
                self._bad_digest(read, loc, lid, eid, buf[p + 4:end], kind)
        self.report.verified += verified

    def _digest_type(self, ledger_id: int) -> int:
        if not self.verify_digest:
            kind = NOT_VERIFIED
        else:
            state = self.ledgers.get(ledger_id) if self.ledgers is not None else None
            kind = NO_STATE if state is None else state.digest_type
        self._types[ledger_id] = kind
        return kind

    def _examine(self, read: _Read, loc: int, lid: int, eid: int) -> None:
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

    def _bad_digest(self, read: _Read, loc: int, lid: int, eid: int, entry: bytes,
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
            return  # S2: moved since the index was read
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


# -- the index ----------------------------------------------------------------------------


def _windows(locations: "EntryLocationIndex", size: int,
             report: ScrubReport) -> Iterator[list[tuple[int, int, int]]]:
    """Windows of (location, ledgerId, entryId) sorted by location (S3).

    Decoded in bulk: one join and one unpack per window, not two unpacks per entry. A
    key or value of the wrong length shifts the decoding; the entries it garbles then fail
    their id check and are reported. Location 0 is "absent" (FORMATS.md §7.1): skipped.
    """
    path = locations.kv.path
    for chunk in locations.kv.item_chunks(size):
        n = len(chunk)
        blob = b"".join(itertools.chain.from_iterable(chunk))
        del chunk
        if len(blob) != 24 * n:
            raise IOFailure(f"RocksDB {path}: locations keys and values are not 16 and 8 "
                            f"bytes (FORMATS.md §7.1)")
        fields = struct.unpack(f">{3 * n}q", blob)
        del blob
        ledger_ids = fields[0::3]
        report.ledger_entries.update(ledger_ids)
        window = sorted(zip(fields[2::3], ledger_ids, fields[1::3]))
        del fields, ledger_ids
        # Negative locations stay, to be reported; zeros are "absent" and go.
        zeros = bisect.bisect_left(window, (0,))
        absent = bisect.bisect_left(window, (1,), zeros)
        if absent > zeros:
            report.ledger_entries.subtract(lid for _, lid, _ in window[zeros:absent])
            report.ledger_entries += collections.Counter()  # drops the zero counts
            del window[zeros:absent]
        yield window


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
    digest_type = DigestType(kind)
    end = METADATA_LENGTH + digest_type.digest_length
    if len(entry) < end:
        return (f"entry of {len(entry)} bytes is shorter than its header and "
                f"{digest_type.header_name} digest")
    view = memoryview(entry)
    expected = compute_digest(digest_type, (view[:METADATA_LENGTH], view[end:]))
    stored = bytes(view[METADATA_LENGTH:end])
    if stored == expected:
        return None
    return (f"{digest_type.header_name} digest mismatch: stored {stored.hex()}, "
            f"computed {expected.hex()}")


def _first_gap(window, first: int, last: int, gap_bytes: int) -> int:
    """The end of window[first:last]'s leading run without a gap above ``gap_bytes``.

    When the index does not fit one window, a window's entries sit between other windows'
    entries in the logs; a read must skip those, not read through them. Done with C-level
    iterators (~0.04 µs an entry) since it runs over every entry.
    """
    locations = list(map(_FIRST, window[first:last]))
    wide = map(operator.gt, map(operator.sub, locations[1:], locations[:-1]),
               itertools.repeat(gap_bytes))
    return first + next(itertools.compress(itertools.count(1), wide), last - first)


def _will_need(handle: "DiskFile", start: int, length: int) -> None:
    """Ask the kernel to start reading a range (an OsFile's fd); a no-op elsewhere."""
    fd = getattr(handle, "fd", None)
    if fd is None or not hasattr(os, "posix_fadvise"):
        return
    try:
        os.posix_fadvise(fd, start, length, os.POSIX_FADV_WILLNEED)
    except OSError:
        pass  # a hint: reading works without it


# -- the reader thread --------------------------------------------------------------------


_DONE = object()


class _ReadAhead:
    """Reads planned ranges in order on its own thread, at most ``depth`` ahead of use.

    Iterating yields (read, bytes) or (read, OSError). Leaving the ``with`` block stops the
    thread after its current read and joins it.
    """

    def __init__(self, disk: "Disk", reads: list[_Read], depth: int) -> None:
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._stopping = threading.Event()
        self._finished = False
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(disk, reads),
                                        name="scrub-read", daemon=True)
        self._thread.start()

    def _run(self, disk: "Disk", reads: list[_Read]) -> None:
        path, handle, failure = None, None, None
        try:
            for index, read in enumerate(reads):
                if self._stopping.is_set():
                    break
                if read.path != path:
                    if handle is not None:
                        handle.close()
                    path, handle, failure = read.path, None, None
                    try:
                        handle = disk.open(path)
                    except OSError as exc:
                        failure = exc
                data = failure
                if handle is not None:
                    ahead = reads[index + HINT_AHEAD_READS:index + HINT_AHEAD_READS + 1]
                    if ahead and ahead[0].path == path:
                        _will_need(handle, ahead[0].start, ahead[0].length)
                    try:
                        data = handle.read_at(read.start, read.length)
                    except OSError as exc:
                        data = exc
                self._queue.put((read, data))
        except BaseException as exc:  # a bug, not an I/O error: re-raised on the scrub thread
            self._error = exc
        finally:
            if handle is not None:
                handle.close()
            self._queue.put(_DONE)

    def __iter__(self):
        while True:
            item = self._queue.get()
            if item is _DONE:
                self._finished = True
                if self._error is not None:
                    raise self._error
                return
            yield item

    def __enter__(self) -> "_ReadAhead":
        return self

    def __exit__(self, *exc_info) -> None:
        self._stopping.set()
        while not self._finished:  # unblock a put, then wait for the thread's last word
            self._finished = self._queue.get() is _DONE
        self._thread.join()
