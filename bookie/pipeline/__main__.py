"""``python -m bookie.pipeline JOB PATH... [--out DIR] [--master URL]``; also the script
that ``spark-submit`` runs (it cannot run ``-m``):

    spark-submit --master spark://127.0.0.1:7077 bookie/pipeline/__main__.py scrub /data

Jobs: scrub, usage, export, index-check (jobs.py); replicas (replicas.py: the cluster's
replica check, over ZooKeeper and the bookies' HTTP, no PATH). Progress goes to stderr while Spark
runs, a summary to stdout (``--json`` for one JSON object). Exit codes: 0 nothing found,
1 problems found (bad entries, unreadable trailers, index mismatches), 2 bad arguments or a
failed run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time

if __package__ in (None, ""):
    # Run as a file by spark-submit: this dir's modules must not shadow anything, and the
    # repository root (or the installed package) must provide ``bookie``.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    sys.path.insert(0, os.path.dirname(os.path.dirname(_here)))

from bookie.pipeline import index_check, jobs  # noqa: E402
from bookie.pipeline import spark as spark_session  # noqa: E402

EXIT_OK, EXIT_PROBLEMS, EXIT_FAILED = 0, 1, 2
PROGRESS_INTERVAL_S = 2.0
#: Report rows printed in text mode; --json and --out carry all of them.
PRINTED_ROWS_MAX = 20
JOBS = ("scrub", "usage", "export", "index-check", "replicas")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bookie.pipeline", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("job", choices=JOBS)
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="data dirs, ledger dirs or files; local or pyarrow.fs URIs "
                        "(every job but replicas)")
    parser.add_argument("--out", help="output dir (local or URI); required by export")
    parser.add_argument("--master", help="Spark master (default: spark-submit's, else "
                                         "local[*])")
    parser.add_argument("--driver-memory", help="e.g. 2g (local masters)")
    parser.add_argument("--live-ledgers", metavar="FILE|URL",
                        help="usage: live ledger ids, a file (one a line) or a bookie URL")
    parser.add_argument("--minor", type=float, default=jobs.MINOR_THRESHOLD)
    parser.add_argument("--major", type=float, default=jobs.MAJOR_THRESHOLD)
    parser.add_argument("--index", metavar="EXPORT",
                        help="index-check: export-index output (Parquet or JSON lines)")
    parser.add_argument("--no-payload", action="store_true",
                        help="export: locations only, without the entry bytes")
    parser.add_argument("--writer", choices=("arrow", "spark"), default="arrow",
                        help="export: pyarrow on the executors (default) or Spark's writer")
    parser.add_argument("--journals", action="store_true",
                        help="scrub: the journals' data records too")
    parser.add_argument("--ledgers-index", metavar="DIR",
                        help="scrub: the ledgers RocksDB, for the ledgers whose digests "
                             "cannot be checked (default: each local data dir's)")
    parser.add_argument("--metadata-service-uri", metavar="zk://HOST:PORT/ledgers",
                        default=os.environ.get("BOOKIE_METADATA_SERVICE_URI"),
                        help="replicas: the cluster's ZooKeeper (default "
                        "$BOOKIE_METADATA_SERVICE_URI)")
    parser.add_argument("--dry-run", action="store_true",
                        help="replicas: report missing copies without marking the ledgers")
    parser.add_argument("--tasks", type=int, help="replicas: Spark tasks (default: 4 per "
                        "core); the ledger tree's slices are shared among them")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    if args.job == "replicas" and not args.metadata_service_uri:
        parser.error("replicas needs --metadata-service-uri zk://HOST:PORT/ledgers")
    if args.job != "replicas" and not args.paths:
        parser.error(f"{args.job} needs at least one PATH")
    if args.job == "export" and not args.out:
        parser.error("export needs --out DIR")
    if args.job == "index-check" and not args.index:
        parser.error("index-check needs --index EXPORT")
    if not 0 <= args.minor <= args.major <= 1:
        parser.error("thresholds must satisfy 0 <= --minor <= --major <= 1")
    return args


def run_job(spark, args: argparse.Namespace) -> jobs.JobResult:
    if args.job == "replicas":
        from bookie.pipeline.replicas import run_replicas  # noqa: PLC0415 (cluster only)

        return run_replicas(spark, args.metadata_service_uri, mark=not args.dry_run,
                            tasks=args.tasks)
    if args.job == "scrub":
        unverified = jobs.unverifiable_ledgers(args.paths, args.ledgers_index)
        return jobs.run_scrub(spark, args.paths, args.out, journals=args.journals,
                              unverified=unverified)
    if args.job == "usage":
        return jobs.run_usage(spark, args.paths, args.out, args.live_ledgers, args.minor,
                              args.major)
    if args.job == "export":
        return jobs.run_export(spark, args.paths, args.out, payload=not args.no_payload,
                               writer=args.writer)
    return index_check.run_index_check(spark, args.paths, args.index, args.out)


class Progress:
    """Prints the running stages' task counts to stderr until stopped.

    A daemon thread polling Spark's status tracker: the jobs stay plain DataFrame code.
    """

    def __init__(self, spark, label: str, interval_s: float = PROGRESS_INTERVAL_S) -> None:
        self._tracker = spark.sparkContext.statusTracker()
        self._label = label
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="progress", daemon=True)
        self._last = ""

    def __enter__(self) -> "Progress":
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                line = self._line()
            except Exception:  # noqa: BLE001 (a progress line must never kill the job)
                return
            if line and line != self._last:
                print(f"[{self._label}] {line}", file=sys.stderr, flush=True)
                self._last = line

    def _line(self) -> str:
        parts = []
        for stage_id in sorted(self._tracker.getActiveStageIds()):
            info = self._tracker.getStageInfo(stage_id)
            if info is not None:
                parts.append(f"stage {stage_id}: {info.numCompletedTasks}/{info.numTasks} "
                             f"tasks")
        return ", ".join(parts)


def print_result(result: jobs.JobResult, elapsed_s: float, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"job": result.job, "problems": result.problems,
                          "elapsedSeconds": round(elapsed_s, 3), "summary": result.summary,
                          "rows": result.rows, "outputs": result.outputs},
                         default=str, sort_keys=True))
        return
    print(f"{result.job}: {result.problems} problem(s) in {elapsed_s:.1f} s")
    for key, value in result.summary.items():
        print(f"  {key}: {value}")
    scanned = result.summary.get("bytes")
    if scanned:
        print(f"  MiB/s: {scanned / 2**20 / max(elapsed_s, 1e-9):.0f}")
    for row in result.rows[:PRINTED_ROWS_MAX]:
        print("  " + json.dumps(row, default=str, sort_keys=True))
    if len(result.rows) > PRINTED_ROWS_MAX:
        print(f"  ... {len(result.rows) - PRINTED_ROWS_MAX} more rows (--json or --out)")
    for name, path in result.outputs.items():
        print(f"  {name} -> {path}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    spark = spark_session.session(args.master, app_name=f"bookie-pipeline-{args.job}",
                                  driver_memory=args.driver_memory)
    started = time.monotonic()
    try:
        with Progress(spark, args.job):
            result = run_job(spark, args)
    except (FileNotFoundError, ValueError) as err:
        print(f"{args.job}: {err}", file=sys.stderr)
        return EXIT_FAILED
    except Exception as err:  # noqa: BLE001 (a failed run must not read as "problems: 1")
        print(f"{args.job}: the run failed: {type(err).__name__}: {err}", file=sys.stderr)
        return EXIT_FAILED
    print_result(result, time.monotonic() - started, args.json)
    return EXIT_PROBLEMS if result.problems else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
