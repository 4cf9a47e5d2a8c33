"""Replay on start: journals from lastMark back into storage (BookieImpl.replay).

Steps (docs/design.md §3.5, docs/formats.md §8.3):
    1. read lastMark (absent: (0, 0)) and list journal ids >= its id; if the marked journal
       is missing, refuse to start ("recovery log <id> is missing")
    2. scan each file in id order, the marked one from the mark's offset, and apply every
       record (decision table below); skip records of deleted ledgers
    3. every scan ends in a ScanEnd; a torn tail's bytes are reported and copied aside to
       ``<file>.torn-<offset>`` (§1.4); a CorruptRecord stops the start unless
       ``skip_corrupt_journal_records`` is set, and then it is reported too
    4. return the end mark; the node checkpoints to it before opening a new journal

Record decision table (docs/formats.md §8.4):
    record          ledger deleted   ledger unknown              ledger known
    LEDGER_KEY      skip             create with the key         same key / zero key: ok;
                                                                 other key: refuse to start
    FENCE           skip             skip, warning               set fenced
    EXPLICIT_LAC    skip             skip, warning               store the body
    DATA            skip             create with a zero key      digest check (CRC types,
                                     (replaced by the next key)  verify_digest; a type not
                                                                 known yet is learned from
                                                                 an entry that verifies); then
                                                                 absent: add; identical or
                                                                 the same entry framed again
                                                                 (W6): ok; different: keep,
                                                                 report
    other meta      skip, warning

Invariant:
    RP1. Replay never drops bytes silently: every byte not applied is in the ReplayReport
         with file, offset, count and reason, and torn tails are saved beside the journal.
    RP2. An existing entry is never overwritten by different bytes; another payload is
         reported as a conflict (the add path refuses it), the same entry framed again
         (W6, a BookKeeper journal's recovery write-back) is the stored one.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from typing import TYPE_CHECKING

from bookie.entry import (ZERO_KEY, DigestType, entry_digest_ok, lac_body_advances,
                          parse_lac_body)
from bookie import write_rules
from bookie.errors import IOFailure, ScanEnd
from bookie.replay_report import Dropped, ReplayReport
from journal.format import LogMark, RecordKind, journal_file_name
from journal.reader import JournalReader
from ledgerindex.keys import LedgerState

if TYPE_CHECKING:
    from bookie.config import BookieConfig
    from bookie.disk import Disk
    from bookie.storage import LedgerStorage

log = logging.getLogger("bookie.recovery")


class MissingJournal(IOFailure):
    """The journal lastMark points into does not exist: replay cannot know what is lost."""


class Replayer:
    """Applies journal records to storage. Runs on one thread before the bookie is ready."""

    def __init__(self, disk: "Disk", config: "BookieConfig", storage: "LedgerStorage") -> None:
        self.disk = disk
        self.config = config
        self.storage = storage
        self.ledgers = storage.ledgers
        self.report = ReplayReport()
        self._indexed_last: dict[int, int] = {}

    def run(self, mark: LogMark, journal_ids: list[int], journal_dir: str | None = None
            ) -> LogMark:
        """Replay one journal dir (default: the first) from ``mark``; the mark at the end of
        the data. The report adds up over dirs; its marks are the first dir's."""
        started, journal_dir = time.monotonic(), journal_dir or self.config.journal_dir
        if first := journal_dir == self.config.journal_dir:
            self.report.mark_from = (mark.journal_id, mark.offset)
        end = mark
        for journal_id in select_journals(mark, journal_ids):
            path = os.path.join(journal_dir, journal_file_name(journal_id))
            end = LogMark(journal_id, self._replay_file(path, self._start(path, mark,
                                                                         journal_id)))
        # A mark past its journal's end stays persisted (C1: never moved back); once the
        # replayed records are checkpointed it is true again: nothing of that file is left.
        end = max(end, mark)
        if first:
            self.report.mark_to = (end.journal_id, end.offset)
        self.report.seconds += time.monotonic() - started
        return end

    def _start(self, path: str, mark: LogMark, journal_id: int) -> int:
        """Where replay of ``path`` begins: START_TABLE (``select_journals`` has refused a
        missing marked journal and left out those below the mark).

        A lastMark past the end of its journal was not written by a checkpoint of this file
        as it is (a damaged lastMark, or a truncated journal): the file is replayed whole,
        which is safe since replay is idempotent, rather than skip records silently."""
        place, offset = "above the mark", "within"
        if mark == LogMark(0, 0):
            place = "no lastMark"
        elif journal_id == mark.journal_id:
            place = "marked"
            size = self.disk.file_size(path)
            offset = "within" if mark.offset <= size else "past the end"
        action = start_of(place, offset)
        if action == FROM_MARK:
            return mark.offset
        if action == FROM_ZERO_WARN:
            warning = (f"lastMark offset {mark.offset} points past the end of {path} "
                       f"({size} bytes): replaying the whole file")
            self.report.warnings.append(warning)
            log.warning("%s", warning)
        return 0

    def _replay_file(self, path: str, from_offset: int) -> int:
        self.report.files.append(path)
        started, first = time.monotonic(), None
        skip = self.config.skip_corrupt_journal_records
        # Closed here, not left to the collector: an open handle keeps a journal that
        # retention deletes later taking disk space for the bookie's lifetime, and keeps
        # its file system busy (found by the real-device EIO test: umount said "busy").
        with JournalReader(self.disk, path, max_entry_size=self.config.max_entry_size) as reader:
            for record in reader.scan(from_offset, skip_invalid=skip):
                first = record.offset if first is None else first
                self.report.records += 1
                self.report.bytes += record.size
                self._apply(path, record)
        end: ScanEnd = reader.end
        if end.cut_bytes:
            self._report_cut(path, end)
        elapsed = max(time.monotonic() - started, 1e-9)
        log.info("replayed %s from %d to %d (%.1f MB/s)%s", path, from_offset, end.offset,
                 (end.offset - (first or end.offset)) / elapsed / 1e6,
                 "" if end.clean else f", stopped: {end.reason}")
        return end.offset

    def _report_cut(self, path: str, end: ScanEnd) -> None:
        saved = save_torn_tail(self.disk, path, end)
        self.report.dropped.append(Dropped(path, end.offset, end.cut_bytes, end.reason, saved))
        log.warning("journal %s: cut %d bytes at offset %d (%s); saved as %s", path,
                    end.cut_bytes, end.offset, end.reason, saved)

    # -- the decision table ------------------------------------------------------------

    def _apply(self, path: str, record) -> None:
        kind = record.kind
        state = self.ledgers.get(record.ledger_id)
        if state is not None and not state.exists:
            self.report.skipped += 1  # deleted ledgers stay deleted (§1.3)
            return
        if kind is RecordKind.DATA:
            self._apply_data(path, record, state)
        elif kind is RecordKind.LEDGER_KEY:
            self.report.keys += 1
            self._apply_key(path, record, state)
        elif kind is RecordKind.FENCE:
            self.report.fences += 1
            self._apply_known(record, state, fenced=True)
        elif kind is RecordKind.EXPLICIT_LAC:
            self.report.lacs += 1
            self._apply_lac(record, state)
        else:
            self.report.skipped += 1
            log.warning("journal %s offset %d: skipping unknown meta record, entry id %d",
                        path, record.offset, record.entry_id)

    def _apply_key(self, path: str, record, state: LedgerState | None) -> None:
        key = record.payload
        if state is None or state.master_key in (b"", ZERO_KEY):
            base = state or LedgerState()
            state = dataclasses.replace(base, master_key=key)
            self.ledgers.set(record.ledger_id, state)
        elif key in (b"", ZERO_KEY):
            # BookKeeper's "no key" (a fence by a recovering client that knew no password)
            # never conflicts: the live path let a later key replace it, so the index may
            # already hold that key when replay meets this record (docs/drills.md "Track record").
            pass
        elif state.master_key != key:
            raise IOFailure(
                f"{path} offset {record.offset}: master key of ledger {record.ledger_id} is "
                f"{key.hex()}, the index holds {state.master_key.hex()}; refusing to replay")
        self._apply_digest_type(path, record, state)

    def _apply_digest_type(self, path: str, record, state: LedgerState) -> None:
        """The digest type a master-key record carries (docs/formats.md §3.4) fixes a type not
        known yet, so that the ledger's next entries are digest-checked even when it was new
        since the checkpoint. The live path never changes a known type: another one is
        damage, reported; the index's type stays."""
        digest_type = record.digest_type
        if not digest_type or state.digest_type == digest_type:
            return
        if state.digest_type == 0:
            self.ledgers.set(record.ledger_id,
                             dataclasses.replace(state, digest_type=digest_type))
            return
        self.report.warnings.append(
            f"{path} offset {record.offset}: ledger {record.ledger_id} has digest type "
            f"{state.digest_type}, the master-key record names {digest_type}; kept "
            f"{state.digest_type}")
        log.warning("replay: %s", self.report.warnings[-1])

    def _apply_known(self, record, state: LedgerState | None, **changes) -> None:
        if state is None:
            self.report.skipped += 1
            log.warning("replay: %s for unknown ledger %d skipped", record.kind.name,
                        record.ledger_id)
            return
        self.ledgers.set(record.ledger_id, dataclasses.replace(state, **changes))

    def _apply_lac(self, record, state: LedgerState | None) -> None:
        ledger_id, _lac = parse_lac_body(record.payload)
        if ledger_id != record.ledger_id:
            self.report.skipped += 1
            log.warning("replay: explicit LAC body names ledger %d in a record of ledger %d",
                        ledger_id, record.ledger_id)
            return
        if state is not None and not lac_body_advances(state.explicit_lac, record.payload):
            return  # the LAC never moves back, on replay as live (lac_body_advances)
        self._apply_known(record, state, explicit_lac=bytes(record.payload))

    def _apply_data(self, path: str, record, state: LedgerState | None) -> None:
        ledger_id, entry_id, data = record.ledger_id, record.entry_id, record.payload
        if state is None:
            state = LedgerState(master_key=ZERO_KEY)
            self.ledgers.set(ledger_id, state)
            log.warning("replay: entry %d/%d before any master key; ledger created with a "
                        "zero key", ledger_id, entry_id)
        state = self._learn_digest_type(ledger_id, data, state)
        if not self._digest_ok(data, state):
            self.report.dropped.append(Dropped(path, record.offset, record.size,
                                               "entry digest mismatch (torn write)"))
            return
        existing = self._existing(ledger_id, entry_id)
        if existing is None:
            self.storage.add_entry(ledger_id, entry_id, data)
            self.report.adds += 1
            self._flush_at_budget()
        elif not write_rules.same_entry(existing, data, state.digest_type):  # W6
            self.report.conflicts.append(
                f"{path} offset {record.offset}: entry {ledger_id}/{entry_id} differs from "
                f"the stored copy; kept the stored one")
            log.error("replay: %s", self.report.conflicts[-1])
        else:
            self.report.adds += 1

    def _flush_at_budget(self) -> None:
        """Replay's memory is the write cache's budget, as the live path's is: at half of it
        the replayed entries go to the entry log and the index (checkpoint steps 2-4), but
        lastMark stays where it is, since it may only name the end of what replay has
        applied, and it is written once, by the checkpoint after replay.
        ! crash after such a flush: replay starts again from the same lastMark and finds
          the flushed entries stored (same bytes: idempotent)."""
        cache_bytes = self.storage.cache.total_bytes
        self.report.cache_peak_bytes = max(self.report.cache_peak_bytes, cache_bytes)
        if cache_bytes < self.config.write_cache_max_bytes // 2:
            return
        self.storage.flush()
        self.report.flushes += 1
        self._indexed_last.clear()  # the index just learned entries past what it knew

    def _digest_ok(self, data: bytes, state: LedgerState) -> bool:
        if not self.config.verify_digest:
            return True
        if state.digest_type == 0:
            return True
        digest_type = DigestType(state.digest_type)
        return not digest_type.verifiable or entry_digest_ok(data, digest_type)

    def _learn_digest_type(self, ledger_id: int, data: bytes, state: LedgerState) -> LedgerState:
        """A ledger re-created from its key record has no digest type (docs/formats.md §9.4).
        An entry that verifies as CRC32C or CRC32 fixes it: a MAC or DUMMY entry matches a
        CRC by chance with probability 2^-32, so later torn records of it are caught."""
        if state.digest_type != 0 or not self.config.verify_digest:
            return state
        for candidate in (DigestType.CRC32C, DigestType.CRC32):
            if entry_digest_ok(data, candidate):
                state = dataclasses.replace(state, digest_type=int(candidate))
                self.ledgers.set(ledger_id, state)
                break
        return state

    def _existing(self, ledger_id: int, entry_id: int) -> bytes | None:
        cached = self.storage.get_cached(ledger_id, entry_id)
        if cached is not None:
            return cached
        # Only entries up to the index's last one per ledger can be stored already: ask
        # RocksDB once per ledger, not once per record (replay speed, docs/design.md §11).
        last = self._indexed_last.get(ledger_id)
        if last is None:
            found = self.storage.locations.last_entry_id(ledger_id)
            last = self._indexed_last[ledger_id] = -1 if found is None else found
        if entry_id > last:
            return None
        try:
            return self.storage.get_entry(ledger_id, entry_id)
        except IOFailure as error:
            # The stored copy is unreadable (a damaged log): the journaled one is the copy
            # to keep, as on the live path (raising here refused every start:
            # docs/drills.md "Track record").
            warning = f"replay: stored copy of {ledger_id}/{entry_id} unreadable ({error}); " \
                      f"storing the journaled one"
            self.report.warnings.append(warning)
            log.warning("%s", warning)
            return None


