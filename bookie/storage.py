"""Ledger storage: write cache -> entry log + RocksDB indexes; reads.

BookKeeper's SingleDirectoryDbLedgerStorage. Synchronous; knows nothing of asyncio or the
journal. The checkpoint (``bookie/checkpoint.py``) calls ``flush``; the node calls the rest.

Invariants:
    R1. A location enters RocksDB only after the entry-log bytes it points at are fsynced
        (``flush`` step order), so a reader never follows a location past the durable end.
    R2. An entry the index knows but that cannot be read back is ``IOFailure`` (EIO), never
        "no such entry" (docs/design.md §1.10): a false 404 during ledger recovery truncates a ledger.
    R3. A deleted ledger is a synced tombstone in ``ledgers`` before ``delete_ledger`` returns
        (docs/design.md §1.3); its locations are range-deleted at the next flush.
    R4. Compaction moves an entry (index switched) before it deletes the old log, so a read
        that fails on a location the index no longer holds is retried once at the new one.
    R6. ``revive_ledger`` (checkpoint thread) is the way back from a tombstone; see there.

Thread-safety: ``add_entry``, ``delete_ledger`` and ledger-state calls on the loop (or the
replay thread); ``get_entry`` on the loop (cache) or a read executor thread; ``flush`` and
``close`` on the checkpoint thread only.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Callable

from bookie.errors import IOFailure
from bookie.ledger_usage import LedgerUsage
from bookie.write_cache import WriteCache
from entrylog.entry_logger import EntryLogger
from entrylog.format import Oversize
from entrylog.run_reader import Bound, joins, piece
from ledgerindex.keys import ENTRY_ID_MAX, LedgerState
from ledgerindex.ledgers import LedgerMetadataIndex
from ledgerindex.locations import EntryLocationIndex

if TYPE_CHECKING:
    from bookie.config import BookieConfig
    from bookie.disk import Disk

log = logging.getLogger("bookie.storage")


@dataclasses.dataclass(frozen=True)
class FlushStats:
    entries: int
    bytes: int
    append_s: float
    index_s: float


@dataclasses.dataclass
class _Flushing:
    """What ``flush_append`` handed to ``flush_index``."""
    started: float
    deletes: set
    batch: list
    total_bytes: int
    sizes: dict


class LedgerStorage:
    def __init__(self, disk: "Disk", config: "BookieConfig",
                 ledger_dir: str | None = None, index_dir: str | None = None) -> None:
        self.disk = disk
        self.config = config
        #: This storage's one ledger dir (``current/``): bookie/storage_dirs.py has one each.
        self.ledger_dir = ledger_dir or config.ledger_dir
        #: Where its RocksDB indexes live (``current/`` of its index dir, index_dirs; the
        #: ledger dir given, else the first): ``<index dir>/current/{locations,ledgers}``,
        #: the paths of BookKeeper's SingleDirectoryDbLedgerStorage.
        self.index_dir = index_dir or (self.ledger_dir if ledger_dir
                                       else config.index_dirs_current[0])
        self.cache = WriteCache()
        self.entry_logger = EntryLogger(disk, self.ledger_dir, max_bytes=config.entrylog_max_bytes,
                                        max_entry_size=config.max_entry_size,
                                        cache_keep_bytes=config.entrylog_cache_keep_bytes)
        self.locations: EntryLocationIndex | None = None
        self.ledgers: LedgerMetadataIndex | None = None
        self.usage: LedgerUsage | None = None
        self._pending_deletes: set[int] = set()
        self._delete_lock = threading.Lock()

    def open(self) -> None:
        self.disk.makedirs(self.ledger_dir)
        self.disk.makedirs(self.index_dir)
        self.locations = EntryLocationIndex.open(os.path.join(self.index_dir, "locations"))
        self.ledgers = LedgerMetadataIndex.open(os.path.join(self.index_dir, "ledgers"))
        self.usage = LedgerUsage(self.cache, self.locations, self.ledgers)
        self.entry_logger.open()

    # -- writes -------------------------------------------------------------------------

    def add_entry(self, ledger_id: int, entry_id: int, data: bytes) -> None:
        self.cache.put(ledger_id, entry_id, data)

    def add_run(self, ledger_id: int, entries) -> None:
        """(entryId, bytes) of one ledger into the write cache at once (a batch add)."""
        self.cache.put_run(ledger_id, entries)

    def delete_ledger(self, ledger_id: int) -> None:
        """R3: the tombstone is synced now; cached entries vanish now; locations at flush."""
        self.ledgers.mark_deleted(ledger_id)
        self.cache.drop_ledger(ledger_id)
        with self._delete_lock:
            self._pending_deletes.add(ledger_id)

    def revive_ledger(self, ledger_id: int,
                      revived: Callable[[LedgerState], LedgerState]) -> None:
        """R6: a tombstoned ledger becomes a new empty one (a cluster bookie takes a copy
        again that its GC deleted). On the checkpoint thread, never during a flush: the
        pending range-delete is dropped and the locations removed (synced) before the live
        state is written, so no flush can delete the new ledger's locations and no old
        location points into a log GC may delete."""
        with self._delete_lock:
            self._pending_deletes.discard(ledger_id)
        if self.locations.last_entry_id(ledger_id) is not None:
            self.locations.delete_ledgers([ledger_id], sync=True)
        self.ledgers.revive(ledger_id, revived)

    def flush(self) -> FlushStats:
        """Checkpoint steps 2-6 (docs/design.md §3.4): swap, append sorted, fsync, index, sync.

        Crash story:
            1. swap the write cache halves
            2. append the flushing half to the entry log in (ledgerId, entryId) order
            3. fsync the entry log (rolled logs were finalized and fsynced on roll)
               ! crash before here: the log holds entries no index points at; replay from
                 the unchanged mark adds them again; GC reclaims the orphans
            3a. usage: what the batch adds that the index lacks; the usage-pending key names
                those ledgers, sync=True; counters take them in memory (U1-U3)
               ! crash from here to 5: those ledgers' counters are recounted at next start
            4. one locations batch, sync=True (R1: only after 3)
            5. dirty ledger states (the counters too), deleting the pending key, sync=True
               ! crash between 4 and 5 and lastMark: replay re-adds identical bytes (idempotent)
            6. range-delete locations of ledgers deleted before this flush began
        """
        flushing = self.flush_append()
        self.flush_sync()
        return self.flush_index(flushing)

    def flush_append(self) -> "_Flushing":
        """``flush`` steps 1-2: CPU and page cache only (bookie/storage_dirs.py runs the
        dirs' appends one after the other and their fsyncs at once: SD1)."""
        started = time.monotonic()
        with self._delete_lock:
            deletes, self._pending_deletes = self._pending_deletes, set()
        self.cache.swap()
        batch, total_bytes, sizes = self._append_flushing(deletes)
        return _Flushing(started, deletes, batch, total_bytes, sizes)

    def flush_sync(self) -> None:
        """``flush`` step 3: the entry log's fsync."""
        self.entry_logger.flush()

    def flush_index(self, flushing: "_Flushing") -> FlushStats:
        """``flush`` steps 3a-6, after ``flush_sync`` (R1)."""
        appended = time.monotonic()
        deltas = self.usage.new_entries(flushing.sizes)
        if deltas:
            self.ledgers.begin_usage(deltas)
        self.usage.count_flushing(deltas)
        if flushing.batch:
            self.locations.add_batch(flushing.batch, sync=True)
        self.ledgers.flush(sync=True)
        for ledger_id in sorted(flushing.deletes):
            self.locations.delete_ledger(ledger_id, sync=True)
        self.cache.clear_flushing()
        return FlushStats(len(flushing.batch), flushing.total_bytes,
                          appended - flushing.started, time.monotonic() - appended)

    def _append_flushing(self, deletes: set[int]):
        """(index batch, bytes, {ledger: {entry: length}}) of the flushing half, appended."""
        batch: list[tuple[int, int, int]] = []
        sizes: dict[int, dict[int, int]] = {}
        total = 0
        add_run = self.entry_logger.add_run
        for ledger_id, ids, datas in self.cache.flushing_chunks():  # C loops, not a step each
            if ledger_id in deletes or self.ledgers.is_deleted(ledger_id):
                continue
            locations = add_run(ledger_id, datas)
            batch.extend(zip(itertools.repeat(ledger_id), ids, locations))
            lengths = list(map(len, datas))
            sizes.setdefault(ledger_id, {}).update(zip(ids, lengths))  # a ledger: several runs
            total += sum(lengths)
        return batch, total, sizes

    # -- reads --------------------------------------------------------------------------

    def get_cached(self, ledger_id: int, entry_id: int) -> bytes | None:
        return self.cache.get(ledger_id, entry_id)

    def get_entry(self, ledger_id: int, entry_id: int, limit: int = 0):
        """The entry's bytes, None if this bookie never stored it; IOFailure if unreadable (R2).
        With a ``limit``, ``Oversize(size)`` for an entry larger than it (the listener's
        plain reads, api/server/bk_budget.py PB7)."""
        data = self.cache.get(ledger_id, entry_id)
        if data is not None:
            return Oversize(len(data)) if limit and len(data) > limit else data
        location = self.locations.get(ledger_id, entry_id)
        if location is None:
            # A checkpoint may have moved it from the cache to the log between the two
            # lookups: look once more, now that the index has it if the flush finished.
            data = self.cache.get(ledger_id, entry_id)
            if data is not None:
                return Oversize(len(data)) if limit and len(data) > limit else data
            location = self.locations.get(ledger_id, entry_id)
            if location is None:
                return None
        try:
            return self.entry_logger.read_entry(location, ledger_id, entry_id, limit)
        except IOFailure as error:
            return self._reread_moved(ledger_id, entry_id, location, error, limit)

    def get_entries(self, ledger_id: int, first: int, last: int,
                    max_bytes: int) -> list[bytes]:
        """Entries first, first+1, ... <= last, stopping before the first one not stored and
        before the one that would take the bytes above ``max_bytes`` (the first one always)."""
        return self.get_batch(ledger_id, first, last, Bound(max_bytes))

    def get_batch(self, ledger_id: int, first: int, last: int, bound: Bound,
                  framed: bool = False) -> list[bytes]:
        """Entries first, first+1, ... <= last while ``bound`` takes them, stopping before
        the first one not stored: each entry's bytes, or with ``framed`` the pieces of a v2
        batch answer's body (run_reader.read_run).

        The batch read's path (issue 41): one index iteration for the range, and entries
        that lie together in a log read in one pread each run (entrylog/run_reader.py).
        Where a run's read fails, each of its entries goes through ``get_entry`` (R4's
        retry of a read that raced compaction, R2's errors); an id found in neither the
        index read nor the cache too (a checkpoint may have moved it meanwhile).

        No entry id above keys.ENTRY_ID_MAX (2**63 - 2) can be stored, so a range asked up
        to 2**63 - 1 ends there (it raised the index's ValueError: a 500 over HTTP)."""
        ids = range(first, min(last, ENTRY_ID_MAX) + 1)
        return self._gather(ledger_id, ids, bound, framed, False) if ids else []

    def get_listed(self, ledger_id: int, entry_ids: list[int], max_bytes: int,
                   limit: int = 0) -> list:
        """Entries ``entry_ids`` (ascending) of one ledger, each its bytes or None where
        this bookie has none, in order, as far as ``max_bytes`` takes them (the first one
        always): a prefix of the list, the rest left for ``get_entry``.

        The read queue's runs (RQ3). A striped ledger's bookie is asked for every few ids
        (at 3/2/2 every third entry, issue 41), and the ids it holds between them lie
        between those entries in the log: one index iteration over their span and one
        pread where they lie together (RR1) serve them, not a lookup and a pread each.
        With a ``limit``, an entry larger than it is ``Oversize(size)`` (``get_entry``)."""
        return self._gather(ledger_id, entry_ids, Bound(max_bytes), False, True, limit)

    def _gather(self, ledger_id: int, entry_ids, bound: Bound, framed: bool,
                gaps: bool, limit: int = 0) -> list:
        """``get_batch`` (``gaps`` False: stop before the first id not stored) and
        ``get_listed`` (``gaps``: an id not stored is None, and the rest go on)."""
        located = self.locations.locate_range(ledger_id, entry_ids[0], entry_ids[-1])
        pieces: list = []
        run: list[tuple[int, int]] = []  # (entryId, location), joined by RR1
        for entry_id in entry_ids:
            data = self.cache.get(ledger_id, entry_id)
            location = located.get(entry_id) if data is None else None
            if run and (location is None or not joins(run[0][1], run[-1][1], location)):
                if not self._take_run(ledger_id, run, bound, framed, gaps, pieces, limit):
                    return pieces
                run = []
            if location is not None:
                run.append((entry_id, location))
                continue
            if data is None:
                data = self.get_entry(ledger_id, entry_id, limit)
            elif limit and len(data) > limit:
                data = Oversize(len(data))
            if not _take(pieces, data, bound, framed, gaps):
                return pieces
        if run:
            self._take_run(ledger_id, run, bound, framed, gaps, pieces, limit)
        return pieces

    def _take_run(self, ledger_id: int, run: list[tuple[int, int]], bound: Bound,
                  framed: bool, gaps: bool, pieces: list, limit: int = 0) -> bool:
        """Appends the run's pieces; False once the bound or a missing entry (without
        ``gaps``) stopped it."""
        mark = bound.mark()
        try:
            pieces.extend(self.entry_logger.read_run(
                run[0][1] >> 32, ledger_id, [(e, location & 0xFFFFFFFF) for e, location in run],
                bound, framed, limit))
            return not bound.full
        except IOFailure:
            bound.reset(mark)
        return all(_take(pieces, self.get_entry(ledger_id, entry_id, limit), bound, framed,
                          gaps) for entry_id, _ in run)

    def _reread_moved(self, ledger_id: int, entry_id: int, location: int,
                      error: IOFailure, limit: int = 0):
        """R4: a read that raced compaction (or GC) holds a location whose log was deleted
        after the index moved on. Ask the index once more; only a new location is retried,
        so a real read error stays EIO (R2)."""
        moved = self.locations.get(ledger_id, entry_id)
        if moved is None and self.ledgers.is_deleted(ledger_id):
            return None  # deleted meanwhile: the node answers NoLedger/NoEntry
        if moved is None or moved == location:
            raise error
        return self.entry_logger.read_entry(moved, ledger_id, entry_id, limit)

    def indexed_entry_ids(self, ledger_id: int) -> list[int]:
        return [entry_id for entry_id, _ in self.locations.entries(ledger_id)]

    def last_entry_id(self, ledger_id: int) -> int | None:
        cached = self.cache.last_entry_id(ledger_id)
        stored = self.locations.last_entry_id(ledger_id)
        candidates = [x for x in (cached, stored) if x is not None]
        return max(candidates) if candidates else None

    def close(self) -> None:
        """Finalize the active entry log and close the indexes (after a final flush)."""
        errors = []
        for closer in (self.entry_logger.close, self._close_indexes):
            try:
                closer()
            except Exception as exc:  # close everything, then report the first failure
                errors.append(exc)
        if errors:
            raise IOFailure(f"closing storage: {errors[0]}") from errors[0]

    def _close_indexes(self) -> None:
        for index in (self.locations, self.ledgers):
            if index is not None:
                index.close()

    def ledger_usage(self, ledger_id: int) -> tuple[int, int] | None:
        """(entries, bytes) stored for a ledger, from its counters (bookie/ledger_usage.py);
        None while they are not known: ``recount_usage`` on the checkpoint thread first."""
        return self.usage.usage(ledger_id)

    def recount_usage(self, ledger_id: int) -> tuple[int, int]:
        """Walk the ledger's indexed entries once to know its counters again (U2). On the
        checkpoint thread, between checkpoints: the cache is counted at the next flush."""
        return self.usage.recount(ledger_id, self._indexed_sizes)

    def _indexed_sizes(self, ledger_id: int) -> tuple[int, int]:
        count = size = 0
        for entry_id, location in self.locations.entries(ledger_id):
            try:
                data = self.entry_logger.read_entry(location, ledger_id, entry_id)
            except IOFailure as error:
                data = self._reread_moved(ledger_id, entry_id, location, error)
            count += 1
            size += len(data or b"")
        return count, size


def _take(pieces: list, data: bytes | None, bound: Bound, framed: bool, gaps: bool) -> bool:
    """One entry read on its own into a gather's pieces; False where the gather stops: at
    the byte bound, or at an id not stored unless ``gaps`` (then it is None)."""
    if data is None and gaps:
        pieces.append(None)
        return True
    if data.__class__ is Oversize:  # RR4: not held, so not counted
        pieces.append(data)
        return True
    if data is None or not bound.take(len(data)):
        return False
    pieces.append(piece(data, framed))
    return True
