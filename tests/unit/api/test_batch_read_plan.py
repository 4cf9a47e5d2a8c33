"""BR1-BR2 of api/client/batch_read.py's plan: every id of a window is asked of exactly one
bookie of its write set, avoided bookies only when a class has no other replica."""

from __future__ import annotations

import itertools

import pytest

from api.client.batch_read import ids_of, plan
from api.client.distribution import write_set

SHAPES = [(1, 1), (2, 2), (3, 2), (3, 3), (4, 2), (5, 3), (5, 1)]


@pytest.mark.parametrize("size,quorum", SHAPES)
@pytest.mark.parametrize("first,last", [(0, 0), (0, 511), (7, 30), (1000, 1001)])
def test_every_id_is_asked_once_of_a_bookie_of_its_write_set(size, quorum, first, last):
    asked: dict[int, int] = {}
    for read in plan(size, quorum, first, last):
        for entry_id in ids_of(read):
            assert entry_id not in asked, f"{entry_id} asked twice"
            assert read.index in write_set(entry_id, size, quorum)
            asked[entry_id] = read.index
    assert sorted(asked) == list(range(first, last + 1))


@pytest.mark.parametrize("size,quorum", SHAPES)
def test_avoided_bookies_are_asked_only_for_classes_with_no_other_replica(size, quorum):
    for avoid in itertools.chain.from_iterable(
            itertools.combinations(range(size), k) for k in range(size + 1)):
        reads = plan(size, quorum, 0, 4 * size, avoid=set(avoid))
        covered = sorted(e for read in reads for e in ids_of(read))
        assert covered == list(range(4 * size + 1))
        for read in reads:
            if read.index in avoid:
                residue = read.first % size
                assert all(i in avoid for i in write_set(residue, size, quorum))


def test_one_bookie_serving_every_class_gets_one_step_one_read():
    assert [(r.index, r.step) for r in plan(3, 3, 0, 99, avoid={1, 2})] == [(0, 1)]
    assert [(r.index, r.step) for r in plan(1, 1, 5, 9)] == [(0, 1)]


def test_wanted_classes_only():
    reads = plan(3, 2, 0, 29, wanted={0, 2}, avoid={0})  # a lost index 0's fragment
    asked = sorted(e for read in reads for e in ids_of(read))
    assert asked == [e for e in range(30) if e % 3 in (0, 2)]
    assert all(read.index != 0 for read in reads)