# -- what start does, as data (docs/design.md §3.5; after TigerBeetle's recovery cases) ----------
#
# Three small tables, each over its own dimensions; every combination of a table's
# dimensions matches exactly one of its rows ("*" matches anything), which
# tests/unit/bookie/test_start_tables.py checks. ``start_of`` below is START_TABLE's lookup,
# the one ``Replayer.run`` uses; END_TABLE and LOG_TABLE say what the reader (journal/reader.py)
# and the entry logger do, each row held by a test of tests/crash/.

ANY = "*"
#: A journal file against lastMark, and the marked offset against the file's size.
PLACES = ("no lastMark", "below the mark", "marked", "above the mark", "marked, missing")
OFFSETS = ("within", "past the end")
#: START_TABLE actions.
REFUSE, SKIP, FROM_ZERO, FROM_MARK, FROM_ZERO_WARN = (
    "refuse to start: the marked journal is missing (MissingJournal)",
    "skip: wholly below lastMark, kept for retention only",
    "replay from its first record",
    "replay from the marked offset",
    "replay from its first record, with a warning: the mark lies past its end")
START_TABLE = (
    ("marked, missing", ANY, REFUSE),
    ("below the mark", ANY, SKIP),
    ("no lastMark", ANY, FROM_ZERO),
    ("above the mark", ANY, FROM_ZERO),
    ("marked", "within", FROM_MARK),
    ("marked", "past the end", FROM_ZERO_WARN),
)
#: How a journal's scan ends × skip_corrupt_journal_records.
ENDINGS = ("clean", "torn tail", "corrupt", "version 1-3", "empty")
END_TABLE = (
    ("clean", ANY, "apply every record to the end"),
    ("torn tail", ANY, "apply up to the tear; cut bytes reported and saved as .torn-<offset>"),
    ("corrupt", False, "refuse to start: CorruptRecord names the file and offset"),
    ("corrupt", True, "apply past it; the skipped bytes reported and saved"),
    ("version 1-3", ANY, "refuse to start: UnsupportedJournalVersion"),
    ("empty", ANY, "nothing to apply: a crash while the journal was being created"),
)
#: An entry log's state at start.
LOG_STATES = ("finalized", "no trailer", "header unpatched", "compacting", "quarantined")
LOG_TABLE = (
    ("finalized", "read by its ledgersMap; never appended to"),
    ("no trailer", "read by location, scanned by GC; never appended to (a new log opens)"),
    ("header unpatched", "read by location; the trailer found by scan, as if missing"),
    ("compacting", "deleted: a compaction a crash cut never switched the index to it"),
    ("quarantined", "kept and reported; still read by location, never deleted by GC"),
)


