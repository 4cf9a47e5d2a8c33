"""``scrub``: read every indexed entry back and check framing, ids and digest.

The engine is ``bookie.scrub.Scrubber``, also behind ``check-index`` (the daemon runs no
scrub); this command opens the indexes read-only and prints each bad entry with its file and
offset.
"""

from __future__ import annotations

import argparse

from bookie.scrub import ScrubProblem, Scrubber
from bookie.shell.datadir import DataDir, UsageError
from bookie.shell.output import MiB, Output, Progress

#: MB/s as the issue spells it: 10**6 bytes a second.
MB = 1_000_000


def register(commands, common: argparse.ArgumentParser) -> None:
    scrub = commands.add_parser(
        "scrub", parents=[common], help="check every indexed entry: framing, ids, digest",
        description="Read every entry the locations index points at, in large sequential "
        "reads per entry log, and check that its size field frames it inside the file, that "
        "it holds the indexed ledger and entry ids, and, for CRC32C and CRC32 ledgers (the "
        "digest type kept in the ledgers index), that its digest matches. MAC, DUMMY and "
        "not-yet-known types are checked for framing and ids only, and counted. Each bad "
        "entry is printed with its entry log file and the offset of its size field. Exit 0 "
        "clean, 1 bad entries found, 2 usage or I/O error.")
    scrub.add_argument("--rate", type=float, metavar="MB/s",
                       help="read at most this many MB (10^6 bytes) a second (default: "
                       "as fast as the disk and CPU allow)")
    scrub.add_argument("--max-problems", type=int, default=1000, metavar="N",
                       help="print at most N bad entries (all are counted; default 1000)")
    scrub.set_defaults(handler=run_scrub)


def run_scrub(args: argparse.Namespace, out: Output) -> int:
    if args.rate is not None and args.rate <= 0:
        raise UsageError("--rate must be positive")
    data_dir = DataDir.of(args)
    locations = data_dir.open_locations()
    ledgers = data_dir.open_ledgers()
    progress = Progress("scrub", out.err, enabled=not args.no_progress)
    shown = [0]

    def on_problem(problem: ScrubProblem) -> None:
        if shown[0] < args.max_problems:
            out.emit(problem.to_json(), f"PROBLEM {problem.path} offset {problem.offset}: "
                     f"entry {problem.ledger_id}/{problem.entry_id}: {problem.reason}")
        shown[0] += 1

    try:
        report = Scrubber(data_dir.disk, data_dir.ledger_dir, locations, ledgers,
                          rate_bytes_per_s=args.rate * MB if args.rate else None,
                          on_progress=progress.update, on_problem=on_problem).run()
    finally:
        progress.finish()
        locations.close()
        ledgers.close()
    out.problems += report.problem_count
    if shown[0] > args.max_problems:
        out.text(f"... {shown[0] - args.max_problems} more bad entries not printed")
    rate = report.bytes_read / report.seconds / MiB if report.seconds > 0 else 0.0
    framing = ", ".join(f"{n} {kind}" for kind, n in report.framing_only.items())
    out.emit({**report.to_json(), "mibPerS": round(rate, 1)},
             f"scrub: {report.entries} entries in {report.logs} logs, {report.verified} "
             f"digests verified" + (f", framing and ids only: {framing}" if framing else "")
             + f"; {report.problem_count} bad; {report.bytes_read / MiB:.1f} MiB read in "
             f"{report.seconds:.1f}s ({rate:.0f} MiB/s)")
    return out.exit_code()
