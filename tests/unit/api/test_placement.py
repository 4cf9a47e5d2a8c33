"""The placement policies (api/client/placement.py, PP1-PP4; docs/cluster.md §6), on the
issue's topology: 9 bookies, 3 hosts, 3 racks, 3 zones."""

from __future__ import annotations

import random

import pytest

from api.client.placement import (FAIL, MEETS_SOFT, MEETS_STRICT, Placement, PlacementCounts,
                                  PlacementNotMet, PlacementRules, write_sets)
from api.client.topology import Location

BOOKIES = [f"127.0.0.1:{3181 + i}" for i in range(9)]


def topology(zones=3, racks=3, hosts=3) -> dict[str, Location]:
    """Bookie i on host i mod hosts, in rack i mod racks of zone i mod zones."""
    return {b: Location(f"/zone-{i % zones}/rack-{i % racks}", f"host-{i % hosts}")
            for i, b in enumerate(BOOKIES)}


def placement(policy="rack", **rules) -> Placement:
    return Placement(PlacementRules(policy=policy, **rules), PlacementCounts())


@pytest.mark.parametrize("policy,size,qw", [("rack", 3, 2), ("rack", 5, 3), ("host", 3, 3),
                                            ("host", 6, 3), ("zone", 3, 3), ("zone", 6, 3)])
def test_every_new_ensemble_meets_the_policy_strictly(policy, size, qw):
    where, chosen = topology(), placement(policy)
    random.seed(39)
    for _ in range(100):
        ensemble = chosen.new_ensemble(size, qw, BOOKIES, where)
        assert len(set(ensemble)) == size
        assert chosen.adherence(ensemble, qw, where) == MEETS_STRICT, ensemble
    assert not chosen.counts.not_adhering


def test_random_placement_breaks_the_rack_policy_which_is_what_the_policy_is_for():
    """The baseline: before topologies, a 3/2 ensemble kept both copies in one rack often."""
    where, rack = topology(), placement("rack")
    random.seed(39)
    broken = sum(rack.adherence(random.sample(BOOKIES, 3), 2, where) == FAIL
                 for _ in range(100))
    assert broken > 20


def test_ties_spread_ledgers_over_every_bookie():
    where, chosen = topology(), placement("rack")
    random.seed(7)
    used = {b for _ in range(60) for b in chosen.new_ensemble(3, 2, BOOKIES, where)}
    assert used == set(BOOKIES)


def test_one_rack_is_random_placement_with_the_same_random_calls():
    """PP4: the simulator's seeds replay as before topologies."""
    where = {b: Location(host=b) for b in BOOKIES}
    random.seed(5)
    chosen = placement("rack").new_ensemble(3, 2, BOOKIES, where)
    random.seed(5)
    assert chosen == tuple(random.sample(BOOKIES, 3))
    random.seed(6)
    replaced = placement("rack").replace_one(chosen, 1, 2, BOOKIES[5:], where)
    random.seed(6)
    assert replaced[1] == random.choice(BOOKIES[5:]) and replaced[0::2] == chosen[0::2]


def test_not_strict_places_anyway_and_counts_it():
    where = {b: Location("/zone-0/rack-0", f"host-{i}") for i, b in enumerate(BOOKIES[:3])}
    where[BOOKIES[3]] = Location("/zone-0/rack-1", "host-3")
    chosen = placement("rack", min_racks=3)
    ensemble = chosen.new_ensemble(3, 3, BOOKIES[:4], where)
    assert chosen.adherence(ensemble, 3, where) == FAIL
    assert chosen.counts.not_adhering == {"create": 1} and not chosen.counts.refused


def test_strict_refuses_what_it_cannot_meet_and_counts_the_refusal():
    where = {b: Location("/zone-0/rack-0", f"host-{i}") for i, b in enumerate(BOOKIES[:3])}
    where[BOOKIES[3]] = Location("/zone-0/rack-1", "host-3")
    chosen = placement("rack", min_racks=3, strict=True)
    with pytest.raises(PlacementNotMet, match="strict rack-aware placement"):
        chosen.new_ensemble(3, 3, BOOKIES[:4], where)
    assert chosen.counts.refused == {"create": 1}


def test_strict_keeps_bookies_of_the_default_rack_out():
    """BookKeeper's enforceMinNumRacksPerWriteQuorum excludes the default rack."""
    where = topology()
    for b in BOOKIES[6:]:
        where[b] = Location(host=f"h-{b}")  # nobody placed them
    chosen = placement("rack", strict=True)
    random.seed(3)
    for _ in range(50):
        assert not set(chosen.new_ensemble(3, 2, BOOKIES, where)) & set(BOOKIES[6:])


