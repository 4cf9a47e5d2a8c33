"""Scan a BKLG journal into records, then a ScanEnd (Journal.scanJournal; docs/formats.md §3.7).

``JournalReader(disk, path).scan(from_offset)`` yields ``JournalRecord``s in file order and,
once exhausted, leaves ``reader.end``: a ``ScanEnd(offset, cut_bytes, reason)``. It serves
replay, ``bookie shell readjournal`` and the pipeline. It does not check entry digests (it
does not know digest types); replay does.

Rules, in order, from the mark offset (or after the header when the offset is <= 0):
    1. Fewer than 4 bytes left: the end (their bytes, if non-zero, are a torn length word).
    2. len = 0: the end of the written region (J2). Non-zero bytes after it are damage.
    3. len = 0xFFFFFF00 in V5+: a padding record; padLen < 0, running past the end of the
       file, or ending off a 512 boundary (J1) is damage. Padding is consumed silently and
       counted (``padding_records``, ``padding_bytes``); ``include_padding`` yields it.
    4. Any other len < 0, len < 16, len > max_entry_size + 64 KiB, a record running past the
       end of the file, ledgerId < 0 (project check: ledger ids are >= 0), a data record with
       len < 24, keyLen or bufLen != len - 20, bufLen < 16, or a meta record below its
       minimum version (V3 key, V4 fence, V6 explicit LAC): damage at the record's offset.
    5. Otherwise the record; other negative entry ids come back as UNKNOWN_META.

Torn inside zeros (V5+). A record torn by a crash inside preallocated zeros reads back at
full length with zeros for its missing bytes. Every flush ends 512-aligned (J1), so when the
scan meets a zero length word at an unaligned offset, the last group's write did not
complete and was never acknowledged. If the record just before that word could end in
missing bytes (its last byte is zero; fence and padding records cannot be torn that way),
it is treated as damage at its offset. A record with an intact non-zero last byte is kept,
as Apache BookKeeper keeps it. Entry digests (replay) catch the rest.

Torn or corrupt (docs/design.md §6). Damage at offset D is a torn tail when no valid data follows
it, and ``CorruptRecord(path, D, reason)`` when some does. Every flush ends on a 512 boundary
(J1), so valid data after damage starts at an aligned offset P > D. Each such P up to the last
non-zero byte of the file is tried: P is plausible when its record is a padding record ending
on a boundary, or has 16 <= len <= the maximum, fits in the file, ledgerId >= 0, and entryId
>= 0 (len >= 24) or a known meta id with consistent inner lengths; and the record after it is
again plausible, or is a zero length word or the end of the file at an aligned offset. V4 has
no alignment: every offset within max_entry_size + 128 KiB of D is tried instead, and the
record after a candidate must be plausible too (bytes of a damaged record too easily pass for
one record followed by zeros). A torn tail ends the scan with ScanEnd(D, cut_bytes = bytes
from D to the last non-zero byte, reason); ``skip_invalid`` (Apache BookKeeper's
skipReplayJournalInvalidRecord) turns corruption into a ScanEnd whose reason starts
"skipped corrupt" instead of raising. Damage that is not followed by an aligned group (the
rest of a damaged last group) is cut and reported, never silently dropped.

Versions: V4..V6 are read. V1..V3 raise UnsupportedJournalVersion, a version outside 1..6
CorruptRecord. A file shorter than 8 bytes or whose first 8 bytes are zero is an empty
journal (a crash during creation): no records, ScanEnd at 0. A V5+ file shorter than its
512-byte header holds no records.

Thread-safety: a reader is used by one thread at a time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from bookie.errors import CorruptRecord, IOFailure, ScanEnd
from journal.format import (
    ALIGNMENT, LEN, MAX_DIGEST_TYPE, META_KINDS, META_PREFIX_LEN, META_RECORD_PREFIX,
    MIN_DATA_RECORD_LEN, MIN_READ_VERSION, MIN_RECORD_LEN, PADDING_MASK,
    PADDING_PREFIX, RECORD_PREFIX, V1, V5, V6, JournalRecord, RecordKind, detect_version,
    foreign_reason, header_size)

from journal.damage import V4_CANDIDATE, DamageProbe, record_problem

if TYPE_CHECKING:
    from bookie.disk import Disk

#: Bytes read per pread while scanning: replay reads in big sequential chunks.
CHUNK_BYTES = 4 << 20
#: Record lengths above max_entry_size + this are damage (room for framing differences).
RECORD_LEN_SLACK = 64 << 10
#: V4 has no flush alignment: valid data after damage is searched this far past max_len.
V4_SEARCH_SLACK = 128 << 10
_TAIL_STEP = 1 << 20

_DATA = RecordKind.DATA
_PADDING = RecordKind.PADDING
_UNKNOWN_META = RecordKind.UNKNOWN_META


class NotAJournal(CorruptRecord):
    """A file with neither the magic nor a plausible V1 first record (format.foreign_reason)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(path, 0, f"not a journal: {reason}")
        self.message = f"{path}: not a journal: {reason}"


