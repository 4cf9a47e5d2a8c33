"""Carrying an older ``ledgers`` index over to today's form, at open. docs/formats.md §7.2.

An index of this project written before the format key holds BKLD ``LedgerState`` values at
key L (tombstones there too, with exists=0) and perhaps a raw usage-pending value. BookKeeper's
DbLedgerStorage cannot read those (its loader parses every key >= 0 as ``LedgerData``), so
each such ledger is rewritten once, in the form of ``ledger_records.writes_for``. Values
already ``LedgerData`` (BookKeeper's, or ours) stay as they are (M5): on BookKeeper's own dirs
the carry-over writes only the format key.

Invariants:
    IU1. No ledger is ever half moved: a ledger's delete and put go in the same atomic batch.
    IU2. A kill -9 at any point loses nothing and changes nothing: until the format key is
         written, the loader takes either form key by key (LR2 in ``ledger_records``), so a
         half-done carry-over loads to the states it started from, and the next open runs it
         again. Rewriting a value already in today's form gives the same bytes.
    IU3. The format key is written last, synced, in the same batch as the usage-pending key's
         new form (naming the same ids, so M6's ledgers stay not known across any number of
         kills): once it is on disk, every value is in today's form.
"""

from __future__ import annotations

from typing import Callable

from ledgerindex import keys, ledger_records
from ledgerindex.kv import KeyValueStore
from ledgerindex.ledger_records import LoadedRecords

#: Ledgers a batch: bounds the batch's memory (a ledger is ~100 bytes) and keeps each write
#: short. Only the last batch is synced (IU3).
BATCH_LEDGERS = 4096


def carry_over(kv: KeyValueStore, found: LoadedRecords, *, batch_ledgers: int = BATCH_LEDGERS,
               after_batch: Callable[[int], None] | None = None) -> int:
    """Rewrite every ledger of ``found`` held in an older form, then write the format key
    (IU3).

    Returns the number of ledgers rewritten. ``after_batch(k)`` runs after batch k is written
    (the crash tests kill the process there).
    """
    ids = sorted(found.old_form)
    for batch, start in enumerate(range(0, len(ids), batch_ledgers)):
        chunk = ((i, found.states[i]) for i in ids[start:start + batch_ledgers])
        puts, deletes = ledger_records.writes_for_all(chunk, found)  # IU1: one batch
        kv.write_batch(puts, deletes=deletes, sync=False)
        if after_batch is not None:
            after_batch(batch)
    final = [(keys.encode_ledger_key(keys.FORMAT_LEDGER_ID), keys.encode_marker())]
    if found.pending_present:
        final.append((keys.encode_ledger_key(keys.USAGE_PENDING_LEDGER_ID),
                      keys.encode_usage_pending(found.pending)))
    kv.write_batch(final, sync=True)
    found.format_present = True
    found.old_form.clear()
    return len(ids)
