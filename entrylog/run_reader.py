"""Runs of entries read from one entry log in a few large reads (issue 41, docs/design.md §3.3).

A batch read asks for consecutive entries of one ledger. A checkpoint writes a ledger's
cached entries together, sorted by ledger (BookKeeper's SortedLedgerStorage does the same),
so their locations in the log lie close together, usually back to back. One pread of the span
that holds them replaces one pread (and one GIL hand-over) per entry.

An entry log stores each entry as its 4-byte size and its bytes: the layout of a v2 batch
read's answer (BP-62). So a framed read hands entries that lie back to back on as one slice
of the span, with no copy and no framing of its own per entry.

Invariants:
    RR1. A run is positions in one log, each after the last and at most RUN_GAP_BYTES past
        it, spanning at most RUN_SPAN_BYTES: a read never fetches much that is not asked
        for, and each read thread holds at most RUN_SPAN_BYTES + a tail at once.
    RR2. Every entry is checked as a point read checks it (size >= 16, its stored ids the
        expected ones); an entry that does not fit in the span read is read on its own.
    RR3. A batch takes an entry only while its ``Bound`` allows it (count, payload bytes,
        framed bytes; the first entry always), so what a batch holds is bounded before it
        is read, not after.
    RR4. With a ``limit`` (the listener's plain reads, api/server/bk_budget.py PB7), an
        entry larger than it is ``Oversize(size)``, its bytes not kept (the span's share
        of it is dropped with the span; one read on its own is not made).
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from bookie.errors import CorruptRecord, IOFailure
from entrylog.format import HEADER_SIZE, MIN_ENTRY_SIZE, SIZE, Oversize
from entrylog.reader import READ_AHEAD_BYTES

if TYPE_CHECKING:
    from entrylog.reader import EntryLogReader

#: RR1: positions further apart than this are read apart.
RUN_GAP_BYTES = 64 * 1024
#: RR1: the most one read of a run fetches (before the last entry's read-ahead).
RUN_SPAN_BYTES = 1024 * 1024
#: A stored entry's size field, then the first 16 bytes of the entry: its ledgerId, entryId.
_ENTRY_HEAD = struct.Struct(">iqq")


class Bound:
    """RR3: what one batch may still take. ``framed`` counts each entry with its 4-byte size
    (a v2 batch answer's body); ``full`` once an entry was refused. With ``first_max``, a
    first entry larger than it is refused too, its size kept in ``oversize`` (the
    listener's batch reads, api/server/bk_budget.py PB7)."""

    __slots__ = ("count", "payload", "framed", "max_payload", "max_framed", "full",
                 "first_max", "oversize")

    def __init__(self, max_payload: int, max_framed: int | None = None,
                 first_max: int | None = None) -> None:
        self.count = self.payload = self.framed = self.oversize = 0
        self.max_payload = max_payload
        self.max_framed = max_payload + (1 << 40) if max_framed is None else max_framed
        self.first_max = 1 << 62 if first_max is None else first_max
        self.full = False

    def take(self, size: int) -> bool:
        if self.count:
            if self.payload + size > self.max_payload \
                    or self.framed + size + SIZE.size > self.max_framed:
                self.full = True
                return False
        elif size > self.first_max:
            self.full = True
            self.oversize = size
            return False
        self.count += 1
        self.payload += size
        self.framed += size + SIZE.size
        return True

    def mark(self) -> tuple[int, int, int]:
        return self.count, self.payload, self.framed

    def reset(self, mark: tuple[int, int, int]) -> None:
        self.count, self.payload, self.framed = mark
        self.full = False


def piece(entry: bytes, framed: bool) -> bytes:
    """An entry as a batch holds it: its bytes, or framed by its 4-byte size."""
    return SIZE.pack(len(entry)) + entry if framed else entry


def joins(run_start: int, previous: int, location: int) -> bool:
    """RR1: whether ``location`` extends a run that starts at ``run_start`` and ends at
    ``previous`` (locations: log id << 32 | position)."""
    return (location >> 32 == previous >> 32 and 0 < location - previous <= RUN_GAP_BYTES
            and location - run_start <= RUN_SPAN_BYTES)


def read_run(reader: EntryLogReader, ledger_id: int, run: list[tuple[int, int]],
             bound: Bound, framed: bool = False, limit: int = 0) -> list:
    """The entries of ``run`` ((entryId, position) in one log, a run by RR1), in order, as
    far as ``bound`` takes them: each entry's bytes, or with ``framed`` pieces of a v2 batch
    answer's body (size, bytes; back-to-back entries in one piece)."""
    first, last = run[0][1], run[-1][1]
    if first < HEADER_SIZE + SIZE.size:
        raise IOFailure(f"{reader.path}: entry position {first} lies inside the header")
    # The last entry's size is not known before the read: allow as much as the run's
    # entries take on average, at least a point read's read-ahead.
    tail = max(READ_AHEAD_BYTES, (last - first) // max(len(run) - 1, 1) + SIZE.size)
    start = first - SIZE.size
    span = reader.read_span(start, last + tail - start)
    pieces: list[bytes] = []
    piece_start = piece_end = -1  # the framed piece of span being extended
    for entry_id, pos in run:
        offset = pos - SIZE.size - start
        entry = None
        if offset + _ENTRY_HEAD.size <= len(span):
            size, found_ledger, found_entry = _ENTRY_HEAD.unpack_from(span, offset)
            if size < MIN_ENTRY_SIZE:
                raise CorruptRecord(reader.path, pos - SIZE.size, f"entry size {size} < 16")
            end = offset + SIZE.size + size
            if limit and size > limit:  # RR4 (never framed: a batch has no limit)
                pieces.append(Oversize(size))
                continue
            if end > len(span):  # RR2: past the span (a large entry, or the file's end)
                entry = reader.read_entry(pos, ledger_id, entry_id)
            elif found_ledger != ledger_id or found_entry != entry_id:
                raise IOFailure(f"{reader.path}: wrong entry at {pos}: expected "
                                f"{ledger_id}/{entry_id}, found {found_ledger}/{found_entry}")
        else:
            entry = reader.read_entry(pos, ledger_id, entry_id, limit)
            if entry.__class__ is Oversize:  # RR4
                pieces.append(entry)
                continue
            size = len(entry)
        if not bound.take(size):
            break
        if entry is not None or not framed:
            if piece_end >= 0:
                pieces.append(span[piece_start:piece_end])
                piece_end = -1
            if entry is None:
                entry = span[offset + SIZE.size:end]
            pieces.append(piece(entry, framed))
        elif offset == piece_end:
            piece_end = end  # back to back with the last one: the same piece
        else:
            if piece_end >= 0:
                pieces.append(span[piece_start:piece_end])
            piece_start, piece_end = offset, end
    if piece_end >= 0:
        pieces.append(span[piece_start:piece_end])
    return pieces
