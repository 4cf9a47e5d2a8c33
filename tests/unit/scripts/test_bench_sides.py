"""The benchmarks' sides (scripts/bench/bench_bookkeeper_reads.py SIDE_FLAGS, shared by the three
issue-41 scripts) and the disk's sync floor (scripts/bench/disk_floor.py): a side's name gives
the bookie settings it runs with, a side that never syncs is never the peer ours is
measured against, and the sync floor writes and syncs a real file on this filesystem."""

from __future__ import annotations

import os

import pytest

from scripts.bench import bench_bookkeeper_reads as sides
from scripts.bench import disk_floor


def test_a_sides_name_gives_its_storage_and_the_settings_of_its_flags():
    assert sides.parse_side("db-epoll-nosync") == ("db", ["epoll", "nosync"])
    assert sides.side_conf(["epoll", "nosync"]) == "journalSyncData=false\n"
    assert sides.side_conf(["flush"]) == "journalFlushWhenQueueEmpty=true\n"
    assert sides.side_conf([]) == ""
    assert sides.parse_side("ours") == ("ours", [])


@pytest.mark.parametrize("name", ["ours-epoll", "db-fast", "leveldb", "sorted-nosync-x"])
def test_a_side_that_is_not_there_is_refused_by_name(name):
    with pytest.raises(SystemExit, match=repr(name)):
        sides.parse_side(name)


def test_a_side_that_never_syncs_is_a_diagnosis_not_a_peer():
    assert sides.is_peer("db-epoll") and sides.is_peer("sorted-flush")
    assert not sides.is_peer("db-epoll-nosync")
    assert not sides.is_peer("ours")


def test_the_sync_floor_writes_and_syncs_each_size_and_leaves_nothing(tmp_path):
    found = disk_floor.sync_floor(str(tmp_path), seconds=0.05, sizes=(4096, 65536),
                                   file_mb=1)
    assert sorted(found) == [4096, 65536]
    for size, (syncs_s, mb_s) in found.items():
        assert syncs_s > 0
        assert mb_s == pytest.approx(syncs_s * size / disk_floor.MiB)
    assert os.listdir(tmp_path) == []
    assert "4 KiB writes each synced" in disk_floor.say_sync_floor(found)
