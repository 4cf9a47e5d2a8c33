"""Where each entry of a replicated ledger lives (docs/cluster.md §3; pure).

BookKeeper's RoundRobinDistributionSchedule: entry e goes to ensemble indices
``(e + i) mod E`` for ``i < Qw``; an ensemble is chosen by the segment whose first entry is
the largest one not above e. ``AckSet`` counts the acknowledgements of one entry.

Invariants:
    DS1. Every entry has Qw distinct indices, and consecutive entries rotate through the
         ensemble, so each bookie holds Qw/E of the entries.
    DS2. An entry completes when Qa distinct indices of its write set acknowledged; an index
         acknowledges at most once, and one outside the write set never counts.
"""

from __future__ import annotations

import bisect


def write_set(entry_id: int, ensemble_size: int, write_quorum: int) -> list[int]:
    """DS1: the ensemble indices of entry ``entry_id``."""
    if not ensemble_size >= write_quorum >= 1:
        raise ValueError(f"need E >= Qw >= 1, got E={ensemble_size} Qw={write_quorum}")
    return [(entry_id + i) % ensemble_size for i in range(write_quorum)]


def segment_for(ensembles, entry_id: int) -> tuple[int, tuple[str, ...]]:
    """(first entry, bookie ids) of the segment that places ``entry_id``."""
    firsts = [first for first, _ in ensembles]
    at = bisect.bisect_right(firsts, entry_id) - 1
    if at < 0:
        raise ValueError(f"no segment places entry {entry_id}: ensembles start at {firsts}")
    return ensembles[at]


def bookies_of(ensembles, entry_id: int, write_quorum: int) -> list[str]:
    """The bookie ids that hold (or should hold) ``entry_id``, in write-set order."""
    _, members = segment_for(ensembles, entry_id)
    return [members[i] for i in write_set(entry_id, len(members), write_quorum)]


def with_segment(ensembles, first: int, members) -> tuple:
    """The ensembles with a segment placing entries from ``first`` on ``members``: it replaces
    the last segment if that one starts there too (no entry was placed by it), else it is
    appended (an ensemble change, §3)."""
    segments = list(ensembles)
    if segments[-1][0] == first:
        segments[-1] = (first, tuple(members))
    else:
        segments.append((first, tuple(members)))
    return tuple(segments)


class AckSet:
    """DS2 for one entry."""

    def __init__(self, entry_id: int, ensemble_size: int, write_quorum: int,
                 ack_quorum: int) -> None:
        self.members = set(write_set(entry_id, ensemble_size, write_quorum))
        self.ack_quorum = ack_quorum
        self.acked: set[int] = set()

    def ack(self, index: int) -> bool:
        """Record an acknowledgement from ``index``; True once the entry has Qa of them."""
        if index in self.members:
            self.acked.add(index)
        return self.complete

    @property
    def complete(self) -> bool:
        return len(self.acked) >= self.ack_quorum
