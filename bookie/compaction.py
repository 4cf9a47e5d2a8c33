"""Compaction: a rolled entry log's live entries move to a new log; then the old one goes.

BookKeeper's EntryLogCompactor and TransactionalEntryLogCompactor, in the order of
docs/formats.md §5.8. A log whose live fraction fell under the minor or major threshold (gc.py
chooses) is scanned; every entry the index still locates in it is copied to a new
``<hex>.log.compacting``, which is finalized and renamed into place; the index is switched;
the old log is deleted. One ``LogCompaction`` advances in bounded steps on the checkpoint
thread, so checkpoints run between steps (docs/design.md §3.4: never interleaved with one).

Crash story of one log; each step is durable before the next starts:
    1. allocate the new id: lastId.tmp, fsync, rename, fsync dir (log_ids.py, L1)
       ! crash: lastId names an id no file uses; nothing else changed
    2. create <new>.log.compacting, fsync the dir; append every entry the index locates in
       the old log (CP1), in file order
       ! crash: a partial .log.compacting, deleted at start (EntryLogger.open); the index
         and the old log are untouched, so nothing is lost
    3. finalize it: trailer, fsync, header patch, fsync (E1)
       ! crash: as 2
    4. rename <new>.log.compacting -> <new>.log
    5. fsync the dir (docs/design.md §1.6)
       ! crash between 4 and 6: after power loss the dir holds either name (A4); a
         .compacting is as 2. A <new>.log is a whole log of copies no location points at,
         beside the old log the index still uses: nothing is lost, the old log (its live
         fraction unchanged) is compacted again by a later run, and the copies go when
         their ledgers are deleted - the cost BookKeeper's EntryLogCompactor has after a
         crash at the same point
    6. switch the index in batches of SWITCH_BATCH keys, each one RocksDB batch with
       sync=True; a key moves only if it still holds the old location (CP2)
       ! crash during 6: a batch is atomic (V3): moved keys read from the new log, the rest
         from the old one, both logs whole; a later run compacts the old log again and
         moves the rest
    7. delete the old log (unlink, fsync the dir)
       ! crash between 6 and 7: the old log remains with no location pointing into it; a
         later run copies nothing from it and deletes it
    No step leaves a location pointing at a missing log: the only location writes are in 6,
    into a log renamed and dir-fsynced in 4-5, and the only deletion (7) follows 6.

Invariants:
    CP1. An entry is copied only if the index holds exactly its location in the old log:
        orphans of a checkpoint that crashed before its index batch (docs/design.md §3.4 3!),
        entries superseded by a later re-add, and entries of deleted ledgers whose locations
        are gone (range-deleted by a checkpoint or GC) are dropped, not copied. A deleted
        ledger whose locations are still there is copied like a live one, so no location is
        ever left pointing into a deleted log; the range delete removes them later.
    CP2. Compare-and-set: right before each synced batch of step 6, on the checkpoint thread
        (the only writer of locations), each key is re-read and moved only if it still holds
        the old location, so a newer location written by a checkpoint between two steps is
        never overwritten, nor is a range delete undone.
    CP3. Readers are never failed by the move: a read holding an old location either reads
        through a handle the unlink does not close (entry_logger G3) or retries through the
        index (storage R4).
    CP4. The throttle is spent as ``compaction_throttle`` says: "bytes", bytes read and
        bytes written both count against ``compaction_rate_bytes``; "entries", each entry
        copied counts one against ``compaction_rate_entries`` (BookKeeper's
        isThrottleByBytes=false), entries scanned and dropped count nothing. A step stops
        when the budget is spent and the caller waits it off the checkpoint thread.

Thread-safety: a LogCompaction belongs to the checkpoint thread; ``abort`` may run on the
closing thread once the checkpoint thread has been joined.
"""

from __future__ import annotations

import enum
import logging
import time
from typing import TYPE_CHECKING, Callable

from bookie.errors import CorruptRecord, IOFailure
from entrylog.format import SIZE
from entrylog.reader import EntryLogReader

if TYPE_CHECKING:
    from bookie.storage import LedgerStorage
    from entrylog.writer import BufferedLogChannel

log = logging.getLogger("bookie.compaction")

#: Keys per synced index batch in step 6: bounds one batch's memory and a step's length.
SWITCH_BATCH = 10_000
#: Unused throttle credit kept for later, so an idle spell does not allow a long burst.
BURST_S = 0.05
#: A throttle debt below this is not worth a sleep; the step just goes on.
MIN_WAIT_S = 0.002


