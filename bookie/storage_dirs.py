"""Ledger storage over every ledger dir: one ``LedgerStorage`` per dir, routed by ledger.

BookKeeper's DbLedgerStorage over its SingleDirectoryDbLedgerStorage list. Each dir has its
own write cache, entry logs, ``lastId``, RocksDB indexes (in index dir i, index_dirs, when
set), GC and disk check; a ledger lives in one (bookie/storage_routes.py, PL1-PL3). With
one ledger dir this is the one LedgerStorage.

Invariant:
    SD1. A checkpoint flushes every dir before ``lastMark`` moves (docs/design.md §3.4): the
         mark covers records of ledgers in every dir. The dirs flush at once, one thread
         each, since each is its own disk; the checkpoint fails if any dir's flush fails,
         after waiting for the others (none is left half-way on a thread nobody joins).

Thread-safety: as LedgerStorage's (its docstring), call by call.
"""

from __future__ import annotations

import concurrent.futures
from typing import TYPE_CHECKING, Callable

from bookie.errors import IOFailure
from bookie.storage import FlushStats, LedgerStorage
from bookie.storage_routes import Placement, RoutedLedgers, RoutedLocations, SummedCache

if TYPE_CHECKING:
    from bookie.config import BookieConfig
    from bookie.disk import Disk
    from ledgerindex.keys import LedgerState


