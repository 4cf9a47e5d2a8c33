#!/usr/bin/env python3
"""Replicated adds through the cluster client, beside one bookie in the same run.

    .venv/bin/python scripts/bench_cluster.py [--entries 20000] [--in-flight 256]

Starts (127.0.0.1 only, stopped by PID at the end) a ZooKeeper from Debian's package and 3
bookie daemons; then, through ``BookKeeper`` / ``EnsembleWriter`` with the same client code
each time, appends ``--entries`` 1 KiB entries with ``--in-flight`` appends outstanding at
E/Qw/Qa = 1/1/1 (one bookie: the baseline), 3/2/2 and 3/3/2, printing entries/s and the
p50/p99 of an append's latency, and each ratio to the one-bookie figure. Last, the time to
recover a ledger whose writer died with 1,000 appends in flight.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from api.client.ensemble import BookKeeper  # noqa: E402
from api.cluster.local_zookeeper import ZooKeeperServer, free_port  # noqa: E402
from tests.support.servers import Daemon  # noqa: E402

PAYLOAD = b"c" * (1024 - 36)
FLAGS = ("--journal-prealloc-bytes", "16MiB")


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def appends(bk: BookKeeper, quorums, entries: int, in_flight: int):
    writer = await bk.create_ledger(*quorums, password=b"bench")
    gate = asyncio.Semaphore(in_flight)
    latencies: list[float] = []

    async def one() -> None:
        try:
            started = time.perf_counter()
            await writer.append(PAYLOAD)
            latencies.append(time.perf_counter() - started)
        finally:
            gate.release()

    began = time.perf_counter()
    tasks = []
    for _ in range(entries):
        await gate.acquire()
        tasks.append(asyncio.ensure_future(one()))
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - began
    await writer.close()
    return entries / elapsed, pct(latencies, 0.5), pct(latencies, 0.99)


async def recovery_time(bk: BookKeeper, uri: str) -> tuple[float, int, int]:
    writer = await bk.create_ledger(3, 2, 2, password=b"bench")
    for _ in range(100):
        await writer.append(PAYLOAD)
    pending = [asyncio.ensure_future(writer.append(PAYLOAD)) for _ in range(1000)]
    while writer.lac < 400:  # mid-stream: some acked, some on fewer than Qa, some unsent
        await asyncio.sleep(0.001)  # noqa: sleep-ok (a benchmark's poll)
    for task in [*pending, *writer._tasks]:  # the writer dies, its sends with it
        task.cancel()
    told = writer.lac
    started = time.perf_counter()
    async with await BookKeeper.connect(uri) as other:
        reader = await other.open_ledger(writer.ledger_id, b"bench")
    return time.perf_counter() - started, reader.metadata.last_entry_id, told


async def run(args, uri: str) -> None:
    async with await BookKeeper.connect(uri) as bk:
        base = None
        for quorums in ((1, 1, 1), (3, 2, 2), (3, 3, 2)):
            rate, p50, p99 = await appends(bk, quorums, args.entries, args.in_flight)
            base = base or rate
            label = "one bookie (baseline)" if quorums == (1, 1, 1) else "E/Qw/Qa %d/%d/%d" % quorums
            print(f"{label:<22} {rate:>9,.0f} entries/s  p50 {p50:7.2f} ms  p99 {p99:7.2f} ms"
                  f"  ({rate / base:.2f}x one bookie)", flush=True)
        seconds, last, told = await recovery_time(bk, uri)
        print(f"recovery of a 3/2/2 ledger whose writer died with 1,000 appends in flight: "
              f"{seconds * 1000:.0f} ms (writer's LAC {told}, closed at entry {last})",
              flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=20000)
    parser.add_argument("--in-flight", type=int, default=256)
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="bench-cluster-")
    zookeeper = ZooKeeperServer(os.path.join(root, "zk")).start()
    uri = f"zk://{zookeeper.hosts}/ledgers"
    bookies = [Daemon(os.path.join(root, f"b{i}", "data"), *FLAGS, "--metadata-service-uri",
                      uri, "--port", str(free_port())).start() for i in range(3)]
    try:
        asyncio.run(run(args, uri))
    finally:
        for daemon in bookies:
            daemon.terminate()
        zookeeper.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
