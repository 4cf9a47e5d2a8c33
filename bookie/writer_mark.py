"""The writer mark (docs/formats.md §7.2, key −0xB00E): whether a bookie other than ours wrote
these dirs since ours last ran. BookKeeper's DbLedgerStorage, started on our dirs
(docs/operations.md §5.11), adds to ``locations`` without rewriting a ledger's
``LedgerData``, so the usage counters in our extension (M6 in ledgerindex/ledgers.py) would
fall short of what the index holds, and ledger info and GC's view with them.

Invariants:
    WM1. Each file journal 0 creates is named in every ledger dir's ``ledgers`` index, synced,
         right after the file is made (Journal's ``on_new_file``), before it takes a record.
         So a journal-0 file above the mark was made by another bookie (BookKeeper's makes a
         new one, id = newest + 1, at every start), or by ours killed between the two steps.
    WM2. At start, before replay: a journal-0 file above an index's mark, or no mark in an
         index holding ledgers (BookKeeper made it, or ours before the mark existed), makes
         every live ledger's counters in that index not known. They are recounted from the
         index when first asked, as after a checkpoint that died (M6). A false alarm costs
         recounts, never a wrong count.
"""

from __future__ import annotations

import logging

from bookie.errors import IOFailure
from ledgerindex import keys

log = logging.getLogger("bookie.writer_mark")

_KEY = keys.encode_ledger_key(keys.WRITER_MARK_LEDGER_ID)


def mark_writer(storage, journal_id: int) -> None:
    """WM1, on the thread that made journal 0's file ``journal_id``."""
    value = keys.encode_marker(journal_id=journal_id)
    for unit in storage.units:  # each ledger dir's (bookie/storage_dirs.py)
        try:
            unit.ledgers.kv.put(_KEY, value, sync=True)
        except Exception as exc:  # noqa: BLE001 - any RocksDB failure is an I/O failure here
            raise IOFailure(f"cannot write the writer mark {journal_id:x} to "
                            f"{unit.ledgers.kv.path}: {exc}") from exc


def forget_usage_if_written_by_another(storage, journal_ids: list[int]) -> int:
    """WM2, with journal 0's file ids; the number of indexes whose counters were forgotten."""
    newest = max(journal_ids, default=None)
    forgotten = 0
    for unit in storage.units:  # each ledger dir's (bookie/storage_dirs.py)
        ledgers, mark = unit.ledgers, unit.ledgers.writer_mark
        if not len(ledgers):
            continue
        if mark is None or (newest is not None and newest > mark):
            why = ("no writer mark" if mark is None else
                   f"journal {newest:x} is newer than the writer mark {mark:x}")
            log.warning("%s: %s: another bookie (BookKeeper's?) may have added entries; "
                        "every ledger's size is recounted from the index when first asked",
                        ledgers.kv.path, why)
            ledgers.forget_usage()
            forgotten += 1
    return forgotten