class DirsStorage:
    """Every ledger dir's storage, with LedgerStorage's calls."""

    def __init__(self, disk: "Disk", config: "BookieConfig") -> None:
        self.disk = disk
        self.config = config
        self.units = [LedgerStorage(disk, config, ledger_dir, index_dir)
                      for ledger_dir, index_dir in zip(config.ledger_dirs_current,
                                                       config.index_dirs_current)]
        self.placement = Placement(self.units)
        self.ledgers = RoutedLedgers(self.placement)
        self.locations: RoutedLocations | None = None
        self.cache = SummedCache(self.placement)
        self._flushers: concurrent.futures.ThreadPoolExecutor | None = None

    @property
    def ledger_dirs(self) -> list[str]:
        return [unit.ledger_dir for unit in self.units]

    @property
    def ledger_dir(self) -> str:
        """The first ledger dir (the operator's flag lives there)."""
        return self.units[0].ledger_dir

    @property
    def entry_logger(self):
        """The first dir's entry logger (``currentEntryLogId`` of /v1/bookie/info)."""
        return self.units[0].entry_logger

    def open(self) -> None:
        for unit in self.units:
            unit.open()
        if len(self.units) > 1:  # one dir: every ledger is there, no map to keep
            self.placement.load()
        self.locations = RoutedLocations(self.placement)
        if len(self.units) == 1:
            self._bind_the_one(self.units[0])
        if len(self.units) > 1:
            self._flushers = concurrent.futures.ThreadPoolExecutor(
                len(self.units), thread_name_prefix="flush")

    def replayed(self) -> None:
        """Replay and the start's checkpoint are done: from now on a ledger no dir holds a
        state of is new (PL1), so no index is searched for it."""
        self.placement.probe_indexes = False

    def _bind_the_one(self, unit: LedgerStorage) -> None:
        """One ledger dir: its storage's own calls and indexes, with no routing between
        (the add path runs these a few times per add)."""
        self.ledgers, self.locations, self.cache = unit.ledgers, unit.locations, unit.cache
        for name in ("add_entry", "add_run", "delete_ledger", "revive_ledger", "get_cached",
                     "get_entry", "indexed_entry_ids", "last_entry_id", "ledger_usage",
                     "recount_usage"):
            setattr(self, name, getattr(unit, name))

    # -- writes -------------------------------------------------------------------------

    def add_entry(self, ledger_id: int, entry_id: int, data: bytes) -> None:
        self.placement.unit_for_write(ledger_id).add_entry(ledger_id, entry_id, data)

    def add_run(self, ledger_id: int, entries) -> None:
        self.placement.unit_for_write(ledger_id).add_run(ledger_id, entries)

    def delete_ledger(self, ledger_id: int) -> None:
        self.placement.unit_for_write(ledger_id).delete_ledger(ledger_id)

    def revive_ledger(self, ledger_id: int,
                      revived: Callable[["LedgerState"], "LedgerState"]) -> None:
        self.placement.unit_for_write(ledger_id).revive_ledger(ledger_id, revived)

    def flush(self) -> FlushStats:
        """SD1: every dir's flush (LedgerStorage.flush's steps). The appends and index
        batches, Python's work, run one dir after the other on this thread; the entry logs'
        fsyncs, one per disk, run at once. (Whole flushes on a thread each were slower on
        one core: three threads taking turns at the GIL, docs/design.md §3.8.)"""
        if self._flushers is None:
            return self.units[0].flush()
        flushing = [unit.flush_append() for unit in self.units]
        syncs = [self._flushers.submit(unit.flush_sync) for unit in self.units]
        concurrent.futures.wait(syncs)
        for sync in syncs:
            sync.result()  # the first failure raises, after every fsync has ended
        stats = [unit.flush_index(f) for unit, f in zip(self.units, flushing)]
        return FlushStats(sum(s.entries for s in stats), sum(s.bytes for s in stats),
                          sum(s.append_s for s in stats), sum(s.index_s for s in stats))

    # -- reads --------------------------------------------------------------------------

    def get_cached(self, ledger_id: int, entry_id: int) -> bytes | None:
        return self.cache.get(ledger_id, entry_id)

    def get_entry(self, ledger_id: int, entry_id: int, limit: int = 0):
        unit = self.placement.unit(ledger_id)
        return None if unit is None else unit.get_entry(ledger_id, entry_id, limit)

    def get_entries(self, ledger_id: int, first: int, last: int,
                    max_bytes: int) -> list[bytes]:
        unit = self.placement.unit(ledger_id)
        return [] if unit is None else unit.get_entries(ledger_id, first, last, max_bytes)

    def get_listed(self, ledger_id: int, entry_ids: list[int], max_bytes: int,
                   limit: int = 0) -> list:
        unit = self.placement.unit(ledger_id)
        return [None] * len(entry_ids) if unit is None else \
            unit.get_listed(ledger_id, entry_ids, max_bytes, limit)

    def get_batch(self, ledger_id: int, first: int, last: int, bound,
                  framed: bool = False) -> list[bytes]:
        unit = self.placement.unit(ledger_id)
        return [] if unit is None else unit.get_batch(ledger_id, first, last, bound, framed)

    def indexed_entry_ids(self, ledger_id: int) -> list[int]:
        unit = self.placement.unit(ledger_id)
        return [] if unit is None else unit.indexed_entry_ids(ledger_id)

    def last_entry_id(self, ledger_id: int) -> int | None:
        unit = self.placement.unit(ledger_id)
        return None if unit is None else unit.last_entry_id(ledger_id)

    def ledger_usage(self, ledger_id: int) -> tuple[int, int] | None:
        # A ledger no dir holds: the first dir answers, as the only dir would.
        unit = self.placement.unit(ledger_id) or self.units[0]
        return unit.ledger_usage(ledger_id)

    def recount_usage(self, ledger_id: int) -> tuple[int, int]:
        unit = self.placement.unit(ledger_id) or self.units[0]
        return unit.recount_usage(ledger_id)

    def close_indexes(self) -> None:
        """Every dir's RocksDB handles closed, nothing else (tests of a dead disk)."""
        for unit in self.units:
            unit._close_indexes()

    def abandon(self) -> None:
        """After an I/O failure (close writes nothing then): let every file and index go
        without writing, so this process may open the dirs again. RocksDB's own close
        flushes its memtable, which fails on a broken device: the handle goes anyway."""
        for unit in self.units:
            unit.entry_logger.abandon()
            for index in (unit.locations, unit.ledgers):
                if index is not None:
                    try:
                        index.close()
                    except IOFailure:
                        pass

    def close(self) -> None:
        """Every dir closed, then the first failure reported."""
        errors = []
        for unit in self.units:
            try:
                unit.close()
            except Exception as exc:
                errors.append(exc)
        if self._flushers is not None:
            self._flushers.shutdown(wait=True)
        if errors:
            raise errors[0] if isinstance(errors[0], IOFailure) else IOFailure(str(errors[0]))
