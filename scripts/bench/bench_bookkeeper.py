"""Side by side, in one run (docs/bookkeeper-protocol.md §6): Apache BookKeeper's
BenchThroughputLatency (1 KiB entries, ensemble 1) against one of OUR bookies (its bookie_port
listener) and against REAL BookKeeper bookies (SortedLedgerStorage, and with ``--storages
sorted,db`` DbLedgerStorage as well, as shipped: -Xmx1g, 2 GiB direct memory), each bookie
pinned to core 0 and the benchmark client to core 1, the same throttle (outstanding adds) for
all. Runs interleave the bookies. Prints entries/s, p95/p99, how busy the bookie's core and
the client's were (near 100%, that side is the limit; well below on both, something else is:
the disk's sync, say) and the ratio ours / the fastest BookKeeper side. BookKeeper's bookies
run over the launcher's Netty; a side's flags (bench_bookkeeper_reads.SIDE_FLAGS) add epoll
(``db-epoll``: ``BOOKKEEPER_NETTY_JARS``, scripts/interop/bk_netty.py), a journal that flushes
when its queue empties (``-flush``) or one that never syncs (``-nosync``: a diagnosis of
whether the disk's sync limits BookKeeper's bookie; it is never taken as the peer). The
report says which transport each side ran. ``--floor`` measures the disk's sync rate in the
same run (scripts/bench/disk_floor.py). ``--raw`` writes with a client that outruns every bookie
on its one core (scripts/bench/bench_bookies_per_host.py's v2 adds) instead of
BenchThroughputLatency, whose JVM on one core can be the limit of every side.

    BOOKKEEPER_LAUNCHER=/path/to/bk .venv/bin/python scripts/bench/bench_bookkeeper.py \\
        [--seconds 20] [--throttle 1000] [--runs 1] [--storages sorted,db] [--tls] [--floor]

``--tls``: each bookie also once with mutual TLS (ours: scripts/interop/bk_tls_peer.py's flags;
BookKeeper's: TLSContextFactory with tlsClientAuthentication and BookieAuthZFactory), the
benchmark given the client keys as system properties (START_TLS on every connection):
plain and TLS measured in the same run, with the same pinning and throttle.

Each bookie gets a ZooKeeper and data dirs of its own under a temp dir; every process is
stopped by PID at the end. Our HTTP single-add rate comes from scripts/bench/bench_http.py.
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
from scripts.interop.bk_tls_peer import TLS_CONNECTED, TlsPeer  # noqa: E402
from scripts.bench.bench_bookies_per_host import WARMUP_S, busy, cpu_times  # noqa: E402
from scripts.bench.bench_bookkeeper_reads import is_peer, parse_side, side_conf  # noqa: E402
from scripts.bench.disk_floor import say_sync_floor, sync_floor  # noqa: E402
from scripts.interop.interop_run import BENCH_CLASS, Interop  # noqa: E402


#: BookKeeper's storages. Both storages' bookies run in the JVM bkenv.sh ships
#: (DbLedgerStorage's caches live in its direct memory).
STORAGE_CONF = {"sorted": "", "db": "ledgerStorageClass="
                "org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage\n"}
DB_JAVA_OPTS = "-Xms1g -Xmx1g -XX:MaxDirectMemorySize=2g"


def pinned(core: int, argv: list[str]) -> list[str]:
    return ["taskset", "-c", str(core), *argv]


def run_bench(run: Interop, uri: str, seconds: int, throttle: int, v2: bool = False,
              tls: TlsPeer | None = None) -> dict:
    zk = uri.split("//", 1)[1].split("/", 1)[0]
    launcher = ([run.launcher, "class", BENCH_CLASS] if os.path.basename(run.launcher) == "bk"
                else [run.launcher, BENCH_CLASS])
    argv = pinned(1, [*launcher, "-time", str(seconds), "-entrysize", "1024", "-ensemble", "1",
                      "-quorum", "1", "-ackQuorum", "1", "-throttle", str(throttle),
                      "-warmupMessages", "20000", "-zookeeper", zk,
                      *(["-useV2"] if v2 else [])])
    out = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 300,
                         cwd=run.dir, env=None if tls is None else tls.env())
    text = out.stdout + out.stderr
    if tls is not None and TLS_CONNECTED not in text:
        raise RuntimeError("BenchThroughputLatency did not connect over TLS:\n" + text[-3000:])
    done = re.search(r"Benchmark complete \{completions=(\d+), durationMs=(\d+), "
                     r"opsPerSec=(\d+)", text)
    if done is None:
        raise RuntimeError("BenchThroughputLatency did not complete:\n" + text[-3000:])
    p99 = float(re.search(r"99th percentile latency \{latency=([\d.]+)", text).group(1))
    p95 = float(re.search(r"95th percentile latency \{latency=([\d.]+)", text).group(1))
    return {"ops": int(done.group(3)), "p95": p95, "p99": p99}


def run_raw(port: int, seconds: int, outstanding: int, entry_size: int = 1024,
            connections: int = 1, ledgers: int = 24) -> dict:
    """The raw client of scripts/bench/bench_bookies_per_host.py on core 1: v2 adds of
    ``entry_size`` bytes, as fast as answers come, ``outstanding`` in flight over
    ``ledgers`` ledgers and ``connections`` connections. Python writing packed frames costs
    ~1.3 us an add, so one core outruns either bookie where BenchThroughputLatency's JVM
    does not (issue 41: on this VM its core was the limit of every side's writes, each
    bookie's half idle). Adds answered other than EOK are counted (``refused``)."""
    out = subprocess.run(
        pinned(1, [sys.executable, os.path.join(ROOT, "scripts", "bench", "bench_bookies_per_host.py"),
                   "--client", str(port), "--seconds", str(seconds + WARMUP_S),
                   "--outstanding", str(outstanding), "--ledgers", str(ledgers),
                   "--bookie-cores", "0", "--entry-size", str(entry_size),
                   "--connections", str(connections)]),
        capture_output=True, text=True, check=True, timeout=seconds + 300)
    answered, elapsed, p50, p99, refused = out.stdout.split()[-7:-2]
    return {"ops": int(int(answered) / float(elapsed)), "p50": float(p50),
            "p99": float(p99), "refused": int(refused)}


def latencies(result: dict) -> str:
    return "  ".join(f"{key} {result[key]:.1f} ms" for key in ("p50", "p95", "p99")
                     if key in result)


def one_side(launcher: str, base: str, kind: str, seconds: int, throttle: int,
             v2: bool = False, raw: bool = False, shape: dict | None = None) -> dict:
    """``kind``: "ours", or a BookKeeper side of ``--storages`` ("db-epoll", "sorted",
    bench_bookkeeper_reads.parse_side), with " TLS" for the bookie's mutual TLS. The
    result has the bookie core's and the client core's busy fractions over the
    benchmark's run (its JVM's start and warm-up included)."""
    side = kind.removesuffix(" TLS")
    store, flags = parse_side(side)
    epoll = "epoll" in flags
    run = Interop(launcher, os.path.join(base, kind.replace(" ", "-")), seconds)
    os.makedirs(run.dir, exist_ok=True)
    tls = TlsPeer(os.path.join(run.dir, "pki")) if kind.endswith(" TLS") else None
    try:
        uri = run.start_zookeeper("zk")
        if store == "ours":
            # The same pending-add bound as BookKeeper's bookie below.
            raised = () if (shape or {}).get("as_shipped") else \
                ("--bookie-max-pending-adds", "100000")
            bookie = run.start_ours("bookie", uri, *raised,
                                    *(tls.bookie_flags() if tls else ()))
            _pin(bookie["proc"].pid)
        else:
            run.bk("shell", "-conf", run.shell_conf(uri), "initnewcluster")  # a fresh tree
            # As bkenv.sh ships it; over epoll with BOOKKEEPER_NETTY_JARS (bk_netty.py).
            run.env = dict(os.environ, JAVA_OPTS=bk_netty.bookie_java_opts(DB_JAVA_OPTS, epoll))
            # BookKeeper's README: raise the pending-add limit for throughput runs.
            raised = "" if (shape or {}).get("as_shipped") else \
                "maxPendingAddRequestsPerThread=100000\n"
            bookie = run.start_theirs("bookie", uri, raised
                                      + STORAGE_CONF[store] + side_conf(flags)
                                      + (tls.bookie_conf() if tls else ""))
            _pin(bookie["proc"].pid)
        run.wait_registered(uri, [bookie["id"]])
        if store != "ours":
            bk_netty.checked(side, bookie["proc"].pid, bookie["log"], epoll)
        before = cpu_times()
        port = bookie["rpc"] if store == "ours" else int(bookie["id"].rsplit(":", 1)[1])
        raw_shape = {k: v for k, v in (shape or {}).items() if k != "as_shipped"}
        result = run_raw(port, seconds, throttle, **raw_shape) if raw else \
            run_bench(run, uri, seconds, throttle, v2, tls)
        after = cpu_times()
        return dict(result, bookie_busy=busy(before, after, "0"),
                    client_busy=busy(before, after, "1"))
    finally:
        run.stop_all()


def _pin(pid: int) -> None:
    """Core 0 for the bookie and every thread it has or will have."""
    subprocess.run(["taskset", "-a", "-p", "-c", "0", str(pid)], check=True,
                   capture_output=True)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--launcher", default=os.environ.get("BOOKKEEPER_LAUNCHER"))
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--throttle", type=int, default=1000,
                        help="BenchThroughputLatency's -throttle: adds outstanding")
    parser.add_argument("--runs", type=int, default=1, help="runs per side; medians printed")
    parser.add_argument("--v2", action="store_true",
                        help="the benchmark speaks v2 (-useV2, Pulsar's default) to both bookies")
    parser.add_argument("--storages", default="sorted",
                        help="BookKeeper's sides to run, of sorted (SortedLedgerStorage) "
                        "and db (DbLedgerStorage, its default), with -epoll (over epoll: "
                        "BOOKKEEPER_NETTY_JARS, scripts/interop/bk_netty.py), -flush "
                        "(journalFlushWhenQueueEmpty=true) and/or -nosync "
                        "(journalSyncData=false, a diagnosis), e.g. db-epoll-nosync; "
                        "--tls runs the first of them with TLS")
    parser.add_argument("--raw", action="store_true",
                        help="write with scripts/bench/bench_bookies_per_host.py's raw v2 client "
                        "(--throttle adds in flight), which outruns either bookie on one "
                        "core, instead of BenchThroughputLatency")
    parser.add_argument("--entry-size", type=int, default=1024,
                        help="--raw: bytes of each entry's payload")
    parser.add_argument("--connections", type=int, default=1,
                        help="--raw: connections to the bookie")
    parser.add_argument("--ledgers", type=int, default=24, help="--raw: ledgers written")
    parser.add_argument("--as-shipped", action="store_true",
                        help="both bookies at their default pending-add bounds (ours "
                        "bookie_max_pending_adds, BookKeeper's maxPendingAddRequestsPerThread, "
                        "10,000 each), not raised to 100,000 (the raw client counts "
                        "refusals in every run)")
    parser.add_argument("--floor", action="store_true",
                        help="measure the disk's sync rate too (scripts/bench/disk_floor.py)")
    parser.add_argument("--tls", action="store_true",
                        help="also each bookie with mutual TLS, the benchmark through START_TLS")
    args = parser.parse_args(argv)
    if args.raw and args.tls:
        raise SystemExit("--raw writes plain TCP: not with --tls")
    if not args.raw and (args.entry_size != 1024 or args.connections != 1
                         or args.ledgers != 24):
        raise SystemExit("--entry-size, --connections and --ledgers are the raw client's")
    args.theirs = args.storages.split(",")
    for side in args.theirs:
        if parse_side(side)[0] == "ours":
            raise SystemExit("--storages names BookKeeper's sides; ours always runs")
    return args


