"""``rebuild-index``: new ``locations`` and ``ledgers`` indexes from the entry logs and journals.

Apache BookKeeper's LocationsIndexRebuildOp and LedgersIndexRebuildOp, in one command:

    locations   every entry log, in ascending log id, scanned (docs/formats.md §5.6); each entry's
                location (offset + 4, §5.3) is written in file order, so where an entry is
                stored twice (replay re-adds, compaction) the later copy wins, as in the index
                the bookie kept
    ledgers     every ledger with entries in the logs or records in the journals, fenced (as
                BookKeeper marks rebuilt ledgers: its writer may have lost entries), with the
                master key from the journals' LEDGER_KEY records or the old ledgers index
                when it is readable (else 20 zero bytes, which the next key replaces, §7.2);
                the digest type from the old index, else learned from an entry that verifies
                as CRC32C or CRC32 (else 0, not known, §9.4); the explicit LAC from the
                journals or the old index. Ledgers deleted in a readable old index stay
                deleted and their entries are left out.

Journal data records after the lastMark are not copied: the next start replays them (§8.3).

Crash story (the indexes are swapped by rename, A4):
    1. build both indexes in a new dir ``rebuild-<time>.tmp`` beside them
                                  ! crash: the old indexes are untouched; delete the .tmp dir
    2. sync and close them
    3. per index: rename the old dir to ``<name>.before-rebuild-<time>``, the new one in
                                  ! crash between the two renames of an index: it is missing
                                    and a start would create it empty: move the new dir from
                                    the .tmp dir into place by hand before starting
    4. fsync the ledger dir       only now may a bookie start on the rebuilt indexes
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time

from bookie.entry import ZERO_KEY, DigestType, entry_digest_ok
from bookie.errors import CorruptRecord, IOFailure
from bookie.shell.datadir import LEDGERS, LOCATIONS, DataDir, UsageError
from bookie.shell.output import Output, Progress
from entrylog.reader import EntryLogReader
from journal.format import RecordKind
from journal.reader import JournalReader, UnsupportedJournalVersion
from ledgerindex.keys import LedgerState
from ledgerindex.ledgers import LedgerMetadataIndex
from ledgerindex.locations import EntryLocationIndex

#: Locations written per RocksDB batch.
BATCH_ENTRIES = 100_000
#: Entries tried per ledger to learn its digest type.
LEARN_TRIES = 4


def register(commands, common: argparse.ArgumentParser) -> None:
    rebuild = commands.add_parser(
        "rebuild-index", parents=[common], help="rebuild both RocksDB indexes from the files",
        description="Rebuild the locations index from the entry logs and the ledgers index "
        "from the journals and entry logs (every rebuilt ledger fenced, as Apache BookKeeper "
        "does; master keys from the journals' key records or the old ledgers index if it is "
        "readable), into a new dir, then swap it in, keeping the old dirs as "
        "<name>.before-rebuild-<time>. The bookie must be stopped. Without a readable old "
        "ledgers index, entries of deleted ledgers still in the logs come back. Exit 0 "
        "rebuilt, 1 rebuilt but damage was found on the way, 2 usage or I/O error.")
    rebuild.add_argument("--out", metavar="DIR",
                         help="build into DIR (must not exist) and do not swap")
    rebuild.set_defaults(handler=rebuild_index)


@dataclasses.dataclass
class _JournalFacts:
    master_keys: dict[int, bytes] = dataclasses.field(default_factory=dict)
    explicit_lacs: dict[int, bytes] = dataclasses.field(default_factory=dict)
    digest_types: dict[int, int] = dataclasses.field(default_factory=dict)  # key records'
    ledger_ids: set[int] = dataclasses.field(default_factory=set)


@dataclasses.dataclass
class _LogFacts:
    entries: int = 0
    copies: int = 0
    ledger_ids: set[int] = dataclasses.field(default_factory=set)
    learned: dict[int, int] = dataclasses.field(default_factory=dict)
    tries: dict[int, int] = dataclasses.field(default_factory=dict)


def rebuild_index(args: argparse.Namespace, out: Output) -> int:
    data_dir = DataDir.of(args).require()  # never build an index into a mistyped path
    data_dir.check_not_in_use()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = args.out or os.path.join(data_dir.index_dir, f"rebuild-{stamp}.tmp")
    if os.path.exists(target):
        raise UsageError(f"{target} exists; the rebuild needs a new dir")
    old = _old_ledgers(out, data_dir)
    journal = _read_journals(out, data_dir)
    os.makedirs(target)
    logs = _rebuild_locations(args, out, data_dir, os.path.join(target, LOCATIONS), old)
    counts = _rebuild_ledgers(os.path.join(target, LEDGERS), old, journal, logs)
    moved = [] if args.out else _swap(data_dir, target, stamp)
    out.emit({"type": "summary", "entries": logs.entries, "supersededCopies": logs.copies,
              **counts, "oldIndexReadable": old is not None, "builtIn": target,
              "oldIndexesMovedTo": moved},
             f"rebuilt: {logs.entries} entry copies indexed ({logs.copies} superseded by a "
             f"later copy), {counts['ledgers']} ledgers (all fenced; master keys: "
             f"{counts['keysFromJournal']} from journals, {counts['keysFromOldIndex']} from "
             f"the old index, {counts['keysUnknown']} unknown), {counts['deleted']} deleted; "
             + (f"old indexes moved to {', '.join(moved)}" if moved else f"built in {target}"))
    return out.exit_code()


def _old_ledgers(out: Output, data_dir: DataDir) -> dict[int, LedgerState] | None:
    """The old ledger states if the old index opens, else None (noted, not a problem)."""
    try:
        index = data_dir.open_ledgers()
    except IOFailure as exc:
        out.emit({"type": "note", "reason": f"old ledgers index not readable: {exc.message}"},
                 f"note: old ledgers index not readable ({exc.message}): keys from the "
                 f"journals only")
        return None
    try:
        return {i: index.get(i) for i in index.ledger_ids() + index.deleted_ids()}
    finally:
        index.close()


def _read_journals(out: Output, data_dir: DataDir) -> _JournalFacts:
    facts = _JournalFacts()
    for journal_id in data_dir.journal_ids():
        path = data_dir.journal_path(journal_id)
        try:
            with JournalReader(data_dir.disk, path) as reader:
                for record in reader.scan():
                    _note_record(facts, record)
        except UnsupportedJournalVersion as exc:
            out.emit({"type": "note", "file": path, "reason": exc.message},
                     f"note: {exc.message}")
        except CorruptRecord as exc:
            out.problem({"file": path, "offset": exc.offset, "reason": exc.reason,
                         "status": "corrupt"}, f"{path}: corrupt at offset {exc.offset}: "
                         f"{exc.reason}; the records before it were used")
    return facts


def _note_record(facts: _JournalFacts, record) -> None:
    if record.kind is RecordKind.UNKNOWN_META or record.kind is RecordKind.PADDING:
        return
    facts.ledger_ids.add(record.ledger_id)
    if record.kind is RecordKind.LEDGER_KEY:
        facts.master_keys[record.ledger_id] = record.payload
        if record.digest_type:
            facts.digest_types[record.ledger_id] = record.digest_type
    elif record.kind is RecordKind.EXPLICIT_LAC:
        facts.explicit_lacs[record.ledger_id] = record.payload


def _rebuild_locations(args, out: Output, data_dir: DataDir, path: str,
                       old: dict[int, LedgerState] | None) -> _LogFacts:
    deleted = {i for i, s in (old or {}).items() if not s.exists}
    known_types = {i: s.digest_type for i, s in (old or {}).items() if s.digest_type}
    facts = _LogFacts()
    index = EntryLocationIndex.open(path, create=True)
    progress = Progress("rebuild-index", out.err, enabled=not args.no_progress)
    try:
        log_ids = data_dir.log_ids()
        sizes = [data_dir.disk.file_size(data_dir.log_path(i)) for i in log_ids]
        batch: list[tuple[int, int, int]] = []
        for done, log_id in enumerate(log_ids):
            for triple in _scan_log(out, data_dir, log_id, deleted, known_types, facts):
                batch.append(triple)
                if len(batch) == BATCH_ENTRIES:
                    index.add_batch(batch, sync=False)
                    batch = []
            progress.update(sum(sizes[:done + 1]), sum(sizes))
        index.add_batch(batch, sync=False)
        index.kv.sync()  # step 2: the WAL is durable before the swap
        # Later copies overwrote earlier ones key by key; the difference is the copies.
        facts.copies = facts.entries - sum(1 for _ in index.kv.items())
    finally:
        progress.finish()
        index.close()
    return facts


def _scan_log(out: Output, data_dir: DataDir, log_id: int, deleted: set[int],
              known_types: dict[int, int], facts: _LogFacts):
    """(ledgerId, entryId, location) of one log's entries in file order."""
    path = data_dir.log_path(log_id)
    with EntryLogReader(data_dir.disk, path, log_id=log_id) as reader:
        try:
            for found in reader.scan(payload=True):
                if found.ledger_id in deleted:
                    continue
                facts.entries += 1
                facts.ledger_ids.add(found.ledger_id)
                if found.ledger_id not in known_types:
                    _learn_digest_type(facts, found.ledger_id, found.entry)
                yield found.ledger_id, found.entry_id, found.location
        except CorruptRecord as exc:
            out.problem({"file": path, "offset": exc.offset, "reason": exc.reason,
                         "status": "corrupt"}, f"{path}: corrupt header: {exc.reason}")
            return
        end = reader.end
        if reader.corrupt:
            out.problem({"file": path, "offset": end.offset, "reason": end.reason,
                         "status": "corrupt"}, f"{path}: scan stopped at offset {end.offset}: "
                         f"{end.reason}; the entries after it are not indexed")
        elif not end.clean:
            out.emit({"type": "note", "file": path, "offset": end.offset, "reason": end.reason},
                     f"note: {path} ends at offset {end.offset}: {end.reason}")


