"""Which journals a checkpoint may delete (Journal.checkpointComplete; docs/formats.md §3.9). Pure.

Invariant (docs/design.md §1.8): a journal is deleted only when it lies wholly below the persisted
lastMark, i.e. its id is strictly below the mark's id; the marked journal and newer ones are
never deleted, and ``backups`` (journalMaxBackups, default 5) older ones are kept.
"""

from __future__ import annotations

from journal.format import LogMark

DEFAULT_BACKUPS = 5


def journals_to_delete(journal_ids: list[int], mark: LogMark,
                       backups: int = DEFAULT_BACKUPS) -> list[int]:
    """The oldest ids strictly below ``mark.journal_id``, beyond the newest ``backups`` of them."""
    assert backups >= 0, backups
    below = sorted(journal_id for journal_id in set(journal_ids)
                   if journal_id < mark.journal_id)
    if len(below) < backups:
        return []
    return below[:len(below) - backups]
