"""Disk thresholds with hysteresis (bookie/disk_monitor.py)."""

from __future__ import annotations

from bookie.disk_monitor import DiskLevel, DiskMonitor, DiskPolicy, classify

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
