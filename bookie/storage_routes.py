"""Where a ledger lives among several ledger dirs, and the views that route to it.

BookKeeper's DbLedgerStorage gives each ledger dir its own SingleDirectoryDbLedgerStorage and
sends ledger L to dir ``L mod n``. Ours does the same, and a full dir takes no new ledgers
while another dir can (docs/design.md §3.8):

    PL1. A ledger lives in one ledger dir for its life: its entries, locations and state
         are all there, so each dir's checkpoint, GC and compaction are its own. Its home is
         the dir whose ``ledgers`` index holds its state, else, during replay, the dir whose
         ``locations`` index holds an entry of it (a crash between a checkpoint's locations
         batch and its states batch leaves that; replay's records of the ledger then set its
         state there, and the start's checkpoint writes it, so after replay a ledger with
         no state has no entries anywhere and nothing is read from disk to find out: the
         add path reads nothing on the loop, N6), else it is placed when first written.
    PL2. A new ledger goes to dir ``ledgerId mod n`` unless that dir is full; then to the
         next dir in order that is not full; when every dir is full, to ``ledgerId mod n``
         (the bookie is read-only then, and only privileged writes get this far).
    PL3. Reading never places: a ledger no dir knows reads as unknown in every view.

Thread-safety: ``home``, ``place`` from the loop, replay, read executor or checkpoint
threads; the map is a dict (atomic lookups under the GIL) written under ``_lock``.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from typing import TYPE_CHECKING, Callable, Iterator

if TYPE_CHECKING:
    from bookie.storage import LedgerStorage
    from ledgerindex.keys import LedgerState


class Placement:
    """PL1-PL3: each ledger's ledger dir, by index into ``units``."""

    def __init__(self, units: list["LedgerStorage"]) -> None:
        self.units = units
        self.full: set[int] = set()   # dirs the disk monitor finds full (PL2)
        self._home: dict[int, int] = {}
        self._lock = threading.Lock()
        self.moved_by_full = 0        # new ledgers placed off their hashed dir (PL2)
        #: PL1: look in the dirs' locations for a ledger no state names; until replay ends.
        self.probe_indexes = True

    def load(self) -> None:
        """PL1 at open: every ledger state of every dir, tombstones too (the indexes hold
        them in memory): a deleted ledger's records must keep finding its tombstone."""
        for index, unit in enumerate(self.units):
            for ledger_id in unit.ledgers.ledger_ids() + unit.ledgers.deleted_ids():
                self._home.setdefault(ledger_id, index)

    def home(self, ledger_id: int) -> int | None:
        """The dir holding the ledger, None if none does (PL3: nothing is placed)."""
        index = self._home.get(ledger_id)
        if index is None and len(self.units) > 1 and self.probe_indexes:
            index = self._indexed_in(ledger_id)
            if index is not None:
                with self._lock:
                    index = self._home.setdefault(ledger_id, index)
        return 0 if index is None and len(self.units) == 1 else index

    def _indexed_in(self, ledger_id: int) -> int | None:
        for index, unit in enumerate(self.units):
            if unit.locations is not None and unit.locations.last_entry_id(ledger_id) is not None:
                return index
        return None

    def place(self, ledger_id: int) -> int:
        """The ledger's dir, choosing one by PL2 when no dir holds it yet."""
        index = self.home(ledger_id)
        if index is not None:
            return index
        count = len(self.units)
        hashed = ledger_id % count
        chosen = next((i % count for i in range(hashed, hashed + count)
                       if i % count not in self.full), hashed)
        with self._lock:
            index = self._home.setdefault(ledger_id, chosen)
        if index != hashed:
            self.moved_by_full += 1
        return index

    def unit(self, ledger_id: int) -> "LedgerStorage | None":
        index = self.home(ledger_id)
        return None if index is None else self.units[index]

    def unit_for_write(self, ledger_id: int) -> "LedgerStorage":
        return self.units[self.place(ledger_id)]

    def counts(self) -> list[int]:
        """Live ledgers per dir, in dir order (0 before the indexes are open: /v1/bookie/info
        answers from the first moment of a start)."""
        return [len(unit.ledgers) if unit.ledgers is not None else 0 for unit in self.units]


