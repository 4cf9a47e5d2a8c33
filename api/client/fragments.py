"""A replicated ledger's fragments and which entries each bookie must hold (pure).

A *fragment* is one bookie index of one segment (BookKeeper's LedgerFragment): the entries
of the segment whose write set holds that index. Its end is the entry before the next
segment's first, or the ledger's last entry once it is closed; the open last segment of an
OPEN ledger has no known end (its writer is still placing entries there).

Entry-id *ranges* are ``[[first, last], ...]``, ascending and disjoint: what a bookie's
``GET /v1/ledgers/{L}/entry-ids`` answers (docs/http-api.md addition), compact for the runs of ids a
bookie holds.
"""

from __future__ import annotations

import bisect
import dataclasses

from api.client.distribution import write_set
from api.client.metadata import LedgerMetadata


@dataclasses.dataclass(frozen=True)
class Fragment:
    segment: int  # index into metadata.ensembles
    first: int  # the segment's first entry
    last: int | None  # its last entry (first - 1: empty); None: open, end unknown
    index: int  # the bookie index in the segment's ensemble
    bookie_id: str

    def entries(self, ensemble_size: int, write_quorum: int) -> list[int]:
        """The ids this fragment's bookie must hold (every entry whose write set has it)."""
        if self.last is None:
            raise ValueError(f"fragment of segment {self.segment} is open: no known end")
        return [e for e in range(self.first, self.last + 1)
                if self.index in write_set(e, ensemble_size, write_quorum)]


def segment_end(metadata: LedgerMetadata, segment: int) -> int | None:
    """The last entry of a segment; None for the open last segment of an unclosed ledger."""
    if segment + 1 < len(metadata.ensembles):
        return metadata.ensembles[segment + 1][0] - 1
    return metadata.last_entry_id if metadata.closed else None


def fragments(metadata: LedgerMetadata) -> list[Fragment]:
    found = []
    for segment, (first, members) in enumerate(metadata.ensembles):
        last = segment_end(metadata, segment)
        if last is not None:
            last = max(last, first - 1)
        for index, bookie_id in enumerate(members):
            found.append(Fragment(segment, first, last, index, bookie_id))
    return found


def referenced_bookies(metadata: LedgerMetadata) -> set[str]:
    return {bookie_id for _, members in metadata.ensembles for bookie_id in members}


def ranges_of(entry_ids) -> list[list[int]]:
    """Ascending ids (duplicates allowed) as ``[[first, last], ...]`` runs."""
    ranges: list[list[int]] = []
    for entry_id in sorted(set(entry_ids)):
        if ranges and ranges[-1][1] == entry_id - 1:
            ranges[-1][1] = entry_id
        else:
            ranges.append([entry_id, entry_id])
    return ranges


def in_ranges(ranges, entry_id: int) -> bool:
    at = bisect.bisect_right([first for first, _ in ranges], entry_id) - 1
    return at >= 0 and ranges[at][0] <= entry_id <= ranges[at][1]


def missing_entries(fragment: Fragment, held, ensemble_size: int, write_quorum: int) -> list[int]:
    """The ids a closed fragment's bookie must hold but ``held`` (its ranges) lacks."""
    starts = [first for first, _ in held]
    missing = []
    for entry_id in fragment.entries(ensemble_size, write_quorum):
        at = bisect.bisect_right(starts, entry_id) - 1
        if at < 0 or not held[at][0] <= entry_id <= held[at][1]:
            missing.append(entry_id)
    return missing
