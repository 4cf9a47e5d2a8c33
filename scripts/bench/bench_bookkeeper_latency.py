"""Latency side by side, in one run (issue 41): one add's round trip, a tailing reader's delay,
and a writer's latency while a catch-up reader reads, against one of OUR bookies and
BookKeeper's with DbLedgerStorage and with SortedLedgerStorage. Bookie on core 0, the
clients on core 1 (BookKeeper's own: BenchBookie and scripts/interop/java/ReadBench.java).

    BOOKKEEPER_LAUNCHER=/path/to/bk .venv/bin/python scripts/bench/bench_bookkeeper_latency.py \\
        [--rounds 3] [--tail-rates 1000,10000] [--pace-rate 40000] [--backlog-mb 1024]

Per round, per storage (rounds interleave the storages), a fresh ZooKeeper and bookie:
1. BenchBookie, BookKeeper's own: its latency phase (5,000 adds one at a time; it prints
   the mean only) and its throughput phase (50,000 adds, all outstanding).
2. One add at a time through the ledger API, v2: p50/p99/p99.9 of 5,000 adds.
3. Tailing: a writer at each fixed rate for 10 s; a reader of its own client follows with
   long-poll LAC and the entry piggybacked (v3); each entry's delay from add to read.
4. Reads during writes: a writer at ``--pace-rate`` (v2) alone for 10 s; then a backlog of
   ``--backlog-mb`` written and the same writer again while a catch-up reader reads the
   backlog (batch reads, v2). Prints both rates and the writer's p99 beside its p99 alone.
Prints medians of the rounds with their spread, and ours / the better BookKeeper storage.
BookKeeper's bookies run over the launcher's Netty; the sides ``db-epoll`` and ``sorted-epoll``
over epoll (``BOOKKEEPER_NETTY_JARS``, scripts/interop/bk_netty.py). The report says which. A side
with ``-flush`` (``db-epoll-flush``) sets ``journalFlushWhenQueueEmpty=true``: BookKeeper's
journal then syncs as soon as no add waits, as ours does, where by default it groups adds
for up to ``journalMaxGroupWaitMSec`` (2 ms), which one add at a time waits out.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from scripts.interop import bk_netty  # noqa: E402
from scripts.bench.bench_bookkeeper_reads import ENTRY, Side, is_peer, parse_side  # noqa: E402
from scripts.interop.interop_run import Failed, say  # noqa: E402

BENCH_BOOKIE = "org.apache.bookkeeper.benchmark.BenchBookie"
#: One add at a time: as many as BenchBookie's own latency phase.
ADDS_ONE_AT_A_TIME = 5000
#: A tailed or paced writer's window.
WINDOW_S = 10
#: Figures where smaller is better (latencies); the rest are rates.
SMALLER_BETTER = re.compile(r"p50|p99|mean")


def bench_bookie(side: Side) -> dict:
    bookie = side.bookies[0]
    port = bookie["rpc"] if side.storage == "ours" else bookie["id"].rsplit(":", 1)[1]
    zk = side.uri.split("//", 1)[1].split("/", 1)[0]
    argv = ["taskset", "-c", "1", side.launcher, "class", BENCH_BOOKIE, "-host", "127.0.0.1",
            "-port", str(port), "-zookeeper", zk, "-size", str(ENTRY)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900, cwd=side.dir,
                          stdin=subprocess.DEVNULL)
    text = done.stdout + done.stderr
    mean = re.search(r"latencyMs=([\d.]+)", text)
    rate = re.search(r"throughput=(\d+)", text)
    if mean is None or rate is None:
        raise Failed(f"BenchBookie did not finish: {text[-3000:]}")
    return {"BenchBookie mean ms": float(mean.group(1)),
            "BenchBookie adds/s": float(rate.group(1))}


def one_round(args, base: str, index: int, storage: str, results: dict) -> None:
    side = Side(args.launcher, os.path.join(base, f"{index}-{storage}"), storage)
    figures: dict[str, float] = {}
    try:
        side.start(1)
        figures.update(bench_bookie(side))
        line = side.java("latency", side.uri, str(ADDS_ONE_AT_A_TIME), "1")
        figures.update({"add p50 us": int(line[1]), "add p99 us": int(line[2]),
                        "add p99.9 us": int(line[3])})
        for rate in args.tail_rates:
            line = side.java("tail", side.uri, str(rate), str(WINDOW_S))
            figures[f"tail {rate}/s p50 us"] = int(line[2])
            figures[f"tail {rate}/s p99 us"] = int(line[3])
            figures[f"tail {rate}/s p99 after 1 s us"] = int(line[6])  # warm-up apart
        line = side.java("pace", side.uri, str(args.pace_rate), str(WINDOW_S))
        figures["writer alone p99 us"] = int(line[3])
        ledger = side.write(args.backlog_mb * 1024 * 1024 // ENTRY, (1, 1, 1))
        line = side.java("pace", side.uri, str(args.pace_rate), "120", str(ledger))
        figures["writer reading p99 us"] = int(line[3])
        figures["catch-up reads/s"] = int(line[5]) * 1000.0 / max(int(line[6]), 1)
        figures["writer adds/s"] = int(line[1]) * 1000.0 / max(int(line[6]), 1)
    finally:
        side.stop_all()
        shutil.rmtree(side.dir, ignore_errors=True)
        os.sync()
    for name, value in figures.items():
        results.setdefault(name, {}).setdefault(storage, []).append(value)
    say(f"round {index + 1} {storage:>12}: " + "  ".join(f"{k} {v:,.1f}"
                                                      for k, v in figures.items()))


def report(args, results: dict) -> None:
    say(f"1 KiB entries, E=1, medians of {args.rounds} interleaved rounds (min-max); "
        f"writer at {args.pace_rate:,}/s, backlog {args.backlog_mb} MiB; BookKeeper's "
        f"bookies over {bk_netty.seen()}:")
    for name, by_storage in results.items():
        medians = {s: statistics.median(v) for s, v in by_storage.items()}
        cells = [f"{s} {medians[s]:>10,.1f} ({min(v):,.1f}-{max(v):,.1f})"
                 for s, v in by_storage.items()]
        theirs = [m for s, m in medians.items() if is_peer(s)]
        ratio = ""
        if theirs and "ours" in medians:
            best = min(theirs) if SMALLER_BETTER.search(name) else max(theirs)
            ratio = f"  ours/best BK {medians['ours'] / best:.2f}x"
        say(f"  {name:>24}: " + "  ".join(cells) + ratio)
    for storage in args.storages:
        alone = statistics.median(results["writer alone p99 us"][storage])
        reading = statistics.median(results["writer reading p99 us"][storage])
        say(f"  {storage}: the writer's p99 while a reader catches up = {reading / alone:.2f}x "
            "its p99 alone")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--launcher", default=os.environ.get("BOOKKEEPER_LAUNCHER"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--storages", default="ours,db,sorted",
                        help="sides (bench_bookkeeper_reads.py --storages): ours, db, sorted, "
                        "BookKeeper's with -epoll and/or -flush, e.g. db-epoll-flush")
    parser.add_argument("--tail-rates", default="1000,10000",
                        help="the tailed writer's fixed rates, adds/s, comma-separated")
    parser.add_argument("--pace-rate", type=int, default=40_000,
                        help="the writer's fixed rate in reads-during-writes, adds/s (40,000: "
                        "about half of either bookie's saturation with v2 on this machine)")
    parser.add_argument("--backlog-mb", type=int, default=1024)
    args = parser.parse_args(argv)
    if not args.launcher:
        print("no BookKeeper launcher: pass --launcher or set BOOKKEEPER_LAUNCHER")
        return 2
    args.launcher = os.path.abspath(args.launcher)
    args.storages = args.storages.split(",")
    for side in args.storages:
        parse_side(side)  # a bad name fails now, not after the sides before it ran
    args.tail_rates = [int(x) for x in args.tail_rates.split(",")]
    base = tempfile.mkdtemp(prefix="bench-bk-latency-", dir=os.environ.get("BENCH_DIR"))
    results: dict = {}
    try:
        for index in range(args.rounds):
            for storage in args.storages:
                one_round(args, base, index, storage, results)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    report(args, results)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
