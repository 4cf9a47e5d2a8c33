"""BookKeeper's ``AvailabilityOfEntriesOfLedger`` bytes: which entry ids a bookie holds for a
ledger, the body of a v3 GET_LIST_OF_ENTRIES_OF_LEDGER answer (autorecovery's replica
check reads it). Written here from the layout, not from BookKeeper's code::

    header    64 bytes: version i32 (0), groupCount i32, then zeros
    group     24 bytes each, by first id: firstSequenceStart i64, lastSequenceStart i64,
              sequenceSize i32, sequencePeriod i32

A *sequence* is a run of consecutive ids; a *group* is ``sequenceSize``-long sequences that
start every ``sequencePeriod`` ids from ``firstSequenceStart`` to ``lastSequenceStart``
(period 0: one sequence). Big-endian, as Java's ByteBuffer.

Invariants:
    AV1. ``decode(encode(ids)) == sorted(set(ids))`` for any ids >= 0.
    AV2. Groups are built as BookKeeper builds them: a sequence joins the open group only
         when it has the group's size and starts ``sequencePeriod`` after the group's last
         start; a group whose period is still 0 takes no second sequence. So the bytes are
         the ones a BookKeeper bookie would send for the same ids, not merely equivalent.
"""

from __future__ import annotations

import struct

HEADER_SIZE = 64
VERSION = 0
_HEADER = struct.Struct(">ii")
_GROUP = struct.Struct(">qqii")


def _runs(ids) -> list[tuple[int, int]]:
    runs: list[list[int]] = []
    for entry_id in sorted(set(ids)):
        if runs and runs[-1][0] + runs[-1][1] == entry_id:
            runs[-1][1] += 1
        else:
            runs.append([entry_id, 1])
    return [(start, size) for start, size in runs]


def _groups(runs) -> list[tuple[int, int, int, int]]:
    """(first start, last start, size, period) per group (AV2), from ascending runs."""
    groups: list[list[int]] = []
    for start, size in runs:
        if groups:
            _first, last, group_size, period = groups[-1]
            if group_size == size and start - last == period:
                groups[-1][1] = start  # period 0 never gets here: start > last (AV2)
                continue
        groups.append([start, start, size, 0])
    return [tuple(group) for group in groups]


def encode(ids) -> bytes:
    return _encode(_groups(_runs(ids)))


def encode_runs(ranges) -> bytes:
    """``encode`` of ascending, disjoint ``[first, last]`` id runs (``Bookie.entry_id_ranges``),
    without listing every id."""
    return _encode(_groups((first, last - first + 1) for first, last in ranges))


def _encode(groups) -> bytes:
    header = _HEADER.pack(VERSION, len(groups)).ljust(HEADER_SIZE, b"\0")
    return header + b"".join(_GROUP.pack(*group) for group in groups)


def decode(data: bytes) -> list[int]:
    """The ids the bytes name, ascending; ValueError for bytes that are not this layout."""
    if len(data) < HEADER_SIZE:
        raise ValueError(f"availability of {len(data)} bytes is shorter than its header")
    version, count = _HEADER.unpack_from(data, 0)
    if version > VERSION or count < 0 or len(data) != HEADER_SIZE + count * _GROUP.size:
        raise ValueError(f"availability header version {version}, {count} groups, does not "
                         f"fit {len(data)} bytes")
    ids: list[int] = []
    for index in range(count):
        first, last, size, period = _GROUP.unpack_from(data, HEADER_SIZE + index * _GROUP.size)
        if size <= 0 or last < first or (period <= 0 and last != first):
            raise ValueError(f"availability group {index} ({first}, {last}, {size}, {period}) "
                             f"is not a group")
        starts = [first] if period == 0 else range(first, last + 1, period)
        for start in starts:
            ids.extend(range(start, start + size))
    return ids