def table_rows(table, combination) -> list:
    """The rows of ``table`` whose leading cells match ``combination`` (``ANY`` matches)."""
    return [row for row in table
            if all(cell == ANY or cell == value for cell, value in zip(row, combination))]


def start_of(place: str, offset: str) -> str:
    """START_TABLE's action for a journal file (exactly one row matches)."""
    (row,) = table_rows(START_TABLE, (place, offset))
    return row[-1]


def select_journals(mark: LogMark, journal_ids: list[int]) -> list[int]:
    """Journal ids to replay, in order; refuses when the marked journal is gone (§8.3.2)."""
    chosen = sorted(i for i in journal_ids if i >= mark.journal_id)
    if mark.journal_id > 0 and (not chosen or chosen[0] != mark.journal_id):
        raise MissingJournal(
            f"recovery log {journal_file_name(mark.journal_id)} (lastMark {mark.journal_id:x}, "
            f"offset {mark.offset}) is missing from the journal dir; refusing to start")
    return chosen


def save_torn_tail(disk: "Disk", path: str, end: ScanEnd) -> str | None:
    """Copy the cut bytes beside the journal as ``<file>.torn-<offset>`` (§1.4)."""
    target = f"{path}.torn-{end.offset}"
    if disk.exists(target):
        return target
    source = disk.open(path)
    try:
        data = source.read_at(end.offset, end.cut_bytes)
    finally:
        source.close()
    handle = disk.create(target)
    try:
        handle.write_at(0, data)
        handle.fsync()
    finally:
        handle.close()
    disk.fsync_dir(os.path.dirname(os.path.abspath(target)))
    return target
