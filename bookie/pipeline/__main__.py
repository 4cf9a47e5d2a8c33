"""``python -m bookie.pipeline JOB [PATH...] [options]`` (``JOB --help``: a job's options);
also the script that spark-submit runs, which cannot run ``-m``:

    spark-submit --master spark://127.0.0.1:7077 bookie/pipeline/__main__.py scrub /data

The arguments are parsed (cli_args.py) before pyspark is imported: ``--help`` needs no
Spark, and without the ``pipeline`` extra the run ends with the one line that says how to
install it. Progress goes to stderr (progress.py), the summary to stdout (report.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

if __package__ in (None, ""):
    # Run as a file by spark-submit: this dir's modules must not shadow anything, and the
    # repository root (or the installed package) must provide ``bookie``.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    sys.path.insert(0, os.path.dirname(os.path.dirname(_here)))

from bookie.pipeline.cli_args import parse_args  # noqa: E402
from bookie.pipeline.progress import StageProgress  # noqa: E402
from bookie.pipeline.report import print_result  # noqa: E402

EXIT_OK, EXIT_PROBLEMS, EXIT_FAILED = 0, 1, 2
#: The modules of the ``pipeline`` extra, as a user knows them.
EXTRA_MODULES = {"pyspark": "PySpark", "pyarrow": "pyarrow", "pandas": "pandas"}
INSTALL_HINT = "pip install -e '.[pipeline]'"

__all__ = ["main", "parse_args", "run_job"]


def missing_extra(err: ImportError) -> str | None:
    """The one-line hint for an ImportError of the ``pipeline`` extra, else None."""
    top = (err.name or "").split(".")[0]
    if top not in EXTRA_MODULES:
        return None
    return f"bookie.pipeline needs {EXTRA_MODULES[top]}: {INSTALL_HINT}"


def run_job(spark, args: argparse.Namespace):
    from bookie.pipeline import index_check, jobs  # noqa: PLC0415 (pyspark: after parsing)

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


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        from bookie.pipeline import jobs  # noqa: F401, PLC0415 (the extra's modules)
        from bookie.pipeline import spark as spark_session  # noqa: PLC0415
    except ImportError as err:
        hint = missing_extra(err)
        if hint is None:
            raise
        print(hint, file=sys.stderr)
        return EXIT_FAILED
    spark = spark_session.session(args.master, app_name=f"bookie-pipeline-{args.job}",
                                  driver_memory=args.driver_memory)
    started = time.monotonic()
    try:
        with StageProgress(spark, args.job, enabled=not args.no_progress):
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
