"""``check-index``: the locations index against the entry logs, both directions.

    index -> logs   every (L, E) -> location lands on an entry framed inside its log that
                    holds (L, E) (``Scrubber`` without digests); every ledger with locations
                    is live in the ledgers index
    logs -> index   every entry a scan of the logs finds (docs/formats.md §5.6) is either the one
                    the index points at, a superseded copy (the index points at a later copy:
                    replay re-adds, compaction), or garbage of a deleted ledger; an entry of
                    a live ledger that the index does not know is a problem, and so is a scan
                    that ends torn or corrupt
"""

from __future__ import annotations

import argparse
import collections

from bookie.errors import CorruptRecord
from bookie.scrub import ScrubProblem, Scrubber
from bookie.shell.datadir import DataDir
from bookie.shell.output import Output, Progress
from entrylog.reader import EntryLogReader


def register(commands, common: argparse.ArgumentParser) -> None:
    check = commands.add_parser(
        "check-index", parents=[common], help="check index -> entry logs and logs -> index",
        description="Check the locations index against the entry logs in both directions: "
        "every index entry must land on a well-framed entry with the same ids in an existing "
        "log, and belong to a ledger the ledgers index knows; every entry found by scanning "
        "the logs must be indexed, superseded by a later copy, or belong to a deleted ledger. "
        "Digests are scrub's job. Exit 0 consistent, 1 problems found, 2 usage or I/O error.")
    check.set_defaults(handler=check_index)


def check_index(args: argparse.Namespace, out: Output) -> int:
    data_dir = DataDir.of(args)
    locations = data_dir.open_locations()
    ledgers = data_dir.open_ledgers()
    try:
        report = _index_to_logs(args, out, data_dir, locations, ledgers)
        _ledgers_of_locations(out, ledgers, report.ledger_entries)
        counts = _logs_to_index(args, out, data_dir, locations, ledgers)
    finally:
        locations.close()
        ledgers.close()
    out.emit({"type": "summary", "indexEntries": report.entries,
              "indexProblems": report.problem_count, **counts},
             f"index -> logs: {report.entries} entries, {report.problem_count} bad; logs -> "
             f"index: {counts['logEntries']} entries, {counts['indexed']} indexed, "
             f"{counts['superseded']} superseded copies, {counts['garbage']} of deleted "
             f"ledgers, {counts['missingFromIndex']} missing from the index")
    return out.exit_code()


def _index_to_logs(args, out: Output, data_dir: DataDir, locations, ledgers):
    progress = Progress("check-index: index -> logs", out.err, enabled=not args.no_progress)

    def on_problem(problem: ScrubProblem) -> None:
        out.problem({**problem.to_json(), "direction": "index->log"},
                    f"index entry {problem.ledger_id}/{problem.entry_id} -> {problem.path} "
                    f"offset {problem.offset}: {problem.reason}")

    try:
        return Scrubber(data_dir.disk, data_dir.ledger_dir, locations, ledgers,
                        verify_digest=False, on_progress=progress.update,
                        on_problem=on_problem).run()
    finally:
        progress.finish()


def _ledgers_of_locations(out: Output, ledgers, ledger_entries: collections.Counter) -> None:
    for ledger_id, count in sorted(ledger_entries.items()):
        state = ledgers.get(ledger_id)
        if state is None:
            reason = (f"{count} index entries of ledger {ledger_id}, which the ledgers index "
                      f"does not know")
        elif not state.exists:
            reason = f"{count} index entries of ledger {ledger_id}, which is deleted"
        else:
            continue
        out.problem({"ledgerId": ledger_id, "entries": count, "reason": reason,
                     "direction": "index->ledgers"}, reason)


def _logs_to_index(args, out: Output, data_dir: DataDir, locations, ledgers) -> dict:
    counts = collections.Counter(logEntries=0, indexed=0, superseded=0, garbage=0,
                                 missingFromIndex=0)
    progress = Progress("check-index: logs -> index", out.err, enabled=not args.no_progress)
    done = 0
    log_ids = data_dir.log_ids()
    sizes = {i: data_dir.disk.file_size(data_dir.log_path(i)) for i in log_ids}
    try:
        for log_id in log_ids:
            path = data_dir.log_path(log_id)
            with EntryLogReader(data_dir.disk, path, log_id=log_id) as reader:
                try:
                    for found in reader.scan(payload=False):
                        counts[_classify(out, path, found, locations, ledgers)] += 1
                        counts["logEntries"] += 1
                except CorruptRecord as exc:  # a foreign or damaged header: no entries
                    out.problem({"file": path, "offset": exc.offset, "reason": exc.reason,
                                 "status": "corrupt", "direction": "log->index"},
                                f"{path}: corrupt header at offset {exc.offset}: {exc.reason}")
                if reader.end is not None:
                    out.scan_end(path, reader.end, reader.corrupt, quiet_if_clean=True,
                                 direction="log->index")
            done += sizes[log_id]
            progress.update(done, sum(sizes.values()))
    finally:
        progress.finish()
    return dict(counts)


def _classify(out: Output, path: str, found, locations, ledgers) -> str:
    indexed = locations.get(found.ledger_id, found.entry_id)
    if indexed == found.location:
        return "indexed"
    if indexed is not None:
        return "superseded"
    state = ledgers.get(found.ledger_id)
    if state is None or not state.exists:
        return "garbage"
    reason = (f"entry {found.ledger_id}/{found.entry_id} of live ledger {found.ledger_id} is "
              f"not in the locations index")
    out.problem({"file": path, "offset": found.offset, "ledgerId": found.ledger_id,
                 "entryId": found.entry_id, "location": found.location, "reason": reason,
                 "direction": "log->index"}, f"{path} offset {found.offset}: {reason}")
    return "missingFromIndex"
