"""Moving ledgers back to the ledger dir BookKeeper looks in (``ledgerId mod n``), on a stopped
bookie's storage (``bookie shell move-home``, docs/operations.md §5.11). Our bookie puts a new
ledger in another dir when its own is full (PL2 in bookie/storage_routes.py) and keeps it
there; BookKeeper's DbLedgerStorage would not find it (BR1 in bookie/shell/bk_ready.py).

Invariants:
    MH1. Copy before forget: the ledger's entries, byte for byte, and its state (fence,
         master key, explicit LAC, digest type) go to its home dir, synced there by one
         checkpoint of that dir (entry log, then locations, then states), before anything
         is removed from the dir it was in. A tombstone is copied as a tombstone.
    MH2. Then the old dir forgets it: its state first (synced), then its locations. A kill
         before the state goes leaves two complete copies (ours reads the first dir's, which
         holds every entry too); a kill after leaves only the home dir's state, so every
         reader, ours (PL1) and BookKeeper's, goes there, and locations in the old dir that
         nothing reads. A run again copies what is still off home again (the same bytes)
         and drops such leftover locations (MH3), so it always finishes the job.
    MH3. Locations of a ledger in a dir that holds no state of it, while another dir does,
         are deleted: nothing reads them, and they would keep GC from freeing their logs
         (G7 in bookie/gc.py).
The ledger's usage counters in its home dir are counted by the checkpoint that indexes its
entries there (U1 in bookie/ledger_usage.py); after a run again, recounted from the index.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from bookie.storage_dirs import DirsStorage
from ledgerindex.keys import USAGE_UNKNOWN


@dataclasses.dataclass
class Moved:
    ledger_id: int
    source: int
    target: int
    entries: int
    tombstone: bool


def _ignore(_step: str) -> None:
    pass


def off_home(storage: DirsStorage) -> list[tuple[int, int]]:
    """(ledger id, dir) of every state, live or tombstone, outside dir ``L mod n``."""
    count = len(storage.units)
    found = []
    for position, unit in enumerate(storage.units):
        for ledger_id in unit.ledgers.ledger_ids() + unit.ledgers.deleted_ids():
            if ledger_id % count != position:
                found.append((ledger_id, position))
    return sorted(found)


def move_home(storage: DirsStorage, ledger_id: int, source: int,
              on_step: Callable[[str], None] = _ignore) -> Moved:
    """MH1-MH2 for one ledger. ``on_step`` hears "copied" and "state-dropped" as each is
    durable (a crash test stops the process there)."""
    target = ledger_id % len(storage.units)
    old, home = storage.units[source], storage.units[target]
    state = old.ledgers.get(ledger_id)
    entries = 0
    if state.exists:
        for entry_id in old.indexed_entry_ids(ledger_id):
            home.add_entry(ledger_id, entry_id, bytes(old.get_entry(ledger_id, entry_id)))
            entries += 1
        # New in this dir, so ``set`` starts its counters at 0, 0, and the flush that
        # indexes the entries counts them (U1).
        home.ledgers.set(ledger_id, state.with_(entry_count=USAGE_UNKNOWN,
                                                     byte_count=USAGE_UNKNOWN))
        home.flush()
    else:
        home.ledgers.put_tombstones({ledger_id: state})
    on_step("copied")
    old.ledgers.purge(ledger_id, moved=True)  # MH2: the state first
    on_step("state-dropped")
    old.locations.delete_ledger(ledger_id, sync=True)
    return Moved(ledger_id, source, target, entries, not state.exists)


def drop_leftover_locations(storage: DirsStorage) -> list[tuple[int, int]]:
    """MH3: (ledger id, dir) of each set of locations deleted."""
    homes = {}
    for position, unit in enumerate(storage.units):
        for ledger_id in unit.ledgers.ledger_ids() + unit.ledgers.deleted_ids():
            homes.setdefault(ledger_id, position)
    dropped = []
    for position, unit in enumerate(storage.units):
        for ledger_id, home in sorted(homes.items()):
            if home != position and unit.ledgers.get(ledger_id) is None and \
                    unit.locations.count_and_max(ledger_id)[0]:
                unit.locations.delete_ledger(ledger_id, sync=True)
                dropped.append((ledger_id, position))
    return dropped
