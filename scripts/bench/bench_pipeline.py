"""Benchmark the Spark pipeline against the plain Python reader, in the same run.

    .venv/bin/python scripts/bench/bench_pipeline.py [--gib 2] [--log-mib 512] [--entry-bytes 1024]
        [--cores N] [--repeat 3] [--dir D] [--keep]

Generates ``--gib`` GiB of finalized entry logs of ``--log-mib`` MiB each (1 KiB entries,
16 ledgers, CRC32C digests, written by the bookie's own BufferedLogChannel) under a temp
dir, reads them once to warm the page cache, and prints MiB/s of log bytes for:

    plain, 1 process     EntryLogReader.scan + the digest check (scrub), ledger_totals
                         (usage), scan + a pyarrow Parquet writer (export)
    plain, 1 per core    the same, one process per core over the logs (multiprocessing)
    spark local[cores]   jobs.run_scrub, run_usage, run_export (bookie.pipeline)

Each figure is the best of ``--repeat`` warm runs, the runners taking turns round by round,
beside its ratio to the baselines (docs/design.md §11: budgets are in-run ratios; the machine
is too noisy for absolute ones).
One partition per file, so logs should be at least ``cores`` in number. The temp dir is
deleted at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import crc32c  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from bookie.disk import OsDisk  # noqa: E402
from bookie.entry import frame_entry  # noqa: E402
from entrylog.reader import EntryLogReader  # noqa: E402
from entrylog.writer import BufferedLogChannel  # noqa: E402

LEDGERS = 16
#: The target on 2 cores, warm page cache (docs/pipeline.md "Tests and figures").
SCRUB_TARGET_MIBS = 600
SCRUB_TARGET_RATIO = 0.8
POOL_BYTES = 4 << 20
_U32 = struct.Struct(">I").unpack_from


# ----------------------------------------------------------------------- data

def generate(directory: str, total_bytes: int, log_bytes: int, entry_bytes: int) -> list[str]:
    """Finalized logs of ~log_bytes each, entries of ``entry_bytes`` (framing included)."""
    ledger_dir = os.path.join(directory, "ledgers", "current")
    os.makedirs(ledger_dir)
    pool = os.urandom(POOL_BYTES)
    payload_bytes = entry_bytes - 36
    per_log = log_bytes // (entry_bytes + 4)
    paths, entry_id = [], 0
    for log_id in range(max(1, -(-total_bytes // log_bytes))):
        channel = BufferedLogChannel.create(OsDisk(), ledger_dir, log_id,
                                            write_buffer_bytes=8 << 20)
        for index in range(per_log):
            ledger_id = index % LEDGERS
            start = (entry_id * 7919) % (POOL_BYTES - payload_bytes)
            channel.add_entry(ledger_id, frame_entry(
                ledger_id, entry_id, entry_id - 1, entry_id, pool[start:start + payload_bytes]))
            entry_id += 1
        channel.finalize()
        paths.append(channel.path)
    return paths


def warm(paths: list[str]) -> None:
    for path in paths:
        with open(path, "rb") as handle:
            while handle.read(64 << 20):
                pass


# ----------------------------------------------------------------------- plain baselines

def plain_scrub(path: str) -> int:
    """Bad entries of one log: the plain reader and the same digest check as the source."""
    bad = 0
    with EntryLogReader(OsDisk(), path) as reader:
        for found in reader.scan(payload=True):
            entry = found.entry
            if len(entry) < 36 or _U32(entry, 32)[0] != crc32c.crc32c(
                    entry[36:], crc32c.crc32c(entry[:32])):
                bad += 1
    return bad


def plain_usage(path: str) -> int:
    with EntryLogReader(OsDisk(), path) as reader:
        totals, _ = reader.ledger_totals()
    return len(totals)


def plain_export(args: tuple[str, str]) -> int:
    """One log's entries (with their bytes) to one Parquet file with pyarrow."""
    path, out_dir = args
    columns = {"ledgerId": [], "entryId": [], "pos": [], "entry": []}
    with EntryLogReader(OsDisk(), path) as reader:
        for found in reader.scan(payload=True):
            columns["ledgerId"].append(found.ledger_id)
            columns["entryId"].append(found.entry_id)
            columns["pos"].append(found.location & 0xFFFFFFFF)
            columns["entry"].append(found.entry)
    table = pa.table(columns)
    pq.write_table(table, os.path.join(out_dir, os.path.basename(path) + ".parquet"))
    return table.num_rows