class UnsupportedJournalVersion(IOFailure):
    """A V1..V3 journal needs replay by an Apache BookKeeper bookie first (docs/formats.md §3.1)."""

    def __init__(self, path: str, version: int) -> None:
        super().__init__(f"{path}: journal format version {version} is not replayed by this "
                         f"bookie (V{MIN_READ_VERSION}..V{V6} are); replay it with an Apache "
                         f"BookKeeper bookie first")
        self.path = path
        self.version = version




def _may_be_torn_inside_zeros(record: JournalRecord) -> bool:
    """Whether the record's missing bytes could read back as zeros (a fence ends in 00 anyway)."""
    if record.kind is RecordKind.FENCE or record.kind is _PADDING:
        return False
    if record.kind is _UNKNOWN_META:
        return True
    return not record.payload or record.payload[-1] == 0


class JournalReader:
    """Reads one journal file. Open on construction; ``close()`` or use as a context manager.

    Attributes: ``path``, ``version`` (None for an empty journal), ``end`` (after a scan),
    ``padding_records`` and ``padding_bytes`` (of the last scan).
    """

    def __init__(self, disk: "Disk", path: str, max_entry_size: int = 5 * 1024 * 1024) -> None:
        self.path = path
        self.max_entry_size = max_entry_size
        self._max_length = max_entry_size + RECORD_LEN_SLACK
        assert self._max_length < 1 << 24, "the V4 search assumes len < 16 MiB"
        try:
            self._handle = disk.open(path)
        except OSError as exc:
            raise IOFailure(f"{path}: cannot open journal: {exc}") from exc
        try:
            first = self._read(0, 12)
            self.version: int | None = detect_version(first[:8])
            #: Set when the file is no journal at all (not even V1); scan() raises NotAJournal.
            self.foreign: str | None = (foreign_reason(first, self._size())
                                        if self.version == V1 else None)
        except IOFailure:
            self._handle.close()
            raise
        self.end: ScanEnd | None = None
        self.padding_records = 0
        self.padding_bytes = 0
        self._stop: tuple[int, str | None, bool] = (0, None, False)

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> "JournalReader":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def scan(self, from_offset: int = 0, *, include_padding: bool = False,
             skip_invalid: bool = False) -> Iterator[JournalRecord]:
        """Records from ``from_offset`` (<= 0: after the header); then ``self.end`` is set.

        Raises UnsupportedJournalVersion, CorruptRecord (unless ``skip_invalid``) and
        IOFailure for read errors. A torn tail is not an error: it ends the scan.
        """
        self.end = None
        self.padding_records = self.padding_bytes = 0
        file_size = self._size()
        start = self._start_offset(from_offset, file_size)
        if start is None:
            self.end = self._empty_journal_end(file_size)
            return
        held = None  # one record of look-ahead, for the torn-inside-zeros rule
        for record in self._records(start, file_size):
            if held is not None and (include_padding or held.kind is not _PADDING):
                yield held
            held = record
        stop, reason, at_zero_word = self._stop
        if (at_zero_word and held is not None and self.version >= V5 and stop % ALIGNMENT
                and _may_be_torn_inside_zeros(held)):
            reason = (f"record ends at unaligned offset {stop} before zeros: its group never "
                      f"completed, so the record may be torn inside preallocated zeros")
            stop, held = held.offset, None
        if held is not None and (include_padding or held.kind is not _PADDING):
            yield held
        self.end = self._finish(stop, reason, file_size, skip_invalid)

    # -- version and start --------------------------------------------------------------

    def _start_offset(self, from_offset: int, file_size: int) -> int | None:
        """Where scanning starts; None for an empty journal. Raises for versions not read."""
        version = self.version
        if version is None:
            return None
        if not V1 <= version <= V6:
            raise CorruptRecord(self.path, 4, f"journal version {version} is not 1..6")
        if self.foreign is not None:
            raise NotAJournal(self.path, self.foreign)
        if version < MIN_READ_VERSION:
            raise UnsupportedJournalVersion(self.path, version)
        first = header_size(version)
        if from_offset <= 0:
            return first  # past the end of a V5+ file cut inside its header: no records
        if from_offset < first:
            raise CorruptRecord(self.path, from_offset,
                                f"start offset inside the {first}-byte header")
        return from_offset

    def _empty_journal_end(self, file_size: int) -> ScanEnd:
        last = self._last_nonzero(0, file_size)
        if last < 0:
            return ScanEnd(0, 0, "clean")
        return ScanEnd(0, last + 1, f"empty journal (no header) holding {last + 1} bytes "
                                    f"that are not all zero")

    # -- the scan loop ------------------------------------------------------------------

    def _records(self, start: int, file_size: int) -> Iterator[JournalRecord]:
        """Yield records (padding too) from ``start``; leave (stop, reason, at_zero_word)."""
        max_length = self._max_length
        unpack_len = LEN.unpack_from
        unpack_prefix = RECORD_PREFIX.unpack_from
        buf, base, i = b"", start, 0
        while True:
            if len(buf) - i < RECORD_PREFIX.size:
                buf, base, i = self._refill(buf, base, i, RECORD_PREFIX.size, file_size)
                if len(buf) < 4:
                    self._stop = self._stop_at_end_of_file(buf, base)
                    return
            pos = base + i
            length = unpack_len(buf, i)[0]
            if length == 0:
                self._stop = (pos, None, True)
                return
            if length == PADDING_MASK and self.version >= V5:
                buf, base, i, record = self._padding(buf, base, i, file_size)
                if record is None:
                    return
                yield record
                continue
            size = 4 + length
            if not MIN_RECORD_LEN <= length <= max_length or pos + size > file_size:
                self._stop = (pos, self._length_problem(length, pos, file_size), False)
                return
            if len(buf) - i < size:
                buf, base, i = self._refill(buf, base, i, size, file_size)
            _, ledger_id, entry_id = unpack_prefix(buf, i)
            if entry_id >= 0 and ledger_id >= 0 and length >= MIN_DATA_RECORD_LEN:
                yield JournalRecord(pos, size, _DATA, ledger_id, entry_id, buf[i + 4:i + size])
            else:
                record = self._meta_record(buf, i, pos, length, ledger_id, entry_id)
                if record is None:
                    return
                yield record
            i += size

    def _length_problem(self, length: int, pos: int, file_size: int) -> str:
        if length < 0:
            return f"invalid record with negative length {length}"
        if length < MIN_RECORD_LEN:
            return f"record length {length} is below 16"
        if length > self._max_length:
            return f"record length {length} exceeds the maximum {self._max_length}"
        return f"record length {length} runs past end of file ({file_size} bytes)"

    def _padding(self, buf: bytes, base: int, i: int, file_size: int):
        """Consume a padding record at buf[i]; (buf, base, i, record or None if damage)."""
        pos = base + i
        if len(buf) - i < PADDING_PREFIX.size:
            buf, base, i = self._refill(buf, base, i, PADDING_PREFIX.size, file_size)
            if len(buf) < PADDING_PREFIX.size:
                self._stop = (pos, "padding record cut by end of file", False)
                return buf, base, i, None
        pad_length = PADDING_PREFIX.unpack_from(buf, i)[1]
        end = pos + PADDING_PREFIX.size + pad_length
        problem = None
        if pad_length < 0:
            problem = f"padding record with negative padLen {pad_length}"
        elif end > file_size:
            problem = f"padding of {pad_length} bytes runs past end of file ({file_size} bytes)"
        elif end % ALIGNMENT:
            problem = f"padding record ends at unaligned offset {end}"
        if problem is not None:
            self._stop = (pos, problem, False)
            return buf, base, i, None
        self.padding_records += 1
        self.padding_bytes += end - pos
        record = JournalRecord(pos, end - pos, _PADDING, -1, -1, b"")
        return buf, base, i + (end - pos), record

    def _meta_record(self, buf: bytes, i: int, pos: int, length: int, ledger_id: int,
                     entry_id: int) -> JournalRecord | None:
        """The non-data record at buf[i], or None (with self._stop set) if it is damage."""
        inner = None
        if length >= META_PREFIX_LEN:
            inner = META_RECORD_PREFIX.unpack_from(buf, i)[3]
        problem = record_problem(self.version, length, ledger_id, entry_id, inner)
        if problem is not None:
            self._stop = (pos, problem, False)
            return None
        size = 4 + length
        kind = META_KINDS.get(entry_id, _UNKNOWN_META)
        payload = b""
        if kind is RecordKind.LEDGER_KEY:
            return self._key_record(buf, i, pos, size, ledger_id, entry_id, inner)
        if kind is RecordKind.EXPLICIT_LAC:
            payload = buf[i + 4 + META_PREFIX_LEN:i + size]
        return JournalRecord(pos, size, kind, ledger_id, entry_id, payload)

    def _key_record(self, buf: bytes, i: int, pos: int, size: int, ledger_id: int,
                    entry_id: int, key_length: int) -> JournalRecord | None:
        """A master-key record, with the digest type byte the project writes after the key
        (journal/format.py J4). The writer never writes another value: one is damage."""
        start = i + 4 + META_PREFIX_LEN
        digest_type = 0
        if start + key_length < i + size:
            digest_type = buf[start + key_length]
            if not 1 <= digest_type <= MAX_DIGEST_TYPE:
                self._stop = (pos, f"master-key record with digest type {digest_type}, "
                                   f"not 1..{MAX_DIGEST_TYPE}", False)
                return None
        return JournalRecord(pos, size, RecordKind.LEDGER_KEY, ledger_id, entry_id,
                             buf[start:start + key_length], digest_type)

    def _stop_at_end_of_file(self, tail: bytes, pos: int) -> tuple[int, str | None, bool]:
        if tail.strip(b"\0"):
            return pos, f"length word cut by end of file after {len(tail)} bytes", False
        return pos, None, False

    # -- where the scan ends --------------------------------------------------------------

    def _finish(self, stop: int, reason: str | None, file_size: int,
                skip_invalid: bool) -> ScanEnd:
        last = self._last_nonzero(stop, file_size)
        if reason is None:
            if last < stop:
                return ScanEnd(stop, 0, "clean")
            reason = f"zero length word followed by non-zero bytes up to offset {last}"
        cut_bytes = max(0, last + 1 - stop)
        follower = self._find_valid_data_after(stop, last, file_size)
        if follower is None:
            return ScanEnd(stop, cut_bytes, reason)
        reason = f"{reason}; valid records follow at offset {follower}"
        if skip_invalid:
            return ScanEnd(stop, cut_bytes, f"skipped corrupt record at offset {stop}: {reason}")
        raise CorruptRecord(self.path, stop, reason)

    def _find_valid_data_after(self, damage: int, last: int, file_size: int) -> int | None:
        """The first offset after ``damage`` where plausible records start (module docstring)."""
        probe = DamageProbe(self, file_size)
        if self.version >= V5:
            candidate = (damage // ALIGNMENT + 1) * ALIGNMENT
            while candidate <= last:
                if probe.plausible_pair(candidate):
                    return candidate
                candidate += ALIGNMENT
            return None
        limit = min(last, damage + self._max_length + V4_SEARCH_SLACK)
        window = self._read(damage + 1, limit + 4 - damage)
        for match in V4_CANDIDATE.finditer(window):
            if probe.plausible_pair(damage + 1 + match.start()):
                return damage + 1 + match.start()
        return None

    def _last_nonzero(self, lower: int, file_size: int) -> int:
        """Offset of the last non-zero byte at or after ``lower``; lower - 1 if there is none."""
        end = file_size
        while end > lower:
            begin = max(lower, end - _TAIL_STEP)
            data = self._read(begin, end - begin).rstrip(b"\0")
            if data:
                return begin + len(data) - 1
            end = begin
        return lower - 1

    # -- I/O ----------------------------------------------------------------------------

    def _refill(self, buf: bytes, base: int, i: int, need: int, file_size: int):
        """(buf, base, 0) holding at least ``need`` bytes from base + i, or up to EOF."""
        keep = buf[i:]
        pos = base + i
        read_from = pos + len(keep)
        want = min(max(CHUNK_BYTES, need - len(keep)), file_size - read_from)
        if want > 0:
            keep += self._read(read_from, want)
        return keep, pos, 0

    def _read(self, offset: int, size: int) -> bytes:
        try:
            return self._handle.read_at(offset, size)
        except OSError as exc:
            raise IOFailure(f"{self.path}: read of {size} bytes at offset {offset} failed: "
                            f"{exc}") from exc

    def _size(self) -> int:
        try:
            return self._handle.size()
        except OSError as exc:
            raise IOFailure(f"{self.path}: cannot stat journal: {exc}") from exc


#: V4 candidates: 16 <= len < 2**24, i.e. a zero top byte and not three more zero bytes.


