"""Side by side, in one run (docs/bookkeeper-protocol.md §6): Apache BookKeeper's
BenchThroughputLatency (1 KiB entries, ensemble 1) against one of OUR bookies (its bookie_port
listener) and against a REAL BookKeeper bookie (SortedLedgerStorage, and with ``--storages
sorted,db`` DbLedgerStorage as well, as shipped: -Xmx1g, 2 GiB direct memory), each bookie
pinned to core 0 and the benchmark client to core 1, the same throttle (outstanding adds) for
all. Runs interleave the bookies. Prints entries/s, p95/p99 and the ratio ours / the faster
BookKeeper storage. BookKeeper's bookies run over the launcher's Netty; ``--storages``
``sorted-epoll`` and ``db-epoll`` run them over epoll (``BOOKKEEPER_NETTY_JARS``,
scripts/bk_netty.py). The report says which.

    BOOKKEEPER_LAUNCHER=/opt/bookkeeper/bin/bookkeeper .venv/bin/python scripts/bench_bookkeeper.py \\
        [--seconds 20] [--throttle 1000] [--runs 1] [--storages sorted,db] [--tls]

``--tls``: each bookie also once with mutual TLS (ours: scripts/bk_tls_peer.py's flags;
BookKeeper's: TLSContextFactory with tlsClientAuthentication and BookieAuthZFactory), the
benchmark given the client keys as system properties (START_TLS on every connection):
plain and TLS measured in the same run, with the same pinning and throttle.

Each bookie gets a ZooKeeper and data dirs of its own under a temp dir; every process is
stopped by PID at the end. Our HTTP single-add rate comes from scripts/bench_http.py.
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from scripts import bk_netty  # noqa: E402
from scripts.bk_tls_peer import TLS_CONNECTED, TlsPeer  # noqa: E402
from scripts.interop_run import BENCH_CLASS, Interop  # noqa: E402


#: BookKeeper's default storage. Both storages' bookies run in the JVM bkenv.sh ships
#: (DbLedgerStorage's caches live in its direct memory).
DB_CONF = "ledgerStorageClass=org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorage\n"
DB_JAVA_OPTS = "-Xms1g -Xmx1g -XX:MaxDirectMemorySize=2g"
THEIRS = {"sorted": "BookKeeper", "db": "BookKeeper db",
          "sorted-epoll": "BookKeeper epoll", "db-epoll": "BookKeeper db epoll"}


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


def one_side(launcher: str, base: str, kind: str, seconds: int, throttle: int,
             v2: bool = False) -> dict:
    """``kind``: "ours" or "BookKeeper" (SortedLedgerStorage) or "BookKeeper db"
    (DbLedgerStorage), with " TLS" for the bookie's mutual TLS or " epoll" for its epoll."""
    epoll = kind.endswith(" epoll")
    run = Interop(launcher, os.path.join(base, kind.replace(" ", "-")), seconds)
    os.makedirs(run.dir, exist_ok=True)
    tls = TlsPeer(os.path.join(run.dir, "pki")) if kind.endswith(" TLS") else None
    try:
        uri = run.start_zookeeper("zk")
        if kind.startswith("ours"):
            # The same pending-add bound as BookKeeper's bookie below.
            bookie = run.start_ours("bookie", uri, "--bookie-max-pending-adds", "100000",
                                    *(tls.bookie_flags() if tls else ()))
            _pin(bookie["proc"].pid)
        else:
            run.bk("shell", "-conf", run.shell_conf(uri), "initnewcluster")  # a fresh tree
            # As bkenv.sh ships it; over epoll with BOOKKEEPER_NETTY_JARS (bk_netty.py).
            run.env = dict(os.environ, JAVA_OPTS=bk_netty.bookie_java_opts(DB_JAVA_OPTS, epoll))
            # BookKeeper's README: raise the pending-add limit for throughput runs.
            bookie = run.start_theirs("bookie", uri, "maxPendingAddRequestsPerThread=100000\n"
                                      + (DB_CONF if kind.startswith("BookKeeper db") else "")
                                      + (tls.bookie_conf() if tls else ""))
            _pin(bookie["proc"].pid)
        run.wait_registered(uri, [bookie["id"]])
        if not kind.startswith("ours"):
            bk_netty.checked(kind, bookie["proc"].pid, bookie["log"], epoll)
        return run_bench(run, uri, seconds, throttle, v2, tls)
    finally:
        run.stop_all()


