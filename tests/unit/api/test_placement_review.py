"""Issue 39's review: the bugs a review helper found in topology-aware placement, each
reproduced by a test that failed on the code before its fix (docs/cluster.md §6)."""

from __future__ import annotations

import asyncio
import random

import pytest

from api.client.fragments import Fragment
from api.client.metadata import FileMetadataStore, LedgerMetadata, MetadataState
from api.client.placement import (FAIL, Placement, PlacementCounts, PlacementNotMet,
                                  PlacementRules)
from api.client.topology import Location
from api.cluster.autorecovery.placement_repair import repair_placement
from api.cluster.autorecovery.worker import ReplicationWorker


def loc(rack: str, host: str) -> Location:
    return Location(f"/zone-{rack}/rack-{rack}", host)


# -- 1. strict mode refuses a writer's ensemble change over a write set it does not touch --

def test_strict_ensemble_change_refused_for_an_unrelated_write_set():
    """E=4 Qw=2: write set [a, b] breaks the rack policy (the operator moved b into a's
    rack; the rack map is read at every placement). d fails; e in a fourth rack makes
    both write sets holding index 3 ([c, e], [e, a]) meet the policy, and BookKeeper's
    strict replaceBookie would take it (it excludes racks, never grades the whole
    ensemble). Here replace_one grades the whole ensemble and refuses: the writer dies."""
    where = {"a": loc("1", "ha"), "b": loc("1", "hb"), "c": loc("2", "hc"),
             "d": loc("3", "hd"), "e": loc("4", "he")}
    strict = Placement(PlacementRules("rack", strict=True), PlacementCounts())
    # the worker's path (targets) accepts e for the same index: PP1 broken too
    assert strict.targets(["a", "b", "c", "d"], 3, 2, ["e"], where) == ["e"]
    chosen = strict.replace_one(["a", "b", "c", "d"], 3, 2, ["e"], where)
    assert chosen == ("a", "b", "c", "e")


# -- 3. PR1's intermediate moves are counted as placements breaking the policy ---------------

class _Bk:
    read_timeout_s = 1.0

    def __init__(self, store, where, writable, placement):
        self.store, self.where, self.writable = store, where, writable
        self.placement = placement

    async def writable_bookies(self):
        return list(self.writable)

    async def locations(self, ids):
        return {b: self.where[b] for b in ids}


def _closed(tmp_path, members, qw):
    """An empty closed ledger in a real file store (the copies are empty, so a move is only
    the compare-and-set; PR1's order is the same: copy, then CAS)."""
    store = FileMetadataStore(str(tmp_path / "metadata"))
    metadata = asyncio.run(store.create(LedgerMetadata(
        ledger_id=7, state=MetadataState.CLOSED, last_entry_id=-1, ensemble_size=len(members),
        write_quorum=qw, ack_quorum=qw, ensembles=((0, tuple(members)),))))
    return store, metadata


def test_a_placement_repair_that_ends_adhering_counts_no_placement_as_not_adhering(tmp_path):
    """E=4 Qw=2, all copies in rack 1; x, y in rack 2. The repair moves two copies and the
    segment meets the policy; its first (intermediate) move is committed through
    _replace, whose note() counts it in bookie_placement_not_adhering_total{replication}."""
    random.seed(1)
    where = {b: loc("1", f"h{b}") for b in "abcd"} | {b: loc("2", f"h{b}") for b in "xy"}
    counts = PlacementCounts()
    placement = Placement(PlacementRules("rack"), counts)
    store, metadata = _closed(tmp_path, "abcd", 2)
    bk = _Bk(store, where, list("abcdxy"), placement)
    worker = ReplicationWorker(bk, None, 0.0, None, None)
    asyncio.run(repair_placement(worker, metadata, None, set("abcdxy"), set()))
    final = asyncio.run(store.read(7)).ensembles[0][1]
    assert placement.adherence(final, 2, where) != FAIL
    assert worker.stats.placement_moves == 2
    assert counts.not_adhering["replication"] == 0, dict(counts.not_adhering)


# -- 4. two placement moves (a lock lost with a session) put one bookie twice in a segment ---

def test_placement_moves_from_two_workers_never_name_one_bookie_twice(tmp_path):
    """RW2 says two workers never both replace a bookie; but the CAS in _replace re-checks
    only that the index still names the old bookie, not that the target is not already in
    the segment. Two workers' best_move on [a, b, c, d] (a, b in rack 1) can both pick x,
    one for index 0 and one for index 1: the segment ends (x, x, c, d), and every entry of
    write set [0, 1] has one bookie for its two copies."""
    where = {"a": loc("1", "ha"), "b": loc("1", "hb"), "c": loc("2", "hc"),
             "d": loc("3", "hd"), "x": loc("4", "hx")}
    placement = Placement(PlacementRules("rack"), PlacementCounts())
    store, stale = _closed(tmp_path, "abcd", 2)
    bk = _Bk(store, where, list("abcdx"), placement)
    worker = ReplicationWorker(bk, None, 0.0, None, None)
    alive = set("abcdx")

    async def both():
        await worker._replace(stale, Fragment(0, 0, -1, 0, "a"), None, alive, set(), ["x"])
        await worker._replace(stale, Fragment(0, 0, -1, 1, "b"), None, alive, set(), ["x"])
    asyncio.run(both())
    final = asyncio.run(store.read(7)).ensembles[0][1]
    assert len(set(final)) == len(final), final


# -- 8. RW5 lost for placement moves: one refusing bookie wedges a fully replicated ledger --

def test_a_refusing_target_does_not_wedge_the_placement_repair(monkeypatch, tmp_path):
    """repair_placement hands _replace one target (targets=[target]); if it refuses (RW5: a
    tombstone it cannot lift, full), NotEnoughBookies escapes repair_placement and
    replicate() (worker.py:194, outside RW8's try), so a ledger with every copy in place
    stays marked (the placement move is optional; the copies are all there), retried with
    back-off forever, counted in failures, while x is the only bookie that improves it."""
    from api.cluster.autorecovery import worker as worker_mod
    where = {b: loc("1", f"h{b}") for b in "abcy"} | {"x": loc("2", "hx")}
    placement = Placement(PlacementRules("rack"), PlacementCounts())
    store, metadata = _closed(tmp_path, "abc", 3)
    bk = _Bk(store, where, list("abcxy"), placement)
    worker = ReplicationWorker(bk, None, 0.0, None, None)

    async def refuse(self, metadata, fragment, members, entries, target, codec, alive):
        if target == "x":
            raise worker_mod._TargetRefused("tombstone")
    monkeypatch.setattr(ReplicationWorker, "_copy", refuse)
    asyncio.run(repair_placement(worker, metadata, None, set("abcxy"), set()))