def timed(function) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def runners(paths: list[str], cores: int, work: str, pool, spark) -> dict:
    """(job, runner) -> a callable doing that job once over every log."""
    from bookie.pipeline import jobs

    root = os.path.dirname(os.path.dirname(os.path.dirname(paths[0])))
    plain_out = os.path.join(work, "plain-export")
    os.makedirs(plain_out, exist_ok=True)
    exports = [(path, plain_out) for path in paths]
    spark_name = f"spark local[{cores}]"
    per_core = f"plain, {cores} processes"
    return {
        ("scrub", "plain, 1 process"): lambda: [plain_scrub(path) for path in paths],
        ("scrub", per_core): lambda: pool.map(plain_scrub, paths, chunksize=1),
        ("scrub", spark_name): lambda: _expect(jobs.run_scrub(spark, [root]).problems == 0),
        ("usage", "plain, 1 process"): lambda: [plain_usage(path) for path in paths],
        ("usage", per_core): lambda: pool.map(plain_usage, paths, chunksize=1),
        ("usage", spark_name): lambda: jobs.run_usage(spark, [root]),
        ("export", "plain, 1 process"): lambda: [plain_export(item) for item in exports],
        ("export", per_core): lambda: pool.map(plain_export, exports, chunksize=1),
        ("export", spark_name): lambda: jobs.run_export(spark, [root],
                                                        os.path.join(work, "spark-export")),
    }


def measure(paths: list[str], cores: int, repeat: int, work: str) -> dict:
    """Best of ``repeat`` for every runner, the runners interleaved round by round: on a
    shared machine a quiet spell then favours no runner over another."""
    from bookie.pipeline.spark import session

    spark = session(f"local[{cores}]", app_name="bench-pipeline", driver_memory="2g")
    spark.sparkContext.setLogLevel("ERROR")
    try:
        # spawn, not fork: this process runs the JVM gateway's threads.
        with multiprocessing.get_context("spawn").Pool(cores) as pool:
            todo = runners(paths, cores, work, pool, spark)
            for run in todo.values():
                run()  # warm: page cache, Python workers, the JIT, the planner
            best = {key: float("inf") for key in todo}
            for _ in range(repeat):
                for key, run in todo.items():
                    best[key] = min(best[key], timed(run))
        return best
    finally:
        spark.stop()


def _expect(condition: bool) -> None:
    if not condition:
        raise AssertionError("scrub found problems in clean generated logs")


# ----------------------------------------------------------------------- report

def _runner_order(item) -> tuple:
    (job, runner), _ = item
    return job, runner.startswith("spark"), runner


def report(figures: dict, total_bytes: int, cores: int) -> None:
    mib = total_bytes / 2**20
    print(f"{'job':8s} {'runner':22s} {'seconds':>8s} {'MiB/s':>8s}  {'vs 1 process':>12s}  "
          f"{'vs ' + str(cores) + ' processes':>14s}")
    for job in ("scrub", "usage", "export"):
        one = figures[(job, "plain, 1 process")]
        per_core = figures[(job, f"plain, {cores} processes")]
        for (name, runner), seconds in sorted(figures.items(), key=_runner_order):
            if name == job:
                print(f"{job:8s} {runner:22s} {seconds:8.3f} {mib / seconds:8.0f}  "
                      f"{one / seconds:11.2f}x  {per_core / seconds:13.2f}x")
    print("usage reads only the ledgersMap trailers: its plain figures are microseconds, the "
          "Spark one is one job's fixed cost.")
    spark_scrub = figures[("scrub", f"spark local[{cores}]")]
    ratio = figures[("scrub", f"plain, {cores} processes")] / spark_scrub
    print(f"target scrub >= {SCRUB_TARGET_MIBS} MiB/s: {mib / spark_scrub:.0f} "
          f"({'met' if mib / spark_scrub >= SCRUB_TARGET_MIBS else 'MISSED'}); "
          f">= {SCRUB_TARGET_RATIO}x one process per core: {ratio:.2f}x "
          f"({'met' if ratio >= SCRUB_TARGET_RATIO else 'MISSED'})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gib", type=float, default=2.0)
    parser.add_argument("--log-mib", type=int, default=512)
    parser.add_argument("--entry-bytes", type=int, default=1024)
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dir", default=None, help="parent of the temp dir")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args(argv)
    assert args.gib >= 1, "the figures are meant over at least 1 GiB"
    work = tempfile.mkdtemp(prefix="bench-pipeline-", dir=args.dir)
    try:
        started = time.perf_counter()
        paths = generate(os.path.join(work, "data"), int(args.gib * 2**30),
                         args.log_mib << 20, args.entry_bytes)
        total = sum(os.path.getsize(path) for path in paths)
        print(f"generated {len(paths)} logs, {total / 2**20:.0f} MiB of {args.entry_bytes}-byte "
              f"entries in {time.perf_counter() - started:.1f} s; cores={args.cores}")
        warm(paths)
        report(measure(paths, args.cores, args.repeat, work), total, args.cores)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
