"""Disk thresholds with hysteresis (bookie/disk_monitor.py)."""

from __future__ import annotations

from bookie.disk_monitor import DiskLevel, DiskMonitor, DiskPolicy, classify, watched_dirs

POLICY = DiskPolicy(warn_ratio=0.80, full_ratio=0.95, low_water_ratio=0.85)


def test_levels_by_used_ratio():
    assert classify(POLICY, 0.10, False) is DiskLevel.OK
    assert classify(POLICY, 0.80, False) is DiskLevel.WARN
    assert classify(POLICY, 0.95, False) is DiskLevel.FULL


def test_a_full_disk_stays_full_until_under_the_low_water_mark():
    assert classify(POLICY, 0.90, True) is DiskLevel.FULL
    assert classify(POLICY, 0.86, True) is DiskLevel.FULL
    assert classify(POLICY, 0.85, True) is DiskLevel.WARN
    assert classify(POLICY, 0.90, False) is DiskLevel.WARN


def test_monitor_is_full_while_any_dir_is_full():
    usage = {"/j": (100, 50), "/l": (100, 4)}
    monitor = DiskMonitor(POLICY, {"journal": "/j", "ledgers": "/l"})
    assert monitor.poll(lambda path: usage[path]) is True
    assert monitor.min_free_bytes() == 4
    usage["/l"] = (100, 12)  # 88% used: still above the low water mark
    assert monitor.poll(lambda path: usage[path]) is True
    usage["/l"] = (100, 20)
    assert monitor.poll(lambda path: usage[path]) is False
    assert monitor.warn is True


def test_index_dirs_apart_are_watched_and_a_full_one_takes_its_ledger_dir_out():
    """indexDirsManager's thresholds are the same diskUsage settings; an index dir that is
    its own ledger dir is not watched twice."""
    named = watched_dirs(["/j"], ["/l0", "/l1"], ["/i0", "/l1"])
    assert named == {"journal": "/j", "ledgers": "/l0", "ledgers.1": "/l1", "index": "/i0"}
    named = watched_dirs(["/j"], ["/l0", "/l1"], ["/i0", "/i1"])
    usage = {path: (100, 50) for path in named.values()}
    monitor = DiskMonitor(POLICY, named)
    usage["/i1"] = (100, 3)
    assert monitor.poll(lambda path: usage[path]) is False
    assert monitor.full_ledger_dirs() == {1}  # PL2: ledger dir 1 takes no new ledgers
    usage["/i0"] = (100, 3)  # every index dir full: read-only, as BookKeeper's allDisksFull
    assert monitor.poll(lambda path: usage[path]) is True
    usage["/i0"], usage["/i1"] = (100, 50), (100, 50)
    usage["/l0"] = (100, 3)  # ledger dir 0 full, index dir 1 not: dir 1 still writable
    assert monitor.poll(lambda path: usage[path]) is False
    assert monitor.full_ledger_dirs() == {0}
