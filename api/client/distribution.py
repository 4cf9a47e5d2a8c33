"""Where each entry of a replicated ledger lives (docs/cluster.md §3; pure).

BookKeeper's RoundRobinDistributionSchedule: entry e goes to ensemble indices
``(e + i) mod E`` for ``i < Qw``; an ensemble is chosen by the segment whose first entry is
the largest one not above e. Counting the acknowledgements is the writer's (DS2 in
api/client/ensemble_writer.py).

Invariant:
    DS1. Every entry has Qw distinct indices, and consecutive entries rotate through the
         ensemble, so each bookie holds Qw/E of the entries.
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