def _learn_digest_type(facts: _LogFacts, ledger_id: int, entry: bytes) -> None:
    """docs/formats.md §9.4 as replay does it: a MAC or DUMMY entry passes a CRC check by chance
    with probability 2^-32, so an entry that verifies names its ledger's type."""
    if ledger_id in facts.learned or facts.tries.get(ledger_id, 0) >= LEARN_TRIES:
        return
    facts.tries[ledger_id] = facts.tries.get(ledger_id, 0) + 1
    for candidate in (DigestType.CRC32C, DigestType.CRC32):
        if entry_digest_ok(entry, candidate):
            facts.learned[ledger_id] = int(candidate)
            return


def _rebuild_ledgers(path: str, old: dict[int, LedgerState] | None, journal: _JournalFacts,
                     logs: _LogFacts) -> dict[str, int]:
    old = old or {}
    deleted = {i: s for i, s in old.items() if not s.exists}
    live = (journal.ledger_ids | logs.ledger_ids | set(old)) - set(deleted)
    counts = {"ledgers": len(live), "keysFromJournal": 0, "keysFromOldIndex": 0,
              "keysUnknown": 0, "deleted": len(deleted)}
    index = LedgerMetadataIndex.open(path, create=True)
    try:
        for ledger_id in sorted(live):
            state, source = _rebuilt_state(ledger_id, old.get(ledger_id), journal, logs)
            counts[source] += 1
            index.set(ledger_id, state)
        index.flush(sync=True)
        index.put_tombstones(deleted)
    finally:
        index.close()
    return counts


