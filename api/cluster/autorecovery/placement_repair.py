"""A worker's repair of a ledger whose placement fails its policy (BookKeeper's
ReplicationWorker with repairedPlacementPolicyNotAdheringBookieEnable, docs/cluster.md §6):
the auditor's placement check marked it (placement_check.py); the worker, once no closed
fragment names a bad bookie, moves copies until each closed segment adheres.

Invariant:
    PR1. A repair never lowers the number of copies, even for a moment: each step copies
         one fragment to the new bookie (durable there, RW1) before one compare-and-set
         swaps it into the segment (RW2); the old bookie keeps its copy until its GC finds
         the metadata no longer names it. A step is taken only when it strictly improves
         the segment's grade (PP2's order), so the repair ends: at most E steps a segment.
         A target that refuses, or a segment changed meanwhile, ends the segment's repair
         without failing the ledger: its copies are all in place, and the next placement
         check looks again. It runs only where the placement check is on (the worker's
         ``repair_placement``), as BookKeeper's repair only with
         repairedPlacementPolicyNotAdheringBookieEnable.
"""

from __future__ import annotations

import logging

from api.client.ensemble_errors import NotEnoughBookies
from api.client.fragments import Fragment, segment_end
from api.client.metadata import LedgerMetadata
from api.client.placement import FAIL

log = logging.getLogger("api.cluster.autorecovery")


async def repair_placement(worker, metadata: LedgerMetadata, codec, alive: set[str],
                           leaving: set[str]) -> LedgerMetadata:
    """PR1 over every closed segment of a closed ledger; the metadata after the moves."""
    placement = worker.bk.placement
    if not placement.needs_topology or not metadata.closed:
        return metadata
    for segment in range(len(metadata.ensembles)):
        for _ in range(metadata.ensemble_size):
            first, members = metadata.ensembles[segment]
            writable = await worker.bk.writable_bookies()
            where = await worker.bk.locations(sorted(set(members) | set(writable)))
            if placement.adherence(members, metadata.write_quorum, where) != FAIL:
                break
            candidates = [b for b in writable if b not in members and b not in leaving]
            if placement.one_level(list(members) + candidates, where):
                break  # one rack (zone, host) in all: nothing to spread over (PP4)
            move = placement.best_move(members, metadata.write_quorum, candidates, where)
            if move is None:
                log.warning("ledger %d segment %d: breaks the %s placement policy and no "
                            "writable bookie improves it", metadata.ledger_id, first,
                            placement.rules.policy)
                break
            index, target = move
            last = max(segment_end(metadata, segment), first - 1)
            fragment = Fragment(segment, first, last, index, members[index])
            log.info("ledger %d segment %d: moving %s's copies to %s for the %s placement "
                     "policy", metadata.ledger_id, first, members[index], target,
                     placement.rules.policy)
            try:
                moved = await worker._replace(metadata, fragment, codec, alive, leaving,
                                              targets=[target])
            except NotEnoughBookies as exc:  # the target refused (RW5): not this ledger's
                log.warning("ledger %d segment %d: placement move to %s not made: %s",
                            metadata.ledger_id, first, target, exc)
                break
            if moved.ensembles[segment][1] == metadata.ensembles[segment][1]:
                break  # not made (changed meanwhile): the next check looks again
            metadata = moved
            worker.stats.placement_moves += 1
    return metadata
