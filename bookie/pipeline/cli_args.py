"""The command line of ``python -m bookie.pipeline``: one sub-command per job, each with its
own options and ``JOB --help``. Imports nothing of Spark, so ``--help`` and bad arguments
are answered at once, and without pyspark installed (__main__.py says how to get it).

Help texts are plain text: argparse prints them as they are written.
"""

from __future__ import annotations

import argparse
import os

from bookie.pipeline.defaults import MAJOR_THRESHOLD, MINOR_THRESHOLD

PROG = "python -m bookie.pipeline"
DESCRIPTION = """\
Jobs over a bookie's files (entry logs, journals) with PySpark, on local[*] or a cluster.
"python -m bookie.pipeline JOB --help" lists a job's options.

Progress goes to stderr while Spark runs (--no-progress: none), a summary to stdout (--json:
one JSON object). Also the script spark-submit runs, which cannot run -m:
    spark-submit --master spark://127.0.0.1:7077 bookie/pipeline/__main__.py scrub /data

Exit codes: 0 nothing found; 1 problems found (bad entries, unreadable trailers, index
mismatches, ledgers missing copies); 2 bad arguments, a failed run, or pyspark missing."""

#: One line each for the top-level --help, and each job's description.
JOBS = {
    "scrub": ("check every entry's framing and digest",
              "Checks every entry's framing and digest (CRC32C, or CRC32 where the stored "
              "digest is one) in one scan; reports the bad entries with file, offset, "
              "ledger, entry and reason. Exit 1 if any."),
    "usage": ("bytes per ledger and log: garbage, compaction candidates",
              "Bytes per ledger per log from the ledgersMap trailers (a log without one is "
              "scanned), joined with the live ledgers: per log total, live and garbage "
              "bytes and the compaction that would rewrite it. Exit 1 if a finalized "
              "log's trailer does not read back."),
    "export": ("entries to Parquet, partitioned by ledger",
               "Writes the entries to Parquet under OUT/entries/ledgerId=N/: entryId, "
               "logId, pos, size, path and the entry's bytes as stored."),
    "index-check": ("the RocksDB locations against the logs, both ways",
                    "Checks the output of 'bookie shell export-index' against the scanned "
                    "logs, both ways: entries the index lacks, locations the logs lack, "
                    "logs not scanned. Exit 1 if any."),
    "replicas": ("a cluster's replica check (ZooKeeper, bookies; no PATH)",
                 "The cluster's replica check: asks every live bookie of every closed "
                 "fragment which entries it holds, and marks the ledgers missing copies "
                 "under-replicated for the replication workers. Exit 1 if any."),
}


def _common(parser: argparse.ArgumentParser) -> None:
    spark = parser.add_argument_group("Spark and output")
    spark.add_argument("--master", metavar="URL",
                       help="Spark master (default: spark-submit's, else local[*])")
    spark.add_argument("--driver-memory", metavar="SIZE",
                       help="driver memory of a local master, e.g. 2g")
    spark.add_argument("--json", action="store_true",
                       help="print the result as one JSON object")
    spark.add_argument("--no-progress", action="store_true",
                       help="no progress lines on stderr")


def _paths(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="data dirs, current/ dirs or files; local paths or pyarrow.fs "
                             "URIs (file://, hdfs://, s3://)")


def _out(parser: argparse.ArgumentParser, what: str, required: bool = False) -> None:
    parser.add_argument("--out", metavar="DIR", required=required,
                        help=f"output dir, local or URI: {what}")


def _scrub(parser: argparse.ArgumentParser) -> None:
    _paths(parser)
    _out(parser, "the bad entries to DIR/scrub (Parquet) and DIR/scrub.jsonl")
    parser.add_argument("--journals", action="store_true",
                        help="check the journals' data records too")
    parser.add_argument("--ledgers-index", metavar="DIR",
                        help="the ledgers RocksDB, for the ledgers whose digests cannot be "
                             "checked (MAC, DUMMY); default: each local data dir's "
                             "(with index_dirs: <index dir>/current/ledgers)")


def _usage(parser: argparse.ArgumentParser) -> None:
    _paths(parser)
    _out(parser, "DIR/usage-by-ledger (Parquet) and DIR/usage-by-log.jsonl")
    parser.add_argument("--live-ledgers", metavar="FILE|URL",
                        help="the live ledger ids: a file (one a line, # comments) or a "
                             "running bookie's URL (GET /v1/ledgers)")
    parser.add_argument("--minor", type=float, default=MINOR_THRESHOLD, metavar="RATIO",
                        help="minor compaction below this usage (default %(default)s)")
    parser.add_argument("--major", type=float, default=MAJOR_THRESHOLD, metavar="RATIO",
                        help="major compaction below this usage (default %(default)s)")


def _export(parser: argparse.ArgumentParser) -> None:
    _paths(parser)
    _out(parser, "the entries to DIR/entries (required)", required=True)
    parser.add_argument("--no-payload", action="store_true",
                        help="locations only, without the entry bytes")
    parser.add_argument("--writer", choices=("arrow", "spark"), default="arrow",
                        help="pyarrow in the tasks (default) or Spark's Parquet writer")


def _index_check(parser: argparse.ArgumentParser) -> None:
    _paths(parser)
    _out(parser, "the mismatches to DIR/index-check (Parquet) and DIR/index-check.jsonl")
    parser.add_argument("--index", metavar="EXPORT", required=True,
                        help="the export-index output (Parquet or JSON lines; required)")


def _replicas(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(paths=[], out=None)
    parser.add_argument("--metadata-service-uri", metavar="zk://HOST:PORT/ledgers",
                        default=os.environ.get("BOOKIE_METADATA_SERVICE_URI"),
                        help="the cluster's ZooKeeper (default: "
                             "$BOOKIE_METADATA_SERVICE_URI)")
    parser.add_argument("--dry-run", action="store_true",
                        help="report the missing copies without marking the ledgers")
    parser.add_argument("--tasks", type=int, metavar="N",
                        help="Spark tasks (default: 4 per core); the ledger tree's slices "
                             "are shared among them")


_OPTIONS = {"scrub": _scrub, "usage": _usage, "export": _export,
            "index-check": _index_check, "replicas": _replicas}


class _JobListFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps each job's line one line: argparse sizes the name column by the JOB line's
    indent, not by the deeper one of the jobs under it, so "index-check" would wrap."""

    def add_argument(self, action: argparse.Action) -> None:
        super().add_argument(action)
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001 (no public name)
            self._action_max_length += self._indent_increment


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION,
                                     formatter_class=_JobListFormatter)
    jobs = parser.add_subparsers(dest="job", metavar="JOB", required=True,
                                 title="jobs")
    for name, (line, description) in JOBS.items():
        job = jobs.add_parser(name, help=line, description=description,
                              prog=f"{PROG} {name}")
        _OPTIONS[name](job)
        _common(job)
    return parser


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.job == "replicas" and not args.metadata_service_uri:
        parser.error("replicas needs --metadata-service-uri zk://HOST:PORT/ledgers")
    if args.job == "usage" and not 0 <= args.minor <= args.major <= 1:
        parser.error("thresholds must satisfy 0 <= --minor <= --major <= 1")
    return args
