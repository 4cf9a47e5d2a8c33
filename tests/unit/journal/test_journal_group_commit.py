"""journal/group_commit.py: the flush decision of docs/design.md §3.2, without threads or disks."""

from __future__ import annotations

import pytest

from journal.group_commit import FlushReason, GroupCommitPolicy, should_flush

DEFAULT = GroupCommitPolicy()


def test_defaults_are_bookkeepers_except_flush_when_queue_empty():
    assert DEFAULT == GroupCommitPolicy(group_wait_ms_max=2.0, group_bytes_max=512 * 1024,
                                        group_entries_max=0, flush_when_queue_empty=True)


def test_nothing_pending_never_flushes():
    assert should_flush(DEFAULT, 1e9, 1 << 30, 0, True) is None


@pytest.mark.parametrize("wait_ms, size, count, queue_empty, reason", [
    (2.0, 0, 1, False, FlushReason.MAX_WAIT),
    (5.0, 1 << 20, 1, True, FlushReason.MAX_WAIT),  # the wait is checked first
    (1.9, 512 * 1024, 3, False, FlushReason.MAX_BYTES),
    (1.9, 512 * 1024 - 1, 3, True, FlushReason.QUEUE_EMPTY),
    (0.0, 100, 1, True, FlushReason.QUEUE_EMPTY),
    (1.9, 512 * 1024 - 1, 3, False, None),
    (0.0, 100, 10_000, False, None),  # entries are not limited by default
])
def test_default_policy(wait_ms, size, count, queue_empty, reason):
    assert should_flush(DEFAULT, wait_ms, size, count, queue_empty) is reason


def test_entry_limit_when_set():
    policy = GroupCommitPolicy(group_entries_max=8)
    assert should_flush(policy, 0.0, 10, 8, False) is FlushReason.MAX_ENTRIES
    assert should_flush(policy, 0.0, 10, 7, False) is None
    assert should_flush(policy, 0.0, 1 << 20, 8, False) is FlushReason.MAX_BYTES


def test_bookkeeper_style_policy_waits_although_the_queue_is_empty():
    policy = GroupCommitPolicy(flush_when_queue_empty=False)
    assert should_flush(policy, 1.0, 10, 1, True) is None
    assert should_flush(policy, 2.0, 10, 1, True) is FlushReason.MAX_WAIT


def test_policy_is_frozen():
    with pytest.raises(Exception):
        DEFAULT.group_wait_ms_max = 1.0