def _rebuilt_state(ledger_id: int, before: LedgerState | None, journal: _JournalFacts,
                   logs: _LogFacts) -> tuple[LedgerState, str]:
    before = before or LedgerState()
    key = journal.master_keys.get(ledger_id)
    source = "keysFromJournal"
    if key is None and before.master_key and before.master_key != ZERO_KEY:
        key, source = before.master_key, "keysFromOldIndex"
    if key is None:
        key, source = ZERO_KEY, "keysUnknown"
    digest_type = (before.digest_type or journal.digest_types.get(ledger_id)
                   or logs.learned.get(ledger_id, 0))
    lac = journal.explicit_lacs.get(ledger_id, before.explicit_lac)
    return LedgerState(exists=True, fenced=True, limbo=before.limbo, digest_type=digest_type,
                       master_key=key, explicit_lac=lac), source


def _swap(data_dir: DataDir, target: str, stamp: str) -> list[str]:
    """Step 3 and 4 of the crash story; returns where the old dirs went."""
    disk, moved = data_dir.disk, []
    for name in (LOCATIONS, LEDGERS):
        live = data_dir.index_path(name)
        if os.path.exists(live):
            aside = f"{live}.before-rebuild-{stamp}"
            disk.rename(live, aside)
            moved.append(aside)
        disk.rename(os.path.join(target, name), live)
    disk.fsync_dir(data_dir.index_dir)
    os.rmdir(target)
    return moved
