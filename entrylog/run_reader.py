"""Runs of entries read from one entry log in a few large reads (issue 41, docs/design.md §3.3).

A batch read asks for consecutive entries of one ledger. A checkpoint writes a ledger's
cached entries together, sorted by ledger (BookKeeper's SortedLedgerStorage does the same),
so their locations in the log lie close together, usually back to back. One pread of the span
that holds them replaces one pread (and one GIL hand-over) per entry.

Invariants:
    RR1. A run is positions in one log, each after the last and at most RUN_GAP_BYTES past
        it, spanning at most RUN_SPAN_BYTES: a read never fetches much that is not asked
        for, and each read thread holds at most RUN_SPAN_BYTES + READ_AHEAD_BYTES at once.
    RR2. Every entry is checked as a point read checks it (size >= 16, its stored ids the
        expected ones); an entry that does not fit in the span read is read on its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bookie.errors import CorruptRecord, IOFailure
from entrylog.format import HEADER_SIZE, MIN_ENTRY_SIZE, SIZE
from entrylog.reader import READ_AHEAD_BYTES, _check_ids

if TYPE_CHECKING:
    from entrylog.reader import EntryLogReader

#: RR1: positions further apart than this are read apart.
RUN_GAP_BYTES = 64 * 1024
#: RR1: the most one read of a run fetches (before the last entry's read-ahead).
RUN_SPAN_BYTES = 1024 * 1024


def joins(run_start: int, previous: int, location: int) -> bool:
    """RR1: whether ``location`` extends a run that starts at ``run_start`` and ends at
    ``previous`` (locations: log id << 32 | position)."""
    return (location >> 32 == previous >> 32 and 0 < location - previous <= RUN_GAP_BYTES
            and location - run_start <= RUN_SPAN_BYTES)


def read_run(reader: EntryLogReader, ledger_id: int,
             run: list[tuple[int, int]]) -> list[bytes]:
    """The entries of ``run`` ((entryId, position) in one log, a run by RR1), in order."""
    first, last = run[0][1], run[-1][1]
    if first < HEADER_SIZE + SIZE.size:
        raise IOFailure(f"{reader.path}: entry position {first} lies inside the header")
    # The last entry's size is not known before the read: allow as much as the run's
    # entries take on average, at least a point read's read-ahead.
    tail = max(READ_AHEAD_BYTES, (last - first) // max(len(run) - 1, 1) + SIZE.size)
    start = first - SIZE.size
    span = reader.read_span(start, last + tail - start)
    entries = []
    for entry_id, pos in run:
        offset = pos - SIZE.size - start
        if offset + SIZE.size > len(span):
            entries.append(reader.read_entry(pos, ledger_id, entry_id))
            continue
        size = SIZE.unpack_from(span, offset)[0]
        if size < MIN_ENTRY_SIZE:
            raise CorruptRecord(reader.path, pos - SIZE.size, f"entry size {size} < 16")
        end = offset + SIZE.size + size
        if end > len(span):  # RR2: past the span (a large entry, or the file's end)
            entries.append(reader.read_entry(pos, ledger_id, entry_id))
            continue
        entry = span[offset + SIZE.size:end]
        _check_ids(reader.path, pos, entry, ledger_id, entry_id)
        entries.append(entry)
    return entries