def test_a_replacement_keeps_its_write_sets_across_racks():
    where = topology(racks=3)
    ensemble = (BOOKIES[0], BOOKIES[1], BOOKIES[2])  # racks 0, 1, 2
    random.seed(1)
    for _ in range(30):  # only rack 0 keeps each write set over two racks
        replaced = placement("rack").replace_one(ensemble, 0, 2, BOOKIES[3:], where)
        assert where[replaced[0]].rack == "/zone-0/rack-0"
        replaced = placement("rack").replace(ensemble, [0, 2], 2, BOOKIES[3:], where)
        assert placement("rack").adherence(replaced, 2, where) == MEETS_STRICT


def test_worker_targets_come_best_first_and_strict_offers_only_passing_ones():
    where = topology()
    ensemble = (BOOKIES[0], BOOKIES[1], BOOKIES[2])
    ranked = placement("rack").targets(ensemble, 0, 2, BOOKIES[3:], where)
    assert sorted(ranked) == sorted(BOOKIES[3:]) and where[ranked[0]].rack.endswith("rack-0")
    strict = placement("rack", strict=True).targets(ensemble, 0, 2, BOOKIES[3:], where)
    assert {where[b].rack for b in strict} == {"/zone-0/rack-0"}
    with pytest.raises(PlacementNotMet):
        placement("rack", strict=True).targets(ensemble, 0, 2, [BOOKIES[4]], where)


def test_best_move_repairs_a_failing_segment_one_copy_at_a_time():
    where = topology()
    ensemble = [BOOKIES[0], BOOKIES[3], BOOKIES[6]]  # all in rack 0
    chosen = placement("rack")
    assert chosen.adherence(ensemble, 2, where) == FAIL
    for _ in range(3):
        move = chosen.best_move(ensemble, 2, [b for b in BOOKIES if b not in ensemble], where)
        if move is None:
            break
        ensemble[move[0]] = move[1]
    assert chosen.adherence(ensemble, 2, where) == MEETS_STRICT
    assert chosen.best_move(ensemble, 2, [b for b in BOOKIES if b not in ensemble],
                            where) is None or chosen.adherence(ensemble, 2, where) != FAIL


def test_zone_policy_is_soft_below_the_desired_zones():
    where = topology(zones=2)
    chosen = placement("zone")
    random.seed(2)
    ensemble = chosen.new_ensemble(3, 3, BOOKIES, where)
    assert chosen.adherence(ensemble, 3, where) == MEETS_SOFT
    assert not chosen.counts.not_adhering  # soft is not a failure (BookKeeper's MEETS_SOFT)


def test_host_policy_never_doubles_a_host_while_another_can_take_it():
    where = topology(racks=1, zones=1, hosts=3)
    chosen = placement("host")
    random.seed(4)
    for _ in range(50):
        ensemble = chosen.new_ensemble(3, 2, BOOKIES, where)
        for ws in write_sets(ensemble, 2):
            assert len({where[b].host for b in ws}) == 2


def test_bad_rules_are_refused():
    with pytest.raises(ValueError, match="placement policy"):
        PlacementRules(policy="region")
    with pytest.raises(ValueError):
        PlacementRules(min_zones=3, desired_zones=2)


def test_strict_replaces_dead_bookies_it_only_knows_as_default_rack():
    """Review of issue 39: a worker started after a rack was lost never saw the dead
    bookies' registrations, so they stand in the default rack; strict placement failed
    every write set holding one and refused both dead slots of an E=5/Qw=3 segment, which
    kept one copy of their entries for good. Only the bookies being chosen must stand in a
    rack (BookKeeper excludes default-rack candidates; it does not refuse over members)."""
    where = {"a": Location(host="a"), "c": Location(host="c"),  # dead, unknown
             "b": Location("/zone-2/rack-2", "b"), "d": Location("/zone-2/rack-2", "d"),
             "e": Location("/zone-3/rack-3", "e"), "x": Location("/zone-3/rack-3", "x"),
             "y": Location("/zone-4/rack-4", "y"), "z": Location(host="z")}
    strict = placement("rack", strict=True)
    members = ["a", "b", "c", "d", "e"]
    for index in (0, 2):
        offered = strict.targets(members, index, 3, ["x", "y", "z"], where)
        assert offered and "z" not in offered, (index, offered)
    replaced = strict.replace(members, [0, 2], 3, ["x", "y", "z"], where)
    assert set(replaced) - set(members) == {"x", "y"}