def shape(args) -> dict:
    """What the raw client varies (``--entry-size``, ``--connections``, ``--ledgers``) and
    ``--as-shipped`` (both bookies at their default pending-add bounds)."""
    return {"entry_size": args.entry_size, "connections": args.connections,
            "ledgers": args.ledgers, "as_shipped": args.as_shipped}


def row(result: dict) -> str:
    """One run's or one median's figures, as printed."""
    refused = f"  refused {result['refused']:,.0f}" if "refused" in result else ""
    return (f"{result['ops']:>9,.0f} entries/s  {latencies(result)}{refused}  bookie core "
            f"{result['bookie_busy']:.0%} busy, client {result['client_busy']:.0%}")


def run_sides(args, kinds: tuple[str, ...]) -> tuple[dict, dict | None]:
    """Every side ``args.runs`` times, interleaved: {kind: [result, ...]}, and the disk's
    sync floor with ``--floor``."""
    base = tempfile.mkdtemp(prefix="bench-bk-", dir=os.environ.get("BENCH_DIR"))
    results: dict = {kind: [] for kind in kinds}
    try:
        floor = sync_floor(base) if args.floor else None
        for index in range(args.runs):
            for kind in kinds:
                result = one_side(os.path.abspath(args.launcher),
                                  os.path.join(base, str(index)), kind, args.seconds,
                                  args.throttle, args.v2, args.raw, shape(args))
                results[kind].append(result)
                # Each run starts on a quiet disk: the last run's GBs are deleted and what
                # is still dirty is written back now, not during the next run (which used
                # to share the disk with it: docs/bookkeeper-protocol.md §6).
                shutil.rmtree(os.path.join(base, str(index), kind.replace(" ", "-")),
                              ignore_errors=True)
                os.sync()
                print(f"run {index + 1} {kind:>19}: {row(result)}", flush=True)
    finally:  # each side's data is GBs: never left behind
        shutil.rmtree(base, ignore_errors=True)
    return results, floor


