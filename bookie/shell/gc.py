"""``gc``: one garbage collection run on a stopped bookie's data dir (docs/http-api.md "CLI").

The daemon's own collector (``bookie/gc.py``, the run ``POST /v1/bookie/gc`` starts) over the
daemon's own ``LedgerStorage``, opened read-write as ``Bookie`` opens it. Opening it takes
both RocksDB ``LOCK``s, the daemon's only lock on a data dir: a bookie that starts meanwhile
is refused by RocksDB, and one already running is detected first (``check_not_in_use``).

The journals are not read: replay at the next start re-adds what lies after lastMark, and
finds the tombstones GC keeps (gc.py G4), so a deleted ledger stays deleted. Every crash
story is gc.py's and compaction.py's: a kill -9 of this command is a crash of the bookie
during a GC run, and the next start (or the next ``gc``) cleans up the same way.
"""

from __future__ import annotations

import argparse
import os
import time

from bookie.config import BookieConfig, ConfigError, load_config
from bookie.disk import OsDisk
from bookie.gc import MAJOR, MINOR, GarbageCollector
from bookie.gc_run import GcResult
from bookie.shell.datadir import INDEX_DIRS, DataDir, UsageError
from bookie.shell.output import Output, Progress, human_bytes
from bookie.storage import LedgerStorage


def register(commands, common: argparse.ArgumentParser) -> None:
    gc = commands.add_parser(
        "gc", parents=[common], help="delete dead entry logs and compact, offline",
        description="Run one garbage collection on a STOPPED bookie's data dir, as the "
        "daemon's periodic GC or POST /v1/bookie/gc does: the locations of deleted ledgers "
        "are removed from the index, every entry log that holds no live ledger is deleted, "
        "and with --force the logs whose live fraction is under the compaction threshold "
        "are compacted (live entries copied to a new log, the old one deleted). Without "
        "--force nothing is compacted: this command has no record of when the bookie last "
        "compacted, so no compaction interval has elapsed, as on a bookie just started. "
        "Thresholds, entry log size and the throttle (compaction_throttle with "
        "compaction_rate_bytes or compaction_rate_entries; 0 = none) come "
        "from --config and BOOKIE_* variables as for 'bookie serve'. The bookie must be "
        "stopped: a data dir a running bookie holds is refused. Prints what was removed "
        "(the JSON of POST /v1/bookie/gc with --json). Exit 0 done, 1 done but a log was "
        "corrupt (quarantined as <hex>.log.quarantined) or another problem was found, "
        "2 usage or I/O error.")
    gc.add_argument("--force", choices=(MINOR, MAJOR), default=None,
                    help="also compact now: 'minor' the logs under "
                    "minor_compaction_threshold, 'major' under major_compaction_threshold")
    gc.add_argument("--config", metavar="FILE",
                    help="the bookie's TOML settings file (or BOOKIE_CONFIG)")
    gc.set_defaults(handler=run_gc)


def run_gc(args: argparse.Namespace, out: Output) -> int:
    data_dir = DataDir.of(args).require()
    _require_indexes(data_dir)
    data_dir.check_not_in_use()  # before opening: a probe's close would drop our own lock
    storage = LedgerStorage(OsDisk(), _config(args), data_dir.ledger_dir, data_dir.index_dir)
    try:
        storage.open()  # takes both RocksDB locks, as the daemon does
        result = _collect(GarbageCollector(storage), args.force,
                          Progress("gc", out.err, enabled=not args.no_progress))
    finally:
        storage.close()
    _report(out, data_dir, args.force, result)
    return out.exit_code()


def _require_indexes(data_dir: DataDir) -> None:
    """Refuse a dir that is not a bookie's: ``storage.open`` would create empty indexes,
    and with an empty locations index compaction would copy nothing and delete every log."""
    for name in INDEX_DIRS:
        path = data_dir.index_path(name)
        if not os.path.exists(os.path.join(path, "CURRENT")):
            raise UsageError(f"{data_dir.root} is not a bookie data dir: no RocksDB index "
                             f"at {path}")


def _config(args: argparse.Namespace) -> BookieConfig:
    try:
        config, _ = load_config(args.config, {"data_dir": args.data_dir})
    except ConfigError as exc:
        raise UsageError(f"bad configuration: {exc}") from exc
    return config


def _collect(gc: GarbageCollector, force: str | None, progress: Progress) -> GcResult:
    """``GarbageCollector.run`` step by step, so that progress is shown between steps."""
    run = gc.begin(force)
    try:
        while (wait := gc.step(run)) is not None:
            result, left = run.result, run.progress_json()["logsLeft"]
            done = result.logs_scanned + len(result.logs_compacted)
            progress.label = f"gc ({run.phase.value})"
            progress.update(done, done + left, unit="logs")
            if wait > 0:
                time.sleep(wait)  # the compaction throttle (compaction.py CP4)
    except BaseException:
        gc.abort()  # e.g. Ctrl-C between steps: drop a half-written compaction log now
        raise
    finally:
        progress.finish()
    return run.result


def _report(out: Output, data_dir: DataDir, force: str | None, result: GcResult) -> None:
    for problem in result.problems:
        out.problem({"reason": problem}, problem)
    record = {"type": "summary", "dataDir": data_dir.root, "force": force,
              **result.to_json()}
    deleted = ", ".join(f"{i:x}.log" for i in result.logs_deleted) or "none"
    compacted = ", ".join(f"{i:x}.log" for i in result.logs_compacted) or "none"
    compaction = result.compaction or f"not run ({result.compaction_skipped or 'not forced'})"
    out.emit(record, "\n".join([
        f"logs scanned: {result.logs_scanned}",
        f"logs deleted: {deleted} ({human_bytes(result.bytes_reclaimed_deletion)}, "
        f"{result.bytes_reclaimed_deletion} bytes)",
        f"compaction: {compaction}",
        f"logs compacted: {compacted} ({human_bytes(result.bytes_reclaimed_compaction)}, "
        f"{result.bytes_reclaimed_compaction} bytes reclaimed; {result.entries_moved} "
        f"entries moved, {result.bytes_written_compaction} bytes written)",
        f"deleted ledgers cleaned from the index: {result.ledgers_index_cleaned}",
        f"quarantined: {', '.join(result.quarantined) or 'none'}",
        f"reclaimed in all: {human_bytes(result.bytes_reclaimed)} "
        f"({result.bytes_reclaimed} bytes) in {result.seconds:.2f}s"]))