class RateLimiter:
    """Compaction's throttle (CP4), as a debt clock: each unit moved adds 1 / rate seconds
    of debt.

    ``per_entry`` False: the units are bytes, read plus written (compaction_rate_bytes);
    True: entries re-added, one each whatever its size, reads free (compaction_rate_entries,
    BookKeeper's isThrottleByBytes=false: its Throttler takes one permit per entry added).
    ``rate`` 0 never throttles. The clock is injectable for tests.
    """

    def __init__(self, rate: int, clock: Callable[[], float] = time.monotonic,
                 per_entry: bool = False) -> None:
        assert rate >= 0
        self.rate = rate
        self.per_entry = per_entry
        self.clock = clock
        self._free_at = clock()

    @classmethod
    def of(cls, config, clock: Callable[[], float] = time.monotonic) -> "RateLimiter":
        """The throttle ``compaction_throttle`` chooses (BookieConfig)."""
        if config.compaction_throttle == "entries":
            return cls(config.compaction_rate_entries, clock, per_entry=True)
        return cls(config.compaction_rate_bytes, clock)

    def consume(self, units: int) -> None:
        if self.rate:
            now = self.clock()
            self._free_at = max(self._free_at, now - BURST_S) + units / self.rate

    def read(self, size: int) -> None:
        """``size`` bytes of the old log scanned."""
        if not self.per_entry:
            self.consume(size)

    def copied(self, size: int) -> None:
        """One entry of ``size`` bytes re-added to the new log."""
        self.consume(1 if self.per_entry else size)

    def delay_s(self) -> float:
        """Seconds to wait before more may move (0 when within budget)."""
        if not self.rate:
            return 0.0
        return max(0.0, self._free_at - self.clock())


class Phase(enum.Enum):
    COPY = "copy"          # steps 1-2
    INSTALL = "install"    # steps 3-5
    SWITCH = "switch"      # step 6
    DELETE = "delete"      # step 7
    DONE = "done"
    ABORTED = "aborted"


