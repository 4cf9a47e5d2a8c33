"""Garbage collection: deleted ledgers give their space back (GarbageCollectorThread).

One run, in phases, each advanced in bounded steps on the checkpoint thread so that it never
interleaves with a checkpoint (docs/design.md §3.4) and never holds checkpoints off for long:

    1. index   range-delete the locations of tombstoned ledgers that still have some (a
               crash lost the pending delete of storage R3), then compact that key range of
               RocksDB: range tombstones cost every later read until compacted away
    2. logs    per rolled log, bytes per ledger from its ledgersMap, or a scan where the
               trailer is missing or invalid (G2); a log with no live ledger is deleted; a
               corrupt one is quarantined (G5)
    3. compact logs whose live fraction is under the minor or major threshold go through
               bookie/compaction.py (its crash story), least live first (G6)

Deleted ledgers keep their tombstone in ``ledgers`` (G4): the locations go, the state stays.

Invariants:
    G1. Only a ledger with a tombstone (a synced delete) whose locations are gone (phase 1,
        synced) is dead, so no location ever points into a log GC deleted. A ledger the
        index has no state for is treated as live: GC never deletes bytes it does not
        understand. With several ledger dirs, a ledger that lives in another dir
        (``lives_elsewhere``: its home, bookie/storage_routes.py PL1) is dead here too: its
        bytes in this dir are a crash's leftovers (appended by a checkpoint that died before
        its locations batch, then replayed into its home), which no location of this dir
        names; G7 still checks that before a log goes.
    G2. A log's ledgers come from its ledgersMap, or from a full scan where the trailer is
        missing or invalid: a missing or zero trailer means "scan", never "empty" (§1.9). A
        scan that stops at corruption has not seen the whole log, so its totals decide
        nothing.
    G3. The active log is never collected, nor is a log rolled after the run chose its
        candidates. A rolled log never changes, so its ledger totals are read once and kept.
    G4. Tombstones stay. This bookie has no metadata store to ask (BookKeeper's GC asks
        ZooKeeper), so the tombstone is its only memory of the delete: replay of the journals
        still on disk (below lastMark, journal_backups_count of them, and after it) and a late
        add from a zombie writer must keep finding it (docs/design.md §1.3). It costs tens of
        bytes per deleted ledger.
    G5. A corrupt log is renamed ``<hex>.log.quarantined`` and reported, and GC goes on with
        the next log. Point reads of locations still in the index keep working (entry logger
        G4); nothing is deleted on the strength of a log GC cannot read.
    G7. Before any entry log is deleted (a dead log here, a compacted one in
        compaction.py), the index is asked whether a location of the log's ledgers still
        points into it; if one does, the log stays and the run reports it. With E5 of
        entrylog/reader.py (a scan cut by a damaged size field is corrupt, not a torn
        tail), no partial scan deletes live entries again (docs/drills.md "Track record").
    G8. A revived ledger (storage R6, on the checkpoint thread like every GC step) leaves
        the dead set at once (``forget_dead``), and phase 1 skips it even if listed before:
        its new locations are never range-deleted, and its new bytes count as live. Bytes of
        its old copy left in rolled logs count as live too until it is deleted again.
    G6. Compaction is suspended while its ledger dir is over the warn threshold (each dir's
        own: bookie/gc_dirs.py; another dir short of room does not stop it), or by the
        operator, unless forced: it needs room for the copy before the old log goes. With
        gc_force_when_full (BookKeeper's isForceGCAllowWhenNoSpace) a dir over the warn
        threshold forces a major compaction at every run instead (the operator's suspend
        still holds): the copies may fill the disk first, the operator's chosen risk.

Thread-safety: ``step`` on the checkpoint thread (the node submits each step there);
``begin`` by the one driver of runs (the node's loop, under its GC lock) while no step runs;
``status_json`` and ``suspended`` from the loop (plain reads and writes of attributes);
``abort`` on the closing thread after the checkpoint thread is joined. ``run`` drives a whole
run on the calling thread, for offline use.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Callable

from bookie.compaction import MIN_WAIT_S, LogCompaction, RateLimiter
from bookie.errors import CorruptRecord, IOFailure
from bookie.gc_run import GcResult, GcRun, LogMeta, RunPhase, count_run
from bookie.stats import GcCounters
from entrylog.reader import EntryLogReader
from ledgerindex import keys
from ledgerindex.locations import END_ENTRY_ID

if TYPE_CHECKING:
    from bookie.storage import LedgerStorage

log = logging.getLogger("bookie.gc")

#: How long one step may hold the checkpoint thread before checkpoints get their turn.
STEP_BUDGET_S = 0.05
#: Tombstones settled per phase-1 chunk: one range-delete batch and one range compaction.
INDEX_CHUNK = 256
MINOR, MAJOR = "minor", "major"


class GarbageCollector:
    """See the module docstring for phases, invariants and thread-safety."""

    def __init__(self, storage: "LedgerStorage", counters: GcCounters | None = None,
                 clock: Callable[[], float] = time.monotonic, *, counted: bool = True,
                 lives_elsewhere: Callable[[int], bool] | None = None) -> None:
        self.storage = storage
        self._elsewhere = lives_elsewhere or (lambda _ledger_id: False)  # G1
        self.config = storage.config
        #: None (``counted=False``): bookie/gc_dirs.py counts the run of every dir as one.
        self.counters = (counters if counters is not None else GcCounters()) if counted else None
        self.clock = clock
        self.suspended = False
        self.running: GcRun | None = None
        self.last_result: GcResult | None = None
        self.limiter = RateLimiter.of(self.config, clock)  # CP4
        self._meta: dict[int, LogMeta] = {}
        #: Tombstoned ledgers whose locations phase 1 removed and compacted: the dead (G1).
        self._index_settled: set[int] = set()
        self._last_compaction = {MINOR: clock(), MAJOR: clock()}
        #: kind -> (runs that compacted, wall-clock ms the last ended; 0 never), for the
        #: admin API's gc_details (BookKeeper's GarbageCollectionStatus counters).
        self.compactions = {MINOR: (0, 0), MAJOR: (0, 0)}

    # -- driving ------------------------------------------------------------------------

    def begin(self, force: str | None = None, disk_warn: bool = False) -> GcRun:
        """Start a run; ``force`` "minor" or "major" compacts now whatever G6 says."""
        assert self.running is None, "one GC run at a time"
        assert force in (None, MINOR, MAJOR), force
        kind, skipped = self._compaction_due(force, disk_warn)
        threshold = getattr(self.config, f"{kind}_compaction_threshold") if kind else 0.0
        run = GcRun(kind, threshold, force is not None, self.clock())
        run.result.compaction_skipped = skipped
        self.running = run
        return run

    def step(self, run: GcRun, budget_s: float = STEP_BUDGET_S) -> float | None:
        """Advance ``run`` for about ``budget_s``; None when it has finished, else how long
        to wait (the throttle, compaction.py's CP4) before the next step. An error ends the
        run (reported in its result) and propagates: an I/O error here is one of the index
        or the ledger dir.
        """
        try:
            return self._advance(run, budget_s)
        except BaseException as exc:
            if run.current is not None:
                run.current.abort(f"the run failed: {exc}")
                run.current = None
            run.result.problems.append(f"gc run failed: {exc}")
            run.phase = RunPhase.DONE
            self._finish(run)
            raise

    def _advance(self, run: GcRun, budget_s: float) -> float | None:
        deadline = self.clock() + budget_s
        while run.phase is not RunPhase.DONE:  # at least one action per step
            if run.phase is RunPhase.INDEX:
                self._clean_index(run)
            elif run.phase is RunPhase.LOGS:
                self._examine_next(run)
            else:
                self._compact_some(run, deadline)
            wait = self.limiter.delay_s()
            if wait >= MIN_WAIT_S:
                return wait
            if run.phase is not RunPhase.DONE and self.clock() >= deadline:
                return 0.0
        self._finish(run)
        return None

    def run(self, force: str | None = None, disk_warn: bool = False) -> GcResult:
        """A whole run on the calling thread, throttle sleeps included (offline tools)."""
        run = self.begin(force, disk_warn)
        while (wait := self.step(run)) is not None:
            if wait > 0:
                time.sleep(wait)
        return run.result

    def abort(self) -> None:
        """Give up the run in progress (shutdown); its compaction log is dropped."""
        run, self.running = self.running, None
        if run is not None and run.current is not None:
            run.current.abort("the bookie is stopping")

    def _compaction_due(self, force: str | None, disk_warn: bool) -> tuple[str | None,
                                                                          str | None]:
        if force is not None:
            return force, None
        if self.suspended:
            return None, "suspended by the operator"
        if disk_warn and self.config.gc_force_when_full:
            return MAJOR, None  # G6: BookKeeper's forced GC while a disk is (almost) full
        if disk_warn:
            return None, "a data dir is over the disk usage warn threshold"  # G6
        now = self.clock()
        for kind in (MAJOR, MINOR):
            interval_ms = getattr(self.config, f"{kind}_compaction_interval_ms")
            threshold = getattr(self.config, f"{kind}_compaction_threshold")
            if threshold > 0 and interval_ms > 0 and \
                    now - self._last_compaction[kind] >= interval_ms / 1000.0:
                return kind, None
        return None, None

    def _finish(self, run: GcRun) -> None:
        """Close the run: compaction intervals, totals, the last result."""
        result = run.result
        if result.compaction is not None:
            now = self.clock()
            self._last_compaction[result.compaction] = now
            if result.compaction == MAJOR:
                self._last_compaction[MINOR] = now  # a major run covers the minor one
        result.seconds = self.clock() - run.started
        result.finished_at = time.time()
        if result.compaction is not None:
            count = self.compactions[result.compaction][0] + 1
            self.compactions[result.compaction] = (count, int(result.finished_at * 1000))
        self._count(result)
        self.last_result = result
        self.running = None
        if result.logs_deleted or result.logs_compacted or result.problems:
            log.info("gc: %d logs deleted (%d bytes), %d compacted (%d bytes), %d problems",
                     len(result.logs_deleted), result.bytes_reclaimed_deletion,
                     len(result.logs_compacted), result.bytes_reclaimed_compaction,
                     len(result.problems))

    def _count(self, result: GcResult) -> None:
        if self.counters is not None:
            count_run(self.counters, result)

    def forget_dead(self, ledger_id: int) -> None:
        """G8: on the checkpoint thread, after storage revived the ledger."""
        self._index_settled.discard(ledger_id)

    # -- phase 1: the index -------------------------------------------------------------

    def _clean_index(self, run: GcRun) -> None:
        """One chunk of phase 1 per call, so a long list of new tombstones yields to
        checkpoints between chunks (RocksDB's compaction may take a while)."""
        storage = self.storage
        if run.fresh is None:
            run.fresh = [ledger_id for ledger_id in storage.ledgers.deleted_ids()
                         if ledger_id not in self._index_settled]
        chunk, run.fresh = run.fresh[:INDEX_CHUNK], run.fresh[INDEX_CHUNK:]
        # G8: a ledger revived since the run listed it is live again: hands off.
        chunk = [ledger_id for ledger_id in chunk if storage.ledgers.is_deleted(ledger_id)]
        if chunk:
            locations = storage.locations
            leftover = [ledger_id for ledger_id in chunk
                        if locations.last_entry_id(ledger_id) is not None]
            if leftover:
                locations.delete_ledgers(leftover, sync=True)
            locations.kv.compact_range(keys.encode_location_key(chunk[0], 0),
                                       keys.encode_location_key(chunk[-1], END_ENTRY_ID))
            self._index_settled.update(chunk)  # G1: only now are they dead
            run.result.ledgers_index_cleaned += len(leftover)
            run.result.ledgers_settled += len(chunk)
        if run.fresh:
            return
        logger = storage.entry_logger
        active = logger.current_log_id
        # G3; kept in descending order so that pop() takes the oldest log first.
        run.to_examine = [i for i in reversed(logger.log_ids()) if i != active]
        rolled = set(run.to_examine)
        self._meta = {i: m for i, m in self._meta.items() if i in rolled}
        run.phase = RunPhase.LOGS

    # -- phase 2: the logs --------------------------------------------------------------

    def _examine_next(self, run: GcRun) -> None:
        if not run.to_examine:
            self._choose_candidates(run)
            return
        log_id = run.to_examine.pop()
        result = run.result
        result.logs_scanned += 1
        meta = self._meta.get(log_id) or self._read_meta(run, log_id)
        if meta is None:
            return
        dead = self._index_settled
        live = sum(size for ledger_id, size in meta.totals.items()
                   if ledger_id not in dead and not self._elsewhere(ledger_id))  # G1
        if live:
            run.usage[log_id] = (live, sum(meta.totals.values()))
            return
        still = self.storage.locations.find_in_log(meta.totals, log_id)  # G7
        if still is not None:
            self._refuse_delete(run, log_id, still)
            return
        self.storage.entry_logger.delete_log(log_id)
        self._meta.pop(log_id, None)
        result.logs_deleted.append(log_id)
        result.bytes_reclaimed_deletion += meta.size

    def _read_meta(self, run: GcRun, log_id: int) -> LogMeta | None:
        storage = self.storage
        path = storage.entry_logger.log_path(log_id)
        try:
            with EntryLogReader(storage.disk, path, log_id,
                                storage.config.max_entry_size) as reader:
                totals, _source = reader.ledger_totals()  # G2
                if reader.corrupt:
                    raise CorruptRecord(path, reader.end.offset, reader.end.reason)
                size = reader.file_size()
        except CorruptRecord as exc:
            self._quarantine(run, log_id, str(exc))
            return None
        except IOFailure as exc:  # unreadable now, maybe not later: report, leave it
            run.result.problems.append(f"{path}: {exc}")
            log.error("gc: cannot read %s, leaving it: %s", path, exc)
            return None
        meta = LogMeta(totals, size)
        self._meta[log_id] = meta
        return meta

    def _refuse_delete(self, run: GcRun, log_id: int, still: tuple[int, int]) -> None:
        problem = (f"entry log {log_id:x} was not deleted: the index still points into it "
                   f"(entry {still[0]}/{still[1]})")
        run.result.problems.append(problem)
        log.error("gc: %s", problem)

    def _quarantine(self, run: GcRun, log_id: int, reason: str) -> None:
        """G5: rename, report, go on. A failed rename is reported too; GC still goes on."""
        self._meta.pop(log_id, None)
        try:
            target = self.storage.entry_logger.quarantine_log(log_id)
        except IOFailure as exc:
            run.result.problems.append(f"entry log {log_id:x} is corrupt ({reason}) and "
                                       f"could not be quarantined: {exc}")
            return
        run.result.quarantined.append(target)
        run.result.problems.append(f"entry log {log_id:x} is corrupt, quarantined as "
                                   f"{target}: {reason}")
        log.error("gc: entry log %x is corrupt, quarantined as %s: %s", log_id, target, reason)

    # -- phase 3: compaction ------------------------------------------------------------

    def _choose_candidates(self, run: GcRun) -> None:
        result = run.result
        result.logs_live = len(run.usage)
        result.log_bytes_live = sum(live for live, _total in run.usage.values())
        result.log_bytes_total = sum(total for _live, total in run.usage.values())
        if run.result.compaction is not None:
            under = [(live / total, log_id) for log_id, (live, total) in run.usage.items()
                     if total and live / total < run.threshold]
            run.candidates = [log_id for _ratio, log_id in sorted(under)]  # least live first
        run.phase = RunPhase.COMPACT

    def _compact_some(self, run: GcRun, deadline: float) -> None:
        current = run.current
        if current is None:
            if not run.candidates or (self.suspended and not run.forced):
                run.phase = RunPhase.DONE  # G6: a suspend stops an unforced run here
                return
            current = run.current = LogCompaction(self.storage, run.candidates.pop(0),
                                                  self.limiter, self.clock)
        current.step(deadline)
        if current.finished:
            run.current = None
            self._account(run, current)

    def _account(self, run: GcRun, done: LogCompaction) -> None:
        result = run.result
        result.entries_moved += done.entries_moved
        result.bytes_written_compaction += done.bytes_written
        self._meta.pop(done.log_id, None)
        if done.corrupt:
            self._quarantine(run, done.log_id, done.problem or "corrupt")
        elif done.problem is not None:
            result.problems.append(done.problem)
        else:
            result.logs_compacted.append(done.log_id)
            result.bytes_reclaimed_compaction += done.reclaimed_bytes

    # -- status -------------------------------------------------------------------------

    def status_json(self) -> dict:
        run = self.running
        last = self.last_result
        return {"running": run is not None, "suspended": self.suspended,
                "current": run.progress_json() if run is not None else None,
                "lastRun": last.to_json() if last is not None else None,
                "totals": self.counters.to_json() if self.counters is not None else None,
                "settings": {
                    "intervalMs": self.config.gc_interval_ms,
                    "minorCompactionThreshold": self.config.minor_compaction_threshold,
                    "minorCompactionIntervalMs": self.config.minor_compaction_interval_ms,
                    "majorCompactionThreshold": self.config.major_compaction_threshold,
                    "majorCompactionIntervalMs": self.config.major_compaction_interval_ms,
                    "compactionThrottle": self.config.compaction_throttle,
                    "compactionRateBytes": self.config.compaction_rate_bytes,
                    "compactionRateEntries": self.config.compaction_rate_entries}}
