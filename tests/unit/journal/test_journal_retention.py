"""journal/retention.py: which journals a checkpoint deletes (docs/formats.md §3.9, docs/design.md §1.8)."""

from __future__ import annotations

import pytest

from journal.format import LogMark
from journal.retention import journals_to_delete


@pytest.mark.parametrize("ids, mark_id, backups, deleted", [
    ([], 10, 5, []),
    ([1, 2, 3, 4, 5], 10, 5, []),  # exactly `backups` below the mark: all kept
    ([1, 2, 3, 4, 5, 6], 10, 5, [1]),
    ([9, 3, 7, 1, 5, 2, 8], 10, 5, [1, 2]),  # unsorted input, oldest deleted
    ([1, 2, 3, 10, 11, 12], 10, 0, [1, 2, 3]),
    ([1, 2, 3, 10, 11, 12], 10, 2, [1]),
    ([10, 11, 12], 10, 0, []),  # the marked journal and newer are never deleted
    ([5, 6, 7], 5, 0, []),
])
def test_journals_strictly_below_the_mark_beyond_the_backups(ids, mark_id, backups, deleted):
    assert journals_to_delete(ids, LogMark(mark_id, 512), backups) == deleted


def test_default_keeps_five_backups():
    assert journals_to_delete(list(range(1, 11)), LogMark(10, 0)) == [1, 2, 3, 4]


def test_the_marked_journal_survives_whatever_its_offset():
    for offset in (0, 512, 1 << 31):
        assert 7 not in journals_to_delete([5, 6, 7], LogMark(7, offset), 0)
