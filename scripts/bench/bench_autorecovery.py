#!/usr/bin/env python3
"""Autorecovery figures (issue 17): how fast a lost bookie's data is copied back, what that
does to foreground adds, and how fast the replica check goes.

    .venv/bin/python scripts/bench/bench_autorecovery.py [--mib 32] [--rate-mib 0] [--check-ledgers 1000]

A real ZooKeeper and 4 bookie daemons on 127.0.0.1 with autorecovery inside them
(lostBookieRecoveryDelay 0). For each entry size (1 KiB, 64 KiB): closed 3/2/2 ledgers
holding --mib MiB are written; a foreground writer appends 1 KiB entries (8 in flight) to a
ledger on the three bookies that stay, for a few seconds alone (the baseline), then the
bookie holding the most is killed for good and the writer goes on while the workers copy its
fragments. Printed: the lost bookie's bytes, how long until the first marker (the auditor's
reaction: ~10 s when the lost bookie was the auditor, its ZooKeeper session must expire),
re-replication MiB/s (from the first marker until no ledger names the bookie), and the
foreground add p50/p99 before and during. Then the replica check over --check-ledgers small ledgers: ledgers/s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from api.client.codec import LedgerCodec  # noqa: E402
from api.client.ensemble import BookKeeper, EnsembleWriter  # noqa: E402
from api.client.fragments import fragments, referenced_bookies  # noqa: E402
from api.client.metadata import LedgerMetadata  # noqa: E402
from api.client.zookeeper import alive_bookies  # noqa: E402
from api.cluster.autorecovery.replica_check import check_ledgers  # noqa: E402
from api.cluster.local_zookeeper import ZooKeeperServer  # noqa: E402
from api.cluster.underreplication import Underreplication  # noqa: E402
from tests.support.servers import Daemon  # noqa: E402

MiB = 1 << 20
BASELINE_S = 4.0


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else 0.0


async def write_closed(bk: BookKeeper, size: int, total: int) -> list[int]:
    ids = []
    per_ledger = max(1, total // size // 8)
    payload = os.urandom(size)
    written = 0
    while written < total:
        writer = await bk.create_ledger(3, 2, 2, password=b"bench")
        await asyncio.gather(*(writer.append(payload) for _ in range(per_ledger)))
        await writer.close()
        ids.append(writer.ledger_id)
        written += per_ledger * size
    return ids


async def bytes_on(bk: BookKeeper, ids: list[int], bookie_id: str, size: int) -> int:
    total = 0
    for ledger_id in ids:
        metadata = await bk.store.read(ledger_id)
        for fragment in fragments(metadata):
            if fragment.bookie_id == bookie_id:
                total += len(fragment.entries(metadata.ensemble_size,
                                              metadata.write_quorum)) * size
    return total


class Foreground:
    """1 KiB appends, 8 in flight, to a ledger on the bookies that stay; latencies kept."""

    def __init__(self, bk: BookKeeper, ensemble: tuple[str, ...]) -> None:
        self.bk, self.ensemble = bk, ensemble
        self.samples: list[tuple[float, float]] = []  # (when done, seconds)
        self.stop = asyncio.Event()

    async def run(self) -> None:
        metadata = await self.bk.store.create(LedgerMetadata(
            ledger_id=None, ensemble_size=3, write_quorum=2, ack_quorum=2, password=b"fg",
            ensembles=((0, self.ensemble),)))
        writer = EnsembleWriter(self.bk, metadata, LedgerCodec.for_password(
            metadata.ledger_id, b"fg", metadata.digest_type))
        payload = os.urandom(1024)

        async def lane() -> None:
            while not self.stop.is_set():
                began = time.monotonic()
                await writer.append(payload)
                now = time.monotonic()
                self.samples.append((now, now - began))
        await asyncio.gather(*(lane() for _ in range(8)))
        await writer.close()

    def between(self, start: float, end: float) -> list[float]:
        return [latency for at, latency in self.samples if start <= at <= end]


async def one_size(uri: str, bookies: list[Daemon], size: int, total: int) -> str:
    ids_of = {d.url.rsplit("/", 1)[-1]: d for d in bookies if d.proc.poll() is None}
    async with await BookKeeper.connect(uri) as bk:
        ids = await write_closed(bk, size, total)
        held = {b: await bytes_on(bk, ids, b, size) for b in ids_of}
        victim_id = max(held, key=held.get)
        stay = tuple(b for b in ids_of if b != victim_id)[:3]
        foreground = Foreground(bk, stay)
        load = asyncio.create_task(foreground.run())
        await asyncio.sleep(BASELINE_S)  # noqa: sleep-ok (the baseline's duration)
        ur = Underreplication(bk.store.client, bk.store.root)
        killed = time.monotonic()
        ids_of[victim_id].kill9()
        marked_at = None
        while True:
            if marked_at is None and await asyncio.to_thread(ur.marked):
                marked_at = time.monotonic()
            naming = [i for i in ids if victim_id in referenced_bookies(await bk.store.read(i))]
            if not naming:
                break
            await asyncio.sleep(0.05)  # noqa: sleep-ok (polling the metadata)
        done = time.monotonic()
        marked_at = marked_at or done
        foreground.stop.set()
        await load
        before = foreground.between(killed - BASELINE_S, killed)
        during = foreground.between(killed, done)
        seconds = max(done - marked_at, 1e-3)
        return (f"entries={size // 1024}KiB lost_bookie_bytes={held[victim_id] / MiB:.1f}MiB "
                f"marked_after={marked_at - killed:.2f}s "
                f"rereplication={held[victim_id] / MiB / seconds:.1f}MiB/s in {seconds:.2f}s "
                f"adds_before p50={pct(before, 0.5):.2f}ms p99={pct(before, 0.99):.2f}ms "
                f"(n={len(before)}) adds_during p50={pct(during, 0.5):.2f}ms "
                f"p99={pct(during, 0.99):.2f}ms (n={len(during)})")


async def replica_check(uri: str, count: int) -> str:
    async with await BookKeeper.connect(uri) as bk:
        ids = []
        for start in range(0, count, 50):
            async def one() -> int:
                writer = await bk.create_ledger(3, 2, 2, password=b"check")
                await writer.append(b"x" * 100)
                await writer.close()
                return writer.ledger_id
            ids.extend(await asyncio.gather(*(one() for _ in range(min(50, count - start)))))
        alive = await asyncio.to_thread(alive_bookies, bk.store.client, bk.store.root)
        every = await bk.store.ledger_ids()
        result = await check_ledgers(bk, every, alive)
        return (f"replica_check ledgers={result.ledgers} seconds={result.seconds:.2f} "
                f"ledgers_per_s={result.ledgers / result.seconds:.0f} "
                f"missing={len(result.missing)}")


def cluster(root: str, uri: str, rate_mib: float) -> list[Daemon]:
    flags = ("--checkpoint-interval-ms", "2000", "--journal-prealloc-bytes", "16MiB",
             "--lost-bookie-recovery-delay-s", "0", "--replicas-check-interval-s", "0",
             "--rereplication-rate-bytes", str(int(rate_mib * MiB)))
    return [Daemon(os.path.join(root, f"b{i}", "data"), *flags, "--metadata-service-uri",
                   uri).start() for i in range(4)]


async def main_async(args, root: str) -> None:
    zookeeper = ZooKeeperServer(os.path.join(root, "zk")).start()
    try:
        for size in (1024, 64 * 1024):
            uri = f"zk://{zookeeper.hosts}/s{size}/ledgers"
            bookies = cluster(os.path.join(root, f"s{size}"), uri, args.rate_mib)
            try:
                print(await one_size(uri, bookies, size, args.mib * MiB), flush=True)
            finally:
                for daemon in bookies:
                    if daemon.proc.poll() is None:
                        daemon.terminate()
        uri = f"zk://{zookeeper.hosts}/check/ledgers"
        bookies = cluster(os.path.join(root, "check"), uri, args.rate_mib)
        try:
            print(await replica_check(uri, args.check_ledgers), flush=True)
        finally:
            for daemon in bookies:
                daemon.terminate()
    finally:
        zookeeper.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=32, help="data written per entry size")
    parser.add_argument("--rate-mib", type=float, default=0,
                        help="rereplication_rate_bytes in MiB/s (0: unthrottled)")
    parser.add_argument("--check-ledgers", type=int, default=1000)
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="bench-autorecovery-")
    try:
        asyncio.run(main_async(args, root))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