class LogCompaction:
    """One rolled log's compaction (the crash story above), advanced by ``step``."""

    def __init__(self, storage: "LedgerStorage", log_id: int, limiter: RateLimiter,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.storage = storage
        self.log_id = log_id
        self.limiter = limiter
        self.clock = clock
        self.phase = Phase.COPY
        self.old_size = 0
        self.new_log_id: int | None = None
        self.new_size = 0
        self.entries_copied = 0
        self.entries_moved = 0
        self.bytes_read = 0
        self.bytes_written = 0
        self.problem: str | None = None
        self.corrupt = False   # the old log is corrupt: the caller quarantines it
        self._reader: EntryLogReader | None = None
        self._scan = None
        self._channel: BufferedLogChannel | None = None
        self._moves: list[tuple[int, int, int, int]] = []   # ledger, entry, old, new
        self._ledgers_seen: set[int] = set()   # for the index check before the delete (G7)
        self._switched = 0

    @property
    def finished(self) -> bool:
        return self.phase in (Phase.DONE, Phase.ABORTED)

    @property
    def reclaimed_bytes(self) -> int:
        return self.old_size - self.new_size if self.phase is Phase.DONE else 0

    def step(self, deadline: float) -> None:
        """Work until ``deadline``, the throttle or the end; I/O errors of the index switch
        and of the deletion propagate (the node goes read-only), the rest abort this log."""
        try:
            while not self.finished:  # at least one action per step, unless throttled
                if self.limiter.delay_s() >= MIN_WAIT_S:
                    return
                if self.phase is Phase.COPY:
                    self._copy(deadline)
                elif self.phase is Phase.INSTALL:
                    self._install()
                elif self.phase is Phase.SWITCH:
                    self._switch()
                else:
                    self._delete_old()
                if self.clock() >= deadline:
                    return
        except CorruptRecord as exc:
            self.corrupt = True
            self._abort(f"corrupt: {exc}")
        except IOFailure as exc:
            if self.phase not in (Phase.COPY, Phase.INSTALL):
                raise
            self._abort(str(exc))

    # -- steps 1-2 ----------------------------------------------------------------------

    def _open(self) -> None:
        storage = self.storage
        self._reader = EntryLogReader(storage.disk, storage.entry_logger.log_path(self.log_id),
                                      self.log_id, storage.config.max_entry_size)
        self.old_size = self._reader.file_size()
        self._scan = self._reader.scan(payload=True)

    def _copy(self, deadline: float) -> None:
        if self._scan is None:
            self._open()
        first = True  # at least one record per call; then until the deadline or the throttle
        while first or (self.clock() < deadline and self.limiter.delay_s() < MIN_WAIT_S):
            first = False
            found = next(self._scan, None)
            if found is None:
                self._end_of_scan()
                return
            self._take(found)

    def _take(self, found) -> None:
        record_bytes = found.size + SIZE.size
        self.bytes_read += record_bytes
        self.limiter.read(record_bytes)
        ledger_id, entry_id = found.ledger_id, found.entry_id
        self._ledgers_seen.add(ledger_id)
        if self.storage.locations.get(ledger_id, entry_id) != found.location:  # CP1
            return
        if self._channel is None:
            self._channel = self.storage.entry_logger.create_compaction_log()  # 1-2
            self.new_log_id = self._channel.log_id
        new_location = self._channel.add_entry(ledger_id, found.entry)
        self._moves.append((ledger_id, entry_id, found.location, new_location))
        self.entries_copied += 1
        self.bytes_written += record_bytes
        self.limiter.copied(record_bytes)

    def _end_of_scan(self) -> None:
        if self._reader.corrupt:
            # Entries after the damage cannot be found by a scan: copying the rest would
            # leave the index pointing into a log about to be deleted.
            raise CorruptRecord(self._reader.path, self._reader.end.offset,
                                self._reader.end.reason)
        self.phase = Phase.INSTALL

    # -- steps 3-5 ----------------------------------------------------------------------

    def _install(self) -> None:
        channel = self._channel
        if channel is None:
            self.phase = Phase.DELETE  # nothing live: no new log, no index change
            return
        channel.finalize()  # 3: the channel has entries, so it is kept
        self.new_size = channel.position
        self.storage.entry_logger.install_compaction_log(channel)  # 4-5
        self._channel = None
        self.phase = Phase.SWITCH

    # -- step 6 -------------------------------------------------------------------------

    def _switch(self) -> None:
        chunk = self._moves[self._switched:self._switched + SWITCH_BATCH]
        locations = self.storage.locations
        batch = [(ledger_id, entry_id, new) for ledger_id, entry_id, old, new in chunk
                 if locations.get(ledger_id, entry_id) == old]  # CP2
        if batch:
            locations.add_batch(batch, sync=True)
        self.entries_moved += len(batch)
        self._switched += len(chunk)
        if self._switched >= len(self._moves):
            self._moves = []
            self.phase = Phase.DELETE

    # -- step 7 -------------------------------------------------------------------------

    def _delete_old(self) -> None:
        self._close_reader()
        still = self.storage.locations.find_in_log(sorted(self._ledgers_seen), self.log_id)
        if still is not None:  # GC's G7: never delete a log the index still points into
            self._abort(f"the index still points into it (entry {still[0]}/{still[1]}) "
                        f"after the switch")
            return
        self.storage.entry_logger.delete_log(self.log_id)
        self.phase = Phase.DONE
        log.info("compacted entry log %x into %s: %d of %d bytes kept, %d entries moved",
                 self.log_id, f"{self.new_log_id:x}" if self.new_log_id is not None else
                 "nothing", self.new_size, self.old_size, self.entries_moved)

    # -- failure ------------------------------------------------------------------------

    def abort(self, reason: str) -> None:
        """Give up before step 4: drop the .compacting file; the old log stays in use."""
        if not self.finished:
            self._abort(reason)

    def _abort(self, reason: str) -> None:
        self.problem = f"compaction of entry log {self.log_id:x}: {reason}"
        log.error("%s; the log is left as it is", self.problem)
        self._close_reader()
        channel, self._channel = self._channel, None
        if channel is not None:
            channel.close()
            self._discard(channel.path)
        self._moves = []
        self.phase = Phase.ABORTED

    def _discard(self, path: str) -> None:
        # Best effort: a leftover .log.compacting is deleted at the next start anyway.
        disk = self.storage.disk
        try:
            if disk.exists(path):
                disk.unlink(path)
                disk.fsync_dir(self.storage.entry_logger.ledger_dir)
        except OSError as exc:
            log.warning("cannot delete %s now (deleted at the next start): %s", path, exc)

    def _close_reader(self) -> None:
        reader, self._reader = self._reader, None
        self._scan = None
        if reader is not None:
            reader.close()
