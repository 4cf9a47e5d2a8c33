"""How many entries and bytes a ledger holds, for ``GET /v1/ledgers/{L}``, without reading it.

Each ledger's state keeps counters of what the ``locations`` index holds (``LedgerState``
``entry_count``/``byte_count``, docs/formats.md §7.2 version 2). A checkpoint adds what it indexes
that the index did not hold yet; the write cache's entries not yet counted are added at read
time. So an answer costs one floor lookup plus the ledger's cached entries: never a walk over
the ledger (0.4 s for 60k entries before, holding a read thread: docs/drills.md "Track record").

Invariants:
    U1. An entry is counted once: by the checkpoint that first indexes it. A re-add of an
        indexed entry (client retry, a damaged copy replaced, replay after a crash past the
        index batch) is not new, since the index already holds it.
    U2. The counters never disagree with the index unseen: the checkpoint names the ledgers
        it will count in the usage-pending key before the index batch, and the counters'
        write deletes it (M6 in ``ledgerindex/ledgers.py``); a ledger left pending by a
        crash has counters "not known", and is recounted from the index.
    U3. An answer is exact at every instant of a checkpoint: the flushing half's entries are
        added to the counters and marked counted in one step under ``lock``, before the index
        batch that makes them "already stored", so no entry is missed or counted twice.

Thread-safety: ``count_flushing`` on the checkpoint thread; ``usage`` on a read thread;
``recount`` on the checkpoint thread (between checkpoints, so nothing is being flushed).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from bookie.write_cache import WriteCache
    from ledgerindex.ledgers import LedgerMetadataIndex
    from ledgerindex.locations import EntryLocationIndex


class LedgerUsage:
    def __init__(self, cache: "WriteCache", locations: "EntryLocationIndex",
                 ledgers: "LedgerMetadataIndex") -> None:
        self.cache = cache
        self.locations = locations
        self.ledgers = ledgers
        self.lock = threading.Lock()

    def new_entries(self, sizes: dict[int, dict[int, int]]) -> dict[int, tuple[int, int]]:
        """(entries, bytes) per ledger of ``sizes`` ({ledger: {entry: length}}) that the
        index does not hold yet (U1). Read before the index batch that adds them."""
        deltas = {}
        for ledger_id, entries in sizes.items():
            count, size = self._not_indexed(ledger_id, entries)
            if count:
                deltas[ledger_id] = (count, size)
        return deltas

    def _not_indexed(self, ledger_id: int, entries: dict[int, int]) -> tuple[int, int]:
        # Entries past the indexed last are new without a lookup: the common case, an
        # append, costs one floor lookup per ledger, not one per entry.
        last = self.locations.last_entry_id(ledger_id)
        if last is None or not entries or min(entries) > last:  # an append (C loops)
            return len(entries), sum(entries.values())
        count = size = 0
        for entry_id, length in entries.items():
            if last is None or entry_id > last or self.locations.get(ledger_id, entry_id) is None:
                count += 1
                size += length
        return count, size

    def count_flushing(self, deltas: dict[int, tuple[int, int]]) -> None:
        """U3: the counters take the flushing half's new entries as it stops counting."""
        with self.lock:
            self.ledgers.add_usage(deltas)
            self.cache.mark_flushing_counted()

    def usage(self, ledger_id: int) -> tuple[int, int] | None:
        """(entries, bytes) stored for the ledger, None while its counters are not known
        (U2: ``recount`` first). Costs the ledger's cached entries, not its size."""
        with self.lock:
            state = self.ledgers.get(ledger_id)
            if state is None or not state.usage_known:
                return None
            count, size = self._not_indexed(ledger_id, self.cache.uncounted_sizes(ledger_id))
            return state.entry_count + count, state.byte_count + size

    def recount(self, ledger_id: int,
                entry_sizes: Callable[[int], tuple[int, int]]) -> tuple[int, int]:
        """Count the ledger from the index (``entry_sizes``: a walk over its stored
        entries) and keep the result as its counters. Only for counters not known (U2)."""
        count, size = entry_sizes(ledger_id)
        self.ledgers.set_usage(ledger_id, count, size)
        return count, size