def _pin(pid: int) -> None:
    """Core 0 for the bookie and every thread it has or will have."""
    subprocess.run(["taskset", "-a", "-p", "-c", "0", str(pid)], check=True,
                   capture_output=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--launcher", default=os.environ.get("BOOKKEEPER_LAUNCHER"))
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--throttle", type=int, default=1000,
                        help="BenchThroughputLatency's -throttle: adds outstanding")
    parser.add_argument("--runs", type=int, default=1, help="runs per side; medians printed")
    parser.add_argument("--v2", action="store_true",
                        help="the benchmark speaks v2 (-useV2, Pulsar's default) to both bookies")
    parser.add_argument("--storages", default="sorted",
                        help="BookKeeper's storages to run, of sorted (SortedLedgerStorage) "
                        "and db (DbLedgerStorage, its default), and sorted-epoll and "
                        "db-epoll over epoll (BOOKKEEPER_NETTY_JARS, scripts/bk_netty.py)")
    parser.add_argument("--tls", action="store_true",
                        help="also each bookie with mutual TLS, the benchmark through START_TLS")
    args = parser.parse_args(argv)
    if not args.launcher:
        print("no BookKeeper launcher: pass --launcher or set BOOKKEEPER_LAUNCHER")
        return 2
    base = tempfile.mkdtemp(prefix="bench-bk-")
    theirs = tuple(THEIRS[s] for s in args.storages.split(","))
    kinds = theirs + ("ours",) + (("BookKeeper TLS", "ours TLS") if args.tls else ())
    results = {kind: [] for kind in kinds}
    try:
        for index in range(args.runs):
            for kind in kinds:
                result = one_side(os.path.abspath(args.launcher),
                                  os.path.join(base, str(index)), kind, args.seconds,
                                  args.throttle, args.v2)
                results[kind].append(result)
                # Each run starts on a quiet disk: the last run's GBs are deleted and what
                # is still dirty is written back now, not during the next run (which used
                # to share the disk with it: docs/bookkeeper-protocol.md §6).
                shutil.rmtree(os.path.join(base, str(index), kind.replace(" ", "-")),
                              ignore_errors=True)
                os.sync()
                print(f"run {index + 1} {kind:>19}: {result['ops']:>7,} entries/s  p95 "
                      f"{result['p95']:.1f} ms  p99 {result['p99']:.1f} ms", flush=True)
    finally:  # each side's data is GBs: never left behind
        shutil.rmtree(base, ignore_errors=True)
    median = {kind: {key: statistics.median(r[key] for r in rows) for key in rows[0]}
              for kind, rows in results.items()}
    print(f"BenchThroughputLatency {'v2' if args.v2 else 'v3'}, 1 KiB, ensemble 1, "
          f"throttle {args.throttle}, "
          f"{args.seconds} s, medians of {args.runs}; BookKeeper's bookies over: "
          f"{bk_netty.seen()}:")
    for kind in kinds:
        row = median[kind]
        print(f"  {kind:>19} bookie: {row['ops']:>9,.0f} entries/s  p95 {row['p95']:.1f} ms  "
              f"p99 {row['p99']:.1f} ms")
    best = max(theirs, key=lambda kind: median[kind]["ops"])
    print(f"  ours / {best} (the faster): {median['ours']['ops'] / median[best]['ops']:.2f}x")
    if args.tls:
        for side in ("BookKeeper", "ours"):
            print(f"  {side} TLS / plain: "
                  f"{median[side + ' TLS']['ops'] / median[side]['ops']:.2f}x")
        print(f"  ours / BookKeeper over TLS: "
              f"{median['ours TLS']['ops'] / median['BookKeeper TLS']['ops']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