class RoutedLedgers:
    """The ``ledgers`` index of every dir as one (LedgerMetadataIndex's calls)."""

    def __init__(self, placement: Placement) -> None:
        self._placement = placement

    def get(self, ledger_id: int) -> "LedgerState | None":
        unit = self._placement.unit(ledger_id)
        return None if unit is None else unit.ledgers.get(ledger_id)

    def is_deleted(self, ledger_id: int) -> bool:
        unit = self._placement.unit(ledger_id)
        return unit is not None and unit.ledgers.is_deleted(ledger_id)

    def ledger_ids(self, start: int = 0, limit: int | None = None) -> list[int]:
        units = self._placement.units
        merged = heapq.merge(*(u.ledgers.ledger_ids(start, limit) for u in units))
        return list(itertools.islice(merged, limit)) if limit is not None else list(merged)

    def deleted_ids(self) -> list[int]:
        return sorted(itertools.chain.from_iterable(
            u.ledgers.deleted_ids() for u in self._placement.units))

    def __len__(self) -> int:
        return sum(len(u.ledgers) for u in self._placement.units)

    @property
    def dirty_count(self) -> int:
        return sum(u.ledgers.dirty_count for u in self._placement.units)

    def __getattr__(self, name: str) -> Callable:
        """The writes (set, set_master_key, update, set_fenced, set_limbo, set_explicit_lac,
        set_usage, mark_deleted, revive, purge): to the ledger's dir, placing it (PL2)."""
        if name not in _WRITES:
            raise AttributeError(name)

        def routed(ledger_id: int, *args, **kwargs):
            unit = self._placement.unit_for_write(ledger_id)
            return getattr(unit.ledgers, name)(ledger_id, *args, **kwargs)
        return routed


_WRITES = frozenset(("set", "set_master_key", "update", "set_fenced", "set_limbo",
                     "set_explicit_lac", "set_usage", "mark_deleted", "revive", "purge"))


class RoutedLocations:
    """The ``locations`` index of every dir as one, for reads by ledger (PL3)."""

    def __init__(self, placement: Placement) -> None:
        self._placement = placement

    def get(self, ledger_id: int, entry_id: int) -> int | None:
        unit = self._placement.unit(ledger_id)
        return None if unit is None else unit.locations.get(ledger_id, entry_id)

    def last_entry_id(self, ledger_id: int) -> int | None:
        unit = self._placement.unit(ledger_id)
        return None if unit is None else unit.locations.last_entry_id(ledger_id)

    def entries(self, ledger_id: int, first_entry_id: int = 0) -> Iterator[tuple[int, int]]:
        unit = self._placement.unit(ledger_id)
        return iter(()) if unit is None else unit.locations.entries(ledger_id, first_entry_id)

    def count_and_max(self, ledger_id: int) -> tuple[int, int | None]:
        unit = self._placement.unit(ledger_id)
        return (0, None) if unit is None else unit.locations.count_and_max(ledger_id)

    def compact(self) -> None:
        for unit in self._placement.units:
            unit.locations.compact()


class SummedCache:
    """The write caches of every dir: their sizes summed, a ledger's entries from its dir."""

    def __init__(self, placement: Placement) -> None:
        self._placement = placement

    @property
    def active_bytes(self) -> int:
        return sum(u.cache.active_bytes for u in self._placement.units)

    @property
    def total_bytes(self) -> int:
        return sum(u.cache.total_bytes for u in self._placement.units)

    def entry_ids(self, ledger_id: int) -> list[int]:
        unit = self._placement.unit(ledger_id)
        return [] if unit is None else unit.cache.entry_ids(ledger_id)

    def get(self, ledger_id: int, entry_id: int) -> bytes | None:
        unit = self._placement.unit(ledger_id)
        return None if unit is None else unit.cache.get(ledger_id, entry_id)

    def last_entry_id(self, ledger_id: int) -> int | None:
        unit = self._placement.unit(ledger_id)
        return None if unit is None else unit.cache.last_entry_id(ledger_id)