def report(args, kinds: tuple[str, ...], results: dict, floor: dict | None) -> None:
    median = {kind: {key: statistics.median(r[key] for r in rows) for key in rows[0]}
              for kind, rows in results.items()}
    client = "the raw v2 client" if args.raw else \
        f"BenchThroughputLatency {'v2' if args.v2 else 'v3'}"
    print(f"{client}, {args.entry_size:,} B, ensemble 1, throttle {args.throttle}, "
          f"{args.connections} connection(s), {args.ledgers} ledgers, "
          f"{args.seconds} s, medians of {args.runs}; BookKeeper's bookies over: "
          f"{bk_netty.seen()}:")
    for kind in kinds:
        print(f"  {kind:>19} bookie: {row(median[kind])}")
    peers = [kind for kind in args.theirs if is_peer(kind)]
    if peers:
        best = max(peers, key=lambda kind: median[kind]["ops"])
        print(f"  ours / {best} (the fastest): "
              f"{median['ours']['ops'] / median[best]['ops']:.2f}x")
    if floor is not None:
        print(f"  the disk: {say_sync_floor(floor)}")
    if args.tls:
        first = args.theirs[0]
        for side in (first, "ours"):
            print(f"  {side} TLS / plain: "
                  f"{median[side + ' TLS']['ops'] / median[side]['ops']:.2f}x")
        print(f"  ours / {first} over TLS: "
              f"{median['ours TLS']['ops'] / median[first + ' TLS']['ops']:.2f}x")


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if not args.launcher:
        print("no BookKeeper launcher: pass --launcher or set BOOKKEEPER_LAUNCHER")
        return 2
    first = args.theirs[0]
    kinds = (*args.theirs, "ours", *((f"{first} TLS", "ours TLS") if args.tls else ()))
    results, floor = run_sides(args, kinds)
    report(args, kinds, results, floor)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
